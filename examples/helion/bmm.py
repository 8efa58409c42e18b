"""Batched matmul (Helion's examples/bmm.py), on tpukit: a 3-D grid, a k-loop, baddbmm."""

from __future__ import annotations

import torch
import tpukit.helion.language as hl
from tpukit import helion


# static_shapes=True gives a performance boost for matmuls
@helion.kernel(static_shapes=True)
def bmm(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    # A: [B, M, K], B: [B, K, N], Out: [B, M, N]   # dense bmm
    b, m, k = A.size()
    b, k, n = B.size()
    out = torch.empty([b, m, n], device=A.device, dtype=torch.promote_types(A.dtype, B.dtype))
    for tile_b, tile_m, tile_n in hl.tile([b, m, n]):
        acc = hl.zeros([tile_b, tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.baddbmm(acc, A[tile_b, tile_m, tile_k], B[tile_b, tile_k, tile_n])
        out[tile_b, tile_m, tile_n] = acc
    return out


def check(b: int, m: int, k: int, n: int, dtype=torch.float32) -> None:
    from _check import assert_close

    tol = {"rtol": 1e-4, "atol": 1e-3} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-1}
    x = torch.randn([b, m, k], dtype=dtype)
    y = torch.randn([b, k, n], dtype=dtype)
    assert_close(bmm(x, y), x @ y, "bmm", **tol)


def main() -> None:
    check(4, 128, 256, 128)
    check(3, 40, 200, 136, torch.bfloat16)
    print("bmm: ok")


if __name__ == "__main__":
    main()
