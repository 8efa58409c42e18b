"""Copies (DMA) through bitcast refs (`pltpu.async_copy(x_hbm.bitcast(jnp.int16), ...)`,
issue 13): the same bits at both ends, 32-bit rows split into two 16-bit rows (the low half
the even row) or row pairs packed back, as Mosaic bitcasts refs; on both devices against
numpy (kernels in bitcast_copy_kernels.py, compiled with libtpu in
tests/conformance/test_pallas_ops.py)."""

import functools

import bitcast_copy_kernels as bk
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import DEVICES, pallas

ANY = pl.BlockSpec(memory_space=pl.ANY)


def sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def split(x32):
    """numpy's view of 32-bit rows as 16-bit ones: row 2r the low halves of row r."""
    u = np.ascontiguousarray(x32).view(np.uint32)
    lo, hi = (u & 0xFFFF).astype(np.uint16), (u >> 16).astype(np.uint16)
    out = np.stack([lo, hi], axis=-2)  # [..., R, 2, C]
    return out.reshape(*u.shape[:-2], 2 * u.shape[-2], u.shape[-1])


def join(x16):
    """The inverse of `split`: row pairs of 16-bit bits packed into 32-bit rows."""
    u = np.ascontiguousarray(x16).view(np.uint16).astype(np.uint32)
    pairs = u.reshape(*u.shape[:-2], u.shape[-2] // 2, 2, u.shape[-1])
    return pairs[..., 0, :] | (pairs[..., 1, :] << 16)


def run_everywhere(kernel, args, want):
    for device in DEVICES:
        got = np.asarray(kernel(*args, device=device))
        assert got.dtype == want.dtype, device
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=device)


@pytest.mark.parametrize("slice_first", [True, False])
def test_a_copy_from_hbm_through_a_bitcast_splits_rows(slice_first, rng):
    x = rng.integers(-2**31, 2**31 - 1, (16, 1, 256), dtype=np.int64).astype(np.int32)
    k = pallas.custom_kernel(
        functools.partial(bk.split_rows_of_hbm, slice_first=slice_first),
        out_shape=sds((8, 2, 128), jnp.int16), in_specs=[ANY], out_specs=ANY,
        scratch_shapes=[pltpu.SemaphoreType.DMA])
    run_everywhere(k, [x], split(x[:8, :, :128]).view(np.int16))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_copies_into_and_out_of_a_16_bit_buffer_pair_rows_alike(dtype, rng):
    x = (rng.standard_normal((16, 256)) * 100).astype(dtype)
    k = pallas.custom_kernel(
        bk.roll_halves, out_shape=sds(x.shape, dtype), in_specs=[ANY], out_specs=ANY,
        scratch_shapes=[pltpu.VMEM((32, 256), jnp.int16), pltpu.SemaphoreType.DMA])
    run_everywhere(k, [x], join(np.roll(split(x), 1, axis=0)).view(dtype))


def test_copies_of_bf16_through_packed_32_bit_views(rng):
    x = rng.standard_normal((32, 128)).astype(ml_dtypes.bfloat16)
    k = pallas.custom_kernel(
        bk.negate_pairs, out_shape=sds(x.shape, x.dtype), in_specs=[ANY], out_specs=ANY,
        scratch_shapes=[pltpu.VMEM((16, 128), jnp.int32), pltpu.SemaphoreType.DMA])
    pairs = (-x).reshape(16, 2, 128)
    run_everywhere(k, [x], np.roll(pairs, 1, axis=0).reshape(32, 128))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_a_nested_pipeline_over_a_bitcast_block(dtype, rng):
    x = (rng.standard_normal((256, 128)) * 100).astype(dtype)
    want = (x.view(np.uint32) ^ np.uint32(0x00FF00FF)).view(dtype)
    for device in DEVICES:
        # `pl.kernel` over a TensorCore mesh asks the device for its cores: under `on_cpu()`
        with pallas.on_cpu(device=device):
            got = np.asarray(jax.jit(bk.nested_split_pipeline)(x))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=device)


def test_a_copy_through_a_reshaped_and_bitcast_ref_is_refused_by_name():
    def kernel(x_hbm, o_hbm, sem):
        pltpu.async_copy(x_hbm.bitcast(jnp.int32).reshape(2, 4, 128), o_hbm, sem).wait()

    k = pallas.custom_kernel(kernel, out_shape=sds((2, 4, 128), jnp.int32), in_specs=[ANY],
                             out_specs=ANY, scratch_shapes=[pltpu.SemaphoreType.DMA])
    with pytest.raises(tpukit.UnsupportedError, match=r"both reshaped and bitcast.*"
                       r"bitcast_copies"):
        k(np.zeros((8, 128), np.float32))
