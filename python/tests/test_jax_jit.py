"""tpukit kernels inside traced JAX programs: ``jax.jit``, ``jax.vmap``, ``jax.grad`` (with a
backward), ``lax.scan``. Traced, a kernel is an XLA custom call (``@tpukit_kernel``) that
tpukit's FFI handler runs; results are checked against pure-JAX twins on random inputs, f32
and bf16, with shapes that do not divide the blocks."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import _native, pallas

BF16 = ml_dtypes.bfloat16
DTYPES = [np.float32, BF16]
BLOCK = (16, 128)


def tiled(shape):
    """A grid of BLOCK-sized tiles covering ``shape`` (the last tiles partial when the shape
    does not divide), and its BlockSpec."""
    grid = tuple(pl.cdiv(n, b) for n, b in zip(shape, BLOCK, strict=True))
    return grid, pl.BlockSpec(BLOCK, lambda i, j: (i, j))


def same_shape(x, *_):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def fused(x, y):
    """The pure-JAX twin of ``fused_kernel``'s body, computed in f32."""
    xf, yf = x.astype(jnp.float32), y.astype(jnp.float32)
    return (xf * yf + jnp.tanh(xf)).astype(x.dtype)


def fused_body(x_ref, y_ref, o_ref):
    o_ref[...] = fused(x_ref[...], y_ref[...])


def fused_kernel(shape, **kwargs):
    grid, spec = tiled(shape)
    return pallas.custom_kernel(
        same_shape, fused_body, grid=grid, in_specs=[spec, spec], out_specs=spec, **kwargs
    )


def fused_backward(ctx, g):
    """The gradients of ``fused``, by a second tpukit kernel."""
    x, y = ctx.inputs
    grid, spec = tiled(x.shape)

    def body(x_ref, y_ref, g_ref, dx_ref, dy_ref):
        xf = x_ref[...].astype(jnp.float32)
        yf = y_ref[...].astype(jnp.float32)
        gf = g_ref[...].astype(jnp.float32)
        t = jnp.tanh(xf)
        dx_ref[...] = (gf * (yf + 1.0 - t * t)).astype(dx_ref.dtype)
        dy_ref[...] = (gf * xf).astype(dy_ref.dtype)

    grads = pallas.custom_kernel(
        lambda x, y, g: (same_shape(x), same_shape(y)),
        body, grid=grid, in_specs=[spec] * 3, out_specs=(spec, spec),
    )
    return grads(x, y, g)


def randn(rng, shape, dtype):
    return jnp.asarray(rng.standard_normal(shape).astype(dtype))


SHAPES = [(40, 300), (16, 128)]  # the first divides neither block extent


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=["40x300", "16x128"])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_jit(device, shape, dtype, rng):
    kernel = fused_kernel(shape, device=device)
    x, y = randn(rng, shape, dtype), randn(rng, shape, dtype)

    @jax.jit
    def program(x, y):
        return kernel(x * 2.0, y) - 1.0  # XLA ops around the custom call

    got = program(x, y)
    assert isinstance(got, jax.Array)
    assert_close(got, fused(x * 2.0, y) - 1.0, "jit vs jnp")
    text = program.lower(x, y).as_text()
    assert "stablehlo.custom_call @tpukit_kernel" in text


def test_jit_eager_and_traced_agree(rng):
    shape = (40, 300)
    kernel = fused_kernel(shape)
    x, y = randn(rng, shape, np.float32), randn(rng, shape, np.float32)
    np.testing.assert_array_equal(jax.jit(kernel)(x, y), kernel(x, y))


@pytest.mark.parametrize("dtype", DTYPES)
def test_vmap_matches_a_python_loop(dtype, rng):
    shape = (40, 300)
    kernel = fused_kernel(shape)
    xs, ys = randn(rng, (3, *shape), dtype), randn(rng, (3, *shape), dtype)
    loop = jnp.stack([kernel(xs[i], ys[i]) for i in range(3)])
    assert_close(jax.vmap(kernel)(xs, ys), loop, "vmap vs loop")
    assert_close(jax.jit(jax.vmap(kernel))(xs, ys), loop, "jit(vmap) vs loop")
    # One operand batched, the other shared.
    shared = jnp.stack([kernel(xs[i], ys[0]) for i in range(3)])
    assert_close(jax.vmap(kernel, in_axes=(0, None))(xs, ys[0]), shared, "vmap, in_axes")


