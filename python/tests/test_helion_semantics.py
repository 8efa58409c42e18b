"""tpukit.helion semantics, against torch eager on random inputs, on `cpu` and `interpret`:
partial tiles (reductions whose identity is not 0), atomics (including collisions across grid
steps), hl.reduce, cumsum, hl.grid, masks, gathers and scatters, device `if`, and the tile API
(tile forms, Tile attributes, subscript, tunables, specialize, constexpr, arange, full).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402
from tpukit.helion.autotuner import PowerOfTwoFragment  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: dict(rtol=1e-5, atol=1e-5), BF16: dict(rtol=1e-2, atol=5e-2)}


def close(actual, expected, dtype=F32, **tol):
    torch.testing.assert_close(actual.float(), expected.float(), **(tol or TOL[dtype]))


# --- partial tiles: elements past the end never count -------------------------------------

BS = 128


@helion.kernel(config=helion.Config(block_sizes=[BS]))
def per_tile_stats(x):
    """Statistics of each 128-column tile; the last tile is partial when n % 128 != 0."""
    m, n = x.size()
    k = helion.cdiv(n, BS)
    mx = torch.empty([m, k], dtype=torch.float32)
    mn = torch.empty([m, k], dtype=torch.float32)
    se = torch.empty([m, k], dtype=torch.float32)
    me = torch.empty([m, k], dtype=torch.float32)
    va = torch.empty([m, k], dtype=torch.float32)
    lse = torch.empty([m, k], dtype=torch.float32)
    am = torch.empty([m, k], dtype=torch.int32)
    for tn in hl.tile(n):
        v = x[:, tn].to(torch.float32)
        mx[:, tn.id] = v.amax(1)
        mn[:, tn.id] = torch.min(v, dim=1).values
        se[:, tn.id] = torch.exp(v).sum(1)
        me[:, tn.id] = v.mean(1)
        va[:, tn.id] = torch.var(v, dim=1, correction=0)
        lse[:, tn.id] = torch.logsumexp(v, 1)
        am[:, tn.id] = torch.argmax(v, 1) + tn.begin
    return mx, mn, se, me, va, lse, am


def per_tile_reference(x):
    chunks = [c.float() for c in x.split(BS, dim=1)]
    return (
        torch.stack([c.amax(1) for c in chunks], 1),
        torch.stack([c.amin(1) for c in chunks], 1),
        torch.stack([c.exp().sum(1) for c in chunks], 1),
        torch.stack([c.mean(1) for c in chunks], 1),
        torch.stack([c.var(1, correction=0) for c in chunks], 1),
        torch.stack([c.logsumexp(1) for c in chunks], 1),
        torch.stack([c.argmax(1) + i * BS for i, c in enumerate(chunks)], 1).int(),
    )


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("n", [384, 300])
def test_reductions_over_a_partial_tile_ignore_the_elements_past_the_end(device, dtype, n):
    # all negative, so a 0 past the end would win the maximum; exp(0) = 1 would add to sums
    x = (torch.randn(16, n) - 4).to(dtype)
    got = per_tile_stats(x)
    for g, e, what in zip(got, per_tile_reference(x), "max min expsum mean var lse argmax".split(),
                          strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5, msg=what)


@helion.kernel(config=helion.Config(block_sizes=[BS, 8]))
def column_softmax(x):
    """Softmax down each column, in row blocks of an inner loop over a partial outer tile."""
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in hl.tile(m):
        mx = hl.full([n], float("-inf"), dtype=torch.float32)
        for inner in hl.tile(tm.begin, tm.end):
            mx = torch.maximum(mx, x[inner, :].to(torch.float32).amax(0))
        out[tm, :] = torch.softmax(x[tm, :].to(torch.float32), dim=0).to(x.dtype)
        out[tm, :] = (out[tm, :].to(torch.float32) * 0 + mx[None, :]).to(x.dtype)
    return out


@pytest.mark.parametrize("m", [256, 300])
def test_inner_tiles_of_a_partial_outer_tile_are_partial_too(device, m):
    x = torch.randn(m, 128) - 4
    got = column_softmax(x)
    expected = torch.cat([c.amax(0, keepdim=True).expand_as(c) for c in x.split(BS)])
    torch.testing.assert_close(got, expected)


@helion.kernel(config=helion.Config(block_sizes=[BS]))
def exp_product_per_k_tile(x, y):
    """sum over k tiles of exp(x[:, k]) @ exp(y[k, :]): a contraction over a partial tile."""
    m, k = x.size()
    out = torch.zeros([m, y.size(1)], dtype=torch.float32)
    for tk in hl.tile(k):
        hl.atomic_add(out, [slice(None), slice(None)], torch.exp(x[:, tk]) @ torch.exp(y[tk, :]))
    return out


def test_matmul_contraction_over_a_partial_tile(device):
    x, y = torch.randn(32, 300) * 0.1, torch.randn(300, 128) * 0.1
    close(exp_product_per_k_tile(x, y), torch.exp(x) @ torch.exp(y), rtol=1e-4, atol=1e-3)


@helion.kernel(config=helion.Config(block_sizes=[32]))
def reverse_cumsum_rows(x):
    out = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        out[tm, :] = hl.cumsum(torch.exp(x[tm, :]), 0, reverse=True)
    return out


@pytest.mark.parametrize("m", [64, 100])
def test_suffix_sums_over_a_partial_tile(device, m):
    # the sum of a row block's rows from each row to the block's end
    x = torch.randn(m, 128)
    expected = torch.cat([c.exp().flip(0).cumsum(0).flip(0) for c in x.split(32)])
    close(reverse_cumsum_rows(x), expected, rtol=1e-5, atol=1e-4)


# --- atomics --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("mkn", [(64, 512, 128), (100, 300, 150)])
def test_atomic_add_accumulates_across_grid_steps_split_k(device, dtype, mkn):
    """Four k splits of the grid add into the same output tile (the innermost axis)."""

    @helion.kernel(config=helion.Config(block_sizes=[32, 128], split_k=4))
    def split_k(x, y):
        m, k = x.size()
        _, n = y.size()
        out = torch.zeros([m, n], dtype=torch.float32)
        k_block = helion.next_power_of_2(
            helion.cdiv(k, hl.register_tunable("split_k", PowerOfTwoFragment(1, 64))))
        for tm, tn, outer_k in hl.tile([m, n, k], block_size=[None, None, k_block]):
            acc = hl.zeros([tm, tn], dtype=torch.float32)
            for inner in hl.tile(outer_k.begin, outer_k.end):
                acc = hl.dot(x[tm, inner], y[inner, tn], acc=acc)
            hl.atomic_add(out, [tm, tn], acc)
        return out

    m, k, n = mkn
    x, y = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    close(split_k(x, y), x.float() @ y.float(), rtol=1e-4, atol=1e-3)


@helion.kernel(config=helion.Config(block_sizes=[64, 128]))
def column_sums_outer_split(x):
    """Row blocks on the *outer* grid axis add into the same column block: its visits are not
    consecutive, so the output stays resident."""
    m, n = x.size()
    out = torch.zeros([n], dtype=torch.float32)
    for tm, tn in hl.tile([m, n]):
        hl.atomic_add(out, [tn], x[tm, tn].to(torch.float32).sum(0))
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", [(256, 256), (200, 300)])
def test_atomic_add_collisions_on_an_outer_axis(device, dtype, shape):
    x = torch.randn(shape).to(dtype)
    close(column_sums_outer_split(x), x.float().sum(0), rtol=1e-4, atol=1e-4)


def test_atomic_add_returns_the_previous_values(device):
    @helion.kernel(config=helion.Config(block_sizes=[128]))
    def add_and_report(target, v):
        before = torch.empty_like(target)
        for t in hl.tile(target.size(0)):
            before[t] = hl.atomic_add(target, [t], v[t])
        return before

    target, v = torch.randn(1000), torch.randn(1000)
    original = target.clone()
    before = add_and_report(target, v)
    torch.testing.assert_close(before, original)
    torch.testing.assert_close(target, original + v)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_scatter_add_with_repeated_indices(device, dtype):
    @helion.kernel(config=helion.Config(block_sizes=[64]))
    def index_add(idx, w, nbins: hl.constexpr):
        out = torch.zeros([nbins, w.size(1)], dtype=w.dtype)
        for t in hl.tile(idx.size(0)):
            hl.atomic_add(out, [idx[t], slice(None)], w[t, :])
        return out

    idx = torch.randint(0, 10, (300,), dtype=torch.int32)
    w = torch.randn(300, 128).to(dtype)
    expected = torch.zeros(10, 128).index_add_(0, idx.long(), w.float())
    # bf16: each addition rounds to bf16, as torch's bf16 index_add does
    close(index_add(idx, w, 10), expected, dtype, rtol=2e-2, atol=0.25)


def test_atomic_add_rejects_an_unknown_memory_order():
    @helion.kernel
    def bad(x):
        out = torch.zeros_like(x)
        for t in hl.tile(x.size(0)):
            hl.atomic_add(out, [t], x[t], sem="seq_cst")
        return out

    with pytest.raises(helion.exc.HelionError, match=r"sem='seq_cst'.*test_helion_semantics"):
        bad(torch.randn(128))


# --- hl.reduce, cumsum, scalar reductions ---------------------------------------------------


@helion.kernel(config=helion.Config(block_sizes=[8]))
def custom_max_and_argmax(x):
    vals = torch.empty([x.size(0)], dtype=x.dtype)
    idxs = torch.empty([x.size(0)], dtype=torch.int32)
    maxs = torch.empty([x.size(0)], dtype=x.dtype)

    def argmax_combine(a, ai, b, bi):
        take_b = (b > a) | ((b == a) & (bi < ai))
        return torch.where(take_b, b, a), torch.where(take_b, bi, ai)

    for t in hl.tile(x.size(0)):
        v = x[t, :]
        maxs[t] = hl.reduce(torch.maximum, v, dim=1, other=float("-inf"))
        i = hl.arange(x.size(1))[None, :].expand(v.shape)
        mv, mi = hl.reduce(argmax_combine, (v, i), dim=1)
        vals[t] = mv
        idxs[t] = mi
    return maxs, vals, idxs


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("m", [16, 21])
def test_hl_reduce_with_custom_combine_functions(device, dtype, m):
    x = torch.randn(m, 100).to(dtype)
    maxs, vals, idxs = custom_max_and_argmax(x)
    torch.testing.assert_close(maxs, x.amax(1), rtol=0, atol=0)
    torch.testing.assert_close(vals, x.amax(1), rtol=0, atol=0)
    torch.testing.assert_close(idxs, x.argmax(1).int())


@helion.kernel(config=helion.Config(block_sizes=[BS]))
def tile_products(x):
    """hl.reduce over a partial tile with `other` (the identity of the product) and over all
    dimensions with keep_dims."""
    out = torch.empty([helion.cdiv(x.size(0), BS)], dtype=torch.float32)
    total = torch.empty([helion.cdiv(x.size(0), BS), 1], dtype=torch.float32)
    for t in hl.tile(x.size(0)):
        v = x[t]
        out[t.id] = hl.reduce(lambda a, b: a * b, v, dim=0, other=1.0)
        total[t.id, :] = hl.reduce(lambda a, b: a + b, v[:, None], keep_dims=True)[0]
    return out, total


def test_hl_reduce_masks_partial_tiles_with_other(device):
    x = torch.rand(300) + 0.5
    prods, sums = tile_products(x)
    chunks = x.split(BS)
    close(prods, torch.stack([c.prod() for c in chunks]), rtol=1e-4, atol=0)
    close(sums[:, 0], torch.stack([c.sum() for c in chunks]), rtol=1e-5, atol=1e-4)


@helion.kernel(config=helion.Config(block_sizes=[8]))
def row_cumsums(x):
    fwd = torch.empty_like(x)
    rev = torch.empty_like(x)
    cs = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        fwd[t, :] = hl.cumsum(x[t, :], 1)
        rev[t, :] = hl.cumsum(x[t, :], 1, reverse=True)
        cs[t, :] = torch.cumsum(x[t, :], dim=1)
    return fwd, rev, cs


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_cumsum_forward_and_reverse(device, dtype):
    x = torch.randn(20, 100).to(dtype)
    fwd, rev, cs = row_cumsums(x)
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == F32 else dict(rtol=1e-2, atol=5e-2)
    close(fwd, x.float().cumsum(1), **tol)
    close(cs, x.float().cumsum(1), **tol)
    close(rev, x.float().flip(1).cumsum(1).flip(1), **tol)


@pytest.mark.parametrize("n", [1024, 1000])
def test_reduction_of_a_tile_to_one_scalar(device, n):
    @helion.kernel(config=helion.Config(block_sizes=[256]))
    def tile_sums(x):
        out = torch.zeros([helion.cdiv(x.size(0), 256)], dtype=torch.float32)
        for t in hl.tile(x.size(0)):
            out[t.id] = x[t].sum() - x[t].amax() + x[t].amax()
        return out

    x = torch.randn(n)
    close(tile_sums(x), torch.stack([c.sum() for c in x.split(256)]), rtol=1e-5, atol=1e-4)


# --- hl.grid ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_hl_grid_rows_and_2d_grid(device, dtype):
    @helion.kernel
    def scale_rows(x):
        out = torch.empty_like(x)
        for i in hl.grid(x.size(0)):
            out[i, :] = x[i, :] * 2 + i
        return out

    @helion.kernel
    def every_element(x):
        out = torch.empty_like(x)
        for i, j in hl.grid([x.size(0), x.size(1)]):
            out[i, j] = x[i, j] + i * 10 + j
        return out

    x = torch.randn(37, 128).to(dtype)
    rows = torch.arange(37.0)[:, None]
    close(scale_rows(x), (x.float() * 2 + rows).to(dtype), dtype)
    x = torch.randn(5, 7).to(dtype)
    expected = x.float() + torch.arange(5.0)[:, None] * 10 + torch.arange(7.0)[None, :]
    close(every_element(x), expected.to(dtype), dtype)


def test_hl_grid_with_begin_end_and_nested_in_a_tile(device):
    @helion.kernel(config=helion.Config(block_sizes=[8]))
    def shifted(x):
        out = torch.zeros_like(x)
        for tm in hl.tile(x.size(0)):
            for j in hl.grid(2, x.size(1)):
                out[tm, j] = x[tm, j] + x[tm, j - 2]
        return out

    x = torch.randn(20, 16)
    expected = torch.zeros_like(x)
    expected[:, 2:] = x[:, 2:] + x[:, :-2]
    close(shifted(x), expected)


# --- masks --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("n", [1024, 1000])
def test_load_and_store_with_extra_mask(device, dtype, n):
    @helion.kernel(config=helion.Config(block_sizes=[128]))
    def masked(x, y):
        z = torch.empty_like(y)
        for t in hl.tile(x.size(0)):
            v = y[t]
            hl.store(x, [t], v, extra_mask=v > 0)  # x keeps its value where y <= 0
            z[t] = hl.load(y, [t], extra_mask=t.index % 3 == 0)  # 0 elsewhere
        return z

    x, y = torch.randn(n).to(dtype), torch.randn(n).to(dtype)
    original = x.clone()
    z = masked(x, y)
    torch.testing.assert_close(x, torch.where(y > 0, y, original))
    torch.testing.assert_close(z, torch.where(torch.arange(n) % 3 == 0, y, torch.zeros_like(y)))


# --- gathers ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_gather_with_a_computed_row_offset_and_a_3d_table(device, dtype):
    @helion.kernel(config=helion.Config(block_sizes=[16, 128]))
    def lookup(idx, table):
        out = torch.empty([idx.size(0), table.size(1), table.size(2)], dtype=table.dtype)
        for tb, te in hl.tile([idx.size(0), table.size(2)]):
            out[tb, :, te] = table[idx[tb], :, te] * 2
        return out

    idx = torch.randint(0, 12, (50,), dtype=torch.int32)
    table = torch.randn(12, 3, 200).to(dtype)
    close(lookup(idx, table), (table[idx.long()].float() * 2).to(dtype), dtype, rtol=0, atol=0)


def test_index_tensor_used_as_value_and_as_index(device):
    @helion.kernel(config=helion.Config(block_sizes=[128]))
    def gather_plus_index(idx, w):
        out = torch.empty([idx.size(0), w.size(1)], dtype=w.dtype)
        for t in hl.tile(idx.size(0)):
            i = idx[t]
            out[t, :] = w[i, :] + i[:, None].to(torch.float32)
        return out

    idx = torch.randint(0, 7, (200,), dtype=torch.int32)
    w = torch.randn(7, 128)
    close(gather_plus_index(idx, w), w[idx.long()] + idx[:, None].float())


def test_gather_index_out_of_range_is_an_error_naming_the_line():
    @helion.kernel
    def lookup(idx, w):
        out = torch.empty([idx.size(0), w.size(1)], dtype=w.dtype)
        for t in hl.tile(idx.size(0)):
            out[t, :] = w[idx[t], :]
        return out

    idx = torch.tensor([0, 3, 9], dtype=torch.int32)
    with pytest.raises(helion.exc.HelionError, match=r"index 9 is out of range.*size 4.*w\[idx"):
        lookup(idx, torch.randn(4, 128))


# --- device `if` ----------------------------------------------------------------------------


def test_device_if_on_a_tile_attribute_and_host_conditions(device):
    @helion.kernel(config=helion.Config(block_sizes=[128]))
    def first_tile_doubled(x, bias):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            v = x[t]
            if t.begin == 0:
                v = v * 2
            else:
                out[t] = v  # a store on one branch only
            if bias is not None:  # a host condition
                v = v + bias[t]
            out[t] = v
        return out

    x, b = torch.randn(300), torch.randn(300)
    expected = x.clone()
    expected[:128] *= 2
    close(first_tile_doubled(x, None), expected)
    close(first_tile_doubled(x, b), expected + b)


# --- the tile API ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [512, 300])
def test_tile_attributes(device, n):
    @helion.kernel(config=helion.Config(block_sizes=[128]))
    def attrs(x):
        k = helion.cdiv(x.size(0), 128)
        index = torch.empty([x.size(0)], dtype=torch.int32)
        info = torch.empty([k, 5], dtype=torch.int32)
        for t in hl.tile(x.size(0)):
            index[t] = t.index
            info[t.id, :] = hl.full([5], 0, dtype=torch.int32) + torch.where(
                hl.arange(5) == 0, t.begin, torch.where(
                    hl.arange(5) == 1, t.end, torch.where(
                        hl.arange(5) == 2, t.block_size, torch.where(
                            hl.arange(5) == 3, t.id, t.count))))
        return index, info

    index, info = attrs(torch.randn(n))
    k = math.ceil(n / 128)
    torch.testing.assert_close(index, torch.arange(n, dtype=torch.int32))
    expected = torch.tensor([[i * 128, min(i * 128 + 128, n), 128, i, k] for i in range(k)],
                            dtype=torch.int32)
    torch.testing.assert_close(info, expected)


def test_tile_forms(device):
    @helion.kernel(config=helion.Config(block_sizes=[8, 128]))
    def forms(x):
        m, n = x.size()
        a = torch.zeros_like(x)
        b = torch.zeros_like(x)
        c = torch.zeros_like(x)
        d = torch.zeros_like(x)
        for tm, tn in hl.tile([m, n]):  # multi-dimensional
            a[tm, tn] = x[tm, tn] + 1
        for tm in hl.tile(16, m, block_size=8):  # begin, end, block_size
            b[tm, :] = x[tm, :] + 2
        for tm, tn in hl.tile([8, 0], [m, n], block_size=[8, 128]):  # lists of begins/ends
            c[tm, tn] = x[tm, tn] + 3
        for tm in hl.tile(m, block_size=16):
            for tm2, tn in hl.tile([tm.begin, 0], [tm.end, n]):  # multi-dim inner loop
                d[tm2, tn] = x[tm2, tn] + 4
        return a, b, c, d

    x = torch.randn(40, 200)
    a, b, c, d = forms(x)
    close(a, x + 1)
    eb, ec = torch.zeros_like(x), torch.zeros_like(x)
    eb[16:] = x[16:] + 2
    ec[8:] = x[8:] + 3
    close(b, eb)
    close(c, ec)
    close(d, x + 4)


def test_subscript_and_value_views(device):
    @helion.kernel(config=helion.Config(block_sizes=[16]))
    def views(x, w):
        out = torch.empty([x.size(0), w.size(0)], dtype=torch.float32)
        for t in hl.tile(x.size(0)):
            v = x[t]
            outer = hl.subscript(v, [slice(None), None]) * w[:][None, :]
            out[t, :] = outer + v.reshape(-1, 1).expand(-1, w.size(0)) - v[:, None]
        return out

    x, w = torch.randn(40), torch.randn(128)
    close(views(x, w), x[:, None] * w[None, :])


def test_register_block_size_tunable_specialize_constexpr_arange_full(device):
    @helion.kernel(config=helion.Config(block_sizes=[16, 128], scale=3))
    def knobs(x, offset: hl.constexpr):
        m, n = x.size()
        n_static = hl.specialize(n)
        bm = hl.register_block_size(m)
        bn = hl.register_block_size(16, n)
        scale = hl.register_tunable("scale", PowerOfTwoFragment(1, 8))
        default = hl.register_tunable("unset", PowerOfTwoFragment(2, 8))
        out = torch.empty_like(x)
        for tm in hl.tile(m, block_size=bm):
            for tn in hl.tile(n_static, block_size=bn):
                ramp = hl.arange(tn.block_size).to(torch.float32)[None, :]
                base = hl.full([tm, tn], offset, dtype=torch.float32)
                out[tm, tn] = x[tm, tn] * scale + base + ramp * default
        return out

    x = torch.randn(48, 256)
    ramp = torch.arange(128.0).repeat(2)[None, :]
    close(knobs(x, hl.constexpr(1.5)), x * 3 + 1.5 + ramp * 2)
    assert knobs.block_sizes(x, 1.5) == [16, 128]


def test_several_device_loops_in_one_kernel(device):
    @helion.kernel
    def two_passes(x):
        y = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            y[t] = x[t] * 2
        z = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            z[t] = y[t] + 1
        return z

    x = torch.randn(3000)
    close(two_passes(x), x * 2 + 1)
    assert len(two_passes.stablehlo(x)) == 2 and len(two_passes.ir(x)) == 2


def test_numpy_arrays_in_numpy_host_code(device):
    @helion.kernel
    def relu_plus(x, y):
        out = np.empty_like(x)
        for tile in hl.tile(x.shape[0]):
            out[tile] = torch.relu(x[tile]) + y[tile]
        return out

    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    y = np.ones(1000, np.float32)
    got = relu_plus(x, y)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, np.maximum(x, 0) + 1, rtol=1e-6)


def test_configs_are_tuned_and_illegal_tpu_blocks_are_rounded_up(device):
    configs = [helion.Config(block_sizes=[8, 32]), helion.Config(block_sizes=[1, 1])]

    @helion.kernel(configs=configs)
    def scale(x):
        out = torch.empty_like(x)
        for tm, tn in hl.tile([x.size(0), x.size(1)]):
            out[tm, tn] = x[tm, tn] * 2
        return out

    x = torch.randn(64, 300)
    close(scale(x), x * 2)
    # Both configs legalise to the same blocks, so either may time fastest.
    assert scale.block_sizes(x) in ([8, 128], [1, 1])
    # 32 columns is no TPU tiling of a last dimension: the next legal size is 128
    assert scale.block_sizes(x, config=configs[0]) == [8, 128]


def test_helpers():
    assert helion.cdiv(10, 4) == 3 and helion.next_power_of_2(100) == 128
    assert helion.next_power_of_2(1) == 1
    c = helion.Config(block_sizes=[32, 64], num_warps=None)
    assert dict(c) == {"block_sizes": [32, 64]}
    assert helion.Config.from_json(c.to_json()) == c
    import tpukit

    assert tpukit.helion is helion


def test_a_loop_that_reads_no_tensor(device):
    """Helion's `tile.index` example: the kernel only writes."""

    @helion.kernel
    def arange(length: int):
        out = torch.empty(length, dtype=torch.int32)
        for tile in hl.tile(length):
            out[tile] = tile.index
        return out

    torch.testing.assert_close(arange(3000), torch.arange(3000, dtype=torch.int32))


