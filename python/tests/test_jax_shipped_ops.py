"""The TPU ops JAX ships (``jax.experimental.pallas.ops.tpu``) in unmodified jitted programs on
the CPU: under ``tpukit.pallas.on_cpu()`` and through ``custom_jax_kernel``, each Pallas call
(nested in the op's own ``jax.jit``, and the backward kernels ``jax.grad`` traces) a tpukit
custom call, checked against a plain ``jax.numpy`` reference on random inputs, f32 and bf16.
The shipped ops need block-divisible shapes (they check it themselves); ops tpukit cannot run
yet are a clear error naming what is missing. The PRNG kernels (uint32 in, uint32 out) are
checked bit for bit."""

import functools
import importlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import flash_attention as fa
from jax.experimental.pallas.ops.tpu import matmul as mm
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as paged
from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa
from jax.experimental.pallas.ops.tpu.random import philox, threefry
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

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


def heads_reference(q, k, v, causal):
    """``attention_reference`` for splash's (heads, seq, dim) layout, scale 1."""
    return attention_reference(q[None], k[None], v[None], causal, 1.0)[0]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_splash_attention_forward(causal, dtype, rng):
    """Splash attention reads int8 block-mask tables in its index maps; 384 is not a multiple
    of its default 512 blocks. It keeps its running max and sum in outputs that every head
    revisits (the heads axis is split across threads with private copies of them): repeated
    calls agree."""
    heads, seq = 2, 384
    q, k, v = (randn(rng, (heads, seq, 128), dtype) for _ in range(3))
    mask = masks.CausalMask((seq, seq)) if causal else masks.FullMask((seq, seq))
    kernel = splash.make_splash_mha(masks.MultiHeadMask([mask] * heads), head_shards=1,
                                    q_seq_shards=1)
    program = jax.jit(kernel)
    with pallas.on_cpu():
        got = program(q, k, v)
        for _ in range(3):
            np.testing.assert_array_equal(np.asarray(program(q, k, v)), np.asarray(got))
    want = heads_reference(q, k, v, causal)
    assert_close(f32(got), want, f"splash {dtype.__name__}", tolerance(dtype, want))


def test_splash_attention_backward_under_grad(rng):
    heads, seq = 2, 256
    q, k, v = (randn(rng, (heads, seq, 128), np.float32) for _ in range(3))
    mask = masks.MultiHeadMask([masks.CausalMask((seq, seq))] * heads)
    kernel = splash.make_splash_mha(mask, head_shards=1, q_seq_shards=1)
    program = jax.jit(jax.grad(lambda *a: jnp.sum(jnp.sin(kernel(*a))), argnums=(0, 1, 2)))
    with pallas.on_cpu():
        got = program(q, k, v)
    want = jax.grad(lambda *a: jnp.sum(jnp.sin(heads_reference(*a, True))), argnums=(0, 1, 2))(
        q, k, v)
    for name, g, w in zip("qkv", got, want, strict=True):
        assert_close(g, w, f"d{name}", tolerance(np.float32, w, f32_rel=2e-4))


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


