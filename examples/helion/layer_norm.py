"""LayerNorm forward (after Helion's examples/layer_norm.py), on tpukit: one row block per
grid step, statistics in f32, optional bias."""

from __future__ import annotations

import torch
import tpukit.helion.language as hl
from tpukit import helion


@helion.kernel(static_shapes=True)
def layer_norm(
    x: torch.Tensor,
    normalized_shape: list[int],
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    m, n = x.size()
    assert weight.size(0) == n, f"weight size mismatch {weight.size(0)} != {n}"
    assert len(normalized_shape) == 1 and normalized_shape[0] == n
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = x[tile_m, :].to(torch.float32)
        var, mean = torch.var_mean(acc, dim=-1, keepdim=True, correction=0)
        normalized = (acc - mean) * torch.rsqrt(var + eps)
        if bias is not None:
            acc = normalized * (weight[:].to(torch.float32)) + (bias[:].to(torch.float32))
        else:
            acc = normalized * (weight[:].to(torch.float32))
        out[tile_m, :] = acc.to(x.dtype)
    return out


def check(m: int, n: int, dtype=torch.float32) -> None:
    from _check import assert_close

    x = torch.randn([m, n], dtype=dtype)
    weight = torch.randn([n], dtype=dtype)
    bias = torch.randn([n], dtype=dtype)
    expected = torch.nn.functional.layer_norm(x, [n], weight, bias, eps=1e-5)
    assert_close(layer_norm(x, [n], weight, bias), expected, "layer_norm")
    expected = torch.nn.functional.layer_norm(x, [n], weight, None, eps=1e-5)
    assert_close(layer_norm(x, [n], weight), expected, "layer_norm without bias")


def main() -> None:
    check(256, 768)
    check(100, 300, torch.bfloat16)
    print("layer_norm: ok")


if __name__ == "__main__":
    main()
