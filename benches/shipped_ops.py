"""JAX's shipped TPU Pallas ops on the CPU, in unmodified jitted programs: under
``tpukit.pallas.on_cpu()`` (each Pallas call a tpukit custom call, XLA for the rest), under
``pltpu.force_tpu_interpret_mode()`` (JAX's TPU interpreter) and as XLA's plain
``jax.numpy`` version of the same computation.

Each cell is the median of the steady-state calls of one jitted program (results ready),
after a first call that compiles; the first call is reported for tpukit. tpukit's and XLA's
steady calls alternate, so that the load of a shared machine weighs on both alike. A mode
that cannot run an op (an exception) is a "fails" cell. Prints a markdown table;
``--write`` replaces the shipped-ops section of BENCHMARKS.md. Not a test: the machine is
noisy, read the ratios.

    PYTHONPATH=python .venv/bin/python benches/shipped_ops.py [--write] [--repeats 10]
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from report import write_section

ROOT = Path(__file__).resolve().parent.parent


def _attention(q, k, v, causal, sm_scale):
    import jax
    import jax.numpy as jnp

    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * sm_scale
    if causal:
        s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -1e30)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def _paged_attention(q, k_pages, v_pages, lengths, page_indices):
    """Decode attention over each sequence's first ``length`` cached tokens, the pages
    gathered by ``page_indices`` (query head h reads kv head h // group), in plain jnp."""
    import jax
    import jax.numpy as jnp

    batch, q_heads, dim = q.shape
    kv_heads = k_pages.shape[0]

    def gather(pages):
        return pages[:, page_indices].reshape(kv_heads, batch, -1, dim).transpose(1, 0, 2, 3)

    k, v = gather(k_pages), gather(v_pages)
    s = jnp.einsum("bhgd,bhtd->bhgt", q.reshape(batch, kv_heads, -1, dim), k)
    keep = jnp.arange(k.shape[2]) < lengths[:, None, None, None]
    p = jax.nn.softmax(jnp.where(keep, s, -jnp.inf), axis=-1)
    return jnp.einsum("bhgt,bhtd->bhgd", p, v).reshape(batch, q_heads, dim)


def _ragged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, max_q):
    """Each sequence's queries (at most ``max_q``) attending causally to its cached tokens,
    in plain jnp: pages gathered per sequence (keys and values alternate in the head axis),
    queries padded to ``max_q`` per sequence and scattered back to their rows."""
    import jax
    import jax.numpy as jnp

    tokens, q_heads, dim = q.shape
    seqs = page_indices.shape[0]
    kv = kv_pages[page_indices].reshape(seqs, -1, kv_pages.shape[2], dim)
    k, v = kv[:, :, 0::2], kv[:, :, 1::2]
    kv_heads, span = k.shape[2], k.shape[1]
    q_lens = cu_q_lens[1:] - cu_q_lens[:-1]
    rows = cu_q_lens[:-1, None] + jnp.arange(max_q)
    valid = (jnp.arange(max_q) < q_lens[:, None]) & (jnp.arange(seqs) < num_seqs[0])[:, None]
    qs = q[jnp.minimum(rows, tokens - 1)].reshape(seqs, max_q, kv_heads, -1, dim)
    s = jnp.einsum("sqhgd,sthd->shgqt", qs, k)
    positions = (kv_lens - q_lens)[:, None] + jnp.arange(max_q)
    keep = jnp.arange(span)[None, None, :] <= positions[:, :, None]
    p = jax.nn.softmax(jnp.where(keep[:, None, None], s, -jnp.inf), axis=-1)
    o = jnp.einsum("shgqt,sthd->sqhgd", p, v).reshape(seqs, max_q, q_heads, dim)
    return jnp.zeros_like(q).at[jnp.where(valid, rows, tokens)].set(o, mode="drop")


def _grouped_matmul(x, w, sizes):
    """Rows of group g (``sizes[g]`` of them, in order) times ``w[g]``, in plain jnp: every
    group's product over all rows, its rows kept by a mask (what dense code computes)."""
    import jax.numpy as jnp

    ends = jnp.cumsum(sizes)
    rows = jnp.arange(x.shape[0])[None, :]
    keep = (rows >= (ends - sizes)[:, None]) & (rows < ends[:, None])
    return jnp.sum(jnp.matmul(x[None] * keep[..., None], w), axis=0)