def paged_reference(q, k_pages, v_pages, lengths, page_indices):
    """Attention of each sequence's query heads over its first ``length`` cached tokens, the
    pages gathered by ``page_indices``; query head h reads kv head h // group. Paged
    attention computes with the pages rounded to bf16 (its unquantized path casts them), so
    the reference does too."""
    batch, q_heads, dim = q.shape
    kv_heads = k_pages.shape[0]

    def gather(pages):  # [kv_heads, pages, page_size, dim] -> [batch, kv_heads, tokens, dim]
        tokens = pages[:, page_indices].reshape(kv_heads, batch, -1, dim)
        return f32(tokens.transpose(1, 0, 2, 3).astype(jnp.bfloat16))

    k, v = gather(k_pages), gather(v_pages)
    qg = f32(q).reshape(batch, kv_heads, q_heads // kv_heads, dim)
    s = jnp.einsum("bhgd,bhtd->bhgt", qg, k)
    keep = jnp.arange(k.shape[2]) < lengths[:, None, None, None]
    p = jax.nn.softmax(jnp.where(keep, s, -jnp.inf), axis=-1)
    return jnp.einsum("bhgt,bhtd->bhgd", p, v).reshape(batch, q_heads, dim)


def paged_inputs(rng, dtype, batch, q_heads, kv_heads, page_size, pages_per_sequence,
                 total_pages):
    """Random q and pages, random lengths in 1..capacity (most not a multiple of the page or
    block size), and a random page table drawn without repetition from the cache."""
    q = randn(rng, (batch, q_heads, 128), dtype)
    k_pages = randn(rng, (kv_heads, total_pages, page_size, 128), dtype)
    v_pages = randn(rng, (kv_heads, total_pages, page_size, 128), dtype)
    lengths = jnp.asarray(rng.integers(1, pages_per_sequence * page_size + 1, batch), jnp.int32)
    table = rng.permutation(total_pages)[:batch * pages_per_sequence]
    indices = jnp.asarray(table.reshape(batch, pages_per_sequence), jnp.int32)
    return q, k_pages, v_pages, lengths, indices


PAGED_SHAPES = {
    # batch, q heads, kv heads, page size, pages per sequence, total pages, pages per block
    "mha": (3, 2, 2, 16, 4, 16, 2),
    "gqa": (2, 8, 2, 16, 6, 16, 3),
    "groups-of-8": (2, 16, 2, 8, 4, 12, 1),
    "one-block": (2, 4, 1, 16, 4, 10, 4),
}


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "grid"])
@pytest.mark.parametrize("shape", list(PAGED_SHAPES))
@pytest.mark.parametrize("dtype", DTYPES)
def test_paged_attention_in_a_jitted_model(dtype, shape, inline, rng):
    """Paged attention copies each block's pages from the cache by manual DMA, double
    buffered across grid steps (and sequences), with its buffer index and first-step flag in
    scalar-prefetch operands it writes; its running max and sum live in outputs whose block
    overhangs their width-1 arrays. ``inline_seq_dim`` runs the blocks of a sequence in a
    loop in one grid step (the default) or as grid steps."""
    batch, q_heads, kv_heads, page_size, per_seq, total, per_block = PAGED_SHAPES[shape]
    q, k, v, lengths, indices = paged_inputs(rng, dtype, batch, q_heads, kv_heads, page_size,
                                             per_seq, total)

    @jax.jit
    def model(q, k, v, lengths, indices):
        out = paged.paged_attention(q, k, v, lengths, indices, inline_seq_dim=inline,
                                    pages_per_compute_block=per_block)
        return jnp.tanh(out.astype(jnp.float32))

    want = jnp.tanh(paged_reference(q, k, v, lengths, indices))
    with pallas.on_cpu():
        got = model(q, k, v, lengths, indices)
        assert model.lower(q, k, v, lengths, indices).as_text().count("@tpukit_kernel") == 1
    assert_close(got, want, f"paged {shape} {dtype.__name__}", tolerance(dtype, want))


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_paged_attention_through_custom_jax_kernel(dtype, device, rng):
    """Unmodified ``paged_attention`` with JAX ops around it, in one function, on either
    device; lengths include full sequences and ones shorter than a page."""
    batch, q_heads, kv_heads, page_size, per_seq, total = 4, 8, 2, 16, 4, 24
    q, k, v, _, indices = paged_inputs(rng, dtype, batch, q_heads, kv_heads, page_size,
                                       per_seq, total)
    lengths = jnp.array([64, 3, 33, 17], jnp.int32)

    @pallas.custom_jax_kernel
    def decode(q, k, v, lengths, indices):
        out = paged.paged_attention(q * 2, k, v, lengths, indices, pages_per_compute_block=2)
        return jax.nn.relu(out.astype(jnp.float32)) + 1

    got = decode(q, k, v, lengths, indices, device=device)
    want = jax.nn.relu(paged_reference((f32(q) * 2).astype(dtype), k, v, lengths,
                                       indices)) + 1
    assert_close(got, want, f"paged on {device}", tolerance(dtype, want))


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_paged_attention_on_torch_tensors(device, rng):
    """``custom_jax_kernel(paged_attention)`` itself on torch tensors: the op is a
    ``jax.jit`` function, so its Pallas call sits in a private function ``@main`` calls,
    inlined before the import (``.kernel()`` shows the one imported kernel)."""
    torch = pytest.importorskip("torch")
    q, k, v, _, indices = paged_inputs(rng, np.float32, 3, 4, 2, 16, 4, 16)
    lengths = jnp.array([64, 5, 30], jnp.int32)
    attention = functools.partial(paged.paged_attention, pages_per_compute_block=2)
    kernel = pallas.custom_jax_kernel(attention)
    assert "dma_start" in str(kernel.kernel(q, k, v, lengths, indices))
    # Writable copies: torch warns on tensors over read-only numpy arrays.
    t = [torch.from_numpy(np.array(a)) for a in (q, k, v, lengths, indices)]
    got = kernel(*t, device=device)
    assert isinstance(got, torch.Tensor)
    want = paged_reference(q, k, v, lengths, indices)
    assert_close(got.numpy(), want, "paged on torch", tolerance(np.float32, want))


