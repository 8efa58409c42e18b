"""Mosaic ops real Pallas TPU kernels emit that tpukit once could not import: a 1-D operand
of ``jnp.dot`` (matrix-vector), the named scopes of ``jnp.einsum``, shifts, and comparisons
and selects in index maps (causal block skipping). Each kernel runs on tpukit's ``cpu`` and
``interpret`` against Pallas interpret mode and a ``jnp`` reference (see conftest.check)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import check
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import DEVICES, pallas

BF16 = ml_dtypes.bfloat16
DTYPES = [np.float32, BF16]


def sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def f32(x):
    return jnp.asarray(x, jnp.float32)


def dot_tolerance(dtype):
    # bf16 inputs, f32 accumulation: only the inputs are rounded, sums of 128 products.
    return None if dtype == np.float32 else dict(rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_vector_over_row_blocks(dtype, rng):
    # 300 rows in blocks of 128: the last block is partial
    def kernel(x_ref, v_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], v_ref[...], preferred_element_type=jnp.float32)

    x = rng.standard_normal((300, 256)).astype(dtype)
    v = rng.standard_normal((256,)).astype(dtype)
    check(kernel, sds((300,), jnp.float32), [x, v], lambda x, v: f32(x) @ f32(v),
          tolerance=dot_tolerance(dtype), grid=(3,),
          in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0)),
                    pl.BlockSpec((256,), lambda i: (0,))],
          out_specs=pl.BlockSpec((128,), lambda i: (i,)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_matrix_and_einsum(dtype, rng):
    # jnp.dot with a 1-D left operand; einsum wraps its dot in trace_start/trace_stop
    def kernel(u_ref, x_ref, v_ref, o_ref, p_ref):
        x = x_ref[...]
        o_ref[...] = jnp.dot(u_ref[...], x, preferred_element_type=jnp.float32)
        p_ref[...] = jnp.einsum("mk,k->m", x, v_ref[...], preferred_element_type=jnp.float32)

    u = rng.standard_normal((24,)).astype(dtype)
    x = rng.standard_normal((24, 200)).astype(dtype)
    v = rng.standard_normal((200,)).astype(dtype)
    check(kernel, (sds((200,), jnp.float32), sds((24,), jnp.float32)), [u, x, v],
          lambda u, x, v: (f32(u) @ f32(x), f32(x) @ f32(v)), tolerance=dot_tolerance(dtype))


@pytest.mark.parametrize("shift", ["left", "arithmetic", "logical"])
def test_shifts(shift, rng):
    # amounts past the width and negative ones shift every bit out (as XLA defines them)
    op = {"left": lambda x, s: x << s, "arithmetic": lambda x, s: x >> s,
          "logical": lax.shift_right_logical}[shift]

    def kernel(x_ref, s_ref, o_ref):
        o_ref[...] = op(x_ref[...], s_ref[...])

    x = rng.integers(-(2**31), 2**31 - 1, (20, 300), dtype=np.int64).astype(np.int32)
    s = rng.integers(-3, 40, (20, 300)).astype(np.int32)
    block = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    check(kernel, sds(x.shape, jnp.int32), [x, s], lambda x, s: op(jnp.asarray(x), jnp.asarray(s)),
          grid=(3, 3), in_specs=[block, block], out_specs=block)


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_block_skipping_index_map(dtype, rng):
    # Row block i sums the key blocks j <= i; steps past the diagonal re-read block i
    # (cmpi + select in the index map, as flash attention clamps) and are skipped in the body.
    def kernel(x_ref, o_ref):
        i, j = pl.program_id(0), pl.program_id(1)

        @pl.when(j == 0)
        def _init():
            o_ref[...] = jnp.zeros_like(o_ref)

        @pl.when(j <= i)
        def _acc():
            o_ref[...] += x_ref[...].astype(jnp.float32)

    def key_block(i, j):
        return (jnp.where(j <= i, j, i), 0)

    x = rng.standard_normal((36, 256)).astype(dtype)

    def reference(x):
        xp = np.zeros((40, 256), np.float32)
        xp[:36] = np.asarray(x, np.float32)
        blocks = xp.reshape(5, 8, 256)
        return np.cumsum(blocks, axis=0).reshape(40, 256)[:36]

    check(kernel, sds((36, 256), jnp.float32), [x], reference, grid=(5, 5),
          in_specs=[pl.BlockSpec((8, 256), key_block)],
          out_specs=pl.BlockSpec((8, 256), lambda i, j: (i, 0)))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_shipped_flash_attention_forward(causal, dtype, rng):
    # JAX's shipped TPU flash attention: causal block skipping selects block indices in its
    # index maps. Its jitted entry point nests the pallas_call in a private function.
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    blocks = fa.BlockSizes(block_q=128, block_k_major=256, block_k=128, block_b=1)

    def attention(q, k, v):
        return fa.flash_attention(q, k, v, causal=causal, sm_scale=0.125, block_sizes=blocks)

    def reference(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", f32(q), f32(k)) * 0.125
        if causal:
            s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -jnp.inf)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), f32(v))

    q, k, v = (rng.standard_normal((1, 2, 512, 128)).astype(dtype) for _ in range(3))
    want = np.asarray(reference(q, k, v))
    kernel = pallas.custom_jax_kernel(attention)
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=3e-2, atol=3e-2)
    for device in DEVICES:
        got = kernel(q, k, v, device=device)
        assert got.dtype == dtype
        np.testing.assert_allclose(np.asarray(got, np.float32), want, err_msg=device, **tolerance)


def test_iota_kernel_of_no_inputs():
    # the Pallas quickstart's iota: no array operands, one scalar SMEM output
    def iota_kernel(o_ref):
        i = pl.program_id(0)
        o_ref[i] = i

    out = check(iota_kernel, sds((8,), jnp.int32), [], lambda: np.arange(8, dtype=np.int32),
                grid=(8,), out_specs=pl.BlockSpec(memory_space=pltpu.SMEM))
    assert isinstance(out, np.ndarray)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_kernel_of_no_inputs_over_partial_blocks(dtype):
    def kernel(o_ref):
        rows = lax.broadcasted_iota(jnp.int32, o_ref.shape, 0) + pl.program_id(0) * 8
        cols = lax.broadcasted_iota(jnp.int32, o_ref.shape, 1) + pl.program_id(1) * 128
        o_ref[...] = (rows * 3 - cols).astype(jnp.float32).astype(o_ref.dtype) * 0.25

    def reference():
        r, c = np.meshgrid(np.arange(20), np.arange(300), indexing="ij")
        return ((r * 3 - c) * 0.25).astype(dtype)

    check(kernel, sds((20, 300), dtype), [], reference, grid=(3, 3),
          out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)))


def test_jax_function_of_no_arguments():
    def kernel(o_ref):
        o_ref[...] = lax.broadcasted_iota(jnp.int32, o_ref.shape, 1) * 2

    @pallas.custom_jax_kernel
    def evens():
        return pl.pallas_call(kernel, out_shape=sds((8, 128), jnp.int32))()

    want = np.broadcast_to(np.arange(128, dtype=np.int32) * 2, (8, 128))
    for device in DEVICES:
        np.testing.assert_array_equal(evens(device=device), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_dot_general_in_a_body(dtype, rng):
    # tpu.matmul with batch dimensions: bmk,bkn and bqd,bkd (the rhs contracted on its last)
    def kernel(x_ref, y_ref, z_ref, o_ref, p_ref):
        x = x_ref[...]
        o_ref[...] = jnp.einsum("bmk,bkn->bmn", x, y_ref[...], preferred_element_type=jnp.float32)
        p_ref[...] = jnp.einsum("bqd,bkd->bqk", x, z_ref[...], preferred_element_type=jnp.float32)

    x = rng.standard_normal((2, 16, 128)).astype(dtype)
    y = rng.standard_normal((2, 128, 256)).astype(dtype)
    z = rng.standard_normal((2, 24, 128)).astype(dtype)
    check(kernel, (sds((2, 16, 256), jnp.float32), sds((2, 16, 24), jnp.float32)), [x, y, z],
          lambda x, y, z: (jnp.einsum("bmk,bkn->bmn", f32(x), f32(y)),
                           jnp.einsum("bqd,bkd->bqk", f32(x), f32(z))),
          tolerance=dot_tolerance(dtype))


def test_argmax_and_argmin_in_a_body(rng):
    # tpu.reduce_index (Pallas lowers it for f32 only): first index of the extreme, ties
    # included (small integers repeat), and a NaN wins as in JAX
    def kernel(x_ref, o_ref, p_ref):
        x = x_ref[...]
        o_ref[...] = jnp.argmax(x, axis=1).astype(jnp.int32)
        p_ref[...] = jnp.argmin(x, axis=0).astype(jnp.int32)

    x = rng.integers(-5, 5, (16, 256)).astype(np.float32)
    x[3, 7] = x[4, 200] = np.nan
    check(kernel, (sds((16,), jnp.int32), sds((256,), jnp.int32)), [x],
          lambda x: (jnp.argmax(x, axis=1).astype(jnp.int32),
                     jnp.argmin(x, axis=0).astype(jnp.int32)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_while_loop_with_a_data_dependent_condition(dtype, rng):
    # scf.while: halve the block until its largest magnitude is at most 1 (or a prefetched
    # bound of steps is reached); the trip count differs per block
    def kernel(n_ref, x_ref, o_ref):
        def cond(c):
            i, v = c
            return (jnp.max(jnp.abs(v.astype(jnp.float32))) > 1.0) & (i < n_ref[0])

        def step(c):
            i, v = c
            return i + 1, v * 0.5

        i, v = lax.while_loop(cond, step, (jnp.int32(0), x_ref[...]))
        o_ref[...] = v + i.astype(v.dtype)

    x = (rng.standard_normal((24, 128)) * [[40.0]] * np.arange(1, 25)[:, None]).astype(dtype)
    n = np.array([100], np.int32)

    def reference(n, x):
        out = []
        for b in range(3):
            v, i = np.asarray(x[8 * b:8 * b + 8], np.float32), 0
            while np.max(np.abs(v)) > 1.0 and i < n[0]:
                v, i = v * 0.5, i + 1
            out.append(v + i)
        return jnp.asarray(np.concatenate(out), dtype)

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(3,),
        in_specs=[pl.BlockSpec((8, 128), lambda b, n: (b, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda b, n: (b, 0)))
    check(kernel, sds(x.shape, dtype), [n, x], reference, grid_spec=grid_spec)


def _next_block_kernel():
    # reads nz[i + 1]: one past the end of the prefetch array at the last step, as the sparse
    # docs' block-sparse matmul does, in the body and in an index map
    def kernel(nz_ref, x_ref, y_ref, o_ref):
        i = pl.program_id(0)
        o_ref[...] = x_ref[...] * (nz_ref[i] + nz_ref[i + 1]).astype(jnp.float32) + y_ref[...]

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, nz: (i, 0)),
                  pl.BlockSpec((8, 128), lambda i, nz: (nz[i + 1] % 4, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, nz: (i, 0)))
    return pallas.custom_kernel(lambda nz, x, y: sds(x.shape, x.dtype), kernel,
                                grid_spec=grid_spec)


@pytest.mark.parametrize("device", DEVICES)
def test_a_scalar_read_past_a_prefetch_array_reads_zero(device, rng):
    nz = np.array([3, 1, 2, 5], np.int32)
    x = rng.standard_normal((32, 128)).astype(np.float32)
    y = rng.standard_normal((32, 128)).astype(np.float32)
    padded = np.append(nz, 0)  # what the CPU devices read past the end (a TPU: unspecified)
    want = np.concatenate([
        x[8 * i:8 * i + 8] * (padded[i] + padded[i + 1])
        + y[8 * (padded[i + 1] % 4):8 * (padded[i + 1] % 4) + 8] for i in range(4)])
    got = _next_block_kernel()(nz, x, y, device=device)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_scalar_read_past_a_prefetch_array_is_an_error_in_debug_mode(device, rng,
                                                                         monkeypatch):
    monkeypatch.setenv("TPUKIT_DEBUG", "1")
    nz = np.array([3, 1, 2, 5], np.int32)
    x = np.zeros((32, 128), np.float32)
    with pytest.raises(tpukit.TpukitError, match="index 4 of dim 0 is outside"):
        _next_block_kernel()(nz, x, x, device=device)
