"""Ref bitcasts across widths (``x_ref.bitcast(jnp.int8)``, Mosaic ``tpu.memref_bitcast``)
between any two of 8, 16 and 32 bits (issue 13; the pairs of JAX's tpu_ops_test that tpukit
refused): the second-minor dimension scales by the width ratio ``k``, and element
``(.., r, c)`` of the wider view holds the narrower rows ``k·r .. k·r + k - 1`` at column
``c``, the lowest row in the lowest bits. Reads through such a view (whole, in part, strided,
at traced row starts), stores and masked stores into one, and copies through one run on
tpukit's devices, compared bit for bit with numpy's view of the same bytes (reads also with
Pallas's interpret mode, which does not discharge stores through a bitcast)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import DEVICES, pallas

BF16 = ml_dtypes.bfloat16

# (from, to): the pairs tpukit refused before, and the pairs already imported (kept working).
PAIRS = [
    (np.int16, np.int32), (np.int16, np.int8), (np.int8, np.float32), (np.int8, BF16),
    (np.int8, np.int32), (np.int8, np.int16), (np.float32, np.int8), (BF16, np.int8),
    (np.int32, np.int8), (np.int16, np.float32),
    (BF16, np.int32), (np.int32, np.int16), (np.float32, BF16), (np.uint8, np.uint32),
]
IDS = [f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b in PAIRS]


def bits(dtype):
    return np.dtype(dtype).itemsize * 8


def view_rows(x, to):
    """numpy's view of ``x``'s rows as ``to``: wider elements pack ``k`` consecutive rows (the
    first in the lowest bytes, as x86 numpy is little-endian), narrower ones split each row
    into ``k`` rows."""
    x = np.ascontiguousarray(x)
    *lead, rows, cols = x.shape
    to = np.dtype(to)
    if to.itemsize > x.itemsize:
        k = to.itemsize // x.itemsize
        groups = x.reshape(*lead, rows // k, k, cols).swapaxes(-1, -2)
        return np.ascontiguousarray(groups).view(to).reshape(*lead, rows // k, cols)
    k = x.itemsize // to.itemsize
    parts = x.view(to).reshape(*lead, rows, cols, k).swapaxes(-1, -2)
    return np.ascontiguousarray(parts).reshape(*lead, rows * k, cols)


def random_bits(rng, shape, dtype):
    """Random bit patterns of ``dtype`` (floats finite: no NaN, whose payloads numpy's
    conversions need not keep)."""
    dtype = np.dtype(dtype)
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32}[dtype.itemsize]
    x = rng.integers(0, np.iinfo(u).max, shape, dtype=np.uint64, endpoint=True).astype(u)
    out = x.view(dtype)
    if dtype.kind == "f" or dtype == BF16:
        out = np.where(np.isfinite(out.astype(np.float32)), out, dtype.type(1.5))
    return out


def rows_for(dtype, rows32):
    """The rows of ``dtype`` holding ``rows32`` rows of 32 bits."""
    return rows32 * 32 // bits(dtype)


def run(kernel, out_shape, args, want, interpret=True, **kw):
    """``kernel`` on every tpukit device, each bit for bit as ``want``, and (``interpret``) on
    Pallas interpret mode, equal as values (XLA may quiet a NaN's payload in the views it
    copies)."""
    for d in DEVICES:
        got = np.asarray(pallas.custom_kernel(kernel, out_shape=out_shape, **kw)(*args, device=d))
        assert got.dtype == want.dtype and got.shape == want.shape, d
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=d)
    if interpret:
        got = np.asarray(pl.pallas_call(kernel, out_shape=out_shape, interpret=True, **kw)(*args))
        if want.dtype.kind == "f" or want.dtype == BF16:
            got, want = got.astype(np.float32), want.astype(np.float32)
        np.testing.assert_array_equal(got, want, err_msg="pallas interpret")


@pytest.mark.parametrize("src,to", PAIRS, ids=IDS)
def test_read_through_a_bitcast_ref(src, to, rng):
    # as JAX's tpu_ops_test.test_bitcast (ref, indexing): the whole ref read as `to`
    x = random_bits(rng, (rows_for(src, 8), 256), src)
    out = jax.ShapeDtypeStruct((rows_for(to, 8), 256), to)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref.bitcast(to)[...]

    run(kernel, out, [x], view_rows(x, to))


@pytest.mark.parametrize("src,to", PAIRS, ids=IDS)
def test_primitive_load_and_store_through_a_bitcast_ref(src, to, rng):
    # as JAX's test_bitcast with use_primitive_io_op: pltpu.load / pltpu.store
    x = random_bits(rng, (rows_for(src, 1), 256), src)
    out = jax.ShapeDtypeStruct((rows_for(to, 1), 256), to)

    def kernel(x_ref, o_ref):
        pltpu.store(o_ref, pltpu.load(x_ref.bitcast(to)))

    run(kernel, out, [x], view_rows(x, to))


@pytest.mark.parametrize("src,to", PAIRS, ids=IDS)
def test_read_of_part_of_a_bitcast_ref(src, to, rng):
    # rows 8..24 (32-bit rows 2..6 and whole groups of narrower ones) of the second column
    # block, the ref sliced before the bitcast too
    x = random_bits(rng, (3, rows_for(src, 8), 256), src)
    a, n = rows_for(to, 2), rows_for(to, 4)
    out = (jax.ShapeDtypeStruct((n, 128), to), jax.ShapeDtypeStruct((rows_for(to, 4), 256), to))

    def kernel(x_ref, o_ref, p_ref):
        o_ref[...] = x_ref.bitcast(to)[1, a:a + n, 128:]
        p_ref[...] = x_ref.at[2, rows_for(src, 4):].bitcast(to)[...]

    want = (view_rows(x[1], to)[a:a + n, 128:], view_rows(x[2, rows_for(src, 4):], to))
    outs = [pallas.custom_kernel(kernel, out_shape=out)(x, device=d) for d in DEVICES]
    outs.append(pl.pallas_call(kernel, out_shape=out, interpret=True)(x))
    for got in outs:
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g).view(np.uint8), w.view(np.uint8))


@pytest.mark.parametrize("src,to", PAIRS, ids=IDS)
def test_store_through_a_bitcast_ref(src, to, rng):
    # o_ref (of `to`) seen as `src`: stored whole, and in part (whole groups of rows); Pallas's
    # interpret mode does not discharge stores through a bitcast, so against numpy only
    x = random_bits(rng, (rows_for(src, 8), 256), src)
    out = jax.ShapeDtypeStruct((rows_for(to, 8), 256), to)
    a, n = rows_for(src, 2), rows_for(src, 4)

    def kernel(x_ref, o_ref):
        o_ref.bitcast(src)[...] = x_ref[...]
        o_ref.bitcast(src)[a:a + n, :128] = x_ref[a:a + n, 128:]

    y = x.copy()
    y[a:a + n, :128] = x[a:a + n, 128:]
    run(kernel, out, [x], view_rows(y, to), interpret=False)


@pytest.mark.parametrize("src,to", PAIRS, ids=IDS)
def test_read_at_a_traced_start_through_a_bitcast_ref(src, to, rng):
    # blocks of 32-bit rows read at a start computed in a loop (a multiple of the group size)
    x = random_bits(rng, (rows_for(src, 16), 256), src)
    m = rows_for(to, 4)
    out = jax.ShapeDtypeStruct((rows_for(to, 16), 256), to)

    def kernel(x_ref, o_ref):
        def body(i, carry):
            start = pl.multiple_of(i * m, m)
            o_ref[pl.ds(start, m), :] = x_ref.bitcast(to)[pl.ds(start, m), :]
            return carry

        lax.fori_loop(0, 4, body, 0)

    run(kernel, out, [x], view_rows(x, to))


@pytest.mark.parametrize("src,to", PAIRS, ids=IDS)
def test_copy_through_a_bitcast_ref(src, to, rng):
    # a DMA from an HBM ref seen as `to` into an output of `to`: the same bytes
    x = random_bits(rng, (rows_for(src, 8), 256), src)
    out = jax.ShapeDtypeStruct((rows_for(to, 8), 256), to)
    hbm = pl.BlockSpec(memory_space=pl.ANY)

    def kernel(x_hbm, o_hbm, sem):
        copy = pltpu.make_async_copy(x_hbm.bitcast(to), o_hbm, sem)
        copy.start()
        copy.wait()

    run(kernel, out, [x], view_rows(x, to), interpret=False, in_specs=[hbm], out_specs=hbm,
        scratch_shapes=[pltpu.SemaphoreType.DMA])


MASKABLE = [(a, b) for a, b in PAIRS if bits(a) == 32]


@pytest.mark.parametrize("src,to", MASKABLE,
                         ids=[f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b in MASKABLE])
def test_masked_store_through_a_bitcast_ref(src, to, rng):
    # o_ref (of `to`) = y, then x stored through its `src` view where (row + column) % 3 == 0
    # (JAX lowers masked stores of 32-bit data only): each wide element is one of the view's
    x = random_bits(rng, (rows_for(src, 8), 256), src)
    y = random_bits(rng, (rows_for(to, 8), 256), to)
    out = jax.ShapeDtypeStruct(y.shape, to)

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = y_ref[...]
        shape = x_ref.shape
        keep = (lax.broadcasted_iota(jnp.int32, shape, 0)
                + lax.broadcasted_iota(jnp.int32, shape, 1)) % 3 == 0
        pltpu.store(o_ref.bitcast(src), x_ref[...], mask=keep)

    rows, cols = np.indices(x.shape)
    keep = (rows + cols) % 3 == 0
    base = view_rows(y, src)
    base[keep] = x[keep]
    run(kernel, out, [x, y], view_rows(base, to), interpret=False)


PACKING = [(a, b) for a, b in PAIRS if bits(b) > bits(a)]


@pytest.mark.parametrize("traced", [False, True])
@pytest.mark.parametrize("src,to", PACKING,
                         ids=[f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b in PACKING])
def test_strided_read_of_packed_rows(src, to, traced, rng):
    # every other row of the wider view, from a static or a traced start: each part of its
    # rows read by a strided load of the rows beneath and packed
    x = random_bits(rng, (rows_for(src, 20), 256), src)
    n = rows_for(to, 8)
    out = jax.ShapeDtypeStruct((n, 256), to)

    def kernel(x_ref, o_ref):
        start = pl.program_id(0) + 1 if traced else 1
        o_ref[...] = x_ref.bitcast(to)[pl.ds(start, n, stride=2), :]

    run(kernel, out, [x], view_rows(x, to)[1::2][:n], interpret=False, grid=(1,))


def test_split_rows_at_a_start_not_known_to_be_whole_are_refused_by_name(rng):
    # 8-bit rows of a 32-bit ref read from a traced start Mosaic does not prove a multiple of 4
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref.bitcast(jnp.int8)[pl.ds(pl.program_id(0) * 2, 8), :]

    k = pallas.custom_kernel(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int8),
                             grid=(2,))
    with pytest.raises(tpukit.UnsupportedError, match="bitcast"):
        k(np.zeros((8, 128), np.int32), device="cpu")


def test_numpy_view_rows_agrees_with_pallas_bitcast(rng):
    # the reference itself: pltpu.bitcast of values (interpret mode) groups rows the same way
    x = random_bits(rng, (16, 128), np.int8)
    got = jax.jit(lambda v: pltpu.bitcast(v, jnp.int32))(x)
    np.testing.assert_array_equal(np.asarray(got), view_rows(x, np.int32))
