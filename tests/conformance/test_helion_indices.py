"""Helion loads at computed indices (python/tpukit/helion/_memory.py, ``take``) lower for TPU
and compile with libtpu for v5e and v6e, in f32 and bf16, through both lowerings (JAX's
StableHLO of the Pallas kernel and tpukit's own Mosaic lowering of the imported IR): a shifted
tile (``t[tile.index + 1]``), a negative shift on the last dimension under ``extra_mask``
(concatenate), a flat index computed from loaded labels (cross_entropy) and a gather along
lanes (``w[:, idx[tile]]``); stores at computed indices (rows at ``start + tile.index``, a
shifted store under ``extra_mask``); and loops with data-dependent bounds (``hl.jagged_tile``, whose
stores are masked per lane, and ``hl.tile(start, end)`` with loaded bounds: while loops); a tile
indexing dimensions of different extents (``[B, L + 1, V]`` written with ``tile_l`` over ``L``:
a block of 56 on 51), static ranges (``16 + hl.arange(16)``) indexing as block slices, and a
``hl.cumsum`` of a 3-D tile (one triangular product per leading element); windows of rows of a
flat tensor (the jagged examples' form, loads and stores) and dynamic slices at device-scalar
starts (``start + hl.arange(8)``, ``j * 128 + hl.arange(128)``, ``bias[h : h + 1]``, and
int4_gemm's ``a[tm, 2 * tk.begin : 2 * tk.begin + 2 * block]``); a tile of
one row on a second-to-last dimension and an index into a size-1 dimension (flex attention).
Their results are tested in python/tests/test_helion_indices.py, test_helion_jagged.py and
test_helion_windows.py."""

import functools

import pytest
from conftest import assert_compiles, helion_modules
from tpu_compile import TOPOLOGIES

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl
from tpukit import helion


@helion.kernel(config=helion.Config(block_sizes=[128]))
def next_minus_this(x):
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t] = x[t.index + 1] - x[t]
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 128]))
def concat_masked(x, y):
    out = torch.empty([x.size(0), x.size(1) + y.size(1)], dtype=x.dtype)
    for t0, t1 in hl.tile(out.size()):
        in_x = (t1.index < x.size(1))[None, :]
        a = hl.load(x, [t0, t1], extra_mask=in_x)
        b = hl.load(y, [t0, t1.index - x.size(1)], extra_mask=(t1.index >= x.size(1))[None, :])
        out[t0, t1] = torch.where(in_x, a, b)
    return out


@helion.kernel(config=helion.Config(block_sizes=[32]))
def pick_logits(logits, labels):
    n, v = logits.shape
    flat = logits.view(-1)
    out = torch.empty([n], dtype=logits.dtype)
    for t in hl.tile(n):
        out[t] = hl.load(flat, [t.index * v + labels[t]])
    return out


@helion.kernel(config=helion.Config(block_sizes=[128]))
def lane_gather(x, w):
    out = torch.empty([w.size(0), x.size(0)], dtype=w.dtype)
    for t in hl.tile(x.size(0)):
        out[:, t] = w[:, x[t]]
    return out


@helion.kernel(config=helion.Config(block_sizes=[8, 128]))
def jagged_scale(x, row_lengths):
    out = x.clone()
    for tile_b in hl.tile(row_lengths.size(0)):
        acc = hl.zeros([tile_b], dtype=torch.float32)
        for tile_k in hl.jagged_tile(row_lengths[tile_b]):
            v = x[tile_b, tile_k]
            acc = acc + v.to(torch.float32).sum(dim=1)
            out[tile_b, tile_k] = v * 2
        out[tile_b, 0] = acc.to(x.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[128]))
def grouped_affine(x, offsets):
    out = torch.zeros_like(x)
    for g in hl.grid(offsets.size(0) - 1):
        for t in hl.tile(offsets[g], offsets[g + 1]):
            out[t] = x[t] * (g + 1).to(x.dtype)
    return out


# the one-hot select holds rows x block x columns in VMEM: a small table, as on a TPU
@helion.kernel(config=helion.Config(block_sizes=[32]))
def grouped_rows(x, offsets):
    out = torch.zeros_like(x)
    for g in hl.grid(offsets.size(0) - 1):
        start = offsets[g]
        for t in hl.tile(offsets[g + 1] - start):
            out[start + t.index, :] = x[start + t.index, :] * (g + 1).to(x.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[128]))