def cases():
    """``(name, shipped program, plain program, arguments)``: jitted functions."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental.pallas.ops.tpu import flash_attention as fa
    from jax.experimental.pallas.ops.tpu import matmul as mm
    from jax.experimental.pallas.ops.tpu.paged_attention import (
        paged_attention_kernel as pa,
    )
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_kernel as sk,
    )
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_mask as sm,
    )

    # megablox's package rebinds the name `gmm` to the function: the module by its path.
    gmm = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")
    rng = np.random.default_rng(0)

    def randn(*shape):
        return jnp.asarray(rng.standard_normal(shape).astype(np.float32))

    qkv = [randn(2, 4, 512, 128) for _ in range(3)]
    out = []
    for causal in (True, False):
        out.append((
            f"flash_attention 2×4×512×128, {'causal' if causal else 'full'}",
            jax.jit(lambda q, k, v, c=causal: fa.flash_attention(q, k, v, causal=c,
                                                                 sm_scale=0.125)),
            jax.jit(lambda q, k, v, c=causal: _attention(q, k, v, c, 0.125)),
            qkv,
        ))

    def loss(attend):
        return lambda q, k, v: jnp.sum(jnp.sin(attend(q, k, v)))

    small = [randn(1, 2, 256, 128) for _ in range(3)]
    out.append((
        "flash_attention 1×2×256×128 causal, jax.grad (fwd + dq, dkv kernels)",
        jax.jit(jax.grad(loss(lambda q, k, v: fa.flash_attention(q, k, v, causal=True,
                                                                 sm_scale=0.125)), (0, 1, 2))),
        jax.jit(jax.grad(loss(lambda q, k, v: _attention(q, k, v, True, 0.125)), (0, 1, 2))),
        small,
    ))
    heads = [randn(8, 512, 128) for _ in range(3)]
    mask = sm.MultiHeadMask([sm.CausalMask((512, 512))] * 8)
    splash = sk.make_splash_mha(mask, head_shards=1, q_seq_shards=1)
    out.append((
        "splash_attention 8×512×128, causal",
        jax.jit(lambda q, k, v: splash(q, k, v)),
        jax.jit(lambda q, k, v: _attention(q[None], k[None], v[None], True, 1.0)[0]),
        heads,
    ))
    batch, q_heads, kv_heads, page_size, per_seq = 8, 16, 4, 16, 32
    total = batch * per_seq
    paged_args = [
        randn(batch, q_heads, 128),
        randn(kv_heads, total, page_size, 128),
        randn(kv_heads, total, page_size, 128),
        jnp.asarray(rng.integers(1, per_seq * page_size + 1, batch), jnp.int32),
        jnp.asarray(rng.permutation(total).reshape(batch, per_seq), jnp.int32),
    ]
    out.append((
        "paged_attention 8 sequences × 16 heads (4 kv) × 512 tokens, 16-token pages",
        jax.jit(lambda *a: pa.paged_attention(*a, pages_per_compute_block=8)),
        jax.jit(_paged_attention),
        paged_args,
    ))
    q_lens = np.array([1, 1, 1, 1, 64, 64, 64, 64], np.int32)
    kv_lens = np.maximum(q_lens, rng.integers(1, per_seq * page_size + 1, batch)).astype(np.int32)
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    ragged_args = [
        randn(int(cu[-1]), q_heads, 128),
        randn(total, page_size, 2 * kv_heads, 128),
        jnp.asarray(kv_lens), paged_args[4], jnp.asarray(cu), jnp.array([batch], jnp.int32),
    ]
    out.append((
        ("ragged_paged_attention 4 decode + 4 prefill (64 tokens) sequences × 16 heads (4 kv) "
         "× ≤512 tokens, 16-token pages"),
        jax.jit(lambda *a: rpa.ragged_paged_attention(*a, num_kv_pages_per_block=8,
                                                      num_queries_per_block=32)),
        jax.jit(lambda *a: _ragged_attention(*a, max_q=64)),
        ragged_args,
    ))
    sizes = jnp.asarray([300, 0, 700, 24], jnp.int32)
    out.append((
        "megablox gmm 1024×512 @ 4 groups of 512×512 (sizes 300, 0, 700, 24)",
        jax.jit(lambda x, w, s: gmm.gmm(x, w, s)),
        jax.jit(_grouped_matmul),
        [randn(1024, 512), randn(4, 512, 512), sizes],
    ))
    x, y = randn(1024, 1024), randn(1024, 1024)
    out.append((
        "matmul 1024×1024×1024, 256×256 blocks, block_k 256",
        jax.jit(lambda x, y: mm.matmul(x, y, block_shape=(256, 256), block_k=256)),
        jax.jit(lambda x, y: x @ y),
        [x, y],
    ))
    return out


def timed(fn, args, repeats) -> tuple[float, float]:
    """``(first call ms, median steady-state ms)``."""
    first, [times] = interleaved([(fn, args)], repeats)
    return first[0], statistics.median(times)


def interleaved(calls, repeats) -> tuple[list[float], list[list[float]]]:
    """Each ``(fn, args)``'s first call (ms), then ``repeats`` rounds that call each once in
    turn: the calls' times (ms), so that the load of the (shared) machine drifts alike for
    all of them."""
    import jax

    def once(fn, args):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        return (time.perf_counter() - t) * 1e3

    first = [once(fn, args) for fn, args in calls]
    times = [[] for _ in calls]
    for _ in range(repeats):
        for i, (fn, args) in enumerate(calls):
            times[i].append(once(fn, args))
    return first, times


def measure(repeats: int) -> list[tuple]:
    from jax.experimental.pallas import tpu as pltpu
    from tpukit import pallas

    # Each mode gets freshly made (so freshly jitted) programs: JAX's caches must not hand one
    # mode's compiled program to another. tpukit's and XLA's calls alternate (a program jitted
    # inside `on_cpu()` keeps its custom calls outside it); interpret mode, 100× slower, is
    # timed on its own.
    ours, interpret, plain = cases(), cases(), cases()
    rows = []
    for i, (name, *_) in enumerate(ours):
        with pallas.on_cpu():
            # Lower (and compile) inside the context; the steady calls then run outside it.
            first = interleaved([(ours[i][1], ours[i][3])], 0)[0][0]
        _warm, (t_ours, t_xla) = interleaved(
            [(ours[i][1], ours[i][3]), (plain[i][2], plain[i][3])], repeats
        )
        try:
            with pltpu.force_tpu_interpret_mode():
                t_interp = timed(interpret[i][1], interpret[i][3], max(1, repeats // 5))[1]
        except Exception as e:  # noqa: BLE001 - a mode that cannot run the op is a cell
            t_interp = None
            print(f"{name}, interpret: fails: {type(e).__name__}: {e}"[:400], file=sys.stderr)
        med = statistics.median
        for mode, t in [("tpukit", med(t_ours)), ("interpret", t_interp), ("xla", med(t_xla))]:
            if t is not None:
                print(f"{name}, {mode}: {t:.1f} ms", file=sys.stderr)
        rows.append((name, first, med(t_ours), t_interp, med(t_xla)))
    return rows


def table(rows) -> str:
    lines = [
        (
            "| op (f32) | tpukit `on_cpu()` first call | tpukit `on_cpu()` | "
            "`force_tpu_interpret_mode()` | XLA plain `jnp` | tpukit / XLA |"
        ),
        "|---|---:|---:|---:|---:|---:|",
    ]
    def cell(x, digits):
        return "fails" if x is None else f"{x:.{digits}f}"

    for name, first, ours, interpret, xla in rows:
        ratio = "" if ours is None or xla is None else f"{ours / xla:.2f}×"
        lines.append(
            f"| {name} | {cell(first, 0)} | {cell(ours, 1)} | {cell(interpret, 0)} | "
            f"{cell(xla, 1)} | {ratio} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="replace the section in BENCHMARKS.md")
    p.add_argument("--repeats", type=int, default=10, help="steady-state calls per cell")
    a = p.parse_args()
    sys.path.insert(0, str(ROOT / "python"))
    rows = measure(a.repeats)
    header = (
        f"Run on {os.cpu_count()} CPUs ({platform.machine()}), {time.strftime('%Y-%m-%d')}; "
        f"medians of {a.repeats} steady-state calls (interpret mode: {max(1, a.repeats // 5)}), "
        "times in ms.\n\n"
    )
    text = header + table(rows)
    print(text)
    if a.write:
        write_section("shipped-ops-bench", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
