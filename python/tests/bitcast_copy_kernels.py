"""Pallas TPU kernels copying through bitcast refs (issue 13), shared by
python/tests/test_pallas_bitcast_copies.py (results on the CPU devices) and
tests/conformance/test_pallas_ops.py (compiled with libtpu): no test imports here."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def split_rows_of_hbm(x_hbm, o_hbm, sem, *, slice_first):
    """Leading rows of an int32 array in HBM copied as int16 (each 32-bit row two 16-bit
    rows), the slice taken before or after the bitcast."""
    n, _, c = o_hbm.shape
    if slice_first:
        view = x_hbm.at[:n, :, :c].bitcast(jnp.int16)
    else:
        view = x_hbm.bitcast(jnp.int16).at[:n, :, :c]
    pltpu.async_copy(view, o_hbm, sem).wait()


def roll_halves(x_hbm, o_hbm, buf, sem):
    """A 32-bit array copied into a 16-bit buffer (rows split), its 16-bit rows rolled by one,
    and copied back out through a bitcast of the output: the two copies must pair rows alike."""
    pltpu.sync_copy(x_hbm.bitcast(buf.dtype), buf)
    buf[...] = pltpu.roll(buf[...], 1, 0)
    pltpu.async_copy(buf, o_hbm.bitcast(buf.dtype), sem).wait()


def negate_pairs(x_hbm, o_hbm, buf, sem):
    """A bf16 array copied into an int32 buffer (row pairs packed), both halves' signs flipped
    and the pairs rolled by one row, then copied out through a bitcast of the bf16 output."""
    pltpu.sync_copy(x_hbm.bitcast(jnp.int32), buf)
    buf[...] = pltpu.roll(buf[...] ^ jnp.int32(-0x7FFF8000), 1, 0)
    pltpu.async_copy(buf, o_hbm.bitcast(jnp.int32), sem).wait()


def nested_split_pipeline(x):
    """An outer ``emit_pipeline`` over 64-row f32 blocks, each seen as int16 (128 rows) by an
    inner pipeline over 32-row blocks (traced starts into the bitcast view, in whole row
    pairs) that flips the low byte of every 16-bit half."""
    @pl.kernel(out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
               mesh=pltpu.create_tensorcore_mesh("core"))
    def run(x_ref, o_ref):
        def outer(xb, ob):
            def inner(xi, oi):
                oi[...] = xi[...] ^ jnp.int16(0xFF)

            spec = pl.BlockSpec((32, 128), lambda i: (i, 0))
            pltpu.emit_pipeline(inner, grid=(4,), in_specs=[spec], out_specs=[spec])(
                xb.bitcast(jnp.int16), ob.bitcast(jnp.int16))

        spec = pl.BlockSpec((64, 128), lambda i: (i, 0))
        pltpu.emit_pipeline(outer, grid=(x.shape[0] // 64,), in_specs=[spec],
                            out_specs=[spec])(x_ref, o_ref)

    return run(x)
