"""RMSNorm forward (Helion's examples/rms_norm.py), on tpukit."""

from __future__ import annotations

import torch
import tpukit.helion.language as hl
from tpukit import helion


@helion.kernel(static_shapes=True)
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, n = x.size()
    assert weight.size(0) == n, f"weight size mismatch {weight.size(0)} != {n}"
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        x_tile = x[tile_m, :].to(torch.float32)
        # RMS normalization
        x_squared = x_tile * x_tile
        mean_x_squared = torch.mean(x_squared, dim=-1)
        inv_rms_tile = torch.rsqrt(mean_x_squared + eps)
        normalized = x_tile * inv_rms_tile[:, None]
        out[tile_m, :] = (normalized * weight[:].to(torch.float32)).to(out.dtype)
    return out


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def check(m: int, n: int, dtype=torch.float32) -> None:
    from _check import assert_close

    x = torch.randn([m, n], dtype=dtype)
    weight = torch.randn([n], dtype=dtype)
    assert_close(rms_norm(x, weight), reference(x, weight), "rms_norm")


def main() -> None:
    check(256, 1024)
    check(100, 300, torch.bfloat16)
    print("rms_norm: ok")


if __name__ == "__main__":
    main()
