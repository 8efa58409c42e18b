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
from jax.experimental.pallas import tpu as pltpu

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


def test_a_masked_store_through_a_32_bit_view_of_bf16_rows_is_refused_by_name():
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...]
        v = jnp.zeros((8, 128), jnp.int32)
        pltpu.store(o_ref.bitcast(jnp.int32), v, mask=v == 0)

    k = pallas.custom_kernel(body, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.bfloat16))
    with pytest.raises(tpukit.UnsupportedError, match=r"a masked store into a ref bitcast "
                       r"between 16 and 32 bits.*view_store_starts"):
        k(np.zeros((16, 128), ml_dtypes.bfloat16))


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
