"""Stores into scalar-prefetch (SMEM) operands: the kernel's own copy of the caller's array,
written and read back across grid steps in grid order (``tpukit_dsl::smem``), on tpukit's
``cpu`` and ``interpret`` against Pallas interpret mode and a numpy reference; the caller's
arrays stay unchanged. Its libtpu compile is in tests/conformance/test_pallas_ops.py."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from smem_kernels import running_offsets, running_offsets_call_kwargs

import tpukit
from tpukit import DEVICES, pallas

BF16 = ml_dtypes.bfloat16


def running_offsets_reference(steps, state, x, grid, rows, cols):
    """Step k (row-major) adds state[0] + sum(steps[:k]); its count is state[1] + k + 1 and
    its flag state[2] at k = 0, else 0."""
    o = np.asarray(x, np.float32).copy()
    c = np.zeros(x.shape, np.int32)
    for k in range(grid[0] * grid[1]):
        i, j = divmod(k, grid[1])
        block = np.s_[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols]
        o[block] += state[0] + steps[:k].sum()
        c[block] = (state[1] + k + 1) * 10 + (state[2] if k == 0 else 0)
    return o.astype(x.dtype), c


@pytest.mark.parametrize("outer", ["arbitrary", "parallel"])
@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("grid", [(1, 1), (3, 4), (6, 2)])
def test_state_in_a_prefetch_operand_carries_across_grid_steps(outer, dtype, grid, rng):
    """Against the reference and JAX's TPU interpret mode (``pltpu.InterpretParams``), which
    models SMEM as a TPU has it (Pallas's generic ``interpret=True`` does not keep the writes
    from one grid step to the next). With a ``parallel`` outer axis JAX's TPU interpreter
    runs its steps in a random order (which a parallel axis allows); tpukit runs a kernel
    that writes its prefetch operands in grid order, as one TensorCore does, also on the
    ``cpu`` device, which otherwise splits parallel axes across threads."""
    rows, cols = 8, 128
    steps = rng.integers(-5, 6, grid[0] * grid[1]).astype(np.int32)
    state = np.array([7, 100, 1], np.int32)
    x = rng.standard_normal((grid[0] * rows, grid[1] * cols)).astype(dtype)
    kept = (steps.copy(), state.copy())
    out_shape = (jax.ShapeDtypeStruct(x.shape, dtype), jax.ShapeDtypeStruct(x.shape, jnp.int32))
    kwargs = running_offsets_call_kwargs(rows, cols, grid, outer)
    want = running_offsets_reference(steps, state, x, grid, rows, cols)
    if outer == "arbitrary":
        tpu_interpret = pl.pallas_call(running_offsets, out_shape=out_shape,
                                       interpret=pltpu.InterpretParams(),
                                       **kwargs)(steps, state, x)
        for w, t in zip(want, tpu_interpret, strict=True):
            assert_close(np.asarray(t), w, "Pallas TPU interpret mode vs reference")
    kernel = pallas.custom_kernel(lambda *a: out_shape, running_offsets, **kwargs)
    for device in DEVICES:
        got = kernel(steps, state, x, device=device)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"tpukit {device}, output {i}")
    # the kernel wrote its own copies: the caller's arrays are unchanged
    np.testing.assert_array_equal(steps, kept[0])
    np.testing.assert_array_equal(state, kept[1])


@pytest.mark.parametrize("device", DEVICES)
def test_prefetch_writes_inside_jit_leave_the_arguments_unchanged(device, rng):
    """Under jax.jit the kernel runs on XLA's buffers (in place on cpu): its writes go to its
    own copy, so a second call sees the same initial state and gives the same result."""
    rows, cols, grid = 8, 128, (4, 3)
    steps = jnp.asarray(rng.integers(-5, 6, 12).astype(np.int32))
    state = jnp.array([1, 0, 1], jnp.int32)
    x = jnp.asarray(rng.standard_normal((32, 384)).astype(np.float32))
    kernel = pallas.custom_kernel(
        lambda *a: (jax.ShapeDtypeStruct(x.shape, x.dtype),
                    jax.ShapeDtypeStruct(x.shape, jnp.int32)),
        running_offsets, device=device,
        **running_offsets_call_kwargs(rows, cols, grid, "parallel"))
    program = jax.jit(lambda s, t, x: kernel(s, t, x))
    want = running_offsets_reference(np.asarray(steps), np.asarray(state), np.asarray(x), grid,
                                     rows, cols)
    for _ in range(2):
        got = program(steps, state, x)
        for g, w in zip(got, want, strict=True):
            assert_close(g, w, device)
    np.testing.assert_array_equal(np.asarray(state), [1, 0, 1])


def test_an_index_map_reading_a_written_prefetch_operand_is_an_error():
    """A TPU evaluates the next step's index maps before the current body runs: what such an
    index map would see is not the program's order, so tpukit refuses it by name."""

    def body(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]
        idx_ref[0] = idx_ref[0] + 1

    kernel = pallas.custom_kernel(
        lambda idx, x: jax.ShapeDtypeStruct((8, 128), x.dtype), body,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[0], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, idx: (0, 0))))
    with pytest.raises(tpukit.TpukitError, match=r"index map reads prefetch operand "
                       r"`prefetch0`, which the body writes"):
        kernel(np.zeros(1, np.int32), np.zeros((16, 128), np.float32))