@pytest.mark.parametrize("dtype", DTYPES)
def test_grad_with_a_backward_matches_jax_grad_of_the_twin(dtype, rng):
    shape = (40, 300)
    kernel = fused_kernel(shape, backward=fused_backward)
    x, y = randn(rng, shape, dtype), randn(rng, shape, dtype)

    def loss(f):
        return lambda x, y: jnp.sum(jnp.sin(f(x, y).astype(jnp.float32)))

    want = jax.grad(loss(fused), argnums=(0, 1))(x, y)
    for transform in (lambda f: f, jax.jit):
        got = transform(jax.grad(loss(kernel), argnums=(0, 1)))(x, y)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"grad {i}")
    # Forward values are the kernel's too.
    assert_close(jax.jit(kernel)(x, y), fused(x, y), "forward")


def test_grad_without_a_backward_is_refused(rng):
    kernel = fused_kernel((16, 128))
    x = randn(rng, (16, 128), np.float32)
    with pytest.raises(ValueError, match="`tpukit_kernel` cannot be differentiated"):
        jax.grad(lambda x: jnp.sum(kernel(x, x)))(x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_kernel_inside_scan(dtype, rng):
    shape = (40, 300)
    kernel = fused_kernel(shape)
    x0 = randn(rng, shape, dtype) * 0.5
    ys = randn(rng, (4, *shape), dtype) * 0.5

    def step(f):
        def body(carry, y):
            out = f(carry, y)
            return out, jnp.sum(out.astype(jnp.float32))

        return body

    got_carry, got_sums = jax.jit(lambda x, ys: jax.lax.scan(step(kernel), x, ys))(x0, ys)
    want_carry, want_sums = jax.lax.scan(step(fused), x0, ys)
    assert_close(got_carry, want_carry, "scan carry")
    np.testing.assert_allclose(got_sums, want_sums, rtol=2e-2 if dtype == BF16 else 1e-4)


def test_scalar_prefetch_and_several_outputs_under_jit(rng):
    """A prefetched index table picks the input blocks; two outputs of different dtypes."""

    def body(idx_ref, x_ref, o_ref, s_ref):
        o_ref[...] = x_ref[...] * 2.0
        s_ref[...] = jnp.sum(x_ref[...], axis=1, keepdims=True).astype(jnp.bfloat16)

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
        out_specs=[pl.BlockSpec((8, 128), lambda i, idx: (i, 0)),
                   pl.BlockSpec((8, 1), lambda i, idx: (i, 0))],
    )
    kernel = pallas.custom_kernel(
        lambda idx, x: (jax.ShapeDtypeStruct((32, 128), jnp.float32),
                        jax.ShapeDtypeStruct((32, 1), jnp.bfloat16)),
        body, grid_spec=grid_spec,
    )
    idx = jnp.asarray([3, 0, 2, 2], jnp.int32)
    x = randn(rng, (32, 128), np.float32)
    out, sums = jax.jit(kernel)(idx, x)
    picked = x.reshape(4, 8, 128)[idx].reshape(32, 128)
    assert_close(out, picked * 2.0, "output 0")
    assert_close(sums, picked.sum(1, keepdims=True).astype(jnp.bfloat16), "output 1")


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_unwritten_output_rows_are_the_aliased_input_or_zeros_under_jit(device, rng):
    """The kernel writes only the first 8 rows: the others keep the aliased input's values
    (input_output_aliases), or are zeros without aliasing, as in an eager launch."""

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def kernel(**aliases):
        return pallas.custom_kernel(
            same_shape, body, grid=(1,), device=device,
            in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)), **aliases,
        )

    x = randn(rng, (24, 128), np.float32)
    aliased, fresh = kernel(input_output_aliases={0: 0}), kernel()
    got = jax.jit(lambda x: aliased(x * 1.0))(x)
    assert_close(got, x.at[:8].add(1.0), "aliased")
    np.testing.assert_array_equal(got, aliased(np.asarray(x)))
    got = jax.jit(lambda x: fresh(x * 1.0))(x)
    assert_close(got, jnp.zeros_like(x).at[:8].set(x[:8] + 1.0), "not aliased")