def test_paged_attention_megacore_modes_are_a_clear_error(rng):
    """``megacore_mode`` splits the work over a TPU's two cores, each with its own copy of
    the scalar-prefetch state; on one core (v5e, v6e, and tpukit's devices, which run such a
    kernel in grid order) the second core's first step waits for a copy nobody started: on a
    TPU it hangs (as JAX's docstring warns), here the wait is an error naming the op, its
    line and the grid step."""
    q, k, v, lengths, indices = paged_inputs(rng, np.float32, 2, 4, 2, 16, 4, 16)
    for mode in ["kv_head", "batch"]:
        program = jax.jit(lambda *a, mode=mode: paged.paged_attention(
            *a, pages_per_compute_block=2, megacore_mode=mode))
        with pallas.on_cpu(), pytest.raises(
                jax.errors.JaxRuntimeError,
                match=r"tpukit invalid error: .*op `dma_wait` at .*paged_attention_kernel.py:"
                      r"\d+:\d+ in grid step \[1, 0, 0\]: .*on a TPU this wait never returns"):
            program(q, k, v, lengths, indices)


def ragged_reference(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, sm_scale,
                     sliding_window=None, soft_cap=None):
    """Per sequence i: its queries attend causally (aligned at the end of its keys) to its
    first kv_lens[i] keys and values, pages page_indices[i] of the cache, whose combined head
    axis alternates keys and values; q head h reads kv head h // (q_heads // kv_heads). The
    rows of the first cu_q_lens[num_seqs] tokens (f32). With ``sliding_window`` a query sees
    only the last that many positions up to its own; ``soft_cap`` squashes the scores to
    ``soft_cap · tanh(score / soft_cap)``."""
    q, kv = np.asarray(f32(q)), np.asarray(f32(kv_pages))
    q_heads, dim = q.shape[1:]
    group = q_heads // (kv.shape[2] // 2)
    rows = []
    for i in range(int(num_seqs[0])):
        start, end, kv_len = int(cu_q_lens[i]), int(cu_q_lens[i + 1]), int(kv_lens[i])
        tokens = kv[np.asarray(page_indices[i])].reshape(-1, kv.shape[2], dim)[:kv_len]
        keys, values = tokens[:, 0::2], tokens[:, 1::2]
        positions = kv_len - (end - start) + np.arange(end - start)
        allowed = np.arange(kv_len)[None, :] <= positions[:, None]
        if sliding_window is not None:
            allowed &= np.arange(kv_len)[None, :] > positions[:, None] - sliding_window
        out = np.empty((end - start, q_heads, dim), np.float32)
        for h in range(q_heads):
            scores = q[start:end, h] @ keys[:, h // group].T * sm_scale
            if soft_cap is not None:
                scores = soft_cap * np.tanh(scores / soft_cap)
            scores = np.where(allowed, scores, -np.inf)
            p = np.exp(scores - scores.max(axis=1, keepdims=True))
            out[:, h] = (p / p.sum(axis=1, keepdims=True)) @ values[:, h // group]
        rows.append(out)
    return jnp.asarray(np.concatenate(rows))


# (q heads, kv heads, page size, pages per sequence, total pages, pages per block, queries per
# block, tokens, sequences, max sequences): token counts, sequence lengths and pages per
# sequence that the blocks do not divide
RAGGED_SHAPES = {
    "gqa": (4, 2, 8, 5, 24, 2, 8, 21, 3, 4),
    "mha": (4, 4, 16, 3, 16, 2, 16, 37, 4, 5),
}


def ragged_inputs(rng, dtype, shape):
    q_heads, kv_heads, page, per_seq, total, _, _, tokens, seqs, max_seqs = shape
    q_lens = rng.multinomial(tokens - seqs, np.ones(seqs) / seqs) + 1  # each at least 1
    q_lens[rng.integers(seqs)] = 1  # a decode step among the prefills
    kv_lens = np.minimum(q_lens + rng.integers(0, page * per_seq, seqs), page * per_seq)
    kv_lens = np.maximum(kv_lens, q_lens)
    cu = np.zeros(max_seqs + 1, np.int32)
    cu[1:seqs + 1] = np.cumsum(q_lens)
    cu[seqs + 1:] = cu[seqs]
    lens = np.zeros(max_seqs, np.int32)
    lens[:seqs] = kv_lens
    pages = rng.permutation(total)[:max_seqs * per_seq].reshape(max_seqs, per_seq)
    return (randn(rng, (tokens, q_heads, 128), dtype),
            randn(rng, (total, page, 2 * kv_heads, 128), dtype),
            jnp.asarray(lens), jnp.asarray(pages, jnp.int32), jnp.asarray(cu),
            jnp.array([seqs], jnp.int32))


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("shape", list(RAGGED_SHAPES))
@pytest.mark.parametrize("dtype", DTYPES)
def test_ragged_paged_attention_in_a_jitted_model(dtype, shape, device, rng):
    """Ragged paged attention (prefill and decode sequences of random lengths in one batch)
    copies pages by manual DMA into a double buffer, reshapes that buffer's ref to rows
    (``tpu.memref_reshape``) and reads keys and values interleaved by strided loads; in bf16
    through a bitcast of the ref to uint32 (``tpu.memref_bitcast``), a key and its value in
    one word. Rows past the last sequence's tokens are not written by the kernel."""
    args = ragged_inputs(rng, dtype, RAGGED_SHAPES[shape])
    per_block, q_block = RAGGED_SHAPES[shape][5:7]

    @jax.jit
    def model(*args):
        return rpa.ragged_paged_attention(*args, sm_scale=0.3, num_kv_pages_per_block=per_block,
                                          num_queries_per_block=q_block)

    with pallas.on_cpu(device=device):
        got = model(*args)
        assert model.lower(*args).as_text().count("@tpukit_kernel") == 1
    want = ragged_reference(*args, sm_scale=0.3)
    assert_close(f32(got)[:want.shape[0]], want, f"ragged {shape} {dtype.__name__}",
                 tolerance(dtype, want))


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_ragged_paged_attention_with_a_sliding_window_and_a_soft_cap(device, rng):
    """The op's options: each query sees its last 10 positions, scores soft-capped at 5."""
    args = ragged_inputs(rng, np.float32, RAGGED_SHAPES["gqa"])
    program = jax.jit(lambda *a: rpa.ragged_paged_attention(
        *a, sm_scale=0.5, sliding_window=10, soft_cap=5.0, num_kv_pages_per_block=2,
        num_queries_per_block=8))
    with pallas.on_cpu(device=device):
        got = program(*args)
    want = ragged_reference(*args, sm_scale=0.5, sliding_window=10, soft_cap=5.0)
    assert_close(f32(got)[:want.shape[0]], want, "ragged window cap",
                 tolerance(np.float32, want))


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_ragged_paged_attention_through_custom_jax_kernel(dtype, device, rng):
    """Unmodified ``ragged_paged_attention`` with JAX ops around it, in one function."""
    args = ragged_inputs(rng, dtype, RAGGED_SHAPES["gqa"])
    total = int(args[4][int(args[5][0])])

    @pallas.custom_jax_kernel
    def attend(q, *rest):
        out = rpa.ragged_paged_attention(q * 2, *rest, num_kv_pages_per_block=2,
                                         num_queries_per_block=8)
        return jnp.tanh(out[:total].astype(jnp.float32))

    got = attend(*args, device=device)
    want = jnp.tanh(ragged_reference((f32(args[0]) * 2).astype(dtype), *args[1:], sm_scale=1.0))
    assert_close(got, want, f"ragged on {device}", tolerance(dtype, want))


def gmm_reference(x, w, sizes):
    """Per group g: rows start_g:end_g of ``x`` times ``w[g]`` (f32)."""
    ends = np.cumsum(np.asarray(sizes))
    starts = ends - np.asarray(sizes)
    rows = [f32(x)[s:e] @ f32(w)[g] for g, (s, e) in enumerate(zip(starts, ends, strict=True))]
    return jnp.concatenate(rows)


def tgmm_reference(x, dy, sizes):
    """Per group g: columns start_g:end_g of ``x`` times rows start_g:end_g of ``dy`` (f32)."""
    ends = np.cumsum(np.asarray(sizes))
    starts = ends - np.asarray(sizes)
    return jnp.stack([f32(x)[:, s:e] @ f32(dy)[s:e] for s, e in zip(starts, ends, strict=True)])


# Group sizes that do not divide megablox's 128-row tiles, one group empty.
GROUP_SIZES = [100, 0, 37, 119]


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_megablox_gmm_and_tgmm_in_a_jitted_model(dtype, device, rng):
    """megablox sizes its grid by the groups' tile count, a traced value (a dynamic grid
    extent); its group metadata is computed by JAX ops around the call (XLA runs them)."""
    m = sum(GROUP_SIZES)
    x, w = randn(rng, (m, 128), dtype), randn(rng, (len(GROUP_SIZES), 128, 256), dtype)
    dy = randn(rng, (m, 256), dtype)
    sizes = jnp.array(GROUP_SIZES, jnp.int32)

    @jax.jit
    def model(x, w, dy, sizes):
        out = gmm_module.gmm(x, w, sizes, preferred_element_type=jnp.float32)
        return out, gmm_module.tgmm(x.T, dy, sizes, preferred_element_type=jnp.float32)

    with pallas.on_cpu(device=device):
        got, got_t = model(x, w, dy, sizes)
        assert model.lower(x, w, dy, sizes).as_text().count("@tpukit_kernel") >= 2
    want = gmm_reference(x, w, GROUP_SIZES)
    assert_close(got, want, f"gmm {dtype.__name__}", tolerance(dtype, want))
    want_t = tgmm_reference(x.T, dy, GROUP_SIZES)
    assert_close(got_t, want_t, f"tgmm {dtype.__name__}", tolerance(dtype, want_t))


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_megablox_gmm_through_custom_jax_kernel(device, rng):
    sizes = [60, 0, 196]
    x, w = randn(rng, (256, 128), np.float32), randn(rng, (3, 128, 128), np.float32)

    @pallas.custom_jax_kernel
    def moe(x, w, sizes):
        return jax.nn.relu(gmm_module.gmm(x, w, sizes)) * 2

    got = moe(x, w, jnp.array(sizes, jnp.int32), device=device)
    want = jax.nn.relu(gmm_reference(x, w, sizes)) * 2
    assert_close(got, want, device, tolerance(np.float32, want))


def _count_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2 + pl.num_programs(0).astype(o_ref.dtype)


def _first_blocks(x, n):
    """The first ``n`` (traced) row blocks of ``x`` doubled plus ``n``; later rows stay 0."""
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(_count_kernel, grid=(n,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_own_kernel_with_a_traced_grid_extent(dtype, device, rng):
    x = randn(rng, (40, 128), dtype)
    model = jax.jit(lambda x, n: _first_blocks(x, n) + 0)
    for n in (0, 2, 5):  # one compiled program serves every extent
        with pallas.on_cpu(device=device):
            got = model(x, jnp.int32(n))
        want = jnp.where(jnp.arange(40)[:, None] < 8 * n, f32(x) * 2 + n, 0).astype(dtype)
        assert_close(got, want, f"n={n}", tolerance(dtype, want))

    @pallas.custom_jax_kernel
    def twice(x, n):
        return _first_blocks(x, n * 2)

    got = twice(x, jnp.int32(2), device=device)
    want = jnp.where(jnp.arange(40)[:, None] < 32, f32(x) * 2 + 4, 0).astype(dtype)
    assert_close(got, want, device, tolerance(dtype, want))


def test_a_negative_traced_grid_extent_is_a_clear_error(rng):
    x = randn(rng, (16, 128), np.float32)
    message = "tpukit shape error: .*`grid_extent0` sizes a grid axis but holds -1"
    with pallas.on_cpu(), pytest.raises(jax.errors.JaxRuntimeError, match=message):
        jax.block_until_ready(jax.jit(_first_blocks)(x, jnp.int32(-1)))


KEY = jnp.array([12, 345], jnp.uint32)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_threefry_kernel_is_jax_random_bits(device):
    """The Pallas threefry kernel fuses ``shaped_iota`` and ``threefry_2x32`` (its docstring):
    bit for bit ``jax.random.bits`` of the ``threefry2x32`` key (partitionable counts), on a
    shape its 256 x 256 blocks do not divide (padded, then sliced by JAX ops)."""
    bits = jax.jit(lambda k: threefry.plthreefry_random_bits(k, 32, (300, 260)))
    with pallas.on_cpu(device=device):
        got = bits(KEY)
        assert "@tpukit_kernel" in bits.lower(KEY).as_text()
    with jax.threefry_partitionable(True):
        want = jax.random.bits(jax.random.wrap_key_data(KEY, impl="threefry2x32"), (300, 260))
    assert got.dtype == jnp.uint32
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _philox_ops(key):
    return (philox.philox_split(key, (3,)), philox.philox_fold_in(key, jnp.uint32(7)),
            philox.philox_random_bits(key, 32, (20, 300)))


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_philox_kernels_match_jax_interpret_mode(device):
    """split, fold_in and random_bits of the Pallas philox PRNG, directly and through its
    registered ``PRNGImpl`` (``jax.random`` on its keys), bit for bit what the same functions
    give under ``pltpu.force_tpu_interpret_mode()``."""

    def via_keys(key):
        k = jax.random.wrap_key_data(key, impl=philox.plphilox_prng_impl)
        return (jax.random.key_data(jax.random.split(k, 3)),
                jax.random.key_data(jax.random.fold_in(k, 7)),
                jax.random.bits(k, (20, 300), jnp.uint32))

    with pltpu.force_tpu_interpret_mode():
        want = jax.jit(_philox_ops)(KEY)
    for fn in (_philox_ops, via_keys):
        with pallas.on_cpu(device=device):
            got = jax.jit(fn)(KEY)
        for name, g, w in zip(("split", "fold_in", "bits"), got, want, strict=True):
            assert g.dtype == jnp.uint32, name
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=name)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_prng_kernels_through_custom_jax_kernel(device):
    """uint32 keys in (JAX and numpy arrays), uint32 bits out, the caller's kind of array."""
    bits = pallas.custom_jax_kernel(lambda k: threefry.plthreefry_random_bits(k, 32, (64, 256)))
    with jax.threefry_partitionable(True):
        want = jax.random.bits(jax.random.wrap_key_data(KEY, impl="threefry2x32"), (64, 256))
    for key in (KEY, np.asarray(KEY)):
        got = bits(key, device=device)
        assert type(got) is type(key) and got.dtype == np.uint32
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
