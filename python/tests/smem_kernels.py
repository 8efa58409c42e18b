"""A Pallas TPU kernel that keeps state in a scalar-prefetch (SMEM) operand it writes, shared by
python/tests/test_pallas_smem.py (results on the CPU devices) and
tests/conformance/test_pallas_ops.py (compiled with libtpu): no test imports here, so both
suites can load it."""

import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def running_offsets(steps_ref, state_ref, x_ref, o_ref, c_ref):
    """Grid step (i, j) adds the running sum of ``steps`` over the steps before it, in grid
    order, to its block of ``x``, carried in ``state_ref[0]`` across steps; ``state_ref[1]``
    counts the steps (written, then read back in the same step) and ``state_ref[2]`` is a flag
    cleared by the first step, as paged attention uses one."""
    i, j = pl.program_id(0), pl.program_id(1)
    n = pl.num_programs(1)
    first = state_ref[2]
    state_ref[2] = 0
    before = state_ref[0]
    state_ref[0] = before + steps_ref[i * n + j]
    state_ref[1] = state_ref[1] + 1
    count = state_ref[1]
    o_ref[...] = x_ref[...] + before.astype(o_ref.dtype)
    c_ref[...] = jnp.full(c_ref.shape, count * 10 + first, jnp.int32)


def running_offsets_call_kwargs(rows, cols, grid, outer="arbitrary"):
    """The ``pl.pallas_call`` arguments of ``running_offsets`` for an x of shape
    (grid[0] * rows, grid[1] * cols), the outer grid axis ``outer`` ("parallel": steps may
    run in any order, which tpukit refines to grid order for a kernel writing its prefetch
    operands, as one TensorCore runs them)."""
    block = pl.BlockSpec((rows, cols), lambda i, j, steps, state: (i, j))
    return dict(
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2, grid=grid, in_specs=[block], out_specs=[block, block]),
        compiler_params=pltpu.CompilerParams(dimension_semantics=(outer, "arbitrary")),
    )
