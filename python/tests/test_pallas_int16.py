"""int16 Pallas kernels (issues 13 and 14): wrapping arithmetic, shifts, signed comparisons,
floor division and remainder, conversions to and from f32/int8/int32, and reductions, on a
grid whose blocks do not divide the arrays, against numpy's int16 arithmetic on random
inputs, on both devices, with numpy, torch and JAX arrays. The same kernels are lowered back
to Mosaic and compiled for v5e/v6e in tests/conformance/test_pallas_ops.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

import tpukit
from tpukit import pallas

SHAPE = (40, 300)  # blocks of (16, 128): edge blocks on both axes
BLOCK = pl.BlockSpec((16, 128), lambda i, j: (i, j))
GRID = (3, 3)
NAMES = ("add", "mul", "shifts", "pick", "div", "conv")


def elementwise(x_ref, y_ref, s_ref, add_ref, mul_ref, shifts_ref, pick_ref, div_ref, conv_ref):
    x, y, s = x_ref[...], y_ref[...], s_ref[...]
    add_ref[...] = x + y - 7
    mul_ref[...] = x * y
    shifts_ref[...] = (x << s) ^ (y >> s) ^ lax.shift_right_logical(x, s)
    pick_ref[...] = jnp.where(x < y, jnp.maximum(x, s), jnp.minimum(y, s))
    div_ref[...] = x // y + x % y
    half = x.astype(jnp.float32) * 0.5
    conv_ref[...] = (
        half.astype(jnp.int16)
        + x.astype(jnp.int8).astype(jnp.int16)
        + (x.astype(jnp.int32) * 3).astype(jnp.int16)
        + (x != 0).astype(jnp.int16)
    )


def reference(x, y, s):
    """The kernel in numpy int16 (which wraps), with int32 for the wider intermediates."""
    with np.errstate(over="ignore"):
        i16 = np.int16
        add = (x + y - i16(7)).astype(i16)
        mul = (x * y).astype(i16)
        u = x.view(np.uint16)
        shifts = (x << s) ^ (y >> s) ^ (u >> s.astype(np.uint16)).view(i16)
        pick = np.where(x < y, np.maximum(x, s), np.minimum(y, s))
        div = (x // y + x % y).astype(i16)
        half = x.astype(np.float32) * np.float32(0.5)
        conv = (
            half.astype(i16)
            + x.astype(np.int8).astype(i16)
            + (x.astype(np.int32) * 3).astype(i16)
            + (x != 0).astype(i16)
        )
    return add, mul, shifts, pick, div, conv


def inputs(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-32768, 32767, SHAPE, dtype=np.int16, endpoint=True)
    y = rng.integers(-32768, 32767, SHAPE, dtype=np.int16, endpoint=True)
    y[y == 0] = 3  # division by zero is undefined in numpy
    y[0, :4] = [-1, 1, 32767, -32768]
    x[0, :4] = [-32767, 32767, -32768, 5]
    s = rng.integers(0, 15, SHAPE, dtype=np.int16, endpoint=True)
    return x, y, s


def kernel():
    out = jax.ShapeDtypeStruct(SHAPE, jnp.int16)
    return pallas.custom_kernel(
        elementwise,
        out_shape=(out,) * 6,
        grid=GRID,
        in_specs=[BLOCK] * 3,
        out_specs=(BLOCK,) * 6,
    )


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_int16_elementwise_matches_numpy(device):
    x, y, s = inputs(1)
    got = kernel()(x, y, s, device=device)
    for name, g, w in zip(NAMES, got, reference(x, y, s), strict=True):
        assert g.dtype == np.int16, name
        np.testing.assert_array_equal(g, w, err_msg=name)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_int16_torch_and_jax_arrays(device):
    torch = pytest.importorskip("torch")
    x, y, s = inputs(2)
    want = reference(x, y, s)
    got = kernel()(*(torch.from_numpy(a) for a in (x, y, s)), device=device)
    assert all(g.dtype == torch.int16 for g in got)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)
    got = kernel()(*(jnp.asarray(a) for a in (x, y, s)), device=device)
    assert all(g.dtype == jnp.int16 for g in got)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w)


def reductions(x_ref, sum_ref, max_ref, min_ref):
    # Pallas lowers no int16 reduction ("Reductions over int16 not implemented"): its users
    # reduce in int32 and narrow, which wraps the sum as an int16 one would.
    x = x_ref[...].astype(jnp.int32)
    sum_ref[...] = jnp.sum(x, axis=1, keepdims=True).astype(jnp.int16)
    max_ref[...] = jnp.max(x, axis=0, keepdims=True).astype(jnp.int16)
    min_ref[...] = jnp.min(x, axis=1, keepdims=True).astype(jnp.int16)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_int16_reductions_wrap_as_numpy(device):
    rng = np.random.default_rng(3)
    x = rng.integers(-32768, 32767, (40, 256), dtype=np.int16, endpoint=True)
    rows, cols = jax.ShapeDtypeStruct((40, 1), jnp.int16), jax.ShapeDtypeStruct((1, 256), jnp.int16)
    got = pallas.custom_kernel(reductions, out_shape=(rows, cols, rows))(x, device=device)
    np.testing.assert_array_equal(got[0], x.sum(axis=1, keepdims=True, dtype=np.int16))
    np.testing.assert_array_equal(got[1], x.max(axis=0, keepdims=True))
    np.testing.assert_array_equal(got[2], x.min(axis=1, keepdims=True))


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_uint16_arrays_keep_their_dtype(device):
    """uint16 crosses as int16 bits; unsigned comparisons, shifts and sums stay unsigned."""

    def body(x_ref, y_ref, o_ref):
        x, y = x_ref[...], y_ref[...]
        o_ref[...] = jnp.where(x > y, x >> 3, y + x)

    rng = np.random.default_rng(4)
    x = rng.integers(0, 65535, (16, 128), dtype=np.uint16, endpoint=True)
    y = rng.integers(0, 65535, (16, 128), dtype=np.uint16, endpoint=True)
    out = jax.ShapeDtypeStruct(x.shape, jnp.uint16)
    got = pallas.custom_kernel(body, out_shape=out)(x, y, device=device)
    assert got.dtype == np.uint16
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, np.where(x > y, x >> 3, y + x))
