"""Stores through reshaped and bitcast refs (`o_ref.reshape(...)[...] = v`,
`o_ref.bitcast(jnp.int32)[...] = bits`): a store of the whole view writes the window
row-major (issue 13), on both devices against numpy (stores into part of one:
test_pallas_ref_view_parts.py)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close
from jax.experimental import pallas as pl

import tpukit
from tpukit import DEVICES, pallas


def sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def check(body, out_shape, args, reference, tolerance=None, **call_kwargs):
    """tpukit on both devices against numpy (Pallas's interpret mode cannot store through
    reshaped or bitcast refs: its discharge raises NotImplementedError)."""
    kernel = pallas.custom_kernel(lambda *a: out_shape, body, **call_kwargs)
    want = reference(*args)
    for device in DEVICES:
        assert_close(kernel(*args, device=device), want, f"tpukit {device}", tolerance)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32])
def test_a_whole_store_through_a_reshaped_ref(dtype, rng):
    def kernel(x_ref, o_ref):
        o_ref.reshape(16, 128)[...] = x_ref[...] * 2

    x = (rng.standard_normal((16, 128)) * 10).astype(dtype)
    check(kernel, sds((2, 8, 128), dtype), [x], lambda x: (x * 2).reshape(2, 8, 128))


def test_a_whole_store_through_a_reshaped_block_of_a_grid(rng):
    def kernel(x_ref, o_ref):
        o_ref.reshape(8, 128)[...] = x_ref[...] + pl.program_id(0).astype(jnp.float32)

    x = rng.standard_normal((24, 128)).astype(np.float32)
    want = (x.reshape(3, 8, 128) + np.arange(3, dtype=np.float32)[:, None, None])
    check(kernel, sds((3, 8, 1, 128), np.float32), [x], lambda x: want.reshape(3, 8, 1, 128),
          grid=(3,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
          out_specs=pl.BlockSpec((1, 8, 1, 128), lambda i: (i, 0, 0, 0)))


def test_a_whole_store_through_a_bitcast_ref(rng):
    def kernel(x_ref, o_ref):
        o_ref.bitcast(jnp.int32)[...] = x_ref[...] ^ 0x7FFFFFFF

    x = rng.integers(-2**31, 2**31 - 1, (8, 128), dtype=np.int64).astype(np.int32)
    check(kernel, sds((8, 128), np.float32), [x],
          lambda x: (x ^ 0x7FFFFFFF).view(np.float32), tolerance=dict(rtol=0, atol=0))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize(("n", "m"), [(2, 8), (4, 2)])
def test_copies_through_reshaped_refs(dtype, n, m, rng):
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_hbm, o_hbm, buf, sem):
        flat = buf.reshape(n * m, 256)
        pltpu.async_copy(x_hbm, flat, sem).wait()
        buf[...] = buf[...] * 2
        pltpu.async_copy(flat, o_hbm.reshape(n * m, 256), sem).wait()

    x = rng.standard_normal((n * m, 256)).astype(dtype)
    any_ = pl.BlockSpec(memory_space=pl.ANY)
    check(kernel, sds((n, m, 256), dtype), [x],
          lambda x: (x.astype(np.float32) * 2).astype(dtype).reshape(n, m, 256),
          in_specs=[any_], out_specs=any_,
          scratch_shapes=[pltpu.VMEM((n, m, 256), dtype), pltpu.SemaphoreType.DMA])


def test_a_copy_through_a_bitcast_ref_of_one_width(rng):
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_hbm, o_hbm, sem):
        pltpu.async_copy(x_hbm.bitcast(jnp.int32), o_hbm, sem).wait()

    any_ = pl.BlockSpec(memory_space=pl.ANY)
    x = rng.standard_normal((8, 128)).astype(np.float32)
    check(kernel, sds((8, 128), jnp.int32), [x], lambda x: x.view(np.int32),
          in_specs=[any_], out_specs=any_, scratch_shapes=[pltpu.SemaphoreType.DMA])


@pytest.mark.parametrize("x_shape", [(24, 1, 128), (3, 8, 128)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_copies_of_leading_rows_of_a_reshaped_ref(dtype, x_shape, rng):
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_hbm, o_hbm, sem):
        rows = x_hbm.reshape(24, 128).at[pl.ds(8, 16)]
        pltpu.async_copy(rows, o_hbm.reshape(16, 128), sem).wait()

    x = (rng.standard_normal(x_shape) * 10).astype(dtype)
    any_ = pl.BlockSpec(memory_space=pl.ANY)
    check(kernel, sds((2, 8, 128), dtype), [x], lambda x: x.reshape(24, 128)[8:].reshape(2, 8, 128),
          in_specs=[any_], out_specs=any_, scratch_shapes=[pltpu.SemaphoreType.DMA])


def test_a_slice_of_a_reshaped_ref_across_window_rows_is_refused_by_name():
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_hbm, o_hbm, sem):
        pltpu.async_copy(x_hbm.reshape(24, 128).at[pl.ds(3, 8)], o_hbm, sem).wait()

    any_ = pl.BlockSpec(memory_space=pl.ANY)
    k = pallas.custom_kernel(kernel, out_shape=sds((8, 128), jnp.float32), in_specs=[any_],
                             out_specs=any_, scratch_shapes=[pltpu.SemaphoreType.DMA])
    with pytest.raises(tpukit.UnsupportedError, match=r"a slice of a reshaped ref "
                       r"other than of whole leading rows.*ref_view_stores"):
        k(np.zeros((3, 8, 128), np.float32))
