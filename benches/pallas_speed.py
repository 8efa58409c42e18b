"""Pallas kernels given to ``tpukit.pallas.custom_kernel``, beside XLA CPU on the same work.

The kernels are written as Pallas TPU users write them (a grid, BlockSpecs, f32 math inside
for bf16 data, an f32 VMEM scratch accumulator over an ``arbitrary`` k axis) and called on
numpy arrays; the reference is ``jax.jit`` of the same computation in ``jax.numpy`` on JAX
arrays. Each kernel's result is first checked against XLA's. Every round times each
implementation of a case for a batch of calls (plus a numpy copy of one input, one thread, for
the memory-bound rows' "of copy": torch's ``copy_`` would leave its OpenMP threads spinning
into XLA's next call, which then ran at up to 6× its time), so load on the shared machine
falls on all alike; cells are medians over rounds.

    PYTHONPATH=python .venv/bin/python benches/pallas_speed.py [--write] [--quick]

``--write`` replaces the ``pallas-bench`` section of BENCHMARKS.md.
"""

from __future__ import annotations

import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from python_speed import CPU, interleaved, layer_norm_jax, softmax_jax
from report import arguments, fma_peak, write_section
from tpukit import pallas

M, N = 4096, 1024  # the rows kernels' arrays
K = 1024  # the matmul's m = n = k
DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}


