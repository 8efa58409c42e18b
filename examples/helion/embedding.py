"""Embedding lookup (Helion's examples/embedding.py), on tpukit: a gather of weight rows.

`weight[x_flat[tile_b], tile_e]` indexes one host tensor with indices loaded from another. On a
TPU the indices travel as scalar prefetch (SMEM) and each row is read by its index; the only
change from the Helion program is the two imports.
"""

from __future__ import annotations

import torch
import tpukit.helion.language as hl
from tpukit import helion


@helion.kernel()
def embedding(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x_flat = x.reshape(-1)  # collapse x into a single dimension
    _, embedding_dim = weight.size()
    out = torch.empty(
        [x_flat.size(0), embedding_dim], dtype=weight.dtype, device=weight.device
    )
    for tile_b, tile_e in hl.tile([x_flat.size(0), embedding_dim]):
        out[tile_b, tile_e] = weight[x_flat[tile_b], tile_e]
    # restore the original shape
    return out.view(*x.size(), embedding_dim)


def check(batch: int, seq: int, num_embeddings: int, embedding_dim: int,
          dtype=torch.float32, index_dtype=torch.int32) -> None:
    from _check import assert_close

    x = torch.randint(0, num_embeddings, [batch, seq], dtype=index_dtype)
    weight = torch.randn([num_embeddings, embedding_dim], dtype=dtype)
    # a gather copies: the result is exact
    assert_close(embedding(x, weight), torch.nn.functional.embedding(x, weight), "embedding",
                 rtol=0, atol=0)


def main() -> None:
    check(256, 32, 16, 64)
    check(7, 13, 50, 300, torch.bfloat16, torch.int64)
    print("embedding: ok")


if __name__ == "__main__":
    main()
