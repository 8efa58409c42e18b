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
