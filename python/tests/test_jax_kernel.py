"""custom_jax_kernel: JAX functions that call pl.pallas_call, with static arguments, and
input/output aliasing; results come back as the caller's kind of array."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import tpukit
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


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_aliased_output_starts_as_its_input(device):
    x = np.full((8, 128), 1.5, np.float32)
    acc = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    np.testing.assert_array_equal(accumulate(x, acc, device=device), acc + x)


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_jax_ops_around_a_pallas_call(device):
    def f(x, m):
        y = pl.pallas_call(double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(
            x.astype(jnp.float32) + 1
        )
        return {"masked": jnp.where(m, y, 0.0).astype(jnp.bfloat16), "y": y, "x": x}

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 128)).astype(jnp.bfloat16)
    m = rng.random((8, 128)) > 0.5
    kernel = pallas.custom_jax_kernel(f)
    got = kernel(x, m, device=device)
    y = (x.astype(np.float32) + 1) * 2
    want = {"masked": np.where(m, y, 0.0).astype(jnp.bfloat16), "y": y, "x": x}
    assert set(got) == {"masked", "y", "x"}
    for key in got:
        assert got[key].dtype == want[key].dtype, key
        np.testing.assert_array_equal(
            got[key].astype(np.float32), np.asarray(want[key]).astype(np.float32), err_msg=key
        )
    assert "tpu_custom_call" in kernel.lower(x, m)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_a_sharding_constraint_around_a_pallas_call_is_a_hint(device):
    # `with_sharding_constraint` (`sdy.sharding_constraint` in the exported program) places
    # data across devices; on one device it changes nothing. The torch path imports the
    # function's StableHLO, constraint included.
    torch = pytest.importorskip("torch")
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = jax.make_mesh((1,), ("rows",), axis_types=(jax.sharding.AxisType.Auto,))

    def f(x):
        x = jax.lax.with_sharding_constraint(x + 1, NamedSharding(mesh, PartitionSpec("rows")))
        return pl.pallas_call(double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    x = np.random.default_rng(0).standard_normal((16, 128)).astype(np.float32)
    kernel = pallas.custom_jax_kernel(f)
    assert "sdy.sharding_constraint" in kernel.lower(x)
    got = kernel(torch.from_numpy(x), device=device)
    np.testing.assert_array_equal(got.numpy(), (x + 1) * 2)


def test_bool_operands_of_a_pallas_call():
    def select_kernel(m_ref, x_ref, o_ref):
        o_ref[...] = jnp.where(m_ref[...], x_ref[...], -x_ref[...])

    @pallas.custom_jax_kernel
    def select(m, x):
        return pl.pallas_call(select_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(
            m, x
        )

    m = np.arange(8 * 128).reshape(8, 128) % 3 == 0
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    for device in tpukit.DEVICES:
        np.testing.assert_array_equal(select(m, x, device=device), np.where(m, x, -x))


def test_aliased_pallas_call_after_a_prologue():
    @pallas.custom_jax_kernel
    def accumulate_scaled(x, acc):
        return pl.pallas_call(
            accumulate_kernel,
            out_shape=jax.ShapeDtypeStruct(acc.shape, acc.dtype),
            input_output_aliases={1: 0},
        )(x * 3.0, acc + 1.0)

    x = np.full((8, 128), 1.5, np.float32)
    acc = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    np.testing.assert_array_equal(accumulate_scaled(x, acc), acc + 1.0 + x * 3.0)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_two_pallas_calls_with_jax_ops_between(device):
    """The function is one XLA program with a custom call per Pallas call, on either device."""

    @pallas.custom_jax_kernel
    def twice(x):
        call = pl.pallas_call(double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))
        return call(call(x) + 1)

    x = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
    got = twice(x, device=device)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, (x * 2 + 1) * 2)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_grad_and_vmap_through_a_function_with_a_pallas_call(device):
    """jax.grad is JAX's VJP of the whole function (here the derivative flows through the jnp
    ops; the Pallas call's operand is held constant), with an integer operand and an integer
    result; vmap batches the Pallas call (JAX's rule: a grid axis)."""

    @pallas.custom_jax_kernel
    def f(x, idx):
        call = pl.pallas_call(double_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))
        y = call(jax.lax.stop_gradient(x))
        return jnp.sum(jnp.sin(x[idx])) + jnp.sum(y), jnp.argmax(y)

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((8, 128)).astype(np.float32))
    idx = jnp.array([1, 3, 5])
    got = jax.jit(jax.grad(lambda x: f(x, idx, device=device)[0]))(x)
    want = jax.grad(lambda x: jnp.sum(jnp.sin(x[idx])))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)
    xs = jnp.stack([x, -x])
    total, where = jax.vmap(lambda x: f(x, idx, device=device))(xs)
    np.testing.assert_array_equal(np.asarray(where), [jnp.argmax(x * 2), jnp.argmax(-x * 2)])
    np.testing.assert_allclose(
        np.asarray(total), [float(jnp.sum(jnp.sin(v[idx])) + jnp.sum(v * 2)) for v in xs],
        rtol=1e-5)
