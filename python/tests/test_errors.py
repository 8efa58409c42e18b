"""Failures are clear Python exceptions: unsupported ops name the op and the kernel's line,
bad arguments name the argument; nothing unsupported ever runs and returns a wrong result."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl

import tpukit
from tpukit import pallas


def same_shape(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def test_unsupported_op_names_op_and_line():
    @pallas.custom_kernel(same_shape, grid=(1,))
    def count_bits(x_ref, o_ref):
        # a population count (math.ctpop) has no kernel-IR form yet
        o_ref[...] = lax.population_count(x_ref[...])  # named line

    with pytest.raises(tpukit.UnsupportedError) as e:
        count_bits(np.zeros((8, 128), np.int32))
    message = str(e.value)
    assert "math.ctpop" in message, message
    line = next(i for i, t in enumerate(open(__file__), 1) if "lax.population_count(" in t)
    assert f"test_errors.py:{line}:" in message, message


def test_while_loop_outside_a_kernel_is_refused_by_name():
    # lax.while_loop inside a Pallas kernel is imported (scf.while); in a plain JAX function
    # it is a stablehlo.while: XLA runs it on `cpu` (the function is one XLA program), the
    # importer (the interpreter's path) refuses it by name
    def halve_until_small(x):
        return jax.lax.while_loop(lambda v: jnp.max(v) > 1.0, lambda v: v * 0.5, x)

    x = np.random.default_rng(0).uniform(1.0, 100.0, (8, 128)).astype(np.float32)
    kernel = pallas.custom_jax_kernel(halve_until_small)
    np.testing.assert_array_equal(kernel(x, device="cpu"), jax.jit(halve_until_small)(x))
    with pytest.raises(tpukit.UnsupportedError, match="stablehlo.while"):
        kernel(x, device="interpret")


def test_non_array_arguments():
    @pallas.custom_kernel(same_shape)
    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    with pytest.raises(TypeError, match="argument 0: expected an array.*got list"):
        copy([[1.0] * 128] * 8)
    with pytest.raises(tpukit.DTypeError, match="unsupported dtype float64"):
        copy(np.zeros((8, 128)))
    with pytest.raises(ValueError, match="unknown device"):
        copy(np.zeros((8, 128), np.float32), device="gpu")


def test_wrong_shapes():
    @pallas.custom_kernel(
        same_shape, grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    # A rank-3 array does not fit the rank-2 block specs: JAX refuses it while lowering.
    with pytest.raises(ValueError, match="[Bb]lock shape|rank"):
        copy(np.zeros((2, 8, 128), np.float32))
    # The kernel is per shape: a launch with arrays of another shape than it was imported for
    # is refused by the runtime.
    kernel = copy.kernel(np.zeros((16, 128), np.float32))
    with pytest.raises(tpukit.ShapeError, match="shape"):
        tpukit.launch(kernel, np.zeros((24, 128), np.float32))