def shifted_store(x):
    out = torch.full_like(x, -1.0)
    for t in hl.tile(x.size(0)):
        hl.store(out, [t.index + 3], x[t], extra_mask=t.index + 3 < x.size(0))
    return out


@helion.kernel()
def shifted_scale(logits, scale):
    b, l1, v = logits.shape
    fwd = logits[:, :-1, :]
    out = torch.zeros_like(logits)
    for tb, tl in hl.tile([b, l1 - 1]):
        s = scale[tb, tl]
        for tv in hl.tile(v):
            out[tb, tl, tv] = (fwd[tb, tl, tv].float() * s[:, :, None]).to(out.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[1]))
def lower_blocks(q, k):
    out = torch.zeros([q.size(0), 32, 32], dtype=q.dtype)
    for tb in hl.tile(q.size(0), block_size=1):
        for base in (0, 16):
            rows = base + hl.arange(16)
            cols = hl.arange(base + 16)
            s = hl.dot(q[tb, rows, :].float(), k[tb, cols, :].float().transpose(-2, -1))
            out[tb, rows, cols] = (s * (rows[:, None] >= cols[None, :])[None].float()).to(out.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[2, 128]))
def scan_middle(g):
    out = torch.empty_like(g)
    for tb, td in hl.tile([g.size(0), g.size(2)]):
        out[tb, :, td] = hl.cumsum(g[tb, :, td].float(), 1).to(out.dtype)
    return out


# windows of rows of a flat tensor (the jagged examples' `x_flat[(starts + k) * M + m]`):
# one dynamic leading-dimension slice per lane, start rows from SMEM, staged in a scoped VMEM
# buffer (python/tpukit/helion/_windows.py); 128 lanes (a 1-D offsets tile) x 8 rows x 128
# columns, as VMEM allows (a jagged tile's 128 rows would need 8 MiB per value)
@helion.kernel(config=helion.Config(block_sizes=[128, 128, 8]))
def flat_row_sums(x, offsets, max_len: int):
    m = x.size(1)
    out = torch.zeros([offsets.size(0) - 1, m], dtype=x.dtype)
    flat = x.view(-1)
    for tb in hl.tile(offsets.size(0) - 1):
        starts = offsets[tb]
        lengths = offsets[tb.index + 1] - starts
        for tm in hl.tile(m):
            acc = hl.zeros([tb, tm], dtype=torch.float32)
            for tk in hl.tile(max_len):
                rows = starts[:, None] + tk.index[None, :]
                idx = rows[:, :, None] * m + tm.index[None, None, :]
                inside = (tk.index[None, :] < lengths[:, None])[:, :, None]
                acc = acc + hl.load(flat, [idx], extra_mask=inside).float().sum(dim=1)
            out[tb, tm] = acc.to(out.dtype)
    return out


@helion.kernel(config=helion.Config(block_sizes=[128, 128, 8]))
def flat_row_scale(x, offsets, max_len: int):
    m = x.size(1)
    out = torch.zeros_like(x)
    flat, out_flat = x.view(-1), out.view(-1)
    for tb in hl.tile(offsets.size(0) - 1):
        starts = offsets[tb]
        lengths = offsets[tb.index + 1] - starts
        for tm in hl.tile(m):
            for tk in hl.tile(max_len):
                rows = starts[:, None] + tk.index[None, :]
                idx = rows[:, :, None] * m + tm.index[None, None, :]
                inside = (tk.index[None, :] < lengths[:, None])[:, :, None]
                hl.store(out_flat, [idx], hl.load(flat, [idx]) * 2, extra_mask=inside)
    return out


# dynamic slices (python/tpukit/helion/_windows.py, ``DSlice``): rows `start + hl.arange(8)`
# from a loaded offset (a leading dimension: any start) and columns `j * 128 + hl.arange(128)`
# (lanes at aligned starts), as Helion's persistent grouped GEMM indexes; `bias[h : h + 1]`
# with a device scalar `h`, as its KDA example does
@helion.kernel()
def group_heads(x, offsets):
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


@helion.kernel(config=helion.Config(block_sizes=[1, 128]))
def head_bias(x, bias):
    out = torch.empty_like(x)
    for tr, td in hl.tile([x.size(0), x.size(1)], block_size=[1, None]):
        r = tr.begin  # one row (a tile of one row would be rounded up to 8 sublanes)
        h = r % bias.size(0)
        out[r, td] = x[r, td] + bias[h : h + 1, td][0]
    return out