@pytest.mark.parametrize("dtype", DTYPES)
def test_custom_jax_kernel_under_jit_and_vmap(dtype, rng):
    """A pure JAX function (one kernel step over whole arrays) and a Pallas call with JAX ops
    around it (prologue and epilogue kernels): each kernel one custom call."""

    @pallas.custom_jax_kernel
    def softmax(x):
        x = x.astype(jnp.float32)
        e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
        return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(dtype)

    def plus_one(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    @pallas.custom_jax_kernel
    def around(x):
        y = pl.pallas_call(plus_one, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(
            jnp.tanh(x.astype(jnp.float32)))
        return {"y": (y * 3.0).astype(dtype)}

    x = randn(rng, (24, 256), dtype)
    want = jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(dtype)
    assert_close(jax.jit(softmax)(x), want, "softmax under jit")
    xs = randn(rng, (2, 24, 256), dtype)
    assert_close(jax.vmap(softmax)(xs), jnp.stack([softmax(xs[0]), softmax(xs[1])]), "vmap")
    got = jax.jit(around)(x)["y"]
    assert_close(got, ((jnp.tanh(x.astype(jnp.float32)) + 1.0) * 3.0).astype(dtype), "around")


# --- errors ----------------------------------------------------------------------------------


def gather_rows():
    """Rows of a 32-row table picked by prefetched block indices (8-row blocks)."""

    def body(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(2,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0)),
    )
    return pallas.custom_kernel(
        lambda idx, x: jax.ShapeDtypeStruct((16, 128), x.dtype), body, grid_spec=grid_spec
    )


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_an_error_in_the_handler_is_an_exception_with_tpukit_s_message(device, rng):
    kernel = gather_rows()
    x = randn(rng, (32, 128), np.float32)
    run = jax.jit(lambda idx, x: kernel(idx, x, device=device))
    good = run(jnp.asarray([3, 1], jnp.int32), x)
    assert_close(good, jnp.concatenate([x[24:], x[8:16]]), "in bounds")
    with pytest.raises(Exception, match=r"tpukit bounds error: .*index map of input") as e:
        run(jnp.asarray([0, 4], jnp.int32), x).block_until_ready()
    assert "grid point [1]" in str(e.value), str(e.value)
    # The handler is still usable afterwards.
    assert_close(run(jnp.asarray([3, 1], jnp.int32), x), good, "after the error")


def test_a_dtype_the_kernel_does_not_take_is_an_exception(rng):
    kernel = fused_kernel((16, 128))
    x = randn(rng, (16, 128), np.float32)
    compiled = kernel.kernel(np.asarray(x), np.asarray(x))
    from tpukit import _custom_call

    with pytest.raises(Exception, match="tpukit dtype error: .*must be f32, got a i32"):
        jax.jit(lambda a: _custom_call.call(compiled, [a, a], "cpu"))(
            jnp.zeros((16, 128), jnp.int32)
        )[0].block_until_ready()


def test_a_panic_in_the_handler_is_an_internal_error_not_a_crash(rng, monkeypatch):
    monkeypatch.setenv("TPUKIT_TEST_HOOKS", "1")
    kernel = fused_kernel((16, 128))
    x = randn(rng, (16, 128), np.float32)
    run = jax.jit(kernel)
    want = run(x, x)  # traced, compiled and run once: the next call runs only the handler
    _native._arm_test_panic()
    with pytest.raises(Exception, match="tpukit internal error: a panic the tests asked for"):
        run(x, x).block_until_ready()
    np.testing.assert_array_equal(run(x, x), want)


def test_eager_calls_on_jax_arrays_raise_tpukit_errors(rng):
    """An eager call on JAX arrays runs as a jitted custom call; its failures are still raised
    as tpukit's exception classes, with the message the numpy path gives."""
    kernel = gather_rows()
    x = rng.standard_normal((32, 128)).astype(np.float32)
    bad = np.asarray([0, 4], np.int32)
    with pytest.raises(tpukit.BoundsError) as eager_numpy:
        kernel(bad, x)
    with pytest.raises(tpukit.BoundsError) as eager_jax:
        kernel(jnp.asarray(bad), jnp.asarray(x))
    assert str(eager_jax.value) == str(eager_numpy.value)
    got = kernel(jnp.asarray([3, 1], jnp.int32), jnp.asarray(x))
    assert isinstance(got, jax.Array)
    np.testing.assert_array_equal(got, np.concatenate([x[24:], x[8:16]]))


def test_every_dtype_crosses_the_custom_call(rng):
    """i8, i32, f16 and bool operands and results (bool through JAX's conversions around the
    call): the handler maps each XLA dtype to tpukit's."""

    def body(a_ref, b_ref, h_ref, m_ref, o_ref, i_ref, k_ref):
        a = a_ref[...].astype(jnp.float32)
        b = b_ref[...].astype(jnp.float32)
        o_ref[...] = jnp.where(m_ref[...], a * b, h_ref[...].astype(jnp.float32))
        i_ref[...] = a_ref[...].astype(jnp.int32) + b_ref[...]
        k_ref[...] = a_ref[...] > 0

    def shapes(a, b, h, m):
        return (jax.ShapeDtypeStruct(a.shape, jnp.float32),
                jax.ShapeDtypeStruct(a.shape, jnp.int32),
                jax.ShapeDtypeStruct(a.shape, jnp.bool_))

    kernel = pallas.custom_kernel(shapes, body)
    a = jnp.asarray(rng.integers(-100, 100, (8, 128)), jnp.int8)
    b = jnp.asarray(rng.integers(-1000, 1000, (8, 128)), jnp.int32)
    h = jnp.asarray(rng.standard_normal((8, 128)), jnp.float16)
    m = jnp.asarray(rng.random((8, 128)) > 0.5)
    out, ints, positive = jax.jit(kernel)(a, b, h, m)
    want = jnp.where(m, a.astype(jnp.float32) * b, h.astype(jnp.float32))
    assert_close(out, want, "f32 result")
    np.testing.assert_array_equal(ints, a.astype(jnp.int32) + b)
    np.testing.assert_array_equal(positive, a > 0)


def test_concurrent_jitted_calls_agree(rng):
    """Several Python threads running jitted programs with the custom call at once (XLA calls
    the handler from each)."""
    from concurrent.futures import ThreadPoolExecutor

    shape = (40, 300)
    kernel = jax.jit(fused_kernel(shape))
    pairs = [(randn(rng, shape, np.float32), randn(rng, shape, np.float32)) for _ in range(8)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda xy: kernel(*xy), pairs * 3))
    for (x, y), got in zip(pairs * 3, results, strict=True):
        assert_close(got, fused(x, y), "concurrent")