def test_cached_plans_serve_new_tensors_and_keep_none_alive():
    import gc
    import weakref

    @helion.kernel
    def double(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t] = x[t] * 2
        return out

    first = torch.randn(3000)
    close(double(first), first * 2)
    gone = weakref.ref(first)
    del first
    gc.collect()
    assert gone() is None, "the cached plan keeps the first call's tensor alive"
    second = torch.randn(3000)
    close(double(second), second * 2)
    assert len(double._plans) == 1


@pytest.mark.parametrize("n", [256, 200])
def test_attributes_of_inner_tiles_within_a_tile(device, n):
    @helion.kernel(config=helion.Config(block_sizes=[64, 16]))
    def inner_attrs(x):
        m = x.size(0)
        info = torch.empty([m, 3], dtype=torch.int32)
        for t in hl.tile(m):
            for u in hl.tile(t.begin, t.end):  # rows: 16 is a legal TPU block for them
                col = hl.arange(3)[None, :]
                info[u, :] = torch.where(col == 0, u.id, torch.where(col == 1, u.count, u.begin))
        return info

    x = torch.randn(n, 8)
    assert inner_attrs.block_sizes(x) == [64, 16]
    i = torch.arange(n, dtype=torch.int32)
    expected = torch.stack([i // 16, torch.full([n], 4, dtype=torch.int32), i // 16 * 16], 1)
    torch.testing.assert_close(inner_attrs(x), expected)


# --- partial inner tiles keep the block size -----------------------------------------------


@helion.kernel
def blockwise_row_stats(x):
    """Accumulators of the block's shape across a nested loop whose block size does not divide
    the row (Helion's long_sum manual loop): the last tile is a masked full block."""
    m, n = x.size()
    bn = hl.register_block_size(n)
    total = torch.empty([m], dtype=x.dtype)
    top = torch.empty([m], dtype=torch.float32)
    for tm in hl.tile(m):
        acc = hl.zeros([tm, bn], dtype=x.dtype)
        best = hl.full([tm, bn], float("-inf"), dtype=torch.float32)
        for tn in hl.tile(n, block_size=bn):
            acc += x[tm, tn]
            best = torch.maximum(best, x[tm, tn].to(torch.float32))
        total[tm] = acc.sum(-1)
        top[tm] = best.amax(-1)
    return total, top


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("n", [100, 300, 3000])
def test_partial_inner_tiles_keep_the_block_size(device, dtype, n):
    x = torch.randn(5, n, dtype=dtype) - 3  # all negative: a 0 read past the end would win
    total, top = blockwise_row_stats(x)
    close(total, x.float().sum(1), dtype, rtol=2e-2, atol=0.5 if dtype == BF16 else 1e-3)
    close(top, x.float().amax(1), F32)


# --- the other atomics ------------------------------------------------------------------------


@helion.kernel(config=helion.Config(block_sizes=[32, 128]))
def column_atomics(x, bits):
    """atomic_max/min into per-column results from every row tile (grid steps collide), and
    atomic_or/and/xor/xchg on int32 bit patterns."""
    m, n = x.size()
    hi = torch.full([n], float("-inf"), dtype=torch.float32)
    lo = torch.full([n], float("inf"), dtype=torch.float32)
    anyb = torch.zeros([n], dtype=torch.int32)
    allb = torch.full([n], -1, dtype=torch.int32)
    par = torch.zeros([n], dtype=torch.int32)
    last = torch.zeros([n], dtype=torch.int32)
    for tm, tn in hl.tile([m, n]):
        v = x[tm, tn].to(torch.float32)
        hl.atomic_max(hi, [tn], v.amax(0))
        hl.atomic_min(lo, [tn], v.amin(0))
        for r in hl.static_range(4):
            b = bits[r, tn]
            hl.atomic_or(anyb, [tn], b)
            hl.atomic_and(allb, [tn], b)
            hl.atomic_xor(par, [tn], b)
        hl.atomic_xchg(last, [tn], bits[0, tn] * 0 + 7)
    return hi, lo, anyb, allb, par, last


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_other_atomics(device, dtype):
    x = torch.randn(70, 300, dtype=dtype)
    bits = torch.randint(0, 1 << 20, (4, 300), dtype=torch.int32)
    hi, lo, anyb, allb, par, last = column_atomics(x, bits)
    close(hi, x.float().amax(0), F32)
    close(lo, x.float().amin(0), F32)
    r = range(4)
    exp_or, exp_and, exp_xor = bits[0].clone(), bits[0].clone(), bits[0].clone() * 0
    for i in r:
        exp_or |= bits[i]
        exp_and &= bits[i]
        exp_xor ^= bits[i]
    # every row tile applies the same bits: or/and are idempotent, xor cancels in pairs
    n_tiles = -(-70 // 32)
    torch.testing.assert_close(anyb, exp_or)
    torch.testing.assert_close(allb, exp_and)
    torch.testing.assert_close(par, exp_xor if n_tiles % 2 else exp_xor * 0)
    torch.testing.assert_close(last, torch.full([300], 7, dtype=torch.int32))


# --- scans ------------------------------------------------------------------------------------


@helion.kernel(config=helion.Config(block_sizes=[8, 64]))
def scans(x, k):
    """cumprod, a running max (associative_scan), an integer cumsum, a reverse scan and a
    two-tensor scan (value, count) along rows."""
    m, n = x.size()
    prod, run_max, rev = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
    isum, cnt = torch.empty_like(k), torch.empty_like(k)
    for tm in hl.tile(m):
        v = x[tm, :]
        prod[tm, :] = hl.cumprod(v, 1)
        run_max[tm, :] = hl.associative_scan(torch.maximum, v, 1)
        rev[tm, :] = hl.associative_scan(lambda a, b: a + b, v, 1, reverse=True)
        isum[tm, :] = hl.cumsum(k[tm, :], 1)
        _, c = hl.associative_scan(lambda a0, a1, b0, b1: (a0 + b0, a1 + b1),
                                   (v, k[tm, :] * 0 + 1), 1)
        cnt[tm, :] = c
    return prod, run_max, rev, isum, cnt


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_scans(device, dtype):
    x = (torch.rand(21, 64) * 0.4 + 0.8).to(dtype)  # products stay well scaled
    k = torch.randint(-5, 5, (21, 64), dtype=torch.int32)
    prod, run_max, rev, isum, cnt = scans(x, k)
    xf = x.float()
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == F32 else dict(rtol=5e-2, atol=5e-2)
    close(prod, torch.cumprod(xf, 1), dtype, **tol)
    close(run_max, torch.cummax(xf, 1).values, dtype)
    close(rev, xf.flip(1).cumsum(1).flip(1), dtype, **tol)
    torch.testing.assert_close(isum, k.cumsum(1).int())
    torch.testing.assert_close(cnt, torch.arange(1, 65, dtype=torch.int32).expand(21, 64))


@helion.kernel(config=helion.Config(block_sizes=[8]))
def cumsums_both_axes(x):
    rows = torch.empty_like(x)
    cols = torch.empty_like(x)
    rev = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        rows[t, :] = torch.cumsum(x[t, :], dim=1)
        rev[t, :] = hl.cumsum(x[t, :], 1, reverse=True)
    for t in hl.tile(x.size(1)):
        cols[:, t] = torch.cumsum(x[:, t], dim=0)
    return rows, cols, rev


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_cumsum_around_nan_and_infinities(device, dtype):
    # a non-finite element leaves the sums before it alone; NaN, or both infinities, so far
    # give NaN, one infinity gives that infinity (torch's sequential scan)
    x = torch.randn(21, 37)
    flat = x.view(-1)
    places = torch.randperm(flat.numel())[:40]
    flat[places[:10]] = float("nan")
    flat[places[10:25]] = float("inf")
    flat[places[25:]] = float("-inf")
    x[3] = torch.tensor([1.0, 2.0, float("inf"), 4.0] * 9 + [0.0])
    x[4] = torch.tensor([1.0, float("nan"), 2.0, 3.0] * 9 + [0.0])
    x = x.to(dtype)
    rows, cols, rev = cumsums_both_axes(x)
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == F32 else dict(rtol=1e-2, atol=5e-2)
    f = x.float()
    # equal_nan: the NaN, +inf and -inf positions must match torch's exactly
    close(rows, f.cumsum(1), equal_nan=True, **tol)
    close(cols, f.cumsum(0), equal_nan=True, **tol)
    close(rev, f.flip(1).cumsum(1).flip(1), equal_nan=True, **tol)
    assert torch.isfinite(rows[3, :2]).all() and torch.isfinite(rows[4, :1]).all()


@helion.kernel
def two_stage(x, a, b):
    """Helion's squeeze-and-excitation forward: two nested loops over k, one inside a loop over
    n whose last tile is partial (its body is traced twice: whole tiles, then the last)."""
    m, k, n = x.size(0), a.size(1), b.size(1)
    c = torch.empty([m, k], dtype=x.dtype)
    out = torch.empty([m, n], dtype=x.dtype)
    for tm in hl.tile(m):
        for tk in hl.tile(k):
            c[tm, tk] = torch.relu(x[tm, :] @ a[:, tk])
        for tn in hl.tile(n):
            acc = hl.zeros([tm, tn], dtype=torch.float32)
            for tk in hl.tile(k):
                acc = torch.addmm(acc, c[tm, tk], b[tk, tn])
            out[tm, tn] = torch.sigmoid(acc)
    return out, c


@helion.kernel
def repeated_launch(x):
    """One device loop run three times by a host loop, with a nested loop: two block sizes."""
    out = torch.zeros([x.size(0)], dtype=torch.float32)
    for _ in range(3):
        for tm in hl.tile(x.size(0)):
            acc = hl.zeros([tm], dtype=torch.float32)
            for tk in hl.tile(x.size(1)):
                acc += x[tm, tk].float().sum(1)
            out[tm] += acc
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_block_sizes_has_one_entry_per_tile_loop_in_the_source(device, dtype):
    """As in Helion, each `hl.tile` of the source has its block size once in
    `Config.block_sizes`, however many times its loop body is traced or its loop runs."""
    x, a = torch.randn(37, 300, dtype=dtype), torch.randn(300, 256, dtype=dtype)
    b = torch.randn(256, 200, dtype=dtype)
    assert len(two_stage.block_sizes(x, a, b)) == 4
    cfg = helion.Config(block_sizes=[8, 256, 128, 128])
    assert two_stage.block_sizes(x, a, b, config=cfg) == [8, 256, 128, 128]
    out, c = two_stage(x, a, b)
    tol = TOL[BF16] if dtype == BF16 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(c.float(), torch.relu(x.float() @ a.float()), **tol)
    torch.testing.assert_close(out.float(), torch.sigmoid(c.float() @ b.float()), **tol)
    y = torch.randn(37, 300, dtype=dtype)
    assert len(repeated_launch.block_sizes(y)) == 2
    torch.testing.assert_close(repeated_launch(y), 3 * y.float().sum(1), rtol=1e-4, atol=1e-3)
