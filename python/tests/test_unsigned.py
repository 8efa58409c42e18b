"""uint32 arrays at the call boundary: numpy and JAX arrays (eager and jitted) cross as the
int32 bits the kernel IR holds them in, results come back with the dtype the program declares,
and the kernel's unsigned arithmetic (multiplication and wrap-around, logical shifts, unsigned
division, remainder and comparisons) is exact on both devices: checked bit for bit against
the same function run by XLA on random values over the whole uint32 range."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import tpukit
from tpukit import pallas

U32 = jnp.uint32


def mix(x, y):
    hashed = (x * U32(2654435761)) ^ lax.shift_right_logical(x, U32(7))
    return hashed + y // (y % U32(13) + 1)


def order(x, y):
    return (x > y).astype(jnp.int32) + (x // U32(3) < y % U32(1000000007)).astype(jnp.int32)


def distance(x, y):
    return jnp.where(x >= y, x - y, y - x)


FUNCTIONS = (mix, order, distance)


def body(x_ref, y_ref, *out_refs):
    x, y = x_ref[...], y_ref[...]
    for f, o in zip(FUNCTIONS, out_refs, strict=True):
        o[...] = f(x, y)


kernel = pallas.custom_kernel(
    lambda x, y: tuple(jax.eval_shape(f, x, y) for f in FUNCTIONS), body
)


@pytest.fixture
def operands():
    rng = np.random.default_rng(7)
    x, y = (rng.integers(0, 2**32, (8, 128), dtype=np.uint32) for _ in range(2))
    x[0, :4] = [0, 1, 2**31 - 1, 2**31]  # around the sign bit of the int32 the IR holds
    y[0, :4] = [2**32 - 1, 2**31, 2**31, 2**31 - 1]
    want = [np.asarray(r) for r in jax.jit(lambda a, b: [f(a, b) for f in FUNCTIONS])(x, y)]
    return x, y, want


def check(got, want):
    for name, g, w in zip(("mix", "order", "distance"), got, want, strict=True):
        assert np.asarray(g).dtype == w.dtype, name
        np.testing.assert_array_equal(np.asarray(g), w, err_msg=name)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_numpy_and_jax_arrays(device, operands):
    x, y, want = operands
    got = kernel(x, y, device=device)
    assert all(isinstance(g, np.ndarray) for g in got)
    check(got, want)
    check(kernel(jnp.asarray(x), jnp.asarray(y), device=device), want)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_inside_jit(device, operands):
    x, y, want = operands
    check(jax.jit(lambda a, b: kernel(a, b, device=device))(x, y), want)
