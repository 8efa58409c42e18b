"""tpukit.helion loads at computed indices, against torch on `cpu` and `interpret`, f32 and bf16,
shapes the blocks do not divide: a shifted tile (`t[tile.index + 1]`, `t[tile.index - k]` with
`extra_mask`, `t[base + tile.index]` with a device scalar `base`), an index computed from
loaded indices (`flat[tile.index * v + labels[tile]]`, `w[idx[tile.index // s] * s + …]`),
an N-D index array into a flattened tensor, stores at computed indices (`out[start +
tile.index, :] = v`, a shifted store under `extra_mask`), and the errors for what is not
translated."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

F32, BF16 = torch.float32, torch.bfloat16


def shifted(x, k):
    """``x[i + k]`` along dimension 0, 0 where ``i + k`` is outside ``x``."""
    out = torch.zeros_like(x)
    n = x.shape[0]
    lo, hi = max(0, -k), min(n, n - k)
    if lo < hi:
        out[lo:hi] = x[lo + k : hi + k]
    return out


@helion.kernel(config=helion.Config(block_sizes=[128]))
def next_minus_this(x):
    """``x[i + 1] - x[i]`` (the last element reads 0 past the end), as jagged kernels read
    ``ends = offsets[tile.index + 1]``."""
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t.index + 1] - x[t]
    return out


@pytest.mark.parametrize("dtype", [F32, BF16, torch.int32])
@pytest.mark.parametrize("n", [300, 128])
def test_tile_index_plus_one(device, dtype, n):
    x = (torch.randn(n) * 100).to(dtype)
    torch.testing.assert_close(next_minus_this(x), shifted(x, 1) - x, rtol=0, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[16, 128]))
def concat_masked(x, y):
    """``torch.cat([x, y], 1)`` through a tile of the output straddling both inputs: ``y`` is
    read at ``tile.index - x.size(1)`` under ``extra_mask`` (Helion's concatenate example)."""
    out = torch.empty([x.size(0), x.size(1) + y.size(1)], dtype=x.dtype)
    for t0, t1 in hl.tile(out.size()):
        in_x = (t1.index < x.size(1))[None, :]
        a = hl.load(x, [t0, t1], extra_mask=in_x)
        b = hl.load(y, [t0, t1.index - x.size(1)], extra_mask=(t1.index >= x.size(1))[None, :])
        out[t0, t1] = torch.where(in_x, a, b)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", [(150, 40, 60), (16, 128, 128), (9, 200, 77)])
def test_concat_through_negative_shift(device, dtype, shape):
    m, n1, n2 = shape
    x, y = torch.randn(m, n1).to(dtype), torch.randn(m, n2).to(dtype)
    torch.testing.assert_close(concat_masked(x, y), torch.cat([x, y], 1), rtol=0, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[128]))
def rows_from_offsets(x, offsets, length: hl.constexpr):
    """Row ``b`` of the result is ``x[offsets[b] : offsets[b] + length]`` (0 past the end):
    a shift by a device scalar, as ragged rows are read."""
    out = torch.empty([offsets.size(0), length], dtype=x.dtype)
    for b in hl.grid(offsets.size(0)):
        start = offsets[b]
        for t in hl.tile(length):
            out[b, t] = x[start + t.index]
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_shift_by_device_scalar(device, dtype):
    x = torch.randn(700).to(dtype)
    offsets = torch.tensor([0, 5, 130, 400, 690], dtype=torch.int32)
    length = 150
    expected = torch.stack([shifted(x, int(o))[:length] for o in offsets])
    torch.testing.assert_close(rows_from_offsets(x, offsets, length), expected, rtol=0, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[32]))
def pick_logits(logits, labels):
    """``logits[i, labels[i]]`` through the flattened logits (Helion's cross_entropy)."""
    n, v = logits.shape
    flat = logits.view(-1)
    out = torch.empty([n], dtype=logits.dtype)
    for t in hl.tile(n):
        out[t] = hl.load(flat, [t.index * v + labels[t]])
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", [(50, 37), (64, 128)])
def test_flat_index_from_loaded_labels(device, dtype, shape):
    n, v = shape
    logits = torch.randn(n, v).to(dtype)
    labels = torch.randint(0, v, (n,), dtype=torch.int64)
    expected = logits[torch.arange(n), labels]
    torch.testing.assert_close(pick_logits(logits, labels), expected, rtol=0, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[64, 128]))
def gather_rows(w, idx, s: hl.constexpr):
    """Row ``r`` of the result is row ``r % s`` of block ``idx[r // s]`` of ``w`` (blocks of
    ``s`` rows): an index vector gathered at computed positions, then a computed row index
    (Helion's gather_gemv)."""
    out = torch.empty([idx.size(0) * s, w.size(1)], dtype=w.dtype)
    for t in hl.tile(idx.size(0) * s):
        block = idx[t.index // s]
        for tk in hl.tile(w.size(1)):
            out[t, tk] = w[block * s + t.index % s, tk]
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_computed_row_index(device, dtype):
    blocks, s, k = 5, 12, 200
    w = torch.randn(blocks * s, k).to(dtype)
    idx = torch.tensor([3, 0, 4, 4, 1, 2, 0], dtype=torch.int32)
    expected = w.view(blocks, s, k)[idx.long()].reshape(-1, k)
    torch.testing.assert_close(gather_rows(w, idx, s), expected, rtol=0, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[8, 16, 8]))
