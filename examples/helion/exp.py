"""Element-wise exp (Helion's examples/exp.py, forward), on tpukit."""

from __future__ import annotations

import torch
import tpukit.helion.language as hl
from tpukit import helion


@helion.kernel()
def exp(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = torch.exp(x[tile])
    return out


def check(n: int, dtype=torch.float32) -> None:
    from _check import assert_close

    x = torch.randn([n], dtype=dtype)
    assert_close(exp(x), torch.exp(x), "exp")


def main() -> None:
    check(10240)
    check(1000, torch.bfloat16)
    print("exp: ok")


if __name__ == "__main__":
    main()
