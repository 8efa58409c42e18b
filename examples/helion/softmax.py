"""Row softmax (Helion's examples/softmax.py), on tpukit: torch's softmax on a row block,
the decomposed one-pass form, and the two-pass (online) form with a nested tile loop."""

from __future__ import annotations

import torch
import tpukit.helion.language as hl
from tpukit import helion


@helion.kernel()
def softmax(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        out[tile_n, :] = torch.nn.functional.softmax(x[tile_n, :], dim=1)
    return out


@helion.kernel()
def softmax_decomposed(x: torch.Tensor) -> torch.Tensor:
    n, _m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        values = x[tile_n, :]
        amax = torch.amax(values, dim=1, keepdim=True)
        exp = torch.exp(values - amax)
        sum_exp = torch.sum(exp, dim=1, keepdim=True)
        out[tile_n, :] = exp / sum_exp
    return out


@helion.kernel()
def softmax_two_pass(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    block_size_m = hl.register_block_size(m)
    block_size_n = hl.register_block_size(n)
    for tile_m in hl.tile(m, block_size=block_size_m):
        mi = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        di = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=block_size_n):
            values = x[tile_m, tile_n]
            local_amax = torch.amax(values, dim=1)
            mi_next = torch.maximum(mi, local_amax)
            di = di * torch.exp(mi - mi_next) + torch.exp(values - mi_next[:, None]).sum(dim=1)
            mi = mi_next
        for tile_n in hl.tile(n, block_size=block_size_n):
            values = x[tile_m, tile_n]
            out[tile_m, tile_n] = torch.exp(values - mi[:, None]) / di[:, None]
    return out


def check(m: int, n: int, dtype=torch.float32) -> None:
    from _check import assert_close

    x = torch.randn([m, n], dtype=dtype) * 3
    expected = torch.nn.functional.softmax(x, dim=1)
    for kernel in (softmax, softmax_decomposed, softmax_two_pass):
        assert_close(kernel(x), expected, kernel.__name__)


def main() -> None:
    check(1024, 1024)
    check(100, 300, torch.bfloat16)
    print("softmax: ok")


if __name__ == "__main__":
    main()