# a tile of one row on a second-to-last dimension (made leading: its block stays 1), and an
# index into a size-1 dimension (Helion drops it: element 0), as flex attention has both
@helion.kernel()
def row_plus_begin(x):
    out = torch.empty_like(x)
    for tr in hl.tile(x.size(0), block_size=1):
        out[tr, :] = x[tr, :] + tr.begin.to(x.dtype)
    return out


@helion.kernel()
def per_head_count(x, counts):
    b, h, m = x.shape
    out = torch.empty_like(x)
    for tb, th, tm in hl.tile([b, h, m], block_size=[1, 1, 128]):
        n = counts[tb.begin, th.begin, tm.begin // 4096]
        out[tb, th, tm] = x[tb, th, tm] * n.to(x.dtype)
    return out


# int4_gemm's loads: last-dimension slices at a tile's begin (a multiple of its 128-wide
# block), one tile wide and, from twice the begin, two
@helion.kernel(config=helion.Config(block_sizes=[128, 8]))
def tile_begin_slices(a, b):
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


def _offsets(lengths):
    return torch.cumsum(torch.tensor([0] + lengths), 0).to(torch.int32)


def _randn(*shape, dtype):
    return torch.randn(*shape).to(dtype)


KERNELS = {
    "next_minus_this": (next_minus_this, lambda d: (_randn(300, dtype=d),)),
    "concat_masked": (concat_masked, lambda d: (_randn(150, 40, dtype=d), _randn(150, 60, dtype=d))),
    "pick_logits": (pick_logits, lambda d: (_randn(50, 37, dtype=d),
                                            torch.randint(0, 37, (50,), dtype=torch.int32))),
    "lane_gather": (lane_gather, lambda d: (torch.randint(0, 16, (200,), dtype=torch.int32),
                                            _randn(8, 16, dtype=d))),
    "jagged_scale": (jagged_scale, lambda d: (_randn(13, 200, dtype=d),
                                              torch.randint(0, 201, (13,), dtype=torch.int32))),
    "grouped_affine": (grouped_affine, lambda d: (_randn(500, dtype=d), torch.tensor(
        [0, 7, 7, 300, 301, 470], dtype=torch.int32))),
    "grouped_rows": (grouped_rows, lambda d: (_randn(100, 40, dtype=d), torch.tensor(
        [0, 7, 7, 60, 61, 90], dtype=torch.int32))),
    "shifted_store": (shifted_store, lambda d: (_randn(300, dtype=d),)),
    "shifted_scale": (shifted_scale, lambda d: (_randn(2, 51, 300, dtype=d), _randn(2, 50,
                                                                              dtype=torch.float32))),
    "flat_row_sums": (flat_row_sums, lambda d: (_randn(60, 200, dtype=d),
                                                _offsets([5, 0, 17, 3, 9, 1, 20, 0, 2, 3]), 20)),
    "flat_row_scale": (flat_row_scale, lambda d: (_randn(60, 200, dtype=d),
                                                  _offsets([5, 0, 17, 3, 9, 1, 20, 0, 2, 3]), 20)),
    "group_heads": (group_heads, lambda d: (_randn(60, 256, dtype=d),
                                            _offsets([5, 0, 17, 3, 9, 1, 20, 0, 2, 3]))),
    "head_bias": (head_bias, lambda d: (_randn(20, 300, dtype=d), _randn(3, 300, dtype=d))),
    "row_plus_begin": (row_plus_begin, lambda d: (_randn(21, 300, dtype=d),)),
    "per_head_count": (per_head_count, lambda d: (_randn(2, 3, 200, dtype=d),
                                                  torch.full([1, 1, 1], 3, dtype=torch.int32))),
    "scan_middle": (scan_middle, lambda d: (_randn(3, 40, 200, dtype=d),)),
    "tile_begin_slices": (tile_begin_slices, lambda d: (_randn(24, 640, dtype=d),
                                                        _randn(24, 1280, dtype=d))),
    "lower_blocks": (lower_blocks, lambda d: (_randn(3, 32, 40, dtype=d), _randn(3, 32, 40, dtype=d))),
}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


@functools.cache
def _lowered(name, dtype, path):
    torch.manual_seed(0)
    kernel, build = KERNELS[name]
    args = build(DTYPES[dtype])
    return helion_modules(kernel, args, path)


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("path", ["jax", "tpukit"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", list(KERNELS))
def test_computed_index_compiles_for_tpu(compiler, name, dtype, path, topology):
    modules = _lowered(name, dtype, path)
    assert len(modules) == 1
    assert_compiles(compiler, modules, topology)