def _add(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def _softmax(x_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    e = jnp.exp(x - x.max(axis=-1, keepdims=True))
    o_ref[...] = (e / e.sum(axis=-1, keepdims=True)).astype(o_ref.dtype)


def _layer_norm(x_ref, w_ref, b_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    mean = x.mean(axis=-1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=-1, keepdims=True)
    y = d * jax.lax.rsqrt(var + 1e-5) * w_ref[...] + b_ref[...]
    o_ref[...] = y.astype(o_ref.dtype)


def _matmul(a_ref, b_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _parallel(axes: int, parallel: bool) -> dict:
    """``compiler_params`` marking ``axes`` grid axes parallel, or none (Pallas's default:
    every axis ``arbitrary``)."""
    if not parallel:
        return {}
    return {"compiler_params": pltpu.CompilerParams(dimension_semantics=("parallel",) * axes)}


def elementwise_add(bm: int, bn: int, parallel: bool = True):
    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))
    return pallas.custom_kernel(
        lambda x, y: x, _add, grid=(M // bm, N // bn), in_specs=[spec, spec], out_specs=spec,
        **_parallel(2, parallel))


def row_kernel(body, rows: int, vectors: int, parallel: bool = True):
    spec = pl.BlockSpec((rows, N), lambda i: (i, 0))
    whole = pl.BlockSpec((1, N), lambda i: (0, 0))
    return pallas.custom_kernel(
        lambda x, *_: x, body, grid=(M // rows,), in_specs=[spec] + [whole] * vectors,
        out_specs=spec, **_parallel(1, parallel))


def matmul(bs: int):
    return pallas.custom_kernel(
        lambda a, b: a, _matmul, grid=(K // bs, K // bs, K // bs),
        in_specs=[pl.BlockSpec((bs, bs), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bs, bs), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bs, bs), lambda i, j, k: (i, j)),
        scratch_shapes=[pltpu.VMEM((bs, bs), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")))


def cases(dname: str) -> dict:
    """``{name: (kernel, xla, numpy args, jax args, bytes moved or None, flops or None)}``."""
    np_dt = DTYPES[dname]
    rng = np.random.default_rng(0)

    def arr(*shape, dt=np_dt):
        a = rng.standard_normal(shape, np.float32).astype(dt)
        return a, jnp.asarray(a)

    (x, xj), (y, yj) = arr(M, N), arr(M, N)
    (w, wj), (b, bj) = arr(1, N, dt=np.float32), arr(1, N, dt=np.float32)
    (a, aj), (c, cj) = arr(K, K), arr(K, K)
    size = x.nbytes
    add_j = jax.jit(lambda p, q: p + q)
    return {
        f"add {M}×{N} {dname}, (8, 128) blocks":
            (elementwise_add(8, 128), add_j, (x, y), (xj, yj), 3 * size, None),
        f"add {M}×{N} {dname}, (256, 1024) blocks":
            (elementwise_add(256, N), add_j, (x, y), (xj, yj), 3 * size, None),
        f"add {M}×{N} {dname}, (8, 128) blocks, no `dimension_semantics`":
            (elementwise_add(8, 128, parallel=False), add_j, (x, y), (xj, yj), 3 * size, None),
        f"softmax {M}×{N} {dname}, 8-row blocks, f32 inside":
            (row_kernel(_softmax, 8, 0), jax.jit(softmax_jax), (x,), (xj,), 2 * size, None),
        f"softmax {M}×{N} {dname}, 8-row blocks, no `dimension_semantics`":
            (row_kernel(_softmax, 8, 0, parallel=False), jax.jit(softmax_jax), (x,), (xj,),
             2 * size, None),
        f"layer norm {M}×{N} {dname}, 16-row blocks, f32 inside":
            (row_kernel(_layer_norm, 16, 2), jax.jit(layer_norm_jax),
             (x, w, b), (xj, wj, bj), 2 * size, None),
        f"matmul {K}³ {dname}, 256 blocks, f32 scratch accumulator":
            (matmul(256),
             jax.jit(lambda p, q: jnp.dot(p, q, preferred_element_type=jnp.float32)
                     .astype(p.dtype)),
             (a, c), (aj, cj), None, 2 * K**3),
    }


def check(kernel, xla, args, jargs, dname: str) -> None:
    """The kernel's result is XLA's, to the dtype's tolerance (a bench of a wrong kernel
    measures nothing)."""
    got = np.asarray(kernel(*args), np.float32)
    want = np.asarray(xla(*jargs).astype(jnp.float32))
    tol = 2e-2 if dname == "bf16" else 2e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


HEAD = ("| kernel | tpukit (ms) | XLA (ms) | tpukit / XLA | CPU ms, tpukit / XLA | tpukit rate |\n"
        "|---|---:|---:|---:|---:|---:|")


def main() -> int:
    args, rounds, seconds = arguments(__doc__, seconds=(0.05, 0.2))
    run = (f"Run on {os.cpu_count()} CPUs ({platform.machine()}), {time.strftime('%Y-%m-%d')}; "
           f"jax {jax.__version__}. Medians of {rounds} interleaved rounds; tpukit on numpy "
           "arrays, XLA on JAX arrays. \"of copy\": the rate over a numpy copy of one input "
           "(one thread) timed in the same rounds; \"of FMA peak\": over the peak of the "
           "cores (`benches/fma_peak.c`, one process per core) measured just before the row.")
    lines = [run, "", HEAD]
    print("\n".join(lines), flush=True)
    for dname in DTYPES:
        for name, (kernel, xla, np_args, j_args, moved, flops) in cases(dname).items():
            check(kernel, xla, np_args, j_args, dname)
            peak = fma_peak(os.cpu_count() or 1) if flops is not None else {}
            dst = np.empty_like(np_args[0])
            times = interleaved({
                "tpukit": lambda k=kernel, a=np_args: k(*a),
                "xla": lambda f=xla, a=j_args: f(*a).block_until_ready(),
                "copy": lambda s=np_args[0], d=dst: np.copyto(d, s),
            }, rounds, seconds)
            t, x = times["tpukit"], times["xla"]
            if flops is not None:
                rate = flops / t / 1e9
                limit = peak.get(dname)
                share = f" ({rate / limit:.2f} of FMA peak, {limit:.0f})" if limit else ""
                rate_s = f"{rate:.0f} GFLOP/s{share}"
            else:
                copy_gbs = 2 * np_args[0].nbytes / times["copy"] / 1e9
                rate_s = f"{moved / t / 1e9:.1f} GB/s ({moved / t / 1e9 / copy_gbs:.2f} of copy)"
            lines.append(f"| {name} | {t * 1e3:.3f} | {x * 1e3:.3f} | {t / x:.2f}× | "
                         f"{CPU['tpukit'] * 1e3:.3f} / {CPU['xla'] * 1e3:.3f} | {rate_s} |")
            print(lines[-1], flush=True)
    if args.write:
        write_section("pallas-bench", "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
