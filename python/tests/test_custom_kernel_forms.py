"""The ways `custom_kernel` is written: with a propagate function, with `out_shape=` as
`pl.pallas_call` takes it, and the mistakes (a bare decorator, shapes given twice or where a
function belongs), each refused with a message saying what to write. And `.mosaic()`: the
Mosaic kernel JAX produced, as readable text."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close
from jax.experimental import pallas as pl

from tpukit import DEVICES, pallas


def add_body(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_out_shape_as_pallas_call_takes_it(rng, dtype):
    shape = (16, 256)
    x, y = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    spec = jax.ShapeDtypeStruct(shape, dtype)
    block = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    call = dict(grid=(2, 2), in_specs=[block, block], out_specs=block)
    kernel = pallas.custom_kernel(add_body, out_shape=spec, **call)
    expected = pl.pallas_call(add_body, out_shape=spec, interpret=True, **call)(x, y)
    for device in DEVICES:
        assert_close(kernel(x, y, device=device), np.asarray(expected), device)


def test_out_shape_as_a_decorator_and_a_tuple(rng):
    x = rng.standard_normal((8, 128)).astype(np.float32)
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)

    @pallas.custom_kernel(out_shape=(spec, spec))
    def twice(x_ref, o_ref, p_ref):
        o_ref[...] = x_ref[...] * 2
        p_ref[...] = x_ref[...] + 1

    doubled, plus_one = twice(x)
    assert_close(doubled, x * 2)
    assert_close(plus_one, x + 1)


def test_a_bare_decorator_says_what_to_write():
    @pallas.custom_kernel
    def add(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    x = np.ones((8, 128), np.float32)
    with pytest.raises(TypeError) as e:
        add(x, x)
    message = str(e.value)
    assert "`add` was decorated with a bare `@pallas.custom_kernel`" in message
    assert "@pallas.custom_kernel(lambda x, y: torch.empty_like(x))" in message
    assert "out_shape=jax.ShapeDtypeStruct(shape, dtype)" in message
    with pytest.raises(TypeError, match="bare `@pallas.custom_kernel`"):
        add(x)  # a single array argument is no kernel body either


def test_shapes_given_twice_are_refused():
    spec = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    with pytest.raises(TypeError, match=r"given twice.*custom_kernel\(body, out_shape=\.\.\.\)"):
        pallas.custom_kernel(lambda x, y: spec, add_body, out_shape=spec)


def test_shapes_where_a_function_belongs_are_refused():
    spec = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    with pytest.raises(TypeError, match=r"not a ShapeDtypeStruct.*out_shape=jax\.ShapeDtypeStruct"):
        pallas.custom_kernel(spec, add_body)
    with pytest.raises(TypeError, match=r"out_shape= takes the output placeholders.*not a func"):
        pallas.custom_kernel(add_body, out_shape=lambda x, y: spec)
    with pytest.raises(TypeError, match=r"not a int"):
        pallas.custom_kernel(add_body, out_shape=(spec, 3))
    with pytest.raises(TypeError, match="the kernel body is a function of refs, not a"):
        pallas.custom_kernel(spec, out_shape=spec)
    with pytest.raises(TypeError, match="needs the output shapes"):
        pallas.custom_kernel(grid=(1,))


def test_pallas_interpret_flag_points_at_the_device():
    spec = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    with pytest.raises(TypeError, match="device='interpret'"):
        pallas.custom_kernel(add_body, out_shape=spec, interpret=True)


def test_mosaic_is_readable_text():
    @pallas.custom_kernel(lambda x: jax.ShapeDtypeStruct((x.shape[0], x.shape[0]), x.dtype))
    def gram(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = jnp.dot(x, x.T, preferred_element_type=jnp.float32)

    x = np.ones((128, 256), np.float32)
    text = gram.mosaic(x)
    assert "func.func @gram(" in text
    assert "stable_mosaic.version" in text  # the module's attribute, kept
    assert '"stable_mosaic.' not in text  # no serialized op name left
    assert "tpu.matmul" in text or "vector.contract" in text
    assert "memref<128x256xf32, #tpu.memory_space<vmem>>" in text
    assert "loc(" not in text


def test_mosaic_of_a_jax_function_without_a_pallas_call_is_refused():
    kernel = pallas.custom_jax_kernel(lambda x: x * 2)
    with pytest.raises(TypeError, match="has no Pallas call"):
        kernel.mosaic(np.ones((8, 128), np.float32))


def test_mosaic_of_a_jax_function_with_a_pallas_call():
    def f(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 1),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        )(x)

    text = pallas.custom_jax_kernel(f).mosaic(np.ones((8, 128), np.float32))
    assert "arith.addf" in text and "func.func" in text


def test_jaxpr_is_the_pallas_program():
    spec = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    x = np.ones((8, 128), np.float32)
    text = pallas.custom_kernel(add_body, out_shape=spec).jaxpr(x, x)
    assert "pallas_call[" in text and "= add " in text


def test_print_output_code(capsys):
    spec = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    kernel = pallas.custom_kernel(add_body, out_shape=spec)
    pallas.print_output_code(kernel, *[np.ones((8, 128), np.float32)] * 2)
    err = capsys.readouterr().err
    assert "# kernel `add_body`: the Pallas program (jaxpr)" in err
    assert "pallas_call[" in err and "func.func @add_body(" in err and "arith.addf" in err
