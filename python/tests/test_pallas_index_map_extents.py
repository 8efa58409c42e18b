"""Index maps reading the grid's extents (`pl.num_programs` in a BlockSpec's index map,
Mosaic's `tpu.iteration_bound`), of a static grid and of a grid sized by a traced value, on
both devices against numpy (issue 13)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.experimental import pallas as pl

from tpukit import DEVICES, pallas


def _body(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2 + pl.program_id(0).astype(o_ref.dtype)


def reversed_blocks(n, x):
    """Step i reads block ``num_programs - 1 - i`` and writes block i."""
    return pl.pallas_call(
        _body, grid=(n,), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (pl.num_programs(0) - 1 - i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
    )(x)


def _want(x, steps):
    tiles = x.astype(np.float32).reshape(-1, 8, x.shape[1])
    out = [tiles[steps - 1 - i] * 2 + i for i in range(steps)]
    return np.concatenate(out).astype(x.dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_an_index_map_reads_a_traced_grid_extent(dtype, device, rng):
    x = rng.standard_normal((48, 128)).astype(dtype)
    f = jax.jit(reversed_blocks)
    for steps in (1, 3, 6):
        with pallas.on_cpu(device):
            got = np.asarray(f(jnp.int32(steps), jnp.asarray(x)))
        np.testing.assert_array_equal(got[:8 * steps], _want(x, steps)[:8 * steps])


@pytest.mark.parametrize("device", DEVICES)
def test_an_index_map_reads_a_static_grid_extent(device, rng):
    x = rng.standard_normal((40, 128)).astype(np.float32)
    with pallas.on_cpu(device):
        got = jax.jit(lambda x: reversed_blocks(5, x))(jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(got), _want(x, 5))


def test_the_ir_shows_num_programs_in_the_index_map():
    from tpukit import _cpu_lowering

    before = len(_cpu_lowering.imported())
    with pallas.on_cpu():
        jax.jit(reversed_blocks).lower(jnp.int32(2), jnp.zeros((16, 128)))
    (kernel,) = _cpu_lowering.imported()[before:]
    assert "num_programs 0" in str(kernel), str(kernel)
