"""The TPU ops JAX ships (``jax.experimental.pallas.ops.tpu``) in unmodified jitted programs on
the CPU: under ``tpukit.pallas.on_cpu()`` and through ``custom_jax_kernel``, each Pallas call
(nested in the op's own ``jax.jit``, and the backward kernels ``jax.grad`` traces) a tpukit
custom call, checked against a plain ``jax.numpy`` reference on random inputs, f32 and bf16.
The shipped ops need block-divisible shapes (they check it themselves); ops tpukit cannot run
yet are a clear error naming what is missing."""

import importlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close
from jax.experimental.pallas.ops.tpu import flash_attention as fa
from jax.experimental.pallas.ops.tpu import matmul as mm
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as paged

import tpukit
from tpukit import pallas

BF16 = ml_dtypes.bfloat16
DTYPES = [np.float32, BF16]
# megablox's package rebinds the name `gmm` to the function; the module is imported by path
gmm_module = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")


def randn(rng, shape, dtype, scale=1.0):
    return jnp.asarray((rng.standard_normal(shape) * scale).astype(dtype))


def f32(x):
    return jnp.asarray(x, jnp.float32)


def tolerance(dtype, want, f32_rel=1e-4):
    """Relative to the result's magnitude: bf16 inputs and outputs carry 8 mantissa bits."""
    size = float(jnp.max(jnp.abs(f32(want)))) or 1.0
    rel = f32_rel if dtype == np.float32 else 3e-2
    return dict(rtol=rel, atol=rel * size)


def attention_reference(q, k, v, causal, sm_scale, bias=None, segments=None):
    s = jnp.einsum("bhqd,bhkd->bhqk", f32(q), f32(k))
    if bias is not None:
        s = s + f32(bias)  # flash attention adds the bias before scaling
    s = s * sm_scale
    keep = jnp.ones(s.shape, bool)
    if causal:
        keep = keep & jnp.tril(jnp.ones(s.shape[-2:], bool))
    if segments is not None:
        keep = keep & (segments[:, None, :, None] == segments[:, None, None, :])
    s = jnp.where(keep, s, -1e30)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), f32(v))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_attention_forward_in_a_jitted_model(causal, dtype, rng):
    q, k, v = (randn(rng, (2, 2, 256, 128), dtype) for _ in range(3))

    @jax.jit
    def model(q, k, v):
        out = fa.flash_attention(q, k, v, causal=causal, sm_scale=0.125)
        return jnp.tanh(out.astype(jnp.float32))

    want = jnp.tanh(attention_reference(q, k, v, causal, 0.125))
    with pallas.on_cpu():
        got = model(q, k, v)
        assert model.lower(q, k, v).as_text().count("@tpukit_kernel") >= 1
    assert_close(got, want, f"flash {dtype.__name__}", tolerance(dtype, want))


def test_flash_attention_with_a_bias_and_segment_ids(rng):
    q, k, v = (randn(rng, (1, 2, 256, 128), np.float32) for _ in range(3))
    bias = randn(rng, (1, 2, 256, 256), np.float32)
    segments = jnp.asarray(np.repeat([[0, 1, 1, 2]], 64, axis=1).astype(np.int32))
    ids = fa.SegmentIds(q=segments, kv=segments)
    with pallas.on_cpu():
        got = jax.jit(lambda q, k, v, b: fa.flash_attention(q, k, v, b, ids, sm_scale=0.5))(
            q, k, v, bias)
    want = attention_reference(q, k, v, False, 0.5, bias, segments)
    assert_close(got, want, "flash with bias and segments", tolerance(np.float32, want))


