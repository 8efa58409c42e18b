"""A TPU ``pl.pallas_call`` with ``input_output_aliases`` under ``tpukit.pallas.on_cpu()``:
the custom call declares the aliasing, so a donated input's buffer is the output's (no second
buffer, as on a TPU), and the kernel still reads the input as it was before the call, on
random inputs against numpy, f32 and bf16, shapes that do not divide the blocks."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close
from jax.experimental import pallas as pl

import tpukit
from tpukit import pallas

BLOCK = (16, 128)


def read_after_write(x_ref, o_ref):
    """Writes its output block, then reads the aliased input block again: on memory the two
    share, the second read must still see the input."""
    o_ref[...] = x_ref[...] * 2
    o_ref[...] = o_ref[...] + x_ref[...]


def tripled(x):
    spec = pl.BlockSpec(BLOCK, lambda i, j: (i, j))
    return pl.pallas_call(
        read_after_write, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(x.shape[0], BLOCK[0]), pl.cdiv(x.shape[1], BLOCK[1])),
        in_specs=[spec], out_specs=spec, input_output_aliases={0: 0},
    )(x)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("shape", [(64, 256), (37, 200)])
def test_donated_aliased_input_is_the_output_buffer(dtype, device, shape, rng):
    x = rng.standard_normal(shape).astype(dtype)
    with pallas.on_cpu(device):
        f = jax.jit(tripled, donate_argnums=0)
        got = f(jnp.asarray(x))
        memory = f.lower(jax.ShapeDtypeStruct(shape, dtype)).compile().memory_analysis()
    assert_close(got, (x.astype(np.float32) * 3).astype(dtype), "x*2 + x")
    assert memory.alias_size_in_bytes == x.nbytes
    assert memory.temp_size_in_bytes == 0


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_undonated_aliased_input_keeps_its_value(device, rng):
    """Without donation XLA copies the input into the output's buffer first: the caller's
    array is unchanged."""
    x = jnp.asarray(rng.standard_normal((37, 200)).astype(np.float32))
    before = np.array(x)
    with pallas.on_cpu(device):
        got = jax.jit(lambda x: tripled(x) + x)(x)
    assert_close(got, before * 4, "x*2 + x + x")
    np.testing.assert_array_equal(np.asarray(x), before)


def test_aliased_input_also_passed_as_another_operand(rng):
    """The aliased input is also the kernel's second operand: both read the input."""

    def body(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0
        o_ref[...] = o_ref[...] * y_ref[...]

    x = jnp.asarray(rng.standard_normal((32, 256)).astype(np.float32))
    spec = pl.BlockSpec(BLOCK, lambda i, j: (i, j))

    def f(x):
        return pl.pallas_call(
            body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2, 2),
            in_specs=[spec, spec], out_specs=spec, input_output_aliases={0: 0},
        )(x, x)

    expected = (np.asarray(x) + 1.0) * np.asarray(x)
    with pallas.on_cpu():
        got = jax.jit(f, donate_argnums=0)(x)
    assert_close(got, expected, "(x + 1) * x")


def test_a_pinned_buffer_is_refused_by_name():
    """``pin``/``unpin`` (a TPU memory placement) has no implementation in XLA's CPU runtime:
    a clear refusal, not XLA's missing-custom-call error at run time."""
    from jax._src.state.primitives import pin, unpin

    def f(x):
        p = pin(x)
        p = pl.pallas_call(
            lambda *_: None, out_shape=p, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY), input_output_aliases={0: 0},
        )(p)
        return unpin(p)

    with pallas.on_cpu(), pytest.raises(tpukit.UnsupportedError, match="pinned buffer"):
        jax.jit(f)(jnp.arange(3.0))


def test_an_unchecked_read_outside_the_array_is_refused_saying_why():
    """``disable_bounds_checks=True`` lets Mosaic compile a read past the array (its values
    undefined on a TPU); tpukit refuses it and says so."""
    from jax.experimental.pallas import tpu as pltpu

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(0, 16), pl.ds(0, 256)]

    call = pl.pallas_call(
        body, out_shape=jax.ShapeDtypeStruct((16, 256), jnp.float32),
        compiler_params=pltpu.CompilerParams(disable_bounds_checks=True),
    )
    with pallas.on_cpu(), pytest.raises(tpukit.UnsupportedError, match="disable_bounds_checks"):
        jax.jit(call)(jnp.zeros((8, 128), jnp.float32))
