"""Matrix multiplication with an f32 accumulator, a `hl.tile` k-loop and an epilogue
(Helion's examples/matmul.py), on tpukit; also the `hl.dot` form."""

from __future__ import annotations

from collections.abc import Callable

import torch
import tpukit.helion.language as hl
from torch import Tensor
from tpukit import helion


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[64, 128, 128]))
def matmul(
    x: Tensor,
    y: Tensor,
    epilogue: Callable[[Tensor, tuple[Tensor, ...]], Tensor] = lambda acc, tile: acc,
) -> Tensor:
    m, k = x.size()
    k2, n = y.size()
    assert k == k2, f"size mismatch {k} != {k2}"
    out = torch.empty([m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = epilogue(acc, (tile_m, tile_n))
    return out


@helion.kernel()
def matmul_dot(x: Tensor, y: Tensor) -> Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = hl.dot(x[tile_m, tile_k], y[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = acc.to(x.dtype)
    return out


def check(m: int, k: int, n: int, dtype=torch.float32) -> None:
    from _check import assert_close

    tol = {"rtol": 1e-4, "atol": 1e-3} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 1e-1}
    x = torch.randn([m, k], dtype=dtype)
    y = torch.randn([k, n], dtype=dtype)
    bias = torch.randn([n], dtype=dtype)
    assert_close(matmul(x, y), x @ y, "matmul", **tol)
    assert_close(matmul_dot(x, y), x @ y, "matmul with hl.dot", **tol)

    # the epilogue can use a captured tensor: it becomes a kernel operand
    def epilogue(acc: Tensor, tile: tuple[Tensor, ...]) -> Tensor:
        return torch.relu(acc + bias[tile[1]])

    assert_close(matmul(x, y, epilogue), torch.relu(x @ y + bias), "matmul + epilogue", **tol)


def main() -> None:
    check(256, 512, 256)
    check(200, 300, 150, torch.bfloat16)
    print("matmul: ok")


if __name__ == "__main__":
    main()
