"""A TPU Pallas call whose windows and VMEM scratch exceed its ``vmem_limit_bytes`` or, without
one, a v5e's default scoped VMEM (16 MiB; the whole VMEM is 128 MiB) does not compile on a TPU:
tpukit refuses it too, listing each allocation, as an ``OutOfMemoryError`` (under
``on_cpu()``, the ``JaxRuntimeError`` a TPU's compile raises), while the same call with blocks
that fit runs, checked against numpy. A window whose block index no grid step changes is
single buffered, as a TPU's pipeline fetches it once; the limits were measured with libtpu's
v5e compile (16 MiB of windows compile, 16 MiB and 1 KiB do not)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_close
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import pallas


def copy(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def blocked_copy(shape, block, buffers=None):
    mode = {} if buffers is None else {"pipeline_mode": pl.Buffered(buffers)}
    spec = pl.BlockSpec(block, lambda i, j: (i, j), **mode)
    grid = (pl.cdiv(shape[0], block[0]), pl.cdiv(shape[1], block[1]))
    return pl.pallas_call(copy, out_shape=jax.ShapeDtypeStruct(shape, jnp.float32), grid=grid,
                          in_specs=[spec], out_specs=spec)


@pytest.mark.parametrize("buffers", [1, 2])
def test_windows_beyond_vmem_are_refused_naming_each(buffers):
    # 128 MiB blocks: 2 x 128 MiB single buffered, 4 x 128 MiB double buffered.
    shape, block = (8192, 8192), (4096, 8192)
    call = blocked_copy(shape, block, buffers)
    with pallas.on_cpu(), pytest.raises(jax.errors.JaxRuntimeError) as caught:
        jax.jit(call).lower(jax.ShapeDtypeStruct(shape, jnp.float32))
    message = str(caught.value)
    assert message.startswith("RESOURCE_EXHAUSTED")
    assert "input window allocation for operator input 0" in message
    assert "output window allocation for operator output 0" in message
    assert "The window shape is f32[4096,8192], while the full shape is f32[8192,8192]." in message
    assert ("This allocation is single buffered." if buffers == 1
            else "This allocation has 2 buffering levels.") in message
    kernel = pallas.custom_kernel(lambda x: jax.ShapeDtypeStruct(shape, jnp.float32), copy,
                                  grid=(2, 1), in_specs=[pl.BlockSpec(block, lambda i, j: (i, j))],
                                  out_specs=pl.BlockSpec(block, lambda i, j: (i, j)))
    with pytest.raises(tpukit.OutOfMemoryError, match="more than the 16.00 MiB of scoped VMEM"):
        kernel(np.zeros(shape, np.float32))


def test_scratch_and_prefetch_count_in_the_operator_numbers():
    """A whole-array window is fetched once (one buffer); the scalar-prefetch operand is
    operator input 0, the array input 1; VMEM scratch counts too."""

    def body(s_ref, x_ref, o_ref, scratch_ref):
        o_ref[...] = x_ref[...] + s_ref[0].astype(jnp.float32)

    shape = (2048, 8192)  # 64 MiB in, 64 MiB out, 16 MiB scratch
    call = pl.pallas_call(
        body, out_shape=jax.ShapeDtypeStruct(shape, jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(2,), in_specs=[pl.BlockSpec()],
            out_specs=pl.BlockSpec(), scratch_shapes=[pltpu.VMEM((512, 8192), jnp.float32)]))
    with pallas.on_cpu(), pytest.raises(jax.errors.JaxRuntimeError) as caught:
        jax.jit(call).lower(jax.ShapeDtypeStruct((1,), jnp.int32),
                            jax.ShapeDtypeStruct(shape, jnp.float32))
    message = str(caught.value)
    assert "input window allocation for operator input 1 of 64.00 MiB" in message
    assert "scratch allocation for scratch operand 0 of 16.00 MiB" in message
    assert "This allocation is single buffered." in message


@pytest.mark.parametrize("shape", [(256, 1024), (300, 1000)])
def test_blocks_that_fit_run(shape, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    with pallas.on_cpu():
        got = jax.jit(blocked_copy(shape, (128, 512)))(x)
    assert_close(got, x * 2, "x * 2")


def test_the_call_s_vmem_limit_bounds_its_windows(rng):
    """``vmem_limit_bytes`` below the windows' 128 KiB is refused; one above runs."""
    x = rng.standard_normal((128, 128)).astype(np.float32)

    def call(limit):
        return pl.pallas_call(copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              compiler_params=pltpu.CompilerParams(vmem_limit_bytes=limit))

    with pallas.on_cpu(), pytest.raises(jax.errors.JaxRuntimeError,
                                        match=r"vmem_limit_bytes \(256 bytes\)"):
        jax.jit(call(256))(x)
    with pallas.on_cpu():
        assert_close(jax.jit(call(2**18))(x), x * 2, "x * 2")


MIB = 1 << 20


def window_call(grid, index_map, window_kib=10 * 1024, compiler_params=None, **spec):
    """An (i8) output of 100 MiB written in windows of ``window_kib`` KiB."""
    def body(o_ref):
        o_ref[...] = jnp.full(o_ref.shape, 3, jnp.int8)

    block = pl.BlockSpec((window_kib * 1024,), index_map, **spec)
    return pl.pallas_call(body, grid=grid, out_specs=block, compiler_params=compiler_params,
                          out_shape=jax.ShapeDtypeStruct((100 * MIB,), jnp.int8))


@pytest.mark.parametrize(("grid", "index_map", "spec"), [
    ((4, 1), lambda i, j: (j,), {}),  # the index reads only an axis of one step
    ((1, 4), lambda i, j: (i,), {}),
    ((4, 1), lambda i, j: (j + i,), {"pipeline_mode": pl.Buffered(1)}),
])
def test_a_window_fetched_once_is_single_buffered(grid, index_map, spec):
    with pallas.on_cpu():
        jax.jit(window_call(grid, index_map, **spec)).lower().compile()


def test_a_window_that_changes_is_double_buffered_within_the_scoped_limit():
    with pallas.on_cpu(), pytest.raises(jax.errors.JaxRuntimeError, match="Ran out of memory"):
        jax.jit(window_call((4, 1), lambda i, j: (j + i,))).lower()
    # 2 x 8 MiB is exactly the limit; 2 x (8 MiB + 1 KiB) is over it.
    with pallas.on_cpu():
        jax.jit(window_call((4, 1), lambda i, j: (i,), window_kib=8 * 1024)).lower()
    with pallas.on_cpu(), pytest.raises(jax.errors.JaxRuntimeError, match="16.00 MiB of scoped"):
        jax.jit(window_call((4, 1), lambda i, j: (i,), window_kib=8 * 1024 + 1)).lower()
    # The call's vmem_limit_bytes raises the limit.
    raised = pltpu.CompilerParams(vmem_limit_bytes=32 * MIB)
    with pallas.on_cpu():
        jax.jit(window_call((4, 1), lambda i, j: (j + i,), compiler_params=raised)).lower()


def test_a_fetched_once_window_runs_writing_its_one_block():
    """The (4, 1) grid whose index map reads the one-step axis writes block 0 four times;
    the rest of the output is never written (undefined in Pallas; zeros on the CPU)."""
    with pallas.on_cpu():
        got = np.asarray(jax.jit(window_call((4, 1), lambda i, j: (j,), window_kib=64))())
    assert (got[:64 * 1024] == 3).all()
