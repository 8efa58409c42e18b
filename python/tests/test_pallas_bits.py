"""Bit-level kernels: `pltpu.bitcast` between dtypes of one width (f32 <-> i32/u32,
bf16 <-> f16/i16) and of different widths (bf16/i16/i8 pairs packed along the sublanes into 32
bits, and back), `lax.bitcast_convert_type` inside kernels, and the conversions between
unsigned integers and floats (`arith.uitofp`, `arith.fptoui`), checked bit for bit against
the same function run by XLA on random inputs, on both devices."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import pallas


def call(body, outs, *args, **kwargs):
    """`pl.pallas_call(body)` over whole arrays, with output shapes `outs`."""
    return pl.pallas_call(body, out_shape=outs, **kwargs)(*args)


def reference_bitcast(x, dtype):
    """Pallas's own definition of `pltpu.bitcast` in plain jnp (what it lowers to off TPU):
    between widths, the second-minor dimension packs little-endian."""
    src, dst = np.dtype(x.dtype).itemsize, np.dtype(dtype).itemsize
    if src < dst:
        *lead, m, n = x.shape
        p = dst // src
        x = jnp.swapaxes(x.reshape(*lead, m // p, p, n), -1, -2)
        return lax.bitcast_convert_type(x, dtype)
    if src > dst:
        y = lax.bitcast_convert_type(x, dtype)
        *lead, m, n, p = y.shape
        return jnp.swapaxes(y, -1, -2).reshape(*lead, m * p, n)
    return lax.bitcast_convert_type(x, dtype)


def bitcast_fn(dtype):
    def f(x):
        *lead, m, n = x.shape
        m = m * np.dtype(x.dtype).itemsize // np.dtype(dtype).itemsize

        def body(x_ref, o_ref):
            o_ref[...] = pltpu.bitcast(x_ref[...], dtype)

        return call(body, jax.ShapeDtypeStruct((*lead, m, n), dtype), x)

    return f


def random(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


CASES = [
    (np.float32, jnp.int32, (8, 128)),
    (np.int32, jnp.float32, (16, 256)),
    (np.float32, jnp.uint32, (8, 128)),
    (ml_dtypes.bfloat16, jnp.float16, (16, 128)),
    (ml_dtypes.bfloat16, jnp.int32, (16, 128)),
    (ml_dtypes.bfloat16, jnp.float32, (2, 32, 128)),
    (np.int32, jnp.bfloat16, (8, 128)),
    (np.float32, jnp.bfloat16, (8, 256)),
    (np.int8, jnp.int32, (32, 128)),
    (np.int32, jnp.int8, (8, 128)),
    (ml_dtypes.bfloat16, jnp.int16, (16, 128)),
    (np.int16, jnp.bfloat16, (16, 128)),
    (np.int16, jnp.int32, (16, 128)),
    (np.int32, jnp.int16, (8, 128)),
    (np.uint16, jnp.float16, (16, 128)),
]


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize(("src", "dst", "shape"), CASES)
def test_pltpu_bitcast_matches_pallas_definition(device, src, dst, shape):
    x = random(np.random.default_rng(3), shape, src)
    got = pallas.custom_jax_kernel(bitcast_fn(dst)).kernel(x)  # imports as one kernel
    assert "bitcast" in str(got)
    got = pallas.custom_kernel(
        lambda a: jax.eval_shape(lambda b: reference_bitcast(b, dst), a),
        lambda x_ref, o_ref: o_ref.__setitem__(..., pltpu.bitcast(x_ref[...], dst)),
    )(x, device=device)
    want = np.asarray(jax.jit(lambda b: reference_bitcast(b, dst))(x))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_bitcast_convert_type_and_bit_tricks(device):
    """The classic bit tricks: a uniform float from random bits (`bits >> 9 | 0x3f800000`,
    bitcast to f32, minus 1), the exponent field of a float, a sign flip by xor."""

    def body(bits_ref, x_ref, u_ref, e_ref, n_ref):
        bits = bits_ref[...]
        mantissa = lax.shift_right_logical(bits, jnp.uint32(9)) | jnp.uint32(0x3F800000)
        u_ref[...] = lax.bitcast_convert_type(mantissa, jnp.float32) - 1.0
        word = lax.bitcast_convert_type(x_ref[...], jnp.int32)
        e_ref[...] = ((word >> 23) & 0xFF) - 127
        n_ref[...] = lax.bitcast_convert_type(word ^ jnp.int32(-(2**31)), jnp.float32)

    def f(bits, x):
        outs = (
            jax.ShapeDtypeStruct(x.shape, jnp.float32),
            jax.ShapeDtypeStruct(x.shape, jnp.int32),
            jax.ShapeDtypeStruct(x.shape, jnp.float32),
        )
        return call(body, outs, bits, x)

    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, (16, 128), dtype=np.uint32)
    x = (rng.standard_normal((16, 128)) * 1e3).astype(np.float32)
    got = pallas.custom_jax_kernel(f)(bits, x, device=device)
    u, e, n = got
    np.testing.assert_array_equal(u, (bits >> 9 | 0x3F800000).view(np.float32) - 1.0)
    assert (u >= 0).all() and (u < 1).all()
    np.testing.assert_array_equal(e, ((x.view(np.int32) >> 23) & 0xFF) - 127)
    np.testing.assert_array_equal(n, -x)


def uint_to_float(x):
    def body(x_ref, f_ref, b_ref):
        f_ref[...] = x_ref[...].astype(jnp.float32)
        b_ref[...] = x_ref[...].astype(jnp.bfloat16)

    outs = (
        jax.ShapeDtypeStruct(x.shape, jnp.float32),
        jax.ShapeDtypeStruct(x.shape, jnp.bfloat16),
    )
    return call(body, outs, x)


def float_to_uint(x, dtype):
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...].astype(dtype)

    return call(body, jax.ShapeDtypeStruct(x.shape, dtype), x)


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("dtype", [np.uint32, np.uint16, np.uint8])
def test_unsigned_to_float(device, dtype):
    rng = np.random.default_rng(11)
    x = rng.integers(0, np.iinfo(dtype).max, (16, 128), dtype=dtype, endpoint=True)
    if dtype == np.uint32:
        # around 2^31, 2^24 (f32's last exact integer) and the top, ties included
        edges = [0, 1, 2**24 + 1, 2**24 + 3, 2**31 - 1, 2**31, 2**31 + 129, 2**32 - 1]
        x[0, : len(edges)] = edges
        x[1, :] = rng.integers(2**31, 2**32, 128, dtype=np.uint64).astype(np.uint32)
    f, b = pallas.custom_jax_kernel(uint_to_float)(x, device=device)
    np.testing.assert_array_equal(f, x.astype(np.float32))
    # XLA converts to bf16 through f32: the reference is what jnp gives
    want = np.asarray(jnp.asarray(x).astype(jnp.bfloat16))
    np.testing.assert_array_equal(b.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("dtype", [jnp.uint32, jnp.uint16, jnp.uint8])
def test_float_to_unsigned_saturates_as_jax(device, dtype):
    rng = np.random.default_rng(13)
    x = (rng.standard_normal((8, 128)) * 2.0 ** rng.integers(0, 34, (8, 128))).astype(np.float32)
    x[0, :8] = [np.nan, -1.0, -0.5, 0.5, 2.0**31, 2.0**32, np.inf, 255.9]
    x[1, :4] = [65535.9, 65536.0, 32768.0, -32769.0]
    got = pallas.custom_jax_kernel(lambda a: float_to_uint(a, dtype))(x, device=device)
    np.testing.assert_array_equal(got, np.asarray(jnp.asarray(x).astype(dtype)))
