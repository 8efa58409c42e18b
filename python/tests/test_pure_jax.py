"""custom_jax_kernel on pure JAX functions (no pl.pallas_call), against ``jax.jit`` of the same
function on JAX's CPU backend: on ``cpu`` the function is one XLA program; on ``interpret``
its StableHLO is imported as one kernel step over whole arrays (the importer's tests)."""

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import tpukit
from tpukit import pallas

BF16 = ml_dtypes.bfloat16
# XLA keeps bf16 intermediates in f32 (it may skip rounding between fused ops); tpukit rounds
# after every op, as the kernel IR specifies. So bf16 results agree to a few bf16 ulps.
TOL = {np.dtype(np.float32): 2e-5, np.dtype(BF16): 6e-2}


def check(fn, *args, tol=None, **kwargs):
    """Runs ``fn`` through tpukit (cpu and interpret) and through ``jax.jit``; asserts they
    agree in structure, shape, dtype and values. Returns the wrapped kernel."""
    kernel = pallas.custom_jax_kernel(fn, **kwargs)
    static = kwargs.get("static_argnums", ())
    expected = jax.jit(fn, static_argnums=static)(*args)
    for device in tpukit.DEVICES:
        got = kernel(*args, device=device)
        got_leaves, got_tree = jax.tree_util.tree_flatten(got)
        want_leaves, want_tree = jax.tree_util.tree_flatten(expected)
        assert got_tree == want_tree, f"{device}: result structure {got_tree} != {want_tree}"
        for i, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
            what = f"{getattr(fn, '__name__', fn)} on {device}, result {i}"
            assert isinstance(g, type(args[0])), f"{what}: {type(g)} for {type(args[0])} in"
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
            assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} != {w.dtype}"
            if g.dtype.kind == "f" or g.dtype == np.dtype(BF16):
                t = tol if tol is not None else TOL[g.dtype]
                np.testing.assert_allclose(
                    g.astype(np.float32), w.astype(np.float32), rtol=t, atol=t, err_msg=what
                )
            else:
                np.testing.assert_array_equal(g, w, err_msg=what)
    return kernel


