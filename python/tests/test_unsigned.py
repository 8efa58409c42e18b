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


@pytest.mark.parametrize("dtype", [np.uint32, np.uint16, np.uint8])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_unsigned_maximum_and_minimum(device, dtype):
    """``jnp.maximum``/``jnp.minimum`` of unsigned vectors (``arith.maxui``/``minui``), and of
    two SMEM scalars, over the whole range (values past the signed maximum included)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    rng = np.random.default_rng(11)
    top = np.iinfo(dtype).max
    x, y = (rng.integers(0, int(top) + 1, (13, 128), dtype=np.uint64).astype(dtype)
            for _ in range(2))
    x[0, :3], y[0, :3] = [0, top, top // 2 + 1], [top, 0, top // 2]

    def extremes(x_ref, y_ref, hi_ref, lo_ref):
        hi_ref[...] = jnp.maximum(x_ref[...], y_ref[...])
        lo_ref[...] = jnp.minimum(x_ref[...], y_ref[...])

    k = pallas.custom_kernel(lambda x, y: (x, x), extremes)
    hi, lo = k(x, y, device=device)
    np.testing.assert_array_equal(np.asarray(hi), np.maximum(x, y))
    np.testing.assert_array_equal(np.asarray(lo), np.minimum(x, y))

    def scalars(s_ref, o_ref):
        o_ref[0] = jnp.maximum(s_ref[0], s_ref[1])
        o_ref[1] = jnp.minimum(s_ref[0], s_ref[1])

    if dtype == np.uint32:  # SMEM holds 32-bit scalars
        s = np.array([2**32 - 5, 87], np.uint32)
        smem = pl.BlockSpec(memory_space=pltpu.SMEM)
        k = pallas.custom_kernel(lambda s: s, scalars, in_specs=[smem], out_specs=smem)
        np.testing.assert_array_equal(np.asarray(k(s, device=device)), [2**32 - 5, 87])


@pytest.mark.parametrize(("src", "dst"), [(np.uint8, np.int32), (np.uint8, np.uint16),
                                          (np.uint16, np.int32), (np.uint16, np.uint32),
                                          (np.uint8, np.int16)])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_unsigned_ints_widen_by_zero_extension(device, src, dst):
    """``astype`` of uint8/uint16 to a wider int (``arith.extui``) keeps values past the
    signed maximum (255 stays 255), as vectors and as SMEM scalars compared after widening."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    rng = np.random.default_rng(5)
    top = int(np.iinfo(src).max)
    x = rng.integers(0, top + 1, (24, 256), dtype=np.uint64).astype(src)
    x[0, :3] = [0, top, top // 2 + 1]

    def widen(x_ref, o_ref):
        o_ref[...] = x_ref[...].astype(dst)

    k = pallas.custom_kernel(lambda x: jax.ShapeDtypeStruct(x.shape, dst), widen)
    np.testing.assert_array_equal(np.asarray(k(x, device=device)), x.astype(dst))

    def greater(x_ref, y_ref, o_ref):
        o_ref[0] = x_ref[0].astype(jnp.int32) > y_ref[0].astype(jnp.int32)

    smem = pl.BlockSpec(memory_space=pltpu.SMEM)
    k = pallas.custom_kernel(lambda x, y: jax.ShapeDtypeStruct((1,), jnp.bool_), greater,
                             in_specs=[smem, smem], out_specs=smem)
    got = k(np.array([top], src), np.array([0], src), device=device)
    np.testing.assert_array_equal(np.asarray(got), [True])
