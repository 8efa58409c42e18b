"""Matrix multiplication with split-K (Helion's examples/matmul_split_k.py), on tpukit.

The K dimension is split across the grid (`register_tunable("split_k", …)`) and each split
adds its partial product into the output with `hl.atomic_add`; the epilogue runs on the first
split only (a device `if` on `outer_k.begin`). On a TPU the split axis runs in order and the
output block stays in VMEM while it accumulates. The only change from the Helion program is
the imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import tpukit.helion.language as hl
from tpukit import helion
from tpukit.helion.autotuner import PowerOfTwoFragment

if TYPE_CHECKING:
    from collections.abc import Callable


@helion.kernel(static_shapes=True)
def matmul_split_k(
    x: torch.Tensor,
    y: torch.Tensor,
    epilogue: Callable[[torch.Tensor, list[torch.Tensor]], torch.Tensor] = lambda acc,
    tile: acc,
) -> torch.Tensor:
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.zeros(
        [m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device
    )
    split_k = hl.register_tunable("split_k", PowerOfTwoFragment(1, 256))
    k_block = helion.next_power_of_2(helion.cdiv(k, split_k))
    for tile_m, tile_n, outer_k in hl.tile([m, n, k], block_size=[None, None, k_block]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for inner_k in hl.tile(outer_k.begin, outer_k.end):
            acc = torch.addmm(acc, x[tile_m, inner_k], y[inner_k, tile_n])
        # Apply epilogue only on the first k-split iteration
        if outer_k.begin == 0:
            acc = epilogue(acc, [tile_m, tile_n])
        hl.atomic_add(out, [tile_m, tile_n], acc)
    return out


def check(m: int, k: int, n: int, dtype=torch.float32, split_k: int = 4) -> None:
    from _check import assert_close

    kernel = helion.kernel(matmul_split_k.fn, config=helion.Config(split_k=split_k))
    # each split's partial sum is rounded to the output's dtype when it is added: bf16 gets
    # Helion's own tolerance for this example
    tol = {"rtol": 1e-4, "atol": 1e-3} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1.0}
    x = torch.randn([m, k], dtype=dtype)
    y = torch.randn([k, n], dtype=dtype)
    assert_close(kernel(x, y), x @ y, "matmul_split_k", **tol)
    bias = torch.randn([n], dtype=dtype)
    got = kernel(x, y, lambda acc, tile: acc + bias[tile[1]])
    assert_close(got, torch.nn.functional.linear(x, y.T, bias), "matmul_split_k + bias", **tol)


def main() -> None:
    check(64, 1024, 128)
    check(100, 300, 150, torch.bfloat16)
    print("matmul_split_k: ok")


if __name__ == "__main__":
    main()
