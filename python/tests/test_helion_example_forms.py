"""Forms Helion's upstream example programs write, against torch eager on `cpu` and
`interpret`, f32 and bf16, shapes that do not divide the blocks: ``Tensor.new_zeros`` /
``new_full`` in device code (of a host tensor, as rms_norm's and layer_norm's backward write
it, or of a device value, as flex_attention does), and one tile indexing dimensions of
different extents (grpo_loss's backward: ``logits[:, :-1, :]`` read, ``[B, L + 1, V]``
written, with ``tile_l`` over ``L``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: dict(rtol=1e-4, atol=1e-4), BF16: dict(rtol=2e-2, atol=5e-2)}


def close(actual, expected, dtype):
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.float(), expected.float(), **TOL[dtype])


@helion.kernel(config=helion.Config(block_sizes=[32, 8]))
def weighted_column_sums(x, weight):
    """Per row block, the column sums of ``x * weight`` accumulated over an inner loop into an
    f32 value made with ``weight.new_zeros`` (a host tensor: it gives the dtype only)."""
    m, n = x.shape
    mb = hl.register_block_size(m)
    partial = x.new_empty([(m + mb - 1) // mb, n], dtype=torch.float32)
    n = hl.specialize(n)
    for tm in hl.tile(m, block_size=mb):
        acc = weight.new_zeros(n, dtype=torch.float32)
        for tr in hl.tile(tm.begin, tm.end):
            acc += (x[tr, :].float() * weight[None, :].float()).sum(0)
        partial[tm.id, :] = acc
    return partial


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_new_zeros_of_a_host_tensor(device, dtype):
    x, w = torch.randn(70, 200, dtype=dtype), torch.randn(200, dtype=dtype)
    got = weighted_column_sums(x, w, device=device)
    prod = x.float() * w.float()
    expect = torch.stack([prod[i : i + 32].sum(0) for i in range(0, 70, 32)])
    close(got, expect, F32)


@helion.kernel(config=helion.Config(block_sizes=[8, 128]))
def clamp_rows(x, limit):
    """``Tensor.new_full`` / ``new_ones`` / ``new_zeros`` of a device value: its dtype unless
    ``dtype=``; ``[]`` is a 0-d value."""
    m, n = x.shape
    out = torch.empty_like(x)
    for tm, tn in hl.tile([m, n]):
        v = x[tm, tn]
        cap = v.new_full([], limit)
        ones = v.new_ones([tm, tn])
        zero = v.new_zeros(tm, tn, dtype=torch.float32)
        out[tm, tn] = (torch.minimum(v, cap) * ones + zero).to(out.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_new_full_of_a_device_value(device, dtype):
    x = torch.randn(20, 300, dtype=dtype)
    close(clamp_rows(x, 0.5, device=device), torch.clamp(x, max=0.5), dtype)


@helion.kernel()
def shifted_scale(logits, scale):
    """``logits[:, :-1, :]`` read and a ``[B, L + 1, V]`` result written with the same
    ``tile_l`` over ``L``: the tile's block must suit both extents."""
    b, l1, v = logits.shape
    fwd = logits[:, :-1, :]
    out = torch.zeros_like(logits)
    for tb, tl in hl.tile([b, l1 - 1]):
        s = scale[tb, tl]
        for tv in hl.tile(v):
            out[tb, tl, tv] = (fwd[tb, tl, tv].float() * s[:, :, None]).to(out.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("length", [50, 13])
def test_tile_over_dimensions_of_different_extents(device, dtype, length):
    logits = torch.randn(2, length + 1, 300, dtype=dtype)
    scale = torch.randn(2, length)
    expect = torch.zeros_like(logits)
    expect[:, :-1, :] = (logits[:, :-1, :].float() * scale[:, :, None]).to(dtype)
    close(shifted_scale(logits, scale, device=device), expect, dtype)


@helion.kernel(config=helion.Config(block_sizes=[1]))
def lower_blocks(q, k):
    """Helion's linear-attention engine form: sub-blocks addressed by static ranges
    (``16 + hl.arange(16)``) read, multiplied and written (``a[tile, rows, cols] = …``)."""
    bh = q.size(0)
    c = hl.specialize(q.size(1))
    out = torch.zeros([bh, c, c], dtype=q.dtype)
    for tb in hl.tile(bh, block_size=1):
        for base in (0, 16):
            rows = base + hl.arange(16)
            cols = hl.arange(base + 16)
            s = hl.dot(q[tb, rows, :].float(), k[tb, cols, :].float().transpose(-2, -1))
            causal = (rows[:, None] >= cols[None, :])[None, :, :]
            out[tb, rows, cols] = (s * causal.to(s.dtype)).to(out.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_static_arange_ranges_index_as_slices(device, dtype):
    q, k = torch.randn(3, 32, 40, dtype=dtype), torch.randn(3, 32, 40, dtype=dtype)
    s = q.float() @ k.float().transpose(-2, -1)
    expect = (s * torch.ones(32, 32).tril()).to(dtype)
    close(lower_blocks(q, k, device=device), expect, dtype)


@helion.kernel(config=helion.Config(block_sizes=[8]))
def shifted_rows(x):
    """A static range reaching past the tensor (``hl.arange(4) + 30`` of 32 rows) still reads
    0 outside, as a gather at computed indices does."""
    m, n = x.shape
    out = torch.zeros([4, n], dtype=x.dtype)
    for tn in hl.tile(n):
        out[:, tn] = x[hl.arange(4) + 30, tn]
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_static_range_past_the_end_reads_zero(device, dtype):
    x = torch.randn(32, 20, dtype=dtype)
    expect = torch.zeros(4, 20, dtype=dtype)
    expect[:2] = x[30:]
    close(shifted_rows(x, device=device), expect, dtype)


@helion.kernel(config=helion.Config(block_sizes=[2, 128]))
def scan_middle(g, reverse):
    """``hl.cumsum`` of a 3-D tile along its middle dimension (Helion's linear-attention
    engine scans the gates of a ``[bhn, C, D]`` block): one 2-D scan per leading element."""
    b, c, d = g.shape
    out = torch.empty_like(g)
    for tb, td in hl.tile([b, d]):
        out[tb, :, td] = hl.cumsum(g[tb, :, td].float(), 1, reverse=reverse).to(out.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_of_a_3d_value(device, dtype, reverse):
    g = torch.randn(3, 40, 200, dtype=dtype)
    f = g.float().flip(1) if reverse else g.float()
    expect = f.cumsum(1).flip(1) if reverse else f.cumsum(1)
    close(scan_middle(g, reverse, device=device), expect.to(dtype), dtype)


@helion.kernel(config=helion.Config(block_sizes=[128]))
def row_slice_at(x, bias):
    m, n = x.shape
    out = torch.empty_like(x)
    for h in hl.grid(m):
        for tn in hl.tile(n):
            out[h, tn] = x[h, tn] + bias[h : h + 1, tn][0]
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_a_slice_with_device_scalar_bounds_is_a_dynamic_slice(device, dtype):
    """`bias[h : h + 1]` (KDA's form): a slice of static length at a device scalar."""
    x, bias = torch.randn(4, 200, dtype=dtype), torch.randn(4, 200, dtype=dtype)
    close(row_slice_at(x, bias, device=device), (x.float() + bias.float()).to(dtype), dtype)


@helion.kernel()
def row_plus_begin(x):
    """A tile of one row (`block_size=1`) on a second-to-last dimension keeps its size: every
    element of it is at `tile.begin` (a block rounded up to 8 rows would not be)."""
    out = torch.empty_like(x)
    for tr in hl.tile(x.size(0), block_size=1):
        out[tr, :] = x[tr, :] + tr.begin.to(x.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_a_tile_of_one_row_keeps_its_begin(device, dtype):
    x = torch.randn(21, 300, dtype=dtype)
    expected = (x.float() + torch.arange(21, dtype=torch.float32)[:, None]).to(dtype)
    close(row_plus_begin(x, device=device), expected, dtype)


@helion.kernel(static_shapes=True)
def per_head_count(x, counts):
    """Flex attention's block mask form: `counts` of shape [1, 1, 1] indexed with the head's
    index; as in Helion, a size-1 dimension's index is dropped (it reads element 0)."""
    b, h, m = x.shape
    out = torch.empty_like(x)
    for tb, th, tm in hl.tile([b, h, m], block_size=[1, 1, 128]):
        n = counts[tb.begin, th.begin, tm.begin // 4096]
        out[tb, th, tm] = x[tb, th, tm] * n.to(x.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_an_index_into_a_size_one_dimension_reads_its_element(device, dtype):
    x = torch.randn(2, 3, 200, dtype=dtype)
    counts = torch.full([1, 1, 1], 3, dtype=torch.int32)
    close(per_head_count(x, counts, device=device), (x.float() * 3).to(dtype), dtype)
