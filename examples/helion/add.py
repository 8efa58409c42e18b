"""Element-wise addition with broadcasting (Helion's examples/add.py), on tpukit.

The only change from the Helion program is the two imports.
"""

from __future__ import annotations

import torch
import tpukit.helion.language as hl
from tpukit import helion


@helion.kernel()
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # match pytorch broadcasting rules
    x, y = torch.broadcast_tensors(x, y)
    out = torch.empty(
        x.shape,
        # match type promotion of torch.add
        dtype=torch.promote_types(x.dtype, y.dtype),
        device=x.device,
    )
    # tile will be a tuple of blocks
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def check(m: int, n: int, dtype=torch.float32) -> None:
    from _check import assert_close

    x = torch.randn([m, n], dtype=dtype)
    y = torch.randn([n], dtype=dtype)
    assert_close(add(x, y), torch.add(x, y), "add")
    z = torch.randn([m, 1], dtype=dtype)
    assert_close(add(x, z), torch.add(x, z), "add, broadcast column")


def main() -> None:
    check(1024, 1024)
    check(100, 300, torch.bfloat16)
    print("add: ok")


if __name__ == "__main__":
    main()