# --- native kernels (catalog, Rust) inside traced programs -----------------------------------


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_launch_of_a_catalog_kernel_under_jit_and_vmap(device, rng):
    """``tpukit.launch`` on tracers: the catalog's ``add_vectors`` (written in Rust) as one
    custom call between XLA ops; vmap runs it once per row."""
    add = tpukit.instantiate("add_vectors", [1000])
    x, y = randn(rng, (1000,), np.float32), randn(rng, (1000,), np.float32)

    @jax.jit
    def program(x, y):
        return tpukit.launch(add, jnp.tanh(x), y, device=device)[0] * 2

    assert_close(program(x, y), (jnp.tanh(x) + y) * 2, "jit")
    xs, ys = randn(rng, (3, 1000), np.float32), randn(rng, (3, 1000), np.float32)
    got = jax.jit(jax.vmap(lambda x, y: tpukit.launch(add, x, y, device=device)[0]))(xs, ys)
    assert_close(got, xs + ys, "vmap")
    with pytest.raises(TypeError, match="outputs= is for arrays"):
        jax.jit(lambda x: tpukit.launch(add, x, x, outputs=[x]))(x)



def test_custom_call_ids_fingerprint_the_kernel_not_the_process(rng):
    """The ``kernel`` attribute a jitted program carries is the same in every process (a
    fingerprint of kernel, device, aliasing and debug mode), so a serialized program never
    names another kernel."""
    add = tpukit.instantiate("add_vectors", [1000])
    x = randn(rng, (1000,), np.float32)
    text = jax.jit(lambda x: tpukit.launch(add, x, x)[0]).lower(x).as_text()
    first = _native.ffi_register(add, "cpu", {}, False)
    assert f"kernel = {first} : i64" in text
    assert _native.ffi_register(add, "cpu", {}, False) == first
    modes = [(d, debug) for d in tpukit.DEVICES for debug in (False, True)]
    others = {_native.ffi_register(add, d, {}, debug) for d, debug in modes}
    assert len(others) == 4 and first in others
    assert first > 1 << 20  # a fingerprint, not a count of registrations


def test_a_custom_call_naming_no_registered_kernel_is_a_clear_error(rng):
    """What a program serialized in another process meets before its kernels are traced here."""
    from tpukit import _custom_call

    x = randn(rng, (8, 128), np.float32)
    run = jax.ffi.ffi_call(_custom_call._target(), jax.ShapeDtypeStruct(x.shape, x.dtype))
    with pytest.raises(tpukit.TpukitError, match="no kernel with id 12345 in this process"):
        _custom_call.run_eager(jax.jit(lambda x: run(x, kernel=np.int64(12345))), [x])
