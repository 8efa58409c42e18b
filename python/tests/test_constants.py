"""Non-splat constants (`jnp.array([...])`, `np.arange`, lookup tables) in imported
functions: `stablehlo.constant dense<[...]>` (JAX prints small ones as lists, larger ones as
hex data) becomes the kernel IR's `dense` constant, exact in every dtype on both devices, in
a plain JAX function imported whole and in the JAX ops around a Pallas call (torch
tensors), checked against XLA on random inputs."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.experimental import pallas as pl

import tpukit
from tpukit import pallas

TABLE = np.arange(128, dtype=np.float32) * 0.5 - 7.0  # hex data in the StableHLO
STEPS = np.array([3, -1, 4, 1, -5, 9, 2, -6], np.int32)  # a list


def affine(x):
    rows = jnp.asarray(STEPS)[:, None].astype(x.dtype)
    return x * jnp.asarray(TABLE).astype(x.dtype)[None, :] + rows


def lookup(x, i):
    """Integer, unsigned and boolean tables."""
    codes = jnp.array([7, 0, 2**32 - 1, 2**31, 12345, 1, 2, 3], jnp.uint32)[:, None]
    mask = jnp.array([True, False] * 4)[:, None]
    mixed = codes * i.astype(jnp.uint32) + jnp.asarray(STEPS).astype(jnp.uint32)[:, None]
    return jnp.where(mask, x, -x), mixed


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_float_tables(device, dtype):
    x = np.random.default_rng(1).standard_normal((8, 128)).astype(dtype)
    kernel = pallas.custom_jax_kernel(affine)
    assert "dense [" in str(kernel.kernel(x))
    got = np.asarray(kernel(x, device=device), np.float32)
    want = np.asarray(jax.jit(affine)(x)).astype(np.float32)  # XLA fuses the multiply-add
    tol = 1e-6 if dtype == np.float32 else 1e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_integer_unsigned_and_bool_tables(device):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 128)).astype(np.float32)
    i = rng.integers(0, 100, (8, 128), dtype=np.int32)
    got = pallas.custom_jax_kernel(lookup)(x, i, device=device)
    want = jax.jit(lookup)(x, i)
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def scaled_call(x):
    """Constants in the prologue and epilogue of a Pallas call."""

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    y = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(
        x + jnp.arange(x.shape[1], dtype=x.dtype)
    )
    return y - jnp.asarray(TABLE)[None, : x.shape[1]]


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_around_a_pallas_call_on_torch_tensors(device):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal((16, 128)).astype(np.float32)
    got = pallas.custom_jax_kernel(scaled_call)(torch.from_numpy(x), device=device)
    want = (x + np.arange(128, dtype=np.float32)) * 2.0 - TABLE
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-5)