def ragged_window_sum(x, starts, m: hl.constexpr, k: hl.constexpr):
    """``sum_j x[starts[b] + j, c]`` over ``j < k`` through the flattened ``x``: a 3-D array of
    indices (Helion's jagged_mean inner loop). The one-hot select costs indices × table size:
    small tables only."""
    flat = x.view(-1)
    out = torch.empty([starts.size(0), m], dtype=torch.float32)
    for tb, tm in hl.tile([starts.size(0), m]):
        s = starts[tb]
        acc = hl.zeros([tb, tm], dtype=torch.float32)
        for tk in hl.tile(k):
            i = (s[:, None] + tk.index[None, :])[:, :, None] * m + tm.index[None, None, :]
            acc = acc + hl.load(flat, [i]).to(torch.float32).sum(1)
        out[tb, tm] = acc
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_nd_index_into_flat_tensor(device, dtype):
    rows, m, k = 16, 20, 6
    x = torch.randn(rows, m).to(dtype)
    starts = torch.tensor([0, 3, 7, 10, 9, 1, 2, 0, 8], dtype=torch.int32)
    expected = torch.stack([x[s : s + k].float().sum(0) for s in starts.tolist()])
    actual = ragged_window_sum(x, starts, m, k)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-4)


@helion.kernel
def doubled_rows(x, w):
    out = torch.empty([x.size(0), w.size(1)], dtype=w.dtype)
    for t in hl.tile(x.size(0)):
        out[t, :] = w[x[t] * 2, :]
    return out


@helion.kernel
def lane_gather(x, w):
    out = torch.empty([w.size(0), x.size(0)], dtype=w.dtype)
    for t in hl.tile(x.size(0)):
        out[:, t] = w[:, x[t]]
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_computed_rows_and_a_gather_along_lanes(device, dtype):
    """Indices computed from loaded ones (``w[x[t] * 2, :]``) and indices along the last
    dimension (``w[:, x[t]]``), which scalar-prefetch gathers (rows) do not cover."""
    idx = torch.randint(0, 4, (50,), dtype=torch.int32)
    w = torch.randn(16, 130).to(dtype)
    torch.testing.assert_close(doubled_rows(idx, w), w[idx.long() * 2], rtol=0, atol=0)
    w = torch.randn(8, 16).to(dtype)
    torch.testing.assert_close(lane_gather(idx, w), w[:, idx.long()], rtol=0, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[128]))
def grouped_rows(x, offsets):
    """Rows ``offsets[g]:offsets[g + 1]`` of the result are those of ``x`` times ``g + 1``,
    loaded and stored at ``start + tile.index`` over a loop of data-dependent length (Helion's
    grouped_gemm)."""
    out = torch.zeros_like(x)
    for g in hl.grid(offsets.size(0) - 1):
        start = offsets[g]
        for t in hl.tile(offsets[g + 1] - start):
            out[start + t.index, :] = x[start + t.index, :] * (g + 1).to(x.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_store_at_computed_rows(device, dtype):
    x = torch.randn(300, 40).to(dtype)
    offsets = torch.tensor([0, 7, 7, 200, 201, 290], dtype=torch.int32)
    expected = torch.zeros_like(x)
    for g in range(len(offsets) - 1):
        a, b = int(offsets[g]), int(offsets[g + 1])
        expected[a:b] = x[a:b] * (g + 1)
    torch.testing.assert_close(grouped_rows(x, offsets), expected, rtol=0, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[128]))
def shifted_store(x, k: hl.constexpr):
    """``out[i + k] = x[i]`` under ``extra_mask`` (indices past the end are not stored)."""
    out = torch.full_like(x, -1.0)
    for t in hl.tile(x.size(0)):
        hl.store(out, [t.index + k], x[t], extra_mask=t.index + k < x.size(0))
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("n", [300, 256])
def test_store_at_shifted_tile(device, dtype, n):
    x = torch.randn(n).to(dtype)
    expected = torch.full_like(x, -1.0)
    expected[3:] = x[:-3]
    torch.testing.assert_close(shifted_store(x, 3), expected, rtol=0, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[16]))
def scatter_valid_rows(x, order, count):
    """Row ``order[i]`` of the result is row ``i`` of ``x`` for ``i < count``; the other lanes
    store back what they read at the index of lane 0, as Helion's moe_matmul_ogs does: the
    first of coinciding indices wins."""
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        valid = t.index < count
        rows = order[torch.where(valid, t.index, 0)]
        old = out[rows, :]
        out[rows, :] = torch.where(valid[:, None], x[t, :], old)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_first_of_coinciding_store_indices_wins(device, dtype):
    x = torch.randn(16, 40).to(dtype)
    order = torch.randperm(16).to(torch.int32)
    count = 11
    expected = torch.zeros_like(x)
    expected[order[:count].long()] = x[:count]
    torch.testing.assert_close(scatter_valid_rows(x, order, count), expected, rtol=0, atol=0)


def test_float_index_is_refused():
    @helion.kernel
    def bad(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t] = x[x[t]]
        return out

    with pytest.raises(helion.exc.UnsupportedConstruct, match="indices must be integers"):
        bad(torch.randn(64))


def test_atomic_at_computed_indices_is_refused():
    @helion.kernel
    def bad(x):
        out = torch.zeros_like(x)
        for t in hl.tile(x.size(0)):
            hl.atomic_add(out, [t.index + 1], x[t])
        return out

    with pytest.raises(helion.exc.UnsupportedConstruct, match="at computed indices"):
        bad(torch.randn(64))
