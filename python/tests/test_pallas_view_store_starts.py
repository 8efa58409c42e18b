"""Masked stores into reshaped and bitcast refs (`pltpu.store(o_ref.reshape(...), v,
mask=...)`) and stores at a traced start into a reshaped ref
(`o_ref.reshape(32, 128)[pl.ds(i * 8, 8), :] = v`), issue 13: on both devices against numpy
(kernels in view_store_kernels.py, compiled with libtpu in
tests/conformance/test_pallas_ops.py)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import view_store_kernels as vk
from conftest import assert_close
from jax.experimental import pallas as pl

import tpukit
from tpukit import DEVICES, pallas


def run(body, out_shape, args, want, **kwargs):
    k = pallas.custom_kernel(body, out_shape=out_shape, **kwargs)
    for device in DEVICES:
        assert_close(k(*args, device=device), want, f"tpukit {device}")


# Pallas lowers no masked store of 16-bit data ("masked swap with non-32-bit data").
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_a_masked_store_through_a_reshaped_ref(dtype, rng):
    x = (rng.standard_normal((32, 128)) * 100).astype(dtype)
    y = (rng.standard_normal((32, 128)) * 100).astype(dtype)
    want = np.where(y.astype(np.float32) > 0, y, x).reshape(2, 16, 128)
    run(vk.masked_through_reshape, jax.ShapeDtypeStruct((2, 16, 128), dtype), [x, y], want)


def test_a_masked_store_through_a_bitcast_ref(rng):
    x = rng.standard_normal((16, 128)).astype(np.float32)
    bits = rng.integers(-2**31, 2**31 - 1, (16, 128), dtype=np.int64).astype(np.int32)
    want = np.where(bits & 1 == 0, bits, x.view(np.int32)).view(np.float32)
    k = pallas.custom_kernel(vk.masked_through_bitcast,
                             out_shape=jax.ShapeDtypeStruct(x.shape, np.float32))
    for device in DEVICES:
        np.testing.assert_array_equal(np.asarray(k(x, bits, device=device)).view(np.int32),
                                      want.view(np.int32), err_msg=device)


def packed_rows(x16):
    """The 32-bit rows of a 16-bit (2R, C) array as Mosaic's ref bitcast packs them: row i
    holds row 2i in its low half, row 2i + 1 in its high half."""
    u = x16.view(np.uint16).astype(np.uint32)
    return (u[0::2] | (u[1::2] << 16)).view(np.int32)


def unpacked_rows(x32, dtype):
    u = x32.view(np.uint32)
    rows = np.empty((2 * u.shape[0], *u.shape[1:]), np.uint16)
    rows[0::2], rows[1::2] = u & 0xFFFF, u >> 16
    return rows.view(dtype)


@pytest.mark.parametrize("rows", [16, 40])
def test_a_masked_store_through_a_32_bit_view_of_bf16_rows(rows, rng):
    """Each masked-off 32-bit element keeps both bf16 elements beneath it."""
    dtype = ml_dtypes.bfloat16
    x = (rng.standard_normal((rows, 128)) * 100).astype(dtype)
    bits = rng.integers(-2**31, 2**31 - 1, (rows // 2, 128), dtype=np.int64).astype(np.int32)
    want = unpacked_rows(np.where(bits & 1 == 0, bits, packed_rows(x)), dtype)
    k = pallas.custom_kernel(vk.masked_through_packing_bitcast,
                             out_shape=jax.ShapeDtypeStruct(x.shape, dtype))
    for device in DEVICES:
        got = np.asarray(k(x, bits, device=device))
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16), err_msg=device)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shape", [(4, 16, 128), (48, 1, 256)])
def test_stores_at_traced_starts_into_a_reshaped_ref(dtype, shape, rng):
    n, r, c = shape
    x = rng.standard_normal((n * r, c)).astype(dtype)
    scale = np.repeat(np.arange(1, n + 1, dtype=np.float32), r)[:, None]
    want = (x.astype(np.float32) * scale).astype(dtype).reshape(shape)
    run(vk.rows_at_traced_starts, jax.ShapeDtypeStruct(shape, dtype), [x], want)


def test_a_traced_start_inside_rows_of_the_ref_beneath_is_refused_by_name():
    def body(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        flat = o_ref.reshape(32, 128)

        def step(i, carry):
            flat[pl.ds(i * 4, 8), :] = x_ref[pl.ds(i * 4, 8), :]
            return carry

        jax.lax.fori_loop(0, 3, step, 0)

    k = pallas.custom_kernel(body, out_shape=jax.ShapeDtypeStruct((4, 8, 128), jnp.float32))
    with pytest.raises(tpukit.UnsupportedError, match=r"a slice of a reshaped ref other than "
                       r"of whole leading rows.*view_store_starts"):
        k(np.zeros((32, 128), np.float32))