def randn(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def test_the_seed_example():
    @pallas.custom_jax_kernel
    def add_vectors(x, y):
        return jax.numpy.add(x, y)

    x = np.array([0.1, 0.2, 0.3], np.float32)
    y = np.array([0.4, 0.5, 0.6], np.float32)
    np.testing.assert_allclose(add_vectors(x, y), x + y, rtol=1e-6)
    np.testing.assert_allclose(add_vectors(x, y, device="interpret"), x + y, rtol=1e-6)
    kernel = str(add_vectors.kernel(x, y))
    assert "grid()" in kernel and " add " in kernel, kernel  # one step, the add imported
    assert "tpu_custom_call" not in add_vectors.lower(x, y)


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
def test_elementwise_chain(rng, dtype):
    def chain(x, y):
        a = jnp.maximum(x, y) - jnp.minimum(x, -y) * 0.5
        b = jnp.exp(-jnp.abs(x)) + jnp.log(jnp.abs(y) + 1.0) - jnp.tanh(a)
        c = jax.nn.sigmoid(b) / (jnp.sqrt(jnp.abs(a) + 2.0) + jax.lax.rsqrt(x * x + 1.0))
        return -c + jnp.power(jnp.abs(x) + 0.5, 1.5)

    x, y = randn(rng, (16, 128), dtype), randn(rng, (16, 128), dtype)
    check(chain, x, y)


def test_more_elementwise_ops(rng):
    def ops(x, y):
        return (
            jnp.floor(x * 3.0), jnp.ceil(x * 3.0), jnp.sin(x), jnp.cos(y), jnp.log1p(jnp.abs(x)),
            jnp.sign(x), jnp.clip(x, -0.5, 0.5), jnp.where(x > y, x, y * 2.0),
            jnp.where((x >= 0) & (y < 0), 1.0, 0.0), x % 0.7, jax.lax.erf(x),
            (x > 0).astype(jnp.int32) + (y <= 0.1).astype(jnp.int32), jnp.logical_not(x < y),
        )

    x, y = randn(rng, (8, 256)), randn(rng, (8, 256))
    x[0, :4] = [0.0, -0.0, 1.0, -1.0]
    check(ops, x, y)


def test_integers(rng):
    def ints(i, j):
        return (i * 3 - j) // 2, jnp.maximum(i, j), i % 5, (i ^ j) | 1, i.astype(jnp.float32)

    i = rng.integers(-100, 100, (8, 128)).astype(np.int32)
    j = rng.integers(1, 50, (8, 128)).astype(np.int32)
    check(ints, i, j)


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
def test_softmax_written_with_jnp(rng, dtype):
    def softmax(x):
        m = jnp.max(x, axis=-1, keepdims=True)
        e = jnp.exp(x - m)
        return e / jnp.sum(e, axis=-1, keepdims=True)

    x = randn(rng, (32, 128), dtype) * 3
    check(softmax, x)
    check(jax.nn.softmax, x)


def test_layer_norm(rng):
    def layer_norm(x, g, b):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b

    check(layer_norm, randn(rng, (16, 256)), randn(rng, (256,)), randn(rng, (256,)))


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("approximate", [True, False], ids=["tanh", "erf"])
def test_matmul_bias_gelu(rng, dtype, approximate):
    def mlp(x, w, b):
        return jax.nn.gelu(x @ w + b, approximate=approximate)

    x, w, b = randn(rng, (64, 96), dtype), randn(rng, (96, 48), dtype), randn(rng, (48,), dtype)
    tol = 1e-4 if dtype == np.float32 else None
    kernel = check(mlp, x, w, b, tol=tol)
    assert " dot " in str(kernel.kernel(x, w, b))


def test_dot_general_layouts(rng):
    a, b = randn(rng, (4, 16, 32)), randn(rng, (4, 32, 8))
    c, d = randn(rng, (16, 4, 32)), randn(rng, (8, 32))
    e, f = randn(rng, (6, 5, 7)), randn(rng, (5, 7, 3))

    def dots(a, b, c, d, e, f):
        return (
            a @ b,  # batched
            jnp.einsum("ibk,bkn->bin", c, b),  # batch dimension not leading
            jnp.einsum("mk,nk->mn", a[0], d),  # x @ w.T
            jnp.einsum("ijk,jkl->il", e, f),  # two contracting dimensions
            jnp.einsum("bmk,bnk->bmn", a, a),  # batched, transposed right
            jnp.dot(d, jnp.ones((32,), jnp.float32)),  # matrix-vector
        )

    check(dots, a, b, c, d, e, f, tol=1e-4)


def test_reductions_over_any_dims(rng):
    def reductions(x):
        return {
            "sum0": jnp.sum(x, axis=0),
            "max02": jnp.max(x, axis=(0, 2)),
            "min1": jnp.min(x, axis=1, keepdims=True),
            "mean": jnp.mean(x, axis=(1, 2)),
            "all": jnp.sum(x),
            "imax": jnp.max(x.astype(jnp.int32), axis=0),
        }

    check(reductions, randn(rng, (4, 24, 128)) * 10)


def test_reduction_init_value_is_folded_in(rng):
    def from_init(x):
        s = jax.lax.reduce(x, np.float32(2.5), jax.lax.add, (0,))
        m = jax.lax.reduce(x, np.float32(0.25), jax.lax.max, (1,))
        return s, m

    check(from_init, randn(rng, (8, 128)))


def test_shapes_broadcast_reshape_transpose_iota(rng):
    def shapes(x, v):
        y = x.reshape(4, 2, 128).transpose(2, 0, 1)  # (128, 4, 2)
        z = y + jnp.arange(2, dtype=jnp.float32) + v[:, None, None]
        row = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 0)
        col = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1)
        tri = jnp.where(row <= col, x, 0.0)
        return z, tri, jnp.broadcast_to(v[0], (3, 5)), jnp.expand_dims(v, 0) * 2

    check(shapes, randn(rng, (8, 128)), randn(rng, (128,)))


def test_slices_concatenation_and_padding(rng):
    def pieces(x, y):
        left, right = x[:, :64], x[:, 64:]
        rotated = jnp.concatenate([right, left], axis=1)
        halves = jnp.concatenate([x[:4], y[4:]], axis=0)
        padded = jnp.pad(x[1:3, 5:9], ((1, 2), (0, 3)), constant_values=-1.0)
        return rotated + y, halves, padded, x[0], x[:, 7]

    check(pieces, randn(rng, (8, 128)), randn(rng, (8, 128)))


