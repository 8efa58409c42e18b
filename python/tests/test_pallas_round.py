"""Rounding in a Pallas kernel (issue 13): `jnp.round` (imported from `math.roundeven`, halves
to the even integer as numpy's `np.round` does) and `lax.round` (its default rounds halves away
from zero: `math.round`), run on both devices on f32 and bf16 inputs holding exact halves, over
a grid whose blocks do not divide the array. The ops are lowered back to Mosaic and compiled
for v5e/v6e in tests/conformance/test_op_table.py (`op.round_even`, `op.round`)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

import tpukit
from tpukit import pallas

SHAPE = (20, 300)  # blocks of (8, 128): edge blocks on both axes
BLOCK = pl.BlockSpec((8, 128), lambda i, j: (i, j))


def half_away_from_zero(x):
    """In f64, where `|x| + 0.5` is exact for every f32 `x` (in f32, 0.49999997 + 0.5 is 1)."""
    x = x.astype(np.float64)
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


# (the kernel's rounding, numpy's reference on f32, the rounded first six halves)
ROUNDINGS = {
    "jnp.round": (jnp.round, np.round, [0.0, -0.0, 2.0, -2.0, 2.0, -2.0]),
    "lax.round": (lax.round, half_away_from_zero, [1.0, -1.0, 2.0, -2.0, 3.0, -3.0]),
    "lax.round-even": (
        lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
        np.round,
        [0.0, -0.0, 2.0, -2.0, 2.0, -2.0],
    ),
}


def inputs(dtype, seed):
    """Random values, a third of them exact halves (k + 0.5, even and odd k, both signs)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-40.0, 40.0, SHAPE)
    halves = rng.integers(-40, 40, SHAPE) + 0.5
    x = np.where(rng.random(SHAPE) < 0.35, halves, x)
    x[0, :8] = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.0, -0.0]
    return x.astype(dtype)


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_round_matches_numpy_on_halves(rounding, dtype, device):
    round_fn, reference, halves = ROUNDINGS[rounding]

    def body(x_ref, o_ref):
        o_ref[...] = round_fn(x_ref[...])

    x = inputs(dtype, 0)
    kernel = pallas.custom_kernel(
        body,
        out_shape=jax.ShapeDtypeStruct(SHAPE, x.dtype),
        grid=(3, 3),
        in_specs=[BLOCK],
        out_specs=BLOCK,
    )
    got = np.asarray(kernel(x, device=device))
    want = reference(x.astype(np.float32)).astype(dtype)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    assert np.array_equal(np.signbit(got[0, :8].astype(np.float32)), np.signbit(want[0, :8]))
    assert got[0, :6].astype(np.float32).tolist() == halves
