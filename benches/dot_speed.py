"""``dot`` on the CPU backend beside XLA CPU, interleaved: big products (tpuBLAS ``mm``, the
128-blocked kernel with an f32 scratch accumulator), a Pallas matmul with a scratch
accumulator and JAX's shipped flash attention (128×128 products inside ``fori_loop``s) under
``tpukit.pallas.on_cpu()``.

Each round times every implementation of every case once (a batch of calls, ~0.2 s), in
turn, so that the load of the (shared, noisy) machine falls on all alike; cells are medians
over rounds. Not a test: read the ratios.

    TPUKIT_BUNDLE= .venv/bin/python benches/dot_speed.py [--rounds 7]

(The tpukit imported is the interpreter's: run it with another checkout's venv to compare.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def _batch(fn, seconds: float) -> float:
    """Mean ms per call of ``fn`` over about ``seconds`` (after one call)."""
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return dt / n * 1e3


def cases():
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    from jax.experimental import pallas as pl
    from jax.experimental.pallas.ops.tpu import flash_attention as fa
    from tpukit import pallas, tpublas

    rng = np.random.default_rng(0)
    out = {}
    for tname, tdt, jdt in (("f32", torch.float32, jnp.float32),
                            ("bf16", torch.bfloat16, jnp.bfloat16)):
        x = torch.rand((1024, 1024), generator=torch.Generator().manual_seed(1)).to(tdt)
        y = torch.rand((1024, 1024), generator=torch.Generator().manual_seed(2)).to(tdt)
        xj = jnp.asarray(x.float().numpy()).astype(jdt)
        yj = jnp.asarray(y.float().numpy()).astype(jdt)
        xla = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32)
                      .astype(a.dtype))
        out[f"tpublas.mm 1024² {tname}"] = {
            "tpukit": lambda x=x, y=y: tpublas.mm(x, y),
            "xla": lambda a=xj, b=yj, f=xla: f(a, b).block_until_ready(),
        }

        def kernel(a_ref, b_ref, o_ref, acc_ref):
            @pl.when(pl.program_id(2) == 0)
            def _():
                acc_ref[...] = jnp.zeros_like(acc_ref)

            acc_ref[...] += jnp.dot(a_ref[...], b_ref[...],
                                    preferred_element_type=jnp.float32)

            @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
            def _():
                o_ref[...] = acc_ref[...].astype(o_ref.dtype)

        from jax.experimental.pallas import tpu as pltpu

        def pallas_mm(a, b, bs=128):
            m, k = a.shape
            n = b.shape[1]
            return pl.pallas_call(
                kernel,
                grid=(m // bs, n // bs, k // bs),
                in_specs=[pl.BlockSpec((bs, bs), lambda i, j, p: (i, p)),
                          pl.BlockSpec((bs, bs), lambda i, j, p: (p, j))],
                out_specs=pl.BlockSpec((bs, bs), lambda i, j, p: (i, j)),
                out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
                scratch_shapes=[pltpu.VMEM((bs, bs), jnp.float32)],
            )(a, b)

        with pallas.on_cpu():
            ours = jax.jit(pallas_mm)
            ours(xj, yj).block_until_ready()
        out[f"Pallas acc += dot, 1024² {tname}, 128 blocks"] = {
            "tpukit": lambda a=xj, b=yj, f=ours: f(a, b).block_until_ready(),
            "xla": lambda a=xj, b=yj, f=xla: f(a, b).block_until_ready(),
        }

    def attention(q, k, v, causal):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * 0.125
        if causal:
            s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -1e30)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    qkv = [jnp.asarray(rng.standard_normal((2, 4, 512, 128)).astype(np.float32))
           for _ in range(3)]
    for causal in (False, True):
        with pallas.on_cpu():
            ours = jax.jit(lambda q, k, v, c=causal: fa.flash_attention(
                q, k, v, causal=c, sm_scale=0.125))
            ours(*qkv).block_until_ready()
        plain = jax.jit(lambda q, k, v, c=causal: attention(q, k, v, c))
        name = f"flash_attention 2×4×512×128 f32, {'causal' if causal else 'full'}"
        out[name] = {
            "tpukit": lambda f=ours: f(*qkv).block_until_ready(),
            "xla": lambda f=plain: f(*qkv).block_until_ready(),
        }
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--seconds", type=float, default=0.2)
    a = p.parse_args()
    made = cases()
    times = {c: {i: [] for i in impls} for c, impls in made.items()}
    for _ in range(a.rounds):
        for c, impls in made.items():
            for i, fn in impls.items():
                times[c][i].append(_batch(fn, a.seconds))
    print(f"Medians of {a.rounds} interleaved rounds, ms per call.\n")
    print("| case | tpukit (ms) | XLA (ms) | tpukit / XLA |")
    print("|---|---:|---:|---:|")
    for c, t in times.items():
        ours, xla = statistics.median(t["tpukit"]), statistics.median(t["xla"])
        print(f"| {c} | {ours:.2f} | {xla:.2f} | {ours / xla:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