def test_nested_jit_calls_are_inlined(rng):
    @jax.jit
    def inner(x):
        return jnp.tanh(x) * 2

    def outer(x):
        return inner(x) + inner(x * 3)

    check(outer, randn(rng, (8, 128)), tol=1e-5)


def test_static_args_and_jax_arrays(rng):
    def scale(x, k):
        return x * k

    kernel = check(scale, jnp.asarray(randn(rng, (8, 16))), 3.0, static_argnums=(1,))
    x = jnp.ones((8, 16), jnp.float32)
    np.testing.assert_array_equal(np.asarray(kernel(x, 4.0)), np.full((8, 16), 4.0, np.float32))


def test_unsupported_op_is_named_with_its_line():
    @pallas.custom_jax_kernel
    def cumulative(x):
        return jnp.sort(x, axis=-1)  # the error names this line

    x = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
    np.testing.assert_array_equal(cumulative(x), np.sort(x, axis=-1))  # cpu: XLA runs it
    with pytest.raises(tpukit.UnsupportedError) as e:
        cumulative(x, device="interpret")
    message = str(e.value)
    assert "stablehlo.sort" in message, message
    line = next(i for i, t in enumerate(open(__file__), 1) if "jnp.sort(x" in t)
    assert f"test_pure_jax.py:{line}:" in message, message


@pytest.mark.parametrize(
    "fn, what",
    [
        (lambda x: x[:, ::2], "strided slice"),
        (lambda x: jnp.argmax(x, axis=1), "argmax"),
        (lambda x: jnp.prod(x, axis=1), "stablehlo.multiply"),
        (lambda x: jnp.flip(x, axis=1), "stablehlo.reverse"),
        (lambda x: jnp.expm1(x), "stablehlo.exponential_minus_one"),
    ],
    ids=["strided-slice", "argmax", "prod", "reverse", "expm1"],
)
def test_unsupported_functions_raise(fn, what):
    """The importer (the interpreter's path) refuses them by name; on `cpu` XLA runs them."""
    kernel = pallas.custom_jax_kernel(fn)
    x = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
    np.testing.assert_allclose(kernel(x), jax.jit(fn)(x), rtol=1e-6)
    with pytest.raises(tpukit.UnsupportedError, match=what):
        kernel(x, device="interpret")


def test_result_kinds_follow_the_first_argument(rng):
    kernel = pallas.custom_jax_kernel(lambda x, y: (x + y, x * y))
    x = randn(rng, (4, 8))
    out = kernel(x, x)
    assert isinstance(out, tuple) and all(isinstance(o, np.ndarray) for o in out)
    out = kernel(jnp.asarray(x), jnp.asarray(x))
    assert all(isinstance(o, jax.Array) for o in out)
    np.testing.assert_allclose(np.asarray(out[1]), x * x, rtol=1e-6)


def test_rank_zero_result(rng):
    total = pallas.custom_jax_kernel(functools.partial(jnp.sum, axis=None))
    x = randn(rng, (16, 16))
    got = total(x)
    assert got.shape == ()
    np.testing.assert_allclose(got, x.sum(dtype=np.float32), rtol=1e-5)


def test_reduce_precision_to_bf16_is_exact(rng):
    # lax.reduce_precision(f32, 8, 7): bf16's rounding (ties to even) kept in f32; normals,
    # halfway cases, overflow and infinities (not subnormals: XLA's CPU backend flushes them
    # to zero, the kernel IR keeps them)
    x = np.concatenate([
        rng.standard_normal(1000).astype(np.float32) * 1e3,
        (rng.standard_normal(200) * 1e-30).astype(np.float32),
        np.array([1 + 2**-8, 1 + 3 * 2**-8, 3.4e38, -np.inf, 0.0], np.float32),
    ])

    def f(x):
        return jax.lax.reduce_precision(x, exponent_bits=8, mantissa_bits=7) * 2

    check(f, x, tol=0)


def test_reduce_precision_to_other_formats_is_refused_by_name():
    def f(x):
        return jax.lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10)

    x = np.random.default_rng(0).standard_normal(8).astype(np.float32)
    kernel = pallas.custom_jax_kernel(f)
    np.testing.assert_array_equal(kernel(x), jax.jit(f)(x))  # cpu: XLA runs it
    with pytest.raises(tpukit.UnsupportedError, match="reduce_precision"):
        kernel(x, device="interpret")
