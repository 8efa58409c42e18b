"""tpukit.helion loops with data-dependent bounds, against torch on `cpu` and `interpret`, f32 and
bf16, lengths the blocks do not divide: `hl.jagged_tile(lengths)` (per-lane ends: loads read 0
past them, stores skip them, reductions ignore them) and `hl.tile(start, end)` with bounds
loaded from a tensor (grouped rows)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import DEVICES, helion  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: dict(rtol=1e-5, atol=1e-4), BF16: dict(rtol=2e-2, atol=1e-1)}


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


@pytest.fixture(params=DEVICES)
def device(request):
    with helion.device(request.param):
        yield request.param


@helion.kernel(config=helion.Config(block_sizes=[8, 128]))
def jagged_row_sum(x, row_lengths):
    """Helion's `jagged_tile` example: row `i` sums its first `row_lengths[i]` elements."""
    out = torch.zeros([row_lengths.size(0)], dtype=torch.float32)
    for tile_b in hl.tile(row_lengths.size(0)):
        lengths = row_lengths[tile_b]
        acc = hl.zeros([tile_b], dtype=torch.float32)
        for tile_k in hl.jagged_tile(lengths):
            acc = acc + x[tile_b, tile_k].to(torch.float32).sum(dim=1)
        out[tile_b] = acc
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", [(20, 300), (8, 128)])
def test_jagged_row_sum(device, dtype, shape):
    b, n = shape
    x = torch.randn(b, n).to(dtype)
    lengths = torch.randint(0, n + 1, (b,), dtype=torch.int32)
    lengths[0] = n
    expected = torch.stack([x[i, : lengths[i]].float().sum() for i in range(b)])
    torch.testing.assert_close(jagged_row_sum(x, lengths), expected, **TOL[dtype])


@helion.kernel(config=helion.Config(block_sizes=[8, 128]))
def jagged_scale(x, row_lengths):
    """Doubles the first `row_lengths[i]` elements of row `i` of a copy of `x` and leaves the
    others as they were: stores through a jagged tile skip its invalid elements."""
    out = x.clone()
    for tile_b in hl.tile(row_lengths.size(0)):
        for tile_k in hl.jagged_tile(row_lengths[tile_b]):
            out[tile_b, tile_k] = x[tile_b, tile_k] * 2
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_stores_through_a_jagged_tile_skip_its_invalid_elements(device, dtype):
    b, n = 13, 200
    x = torch.randn(b, n).to(dtype)
    lengths = torch.randint(0, n + 1, (b,), dtype=torch.int32)
    expected = x.clone()
    for i in range(b):
        expected[i, : lengths[i]] *= 2
    torch.testing.assert_close(jagged_scale(x, lengths), expected, rtol=0, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[128]))
def grouped_affine(x, offsets):
    """Rows `offsets[g]:offsets[g + 1]` of the result are those of `x` times `g + 1`: a nested
    loop whose bounds are loaded from a tensor."""
    out = torch.zeros_like(x)
    for g in hl.grid(offsets.size(0) - 1):
        start = offsets[g]
        end = offsets[g + 1]
        for t in hl.tile(start, end):
            out[t] = x[t] * (g + 1).to(x.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_loop_bounds_loaded_from_a_tensor(device, dtype):
    x = torch.randn(500).to(dtype)
    offsets = torch.tensor([0, 7, 7, 300, 301, 470], dtype=torch.int32)
    expected = torch.zeros_like(x)
    for g in range(len(offsets) - 1):
        a, b = int(offsets[g]), int(offsets[g + 1])
        expected[a:b] = x[a:b] * (g + 1)
    torch.testing.assert_close(grouped_affine(x, offsets), expected, rtol=0, atol=0)


def test_a_mean_over_a_jagged_tile_is_refused():
    @helion.kernel
    def bad(x, lengths):
        out = torch.zeros([lengths.size(0)], dtype=x.dtype)
        for tb in hl.tile(lengths.size(0)):
            acc = hl.zeros([tb], dtype=x.dtype)
            for tk in hl.jagged_tile(lengths[tb]):
                acc = acc + x[tb, tk].mean(dim=1)
            out[tb] = acc
        return out

    with pytest.raises(helion.exc.UnsupportedConstruct, match="jagged tile"):
        bad(torch.randn(8, 128), torch.full((8,), 5, dtype=torch.int32))
