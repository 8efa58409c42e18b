"""``tpukit.pallas.on_cpu()``: the user's own TPU ``pl.pallas_call`` inside a jitted program,
unmodified, lowered for the CPU as tpukit's custom call, beside XLA's ops; checked against
plain ``jax.numpy`` on random inputs, f32 and bf16, shapes that do not divide the blocks."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import pallas

BF16 = ml_dtypes.bfloat16


def scaled_tanh_body(x_ref, y_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    o_ref[...] = (jnp.tanh(x) * y_ref[...].astype(jnp.float32) + 1.0).astype(o_ref.dtype)


def model(x, y):
    """A user's program: XLA ops around a TPU Pallas call on 16×128 blocks."""
    grid = (pl.cdiv(x.shape[0], 16), pl.cdiv(x.shape[1], 128))
    spec = pl.BlockSpec((16, 128), lambda i, j: (i, j))
    out = pl.pallas_call(
        scaled_tanh_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=grid,
        in_specs=[spec, spec], out_specs=spec,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x * 2, y)
    return jnp.sum(out.astype(jnp.float32), axis=0)


def reference(x, y):
    xf, yf = (x * 2).astype(jnp.float32), y.astype(jnp.float32)
    return jnp.sum((jnp.tanh(xf) * yf + 1.0).astype(x.dtype).astype(jnp.float32), axis=0)


def randn(rng, shape, dtype):
    return jnp.asarray(rng.standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_an_unmodified_jitted_program_runs_its_pallas_call_on_cpu(device, dtype, rng):
    x, y = randn(rng, (40, 300), dtype), randn(rng, (40, 300), dtype)
    with pytest.raises(ValueError, match="Only interpret mode"):
        jax.jit(model)(x, y)  # JAX alone: interpret mode only
    program = jax.jit(model)
    with pallas.on_cpu(device=device):
        got = program(x, y)
        text = program.lower(x, y).as_text()
    assert "stablehlo.custom_call @tpukit_kernel" in text
    tolerance = dict(rtol=1e-5, atol=1e-4) if dtype == np.float32 else dict(rtol=2e-2, atol=0.3)
    assert_close(got, reference(x, y), "on_cpu vs jnp", tolerance)


def test_vmap_and_scan_around_a_pallas_call(rng):
    """vmap batches the pallas_call (JAX's rule adds a grid axis), scan loops over it."""
    xs, ys = randn(rng, (3, 40, 300), np.float32), randn(rng, (3, 40, 300), np.float32)
    tolerance = dict(rtol=1e-5, atol=1e-4)
    with pallas.on_cpu():
        got = jax.jit(jax.vmap(model))(xs, ys)
        assert_close(got, jax.vmap(reference)(xs, ys), "vmap", tolerance)

        def step(carry, xy):
            return carry + model(*xy), None

        total, _ = jax.jit(lambda xs, ys: jax.lax.scan(step, jnp.zeros(300), (xs, ys)))(xs, ys)
    assert_close(total, sum(reference(xs[i], ys[i]) for i in range(3)), "scan", tolerance)


def test_interpret_mode_calls_keep_jax_s_interpreter(rng):
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3.0

    def f(x):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              interpret=True)(x)

    x = randn(rng, (8, 128), np.float32)
    with pallas.on_cpu():
        text = jax.jit(f).lower(x).as_text()
        got = jax.jit(f)(x)
    assert "tpukit_kernel" not in text
    assert_close(got, x * 3.0, "interpret")


def test_install_applies_until_uninstalled(rng):
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def f(x):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    x = randn(rng, (8, 128), np.float32)
    pallas.install()
    try:
        assert_close(jax.jit(f)(x), x + 1.0, "installed")
    finally:
        pallas.install(None)
    with pytest.raises(ValueError, match="Only interpret mode"):
        jax.jit(lambda x: f(x) * 2)(x)
    with pytest.raises(ValueError, match="unknown device"):
        pallas.install("gpu")


