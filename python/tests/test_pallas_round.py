"""`jnp.round` in a Pallas kernel (issue 13): imported from `math.roundeven` and run on both
devices, rounding halves to the even integer as numpy's `np.round` does, on f32 and bf16
inputs holding exact halves, over a grid whose blocks do not divide the array. The op is
lowered back to Mosaic and compiled for v5e/v6e in tests/conformance/test_op_table.py
(`op.round_even`)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.experimental import pallas as pl

import tpukit
from tpukit import pallas

SHAPE = (20, 300)  # blocks of (8, 128): edge blocks on both axes
BLOCK = pl.BlockSpec((8, 128), lambda i, j: (i, j))


def body(x_ref, o_ref):
    o_ref[...] = jnp.round(x_ref[...])


def inputs(dtype, seed):
    """Random values, a third of them exact halves (k + 0.5, even and odd k, both signs)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-40.0, 40.0, SHAPE)
    halves = rng.integers(-40, 40, SHAPE) + 0.5
    x = np.where(rng.random(SHAPE) < 0.35, halves, x)
    x[0, :8] = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.0, -0.0]
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_round_is_half_to_even(dtype, device):
    x = inputs(dtype, 0)
    kernel = pallas.custom_kernel(
        body,
        out_shape=jax.ShapeDtypeStruct(SHAPE, x.dtype),
        grid=(3, 3),
        in_specs=[BLOCK],
        out_specs=BLOCK,
    )
    got = np.asarray(kernel(x, device=device))
    want = np.round(x.astype(np.float32)).astype(dtype)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    assert np.array_equal(np.signbit(got[0, :8].astype(np.float32)), np.signbit(want[0, :8]))
    assert got[0, :6].astype(np.float32).tolist() == [0.0, -0.0, 2.0, -2.0, 2.0, -2.0]
