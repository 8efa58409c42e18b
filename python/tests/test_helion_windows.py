"""tpukit.helion loads and stores of a flat tensor at computed indices that walk rows (the form of
Helion's jagged_sum/mean/softmax/layer_norm examples: `x_flat[(starts + k) * M + m]` with
`starts` loaded from offsets), against torch on `cpu` and `interpret`, f32 and bf16, sizes the
blocks do not divide. They are read and written as windows of rows (python/tpukit/helion/
_windows.py) rather than a one-hot select over the table, so large tables work."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: dict(rtol=1e-5, atol=1e-4), BF16: dict(rtol=2e-2, atol=1e-1)}


def _jagged(lengths, m, dtype):
    offsets = torch.cumsum(torch.tensor([0, *lengths]), 0)
    return torch.randn(int(offsets[-1]), m).to(dtype), offsets


@helion.kernel(config=helion.Config(block_sizes=[8, 128, 16]))
def row_sums(x, offsets):
    """Helion's jagged_sum: the sum of each group of rows `offsets[i]:offsets[i + 1]`."""
    m = x.size(1)
    out = torch.zeros([offsets.size(0) - 1, m], dtype=x.dtype)
    flat = x.view(-1)
    for tb in hl.tile(offsets.size(0) - 1):
        starts = offsets[tb]
        lengths = offsets[tb.index + 1] - starts
        for tm in hl.tile(m):
            acc = hl.zeros([tb, tm], dtype=torch.float32)
            for tk in hl.jagged_tile(lengths):
                rows = starts[:, None] + tk.index[None, :]
                idx = rows[:, :, None] * m + tm.index[None, None, :]
                acc = acc + hl.load(flat, [idx]).float().sum(dim=1)
            out[tb, tm] = acc.to(out.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("m", [200, 8])
def test_row_sums_read_windows_of_rows(device, dtype, m):
    lengths = [5, 0, 37, 3, 9, 1, 20, 0, 2, 3, 50, 1, 7]
    x, offsets = _jagged(lengths, m, dtype)
    expected = torch.stack([x[offsets[i]:offsets[i + 1]].float().sum(0)
                            for i in range(len(lengths))]).to(dtype)
    torch.testing.assert_close(row_sums(x, offsets), expected, **TOL[dtype])


def test_a_large_table_is_not_a_one_hot_select(device):
    """100K rows: a one-hot select would hold rows x indices elements."""
    lengths = [int(n) for n in torch.randint(0, 200, (700,))]
    x, offsets = _jagged(lengths, 128, F32)
    expected = torch.stack([x[offsets[i]:offsets[i + 1]].sum(0) for i in range(len(lengths))])
    torch.testing.assert_close(row_sums(x, offsets), expected, **TOL[F32])


@helion.kernel(config=helion.Config(block_sizes=[8, 128, 16]))
def row_softmax(x, offsets):
    """Helion's jagged_softmax: a softmax over each group's rows, per column, stored flat."""
    m = x.size(1)
    out = torch.zeros(x.numel(), dtype=x.dtype)
    flat = x.view(-1)
    for tb in hl.tile(offsets.size(0) - 1):
        starts = offsets[tb]
        lengths = offsets[tb.index + 1] - starts
        for tm in hl.tile(m):
            mx = hl.full([tb, tm], float("-inf"), dtype=torch.float32)
            total = hl.zeros([tb, tm], dtype=torch.float32)
            for tk in hl.jagged_tile(lengths):
                rows = starts[:, None] + tk.index[None, :]
                idx = rows[:, :, None] * m + tm.index[None, None, :]
                v = hl.load(flat, [idx]).float()
                new = torch.maximum(mx, v.amax(dim=1))
                total = total * torch.exp(mx - new) + torch.exp(v - new[:, None, :]).sum(dim=1)
                mx = new
            for tk in hl.jagged_tile(lengths):
                rows = starts[:, None] + tk.index[None, :]
                idx = rows[:, :, None] * m + tm.index[None, None, :]
                v = hl.load(flat, [idx]).float()
                y = torch.exp(v - mx[:, None, :]) / total[:, None, :]
                hl.store(out, [idx], y.to(x.dtype))
    return out.reshape(x.shape)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_row_softmax_stores_windows_of_rows(device, dtype):
    lengths = [5, 0, 37, 3, 9, 1, 20, 0, 2, 3, 50, 1, 7]
    x, offsets = _jagged(lengths, 150, dtype)
    expected = torch.cat([torch.softmax(x[offsets[i]:offsets[i + 1]].float(), dim=0)
                          for i in range(len(lengths))]).to(dtype)
    torch.testing.assert_close(row_softmax(x, offsets), expected, **TOL[dtype])


@helion.kernel(config=helion.Config(block_sizes=[8, 128]))
def feature_means(x, offsets, counts):
    """Helion's jagged_mean: a jagged tile of columns (`counts[i]` features of group `i`)
    inside which rows are walked; columns past a group's count stay 0."""
    m = x.size(1)
    out = torch.zeros([offsets.size(0) - 1, m], dtype=x.dtype)
    flat = x.view(-1)
    for tb in hl.tile(offsets.size(0) - 1):
        starts = offsets[tb]
        lengths = offsets[tb.index + 1] - starts
        for tm in hl.jagged_tile(counts[tb]):
            acc = hl.zeros([tb, tm], dtype=torch.float32)
            for tk in hl.jagged_tile(lengths):
                rows = starts[:, None] + tk.index[None, :]
                idx = rows[:, :, None] * m + tm.index[None, None, :]
                acc = acc + hl.load(flat, [idx]).float().sum(dim=1)
            n = lengths.float()[:, None]
            out[tb, tm] = torch.where(n > 0, acc / n, 0.0).to(out.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_feature_means_with_a_jagged_column_tile(device, dtype):
    """Block sizes of 128 rows and 128 groups: the jagged column tile's lanes are found by
    their tile, not by an extent both axes share."""
    lengths = [int(n) for n in torch.randint(1, 64, (30,))]
    x, offsets = _jagged(lengths, 8, dtype)
    counts = torch.randint(1, 9, (30,), dtype=torch.int32)
    expected = torch.zeros(30, 8)
    for i in range(30):
        expected[i, :counts[i]] = x[offsets[i]:offsets[i + 1], :counts[i]].float().mean(0)
    torch.testing.assert_close(feature_means(x, offsets, counts), expected.to(dtype),
                               **TOL[dtype])


@helion.kernel(config=helion.Config(block_sizes=[8, 128]))
def flat_tiles(x):
    """Tiles of a 2-D tensor read through its flat view (`flat[tb.index[:, None] * m +
    tm.index]`): one window per tile, its start row the tile's begin."""
    m = x.size(1)
    flat = x.view(-1)
    out = torch.zeros_like(x)
    for tb, tm in hl.tile([x.size(0), m]):
        out[tb, tm] = hl.load(flat, [tb.index[:, None] * m + tm.index[None, :]]) * 3
    return out


@helion.kernel(config=helion.Config(block_sizes=[8, 128]))
def flat_tiles_and_head(x):
    """The same flat tensor also read by a plain tile: it keeps the one-hot select."""
    m = x.size(1)
    flat = x.view(-1)
    out = torch.zeros_like(x)
    for tb, tm in hl.tile([x.size(0), m]):
        out[tb, tm] = hl.load(flat, [tb.index[:, None] * m + tm.index[None, :]]) + flat[tm][None, :]
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_flat_tiles_with_and_without_other_accesses(device, dtype):
    x = torch.randn(20, 40).to(dtype)
    torch.testing.assert_close(flat_tiles(x), x * 3, **TOL[dtype])
    torch.testing.assert_close(flat_tiles_and_head(x), x + x[0][None, :], **TOL[dtype])


@helion.kernel()
def group_heads(x, offsets):
    """Helion's persistent grouped GEMM indexing: rows `start + hl.arange(8)` from a loaded
    offset and columns `j * 128 + hl.arange(128)`, masked: dynamic slices, not gathers."""
    out = torch.zeros_like(x)
    for g in hl.grid(offsets.size(0) - 1):
        start = offsets[g]
        end = offsets[g + 1]
        for j in hl.grid(x.size(1) // 128):
            rows = start + hl.arange(8)
            cols = j * 128 + hl.arange(128)
            ok = (rows < end)[:, None]
            v = hl.load(x, [rows, cols], extra_mask=ok)
            hl.store(out, [rows, cols], v * (g + 1).to(x.dtype), extra_mask=ok)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_rows_and_columns_at_device_scalar_starts(device, dtype):
    lengths = [5, 0, 17, 3, 9, 1, 20, 0, 2, 3]
    offsets = torch.cumsum(torch.tensor([0, *lengths]), 0).to(torch.int32)
    x = torch.randn(60, 384).to(dtype)
    expected = torch.zeros_like(x)
    for g, n in enumerate(lengths):
        s = int(offsets[g])
        expected[s:s + min(n, 8)] = x[s:s + min(n, 8)] * (g + 1)
    torch.testing.assert_close(group_heads(x, offsets), expected, **TOL[dtype])


@helion.kernel(config=helion.Config(block_sizes=[1, 128]))
def head_bias(x, bias):
    """Helion's KDA example: `bias[h : h + 1, tile]` with a device scalar `h`."""
    out = torch.empty_like(x)
    for tr, td in hl.tile([x.size(0), x.size(1)], block_size=[1, None]):
        r = tr.begin  # one row (a tile of one row would be rounded up to 8 sublanes)
        h = r % bias.size(0)
        out[r, td] = x[r, td] + bias[h : h + 1, td][0]
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_a_slice_with_device_scalar_bounds(device, dtype):
    x, bias = torch.randn(20, 300).to(dtype), torch.randn(3, 300).to(dtype)
    expected = x + bias[torch.arange(20) % 3]
    torch.testing.assert_close(head_bias(x, bias), expected, **TOL[dtype])


def tile_begin_slices(a, b):
    """Helion's int4_gemm indexing: last-dimension slices at a tile's begin, of the tile's
    width (`a`) and of twice its width from twice its begin (`b`, two packed columns per
    element): starts that are multiples of the block size, so of 128."""
    m, k = a.shape
    out = torch.empty([m], dtype=torch.float32)
    block = hl.register_block_size(k)
    for tm in hl.tile(m):
        acc = hl.zeros([tm], dtype=torch.float32)
        for tk in hl.tile(k, block_size=block):
            wide = tk.begin * 2
            acc += a[tm, tk.begin : tk.begin + block].to(torch.float32).sum(dim=1)
            acc += b[tm, wide : wide + block * 2].to(torch.float32).sum(dim=1)
        out[tm] = acc
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("block", [128, 256])
def test_slices_at_a_tiles_begin_are_dynamic_slices(device, dtype, block):
    a, b = torch.randn(24, 640).to(dtype), torch.randn(24, 1280).to(dtype)
    kernel = helion.kernel(tile_begin_slices, config=helion.Config(block_sizes=[block, 8]))
    want = a.float().sum(1) + b.float().sum(1)
    torch.testing.assert_close(kernel(a, b), want, rtol=1e-4, atol=1e-2)


def test_a_slice_at_a_tiles_begin_of_a_block_not_a_multiple_of_128_is_refused(device):
    @helion.kernel(config=helion.Config(block_sizes=[8, 64]))
    def k(a):
        out = torch.empty([a.size(0)], dtype=torch.float32)
        for tm in hl.tile(a.size(0)):
            acc = hl.zeros([tm], dtype=torch.float32)
            for tk in hl.tile(a.size(1), block_size=64):
                acc += a[tm, tk.begin : tk.begin + 128].sum(dim=1)
            out[tm] = acc
        return out

    with pytest.raises(helion.exc.UnsupportedConstruct, match="bounds that are device values"):
        k(torch.randn(8, 512))


def test_a_slice_of_a_device_value_length_is_refused(device):
    @helion.kernel()
    def k(x, n):
        out = torch.zeros_like(x)
        for t in hl.tile(x.size(0)):
            m = n[0]
            out[t, 0:1] = x[t, 0:1] + x[t, m : 2 * m].sum(1, keepdim=True)
        return out

    with pytest.raises(helion.exc.UnsupportedConstruct, match=r"a slice of `x` with bounds "
                       r"that are device values.*test_helion_windows.py"):
        k(torch.randn(8, 16), torch.tensor([2], dtype=torch.int32))


@helion.kernel(config=helion.Config(block_sizes=[8, 128, 16]))
def nested_blocks(x):
    """Nested inner loops keep their own block sizes (the config's third entry is the
    innermost loop's: 16 rows, where the middle loop's columns must be 128)."""
    out = torch.zeros([x.size(0), x.size(2)], dtype=torch.float32)
    for tb in hl.tile(x.size(0)):
        for tm in hl.tile(x.size(2)):
            acc = hl.zeros([tb, tm], dtype=torch.float32)
            for tk in hl.tile(x.size(1)):
                acc = acc + x[tb, tk, tm].float().sum(1)
            out[tb, tm] = acc
    return out


def test_nested_inner_loops_have_their_own_block_sizes(device):
    x = torch.randn(10, 40, 200)
    assert nested_blocks.block_sizes(x) == [8, 128, 16]
    torch.testing.assert_close(nested_blocks(x), x.sum(1), **TOL[F32])