def test_an_unsupported_kernel_names_the_op(rng):
    def body(x_ref, o_ref):  # a population count (math.ctpop): not imported yet
        o_ref[...] = jax.lax.population_count(x_ref[...])

    def f(x):
        return pl.pallas_call(
            body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(1,)
        )(x)

    with pallas.on_cpu(), pytest.raises(tpukit.UnsupportedError, match="math.ctpop"):
        jax.jit(f)(randn(rng, (8, 128), np.float32).view(np.int32))


def test_debug_mode_runs_the_same_kernel_checked(rng):
    """on_cpu(debug=True) registers the kernel in tpukit's debug mode (its own compiled
    kernel, a bounds check on every access): same results, and an index map outside the
    array is reported with the kernel, operand and grid point."""

    def body(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def f(idx, x):
        grid_spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0)),
        )
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((16, 128), x.dtype),
                              grid_spec=grid_spec)(idx, x)

    x = randn(rng, (32, 128), np.float32)
    good, bad = jnp.asarray([3, 1], jnp.int32), jnp.asarray([0, 4], jnp.int32)
    with pallas.on_cpu():
        plain = jax.jit(f).lower(good, x).as_text()
    program = jax.jit(lambda idx, x: f(idx, x) + 0.0)  # another program: lowered afresh
    with pallas.on_cpu(debug=True):
        checked = program.lower(good, x).as_text()
        got = program(good, x)
        with pytest.raises(Exception, match=r"tpukit bounds error: .*index map.*grid point \[1\]"):
            program(bad, x).block_until_ready()
    assert_close(got, jnp.concatenate([x[24:], x[8:16]]) * 2.0, "debug")
    ids = [t.split("kernel = ")[1].split(" ")[0] for t in (plain, checked)]
    assert ids[0] != ids[1], ids


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_a_blocked_matmul_with_scratch_in_a_jitted_layer(dtype, rng):
    """The README's matmul (VMEM accumulator, pl.when on the reduction axis) as the user
    writes it, inside a jitted layer with a bias and a gelu around it; M does not divide the
    row block."""

    def matmul_kernel(x_ref, y_ref, o_ref, acc_ref, *, k_steps):
        @pl.when(pl.program_id(2) == 0)
        def _init():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == k_steps - 1)
        def _finalize():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    def layer(x, w, b):
        m, k = x.shape
        n = w.shape[1]
        y = pl.pallas_call(
            lambda *refs: matmul_kernel(*refs, k_steps=k // 128),
            out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
            grid=(pl.cdiv(m, 128), n // 128, k // 128),
            in_specs=[pl.BlockSpec((128, 128), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((128, 128), lambda i, j, kk: (kk, j))],
            out_specs=pl.BlockSpec((128, 128), lambda i, j, kk: (i, j)),
            scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary")),
        )(x, w)
        return jax.nn.gelu(y.astype(jnp.float32) + b)

    x, w = randn(rng, (200, 256), dtype), randn(rng, (256, 384), dtype)
    b = randn(rng, (384,), np.float32)
    with pallas.on_cpu():
        got = jax.jit(layer)(x, w, b)
    y = jnp.dot(x, w, preferred_element_type=jnp.float32).astype(dtype)
    want = jax.nn.gelu(y.astype(jnp.float32) + b)
    tolerance = dict(rtol=1e-4, atol=1e-3) if dtype == np.float32 else dict(rtol=1e-2, atol=1e-2)
    assert_close(got, want, "layer", tolerance)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_running_row_state_in_scratch_read_before_and_after_its_store(dtype, rng):
    """Flash attention's running max and sum, kept in ``(1, rows, 128)`` scratch across the
    column blocks: ``m_ref[0]`` (a view of the scratch) is used twice, and ``exp(m_prev -
    m_next)`` is computed after ``m_ref[0] = m_next``, so it must still see the old max. The
    row count does not divide the row block."""

    def kernel(x_ref, m_out, l_out, m_ref, l_ref, *, steps):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _init():
            m_ref[0] = jnp.full(m_ref.shape[1:], -jnp.inf, jnp.float32)
            l_ref[0] = jnp.zeros(l_ref.shape[1:], jnp.float32)

        x = x_ref[...].astype(jnp.float32)
        m_prev = m_ref[0]
        m_next = jnp.maximum(m_prev, jnp.max(x, axis=1, keepdims=True))
        m_ref[0] = m_next
        alpha = jnp.exp(m_prev - m_next)
        l_ref[0] = alpha * l_ref[0] + jnp.sum(jnp.exp(x - m_next), axis=1, keepdims=True)

        @pl.when(j == steps - 1)
        def _finalize():
            m_out[...] = m_ref[0]
            l_out[...] = l_ref[0]

    x = randn(rng, (40, 384), dtype) * 3
    steps = x.shape[1] // 128
    spec = pl.BlockSpec((16, 128), lambda i, j: (i, 0))
    call = pl.pallas_call(
        lambda *refs: kernel(*refs, steps=steps),
        out_shape=[jax.ShapeDtypeStruct((40, 128), jnp.float32)] * 2,
        grid=(pl.cdiv(40, 16), steps),
        in_specs=[pl.BlockSpec((16, 128), lambda i, j: (i, j))],
        out_specs=[spec, spec],
        scratch_shapes=[pltpu.VMEM((1, 16, 128), jnp.float32)] * 2,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )
    with pallas.on_cpu():
        m, total = jax.jit(call)(x)
    xf = np.asarray(x, np.float32)
    want_m = xf.max(axis=1, keepdims=True)
    want_l = np.exp(xf - want_m).sum(axis=1, keepdims=True)
    assert_close(m, np.broadcast_to(want_m, (40, 128)), "running max")
    tolerance = dict(rtol=1e-5, atol=1e-5)
    assert_close(total, np.broadcast_to(want_l, (40, 128)), "running sum", tolerance)


def test_the_same_body_with_other_block_specs_is_another_kernel(rng):
    """Imports are cached by every parameter of the call: one body, two grids."""

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def f(x, reverse):
        spec = pl.BlockSpec((8, 128), (lambda i: (1 - i, 0)) if reverse else (lambda i: (i, 0)))
        out = pl.BlockSpec((8, 128), lambda i: (i, 0))
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                              in_specs=[spec], out_specs=out)(x)

    x = randn(rng, (16, 128), np.float32)
    with pallas.on_cpu():
        forward = jax.jit(lambda x: f(x, False))(x)
        backward = jax.jit(lambda x: f(x, True))(x)
    assert_close(forward, x * 2.0, "forward")
    assert_close(backward, jnp.concatenate([x[8:], x[:8]]) * 2.0, "reversed blocks")


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_an_emit_pipeline_matmul_over_hbm_refs(dtype, rng):
    """A kernel that pipelines its own blocks: HBM operands (`pl.ANY`) and
    `pltpu.emit_pipeline` over a 3-D grid accumulating into the output block; M and K are
    not powers of two. Tracing it asks Pallas for TPU tilings (`get_tpu_info`), which a CPU
    device answers as the v5e tpukit compiles for."""

    def block_step(x_ref, y_ref, z_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            z_ref[...] = jnp.zeros(z_ref.shape, z_ref.dtype)

        z_ref[...] += jnp.dot(x_ref[...], y_ref[...],
                              preferred_element_type=jnp.float32).astype(z_ref.dtype)

    def kernel(x_hbm, y_hbm, z_hbm):
        pltpu.emit_pipeline(
            block_step, grid=(3, 2, 2),
            in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                      pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
        )(x_hbm, y_hbm, z_hbm)

    def matmul(x, y):
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((384, 256), jnp.float32),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2,
            out_specs=pl.BlockSpec(memory_space=pl.ANY))(x, y)

    x, y = randn(rng, (384, 256), dtype), randn(rng, (256, 256), dtype)
    with pallas.on_cpu():
        got = jax.jit(matmul)(x, y)
    want = jnp.dot(x, y, preferred_element_type=jnp.float32)
    assert_close(got, want, "emit_pipeline matmul", dict(rtol=1e-4, atol=1e-3))


@pytest.mark.parametrize("n_shape", [(), (1,)])
def test_a_grid_sized_by_a_traced_value_counts_its_steps(n_shape):
    """`grid=(n,)` with `n` traced, 0-d or of shape (1,) (as `jax.random.randint(..., (1,))`
    gives it); the body keeps a count in an SMEM output across the steps and, for a vector
    output, copies the rows the steps reach."""

    def body(_, x_ref, count_ref, o_ref):
        count_ref[0] = jax.lax.cond(pl.program_id(0) == 0, lambda: 1,
                                    lambda: count_ref[0] + 1)
        o_ref[...] = x_ref[...] * 2.0

    def program(n, x):
        return pl.pallas_call(
            body,
            out_shape=(pltpu.SMEM((1,), jnp.int32), jax.ShapeDtypeStruct(x.shape, x.dtype)),
            grid=(n,),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                      pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=(pl.BlockSpec(memory_space=pltpu.SMEM),
                       pl.BlockSpec((8, 128), lambda i: (i, 0))),
        )(n, x)

    x = np.random.default_rng(1).standard_normal((48, 128)).astype(np.float32)
    for steps in (1, 4, 6):
        n = np.full(n_shape, steps, np.int32)
        with pallas.on_cpu():
            count, out = jax.jit(program)(n, x)
        assert int(np.asarray(count)[0]) == steps
        np.testing.assert_array_equal(np.asarray(out)[:8 * steps], x[:8 * steps] * 2.0)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_a_kernel_over_a_tensorcore_mesh(device, dtype, rng):
    """`pl.kernel(mesh=pltpu.create_tensorcore_mesh(..))` (JAX's `mpmd_map`): HBM refs the
    body copies through VMEM scratch, a row at a time in a `fori_loop`. The mesh has as many
    cores as `jax.devices()[0].num_cores`, which a CPU device answers as the v5e's one."""
    rows, cols = 40, 300

    def program(x):
        @pl.kernel(out_type=jax.ShapeDtypeStruct(x.shape, jnp.float32),
                   mesh=pltpu.create_tensorcore_mesh("core"),
                   scratch_types=[pltpu.VMEM((8, cols), x.dtype),
                                  pltpu.VMEM((8, cols), jnp.float32)])
        def scaled(x_hbm, o_hbm, x_vmem, o_vmem):
            def step(i, carry):
                rows_i = pl.ds(pl.multiple_of(i * 8, 8), 8)
                pltpu.sync_copy(x_hbm.at[rows_i], x_vmem)
                o_vmem[...] = jnp.exp(x_vmem[...].astype(jnp.float32)) * 0.5
                pltpu.sync_copy(o_vmem, o_hbm.at[rows_i])
                return carry

            jax.lax.fori_loop(0, rows // 8, step, 0)

        return scaled(x)

    x = randn(rng, (rows, cols), dtype)
    with pallas.on_cpu(device=device):
        assert jax.devices()[0].num_cores == 1
        got = jax.jit(program)(x)
    assert_close(got, jnp.exp(x.astype(jnp.float32)) * 0.5, "mesh kernel",
                 dict(rtol=1e-5, atol=1e-5))


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_a_core_map_updates_refs_in_place(device, rng):
    """`pl.run_state` around a `pl.core_map`: the kernel DMAs into a ref it was given (an HBM
    operand JAX aliases to a result). It reads the ref's incoming contents and leaves the
    other operand as it was."""

    def program(x, acc):
        def stateful(refs):
            x_ref, acc_ref = refs

            @pl.core_map(pltpu.create_tensorcore_mesh("core"))
            def _():
                def body(x_vmem, acc_vmem):
                    pltpu.sync_copy(x_ref, x_vmem)
                    pltpu.sync_copy(acc_ref, acc_vmem)
                    acc_vmem[...] += x_vmem[...] * 2.0
                    pltpu.sync_copy(acc_vmem, acc_ref)

                pl.run_scoped(body, pltpu.VMEM(x.shape, x.dtype),
                              pltpu.VMEM(acc.shape, acc.dtype))

        return pl.run_state(stateful)((x, acc))

    x, acc = randn(rng, (24, 256), np.float32), randn(rng, (24, 256), np.float32)
    with pallas.on_cpu(device=device):
        x_out, acc_out = jax.jit(program)(x, acc)
    np.testing.assert_array_equal(np.asarray(x_out), np.asarray(x))
    assert_close(acc_out, acc + x * 2.0, "in-place update", dict(rtol=1e-6, atol=1e-6))