@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_attention_backward_under_grad(dtype, rng):
    """jax.grad traces flash attention's own backward Pallas kernels (dq, dkv): all tpukit."""
    q, k, v = (randn(rng, (1, 2, 256, 128), dtype) for _ in range(3))
    blocks = fa.BlockSizes(
        block_q=128, block_k_major=128, block_k=128, block_b=1,
        block_q_major_dkv=128, block_k_major_dkv=128, block_k_dkv=128, block_q_dkv=128,
        block_k_major_dq=128, block_k_dq=128, block_q_dq=128,
    )

    def loss(q, k, v):
        out = fa.flash_attention(q, k, v, causal=True, sm_scale=0.125, block_sizes=blocks)
        return jnp.sum(jnp.sin(out.astype(jnp.float32)))

    def reference_loss(q, k, v):
        return jnp.sum(jnp.sin(attention_reference(q, k, v, True, 0.125)))

    program = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    with pallas.on_cpu():
        got = program(q, k, v)
        assert program.lower(q, k, v).as_text().count("@tpukit_kernel") >= 3  # fwd, dkv, dq
    want = jax.grad(reference_loss, argnums=(0, 1, 2))(f32(q), f32(k), f32(v))
    for name, g, w in zip("qkv", got, want, strict=True):
        assert_close(f32(g), w, f"d{name}", tolerance(dtype, w, f32_rel=2e-4))


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul(dtype, rng):
    x, y = randn(rng, (256, 384), dtype), randn(rng, (384, 512), dtype)

    @jax.jit
    def model(x, y):
        return mm.matmul(x, y, block_shape=(128, 256), block_k=128) + 1

    with pallas.on_cpu():
        got = model(x, y)
    want = (f32(x) @ f32(y) + 1).astype(dtype)
    assert_close(got, want, "matmul", tolerance(dtype, want))


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_shipped_ops_through_custom_jax_kernel(device, rng):
    """Two shipped ops (each nested in its own jit) with JAX ops between, in one function."""

    @pallas.custom_jax_kernel
    def block(q, k, v, w):
        attended = fa.flash_attention(q, k, v, causal=True, sm_scale=0.125)
        flat = jax.nn.relu(attended.reshape(-1, attended.shape[-1]))
        return mm.matmul(flat, w, block_shape=(128, 128), block_k=128) * 0.5

    q, k, v = (randn(rng, (1, 2, 128, 128), np.float32) for _ in range(3))
    w = randn(rng, (128, 256), np.float32)
    got = block(q, k, v, w, device=device)
    flat = jax.nn.relu(attention_reference(q, k, v, True, 0.125).reshape(-1, 128))
    want = (flat @ w) * 0.5
    assert_close(got, want, device, tolerance(np.float32, want))
    # JAX differentiates flash attention by its custom VJP (backward Pallas kernels);
    # matmul's pallas_call has no derivative in JAX, so the gradient is taken for q only.
    @pallas.custom_jax_kernel
    def attend(q, k, v):
        return jnp.sum(jnp.sin(fa.flash_attention(q, k, v, causal=True, sm_scale=0.125)))

    got = jax.jit(jax.grad(lambda q: attend(q, k, v, device=device)))(q)
    want = jax.grad(lambda q: jnp.sum(jnp.sin(attention_reference(q, k, v, True, 0.125))))(q)
    assert_close(got, want, f"dq on {device}", tolerance(np.float32, want, f32_rel=2e-4))


def test_paged_attention_is_a_clear_error(rng):
    """Paged attention copies pages by manual DMA, which tpukit's import does not take yet."""
    q = randn(rng, (2, 4, 128), np.float32)
    pages = randn(rng, (2, 16, 16, 128), np.float32)
    lengths = jnp.array([40, 64], jnp.int32)
    indices = jnp.arange(8, dtype=jnp.int32).reshape(2, 4)
    with pallas.on_cpu(), pytest.raises(tpukit.UnsupportedError, match="dma_semaphore"):
        jax.jit(lambda *a: paged.paged_attention(*a, pages_per_compute_block=2))(
            q, pages, pages, lengths, indices)


def test_megablox_gmm_is_a_clear_error(rng):
    """megablox sizes its grid by the groups' tile count, a traced value."""
    x, w = randn(rng, (256, 128), np.float32), randn(rng, (2, 128, 128), np.float32)
    sizes = jnp.array([100, 156], jnp.int32)
    with pallas.on_cpu(), pytest.raises(tpukit.UnsupportedError, match="dynamic grid"):
        jax.jit(gmm_module.gmm)(x, w, sizes)
