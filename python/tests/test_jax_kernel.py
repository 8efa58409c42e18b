"""custom_jax_kernel: JAX functions that call pl.pallas_call, with static arguments, and
input/output aliasing; results come back as the caller's kind of array."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from tpukit import pallas


def scale_kernel(x_ref, o_ref, *, factor):
    o_ref[...] = x_ref[...] * factor


@pallas.custom_jax_kernel(static_argnums=(1,))
def scale(x, factor):
    return pl.pallas_call(
        functools.partial(scale_kernel, factor=factor),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def test_static_arguments_are_part_of_the_cache_key():
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    np.testing.assert_array_equal(scale(x, 2.0), x * 2.0)
    np.testing.assert_array_equal(scale(x, 3.0), x * 3.0)
    np.testing.assert_array_equal(scale(x, 2.0, device="interpret"), x * 2.0)
    assert "tpu_custom_call" in scale.lower(x, 2.0)


def test_jax_arrays_in_jax_arrays_out():
    x = jnp.ones((8, 128), jnp.float32)
    out = scale(x, 4.0)
    assert isinstance(out, jax.Array)
    np.testing.assert_array_equal(np.asarray(out), np.full((8, 128), 4.0, np.float32))


def accumulate_kernel(x_ref, acc_ref, o_ref):
    o_ref[...] += x_ref[...]


@pallas.custom_jax_kernel
def accumulate(x, acc):
    return pl.pallas_call(
        accumulate_kernel,
        out_shape=jax.ShapeDtypeStruct(acc.shape, acc.dtype),
        input_output_aliases={1: 0},
    )(x, acc)


@pytest.mark.parametrize("device", ["cpu", "interpret"])
def test_aliased_output_starts_as_its_input(device):
    x = np.full((8, 128), 1.5, np.float32)
    acc = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    np.testing.assert_array_equal(accumulate(x, acc, device=device), acc + x)
