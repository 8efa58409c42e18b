"""Sum over the last dimension (Helion's examples/sum.py), on tpukit."""

from __future__ import annotations

import torch
import tpukit.helion.language as hl
from tpukit import helion


@helion.kernel()
def sum_kernel(x: torch.Tensor) -> torch.Tensor:
    m, _n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        out[tile_m] = x[tile_m, :].sum(-1)
    return out


def check(m: int, n: int, dtype=torch.float32) -> None:
    from _check import assert_close

    x = torch.randn([m, n], dtype=dtype)
    # a bf16 sum of n elements is rounded once (f32 accumulation); torch rounds likewise
    tol = {"rtol": 1e-2, "atol": 1e-1} if dtype == torch.bfloat16 else {}
    assert_close(sum_kernel(x), x.sum(-1), "sum", **tol)


def main() -> None:
    check(512, 1024)
    check(100, 300, torch.bfloat16)
    print("sum: ok")


if __name__ == "__main__":
    main()
