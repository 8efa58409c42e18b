"""tpuBLAS first calls and steady state, beside XLA CPU and libtpu, in one run.

For every operator, on one realistic f32 call (below), each measured in fresh processes:

- tpukit's first call with the kernels from the shipped bundle (what ``import tpukit`` loads),
  from a warm disk cache (``TPUKIT_CACHE_DIR``, no bundle), and compiled cold (neither);
- tpukit's steady-state time (median of repeated calls in the same process);
- XLA CPU's first call of the same computation (``jax.jit``: trace, compile, run) and its
  steady-state time;
- libtpu's compile time of the operator's kernel, lowered by tpukit (v5e; compile-only).

Each child process does its imports, makes its inputs and calls ``tpukit.warm_up()`` (threads,
JIT, allocator: what import did before it stopped doing work) before timing, so start-up is
not counted; medians over ``--repeats`` processes. Prints a markdown table; ``--write`` replaces
the tpuBLAS section of BENCHMARKS.md. Not a test: the machine is noisy, read the ratios.

    .venv/bin/python benches/tpublas.py [--write] [--repeats 3] [--ops add.Tensor,mm]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from report import write_section

ROOT = Path(__file__).resolve().parent.parent
M, N = 512, 1024  # rows and row length of the elementwise and row operators' inputs


# Operators timed as part of a GPT-2 training step by `benches/first_iteration.py`, not here.
TRAINING_STEP_OPS = {
    "nll_loss_forward", "nll_loss_backward", "_log_softmax_backward_data", "tanh_backward",
    "full", "arange.start_step", "clone", "_to_copy", "embedding_dense_backward",
    "eq.Scalar", "ne.Scalar", "lt.Scalar", "le.Scalar", "gt.Scalar", "ge.Scalar",
    "masked_fill.Scalar", "masked_fill.Tensor", "bernoulli.p",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward", "constant_pad_nd", "tril", "triu",
    "_safe_softmax",
}


def arrays(op: str):
    """The call's arguments (numpy) for ``op``: realistic sizes off the kernels' blocks."""
    r = np.random.default_rng(0)

    def t(*shape, lo=-2.0, hi=2.0):
        return r.uniform(lo, hi, shape).astype(np.float32)

    x, g = t(M, N), t(M, N)
    rows = {
        "_softmax": (x, -1, False),
        "_log_softmax": (x, -1, False),
        "_softmax_backward_data": (g, t(M, N, lo=0, hi=1e-3), -1, np.float32),
        "native_layer_norm": (x, [N], t(N), t(N), 1e-5),
        "_fused_rms_norm": (x, [N], t(N), 1e-6),
        "native_layer_norm_backward": (g, x, [N], t(M, 1), t(M, 1, lo=0.5, hi=2), t(N), t(N),
                                       [True, True, True]),
        "sum.dim_IntList": (x, [1]),
        "mean.dim": (x, [1]),
        "amax": (x, [1]),
        "cumsum": (x, 1),
        "mm": (t(512, 512), t(512, 512)),
        "bmm": (t(8, 256, 256), t(8, 256, 256)),
        "addmm": (t(512), t(512, 512), t(512, 512)),
        "index_select": (t(4096, 512), 0, r.integers(0, 4096, 1024).astype(np.int32)),
        "embedding": (t(32000, 512), r.integers(0, 32000, 2048).astype(np.int32)),
        "permute": (t(64, 128, 256), [2, 0, 1]),
        "transpose.int": (t(1024, 1024), 0, 1),
        "cat": ([x, t(M, N)], 0),
        "where.self": (x > 0, x, g),
        "clamp": (x, -0.5, 0.5),
        "addcmul": (x, g, t(M, N)),
        "addcdiv": (x, g, t(M, N, lo=0.5, hi=2.0)),
        "lerp.Scalar": (x, g, 0.1),
        "threshold_backward": (g, x, 0.0),
        "gelu_backward": (g, x),
        "add.Tensor": (x, t(N)),  # a bias row
    }
    if op in rows:
        return rows[op]
    if op in ("log", "sqrt", "rsqrt"):
        return (t(M, N, lo=0.1, hi=2.0),)
    if op.endswith("Scalar"):
        return (x, 2.5)
    if op in ("sub.Tensor", "mul.Tensor", "div.Tensor", "maximum", "minimum"):
        return (x, g)
    if op == "pow.Tensor_Tensor":
        return (t(M, N, lo=0.1, hi=2.0), g)
    return (x,)


def problem_shape(op: str, args) -> str:
    """The problem shape ``tpukit lower OP --shape`` takes for the operator's main kernel."""
    shapes = {"mm": "512x512x512", "addmm": "512x512x512", "bmm": "8x256x256x256",
              "index_select": "4096x512x1024", "embedding": "32000x512x2048",
              "permute": "64x128x256", "transpose.int": "1x1024x1024",
              "cat": f"{M}x{N}x{2 * M}"}
    rowwise = ("_softmax", "_log_softmax", "_softmax_backward_data", "native_layer_norm",
               "_fused_rms_norm", "native_layer_norm_backward", "sum.dim_IntList", "mean.dim",
               "amax", "cumsum")
    if op in shapes:
        return shapes[op]
    if op in rowwise:
        return f"{M}x{N}"
    return str(int(np.prod(args[0].shape)))


def jax_function(op: str):
    """The same computation in JAX, as XLA would run it."""
    import jax
    import jax.numpy as jnp

    def layer_norm(x, w, b):
        mean = x.mean(-1, keepdims=True)
        rstd = jax.lax.rsqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
        return (x - mean) * rstd * w + b, mean, rstd

    def layer_norm_backward(g, x, w, b):
        _, vjp = jax.vjp(lambda x, w, b: layer_norm(x, w, b)[0], x, w, b)
        return vjp(g)

    def gelu_backward(g, x):
        return jax.vjp(lambda v: jax.nn.gelu(v, approximate=False), x)[1](g)[0]

    fns = {
        "neg": jnp.negative, "abs": jnp.abs, "exp": jnp.exp, "log": jnp.log, "sqrt": jnp.sqrt,
        "rsqrt": jax.lax.rsqrt, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid,
        "relu": jax.nn.relu, "silu": jax.nn.silu,
        "gelu": lambda x: jax.nn.gelu(x, approximate=False),
        "add.Tensor": jnp.add, "sub.Tensor": jnp.subtract, "mul.Tensor": jnp.multiply,
        "div.Tensor": jnp.divide, "maximum": jnp.maximum, "minimum": jnp.minimum,
        "pow.Tensor_Tensor": jnp.power,
        "add.Scalar": lambda x, s: x + s, "sub.Scalar": lambda x, s: x - s,
        "mul.Scalar": lambda x, s: x * s, "div.Scalar": lambda x, s: x / s,
        "pow.Tensor_Scalar": lambda x, s: x**s,
        "where.self": jnp.where, "clamp": lambda x, lo, hi: jnp.clip(x, lo, hi),
        "addcmul": lambda x, a, b: x + a * b, "addcdiv": lambda x, a, b: x + a / b,
        "lerp.Scalar": lambda x, e, w: x + w * (e - x),
        "threshold_backward": lambda g, x, t: jnp.where(x <= t, 0.0, g),
        "gelu_backward": gelu_backward,
        "sum.dim_IntList": lambda x, d: x.sum(d[0]), "mean.dim": lambda x, d: x.mean(d[0]),
        "amax": lambda x, d: x.max(d[0]),
        "_softmax": lambda x, d, h: jax.nn.softmax(x, axis=d),
        "_log_softmax": lambda x, d, h: jax.nn.log_softmax(x, axis=d),
        "_softmax_backward_data": lambda g, y, d, t: y * (g - (g * y).sum(d, keepdims=True)),
        "native_layer_norm": lambda x, s, w, b, e: layer_norm(x, w, b),
        "_fused_rms_norm": lambda x, s, w, e: (
            x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + e) * w),
        "native_layer_norm_backward": lambda g, x, s, m, r, w, b, k: layer_norm_backward(
            g, x, w, b),
        "cumsum": lambda x, d: jnp.cumsum(x, d),
        "mm": jnp.matmul, "bmm": jnp.matmul, "addmm": lambda c, a, b: c + a @ b,
        "index_select": lambda x, d, i: jnp.take(x, i, axis=d),
        "embedding": lambda w, i: w[i],
        "permute": lambda x, p: jnp.transpose(x, p),
        "transpose.int": lambda x, a, b: jnp.swapaxes(x, a, b),
        "cat": lambda xs, d: jnp.concatenate(xs, d),
    }
    return fns[op]


# Arguments of each operator that are static (shapes, dims, flags): not traced by jax.jit.
STATIC = {"sum.dim_IntList": (1,), "mean.dim": (1,), "amax": (1,), "_softmax": (1, 2),
          "_log_softmax": (1, 2), "_softmax_backward_data": (2, 3), "native_layer_norm": (1, 4),
          "_fused_rms_norm": (1, 3), "native_layer_norm_backward": (2, 7), "cumsum": (1,),
          "index_select": (1,), "permute": (1,), "transpose.int": (1, 2), "cat": (1,),
          "clamp": (1, 2), "threshold_backward": (2,)}


def steady(f) -> float:
    """Median ms of one call of ``f`` once warm: at least 9 calls, 0.5 s or 200 calls."""
    from tpukit.testing import do_bench

    return do_bench(f, warmup=0, rep=500, min_rep=9, max_rep=200)


def child(side: str, op: str) -> None:
    """In a fresh process: time the first call of ``op``, then its steady state."""
    args = arrays(op)
    if side == "tpukit":
        import tpukit.tpublas as tb

        packet, _, overload = op.partition(".")
        fn = getattr(getattr(tb, packet), overload or "default")
        import tpukit

        tpukit.warm_up()

        def call():
            return fn(*args)
    else:
        import jax

        fn = jax.jit(jax_function(op), static_argnums=STATIC.get(op, ()))
        hashable = [tuple(a) if isinstance(a, list) and not isinstance(a[0], np.ndarray)
                    else a for a in args]

        def call():
            return jax.block_until_ready(fn(*hashable))
    t = time.perf_counter()
    call()
    first = (time.perf_counter() - t) * 1e3
    print(json.dumps({"first_ms": first, "steady_ms": steady(call)}))


def run_child(side: str, op: str, env: dict) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("TPUKIT_BUNDLE", "TPUKIT_CACHE_DIR")}
    done = subprocess.run([sys.executable, __file__, "--child", side, op], env={**base, **env},
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{side} {op}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def libtpu_compile_ms(ops, repeats: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "python"))
    from tpukit.tpu import TOPOLOGIES, Compiler, available

    if not available():
        return {}
    cli = ROOT / "target" / "debug" / "tpukit"
    subprocess.run(["cargo", "build", "-q", "-p", "tpukit-cli"], cwd=ROOT, check=True)
    compiler, out = Compiler(), {}
    with tempfile.TemporaryDirectory() as d:
        for op in ops:
            path = Path(d) / "k.mlir"
            shape = problem_shape(op, arrays(op))
            subprocess.run([str(cli), "lower", op, "--shape", shape, "-o", str(path)], check=True)
            times = [compiler.compile(path.read_text(), TOPOLOGIES[0]) for _ in range(repeats)]
            if all(c.ok for c in times):
                out[op] = statistics.median(c.compile_ms for c in times)
    return out


def measure(ops, repeats: int) -> dict:
    env = {"TPUKIT_TORCH": "0"}
    rows = {}
    with tempfile.TemporaryDirectory() as cache:
        for i, op in enumerate(ops):
            row = {}
            run_child("tpukit", op, {**env, "TPUKIT_BUNDLE": "", "TPUKIT_CACHE_DIR": cache})
            for source, extra in [("bundle", {}),
                                  ("disk", {"TPUKIT_BUNDLE": "", "TPUKIT_CACHE_DIR": cache}),
                                  ("cold", {"TPUKIT_BUNDLE": ""})]:
                runs = [run_child("tpukit", op, {**env, **extra}) for _ in range(repeats)]
                row[source] = statistics.median(r["first_ms"] for r in runs)
                if source == "bundle":
                    row["steady"] = statistics.median(r["steady_ms"] for r in runs)
            runs = [run_child("xla", op, env) for _ in range(repeats)]
            row["xla_first"] = statistics.median(r["first_ms"] for r in runs)
            row["xla_steady"] = statistics.median(r["steady_ms"] for r in runs)
            rows[op] = row
            print(f"[{i + 1}/{len(ops)}] {op}: {json.dumps(row)}", file=sys.stderr)
    for op, ms in libtpu_compile_ms(ops, repeats).items():
        rows[op]["libtpu"] = ms
    return rows


def describe(op: str) -> str:
    def shape(a):
        if isinstance(a, np.ndarray):
            return "x".join(map(str, a.shape)) or "()"
        if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
            return "[" + ", ".join(shape(x) for x in a) + "]"
        return None

    return ", ".join(s for s in map(shape, arrays(op)) if s)


def table(rows: dict) -> str:
    def f(v):
        return "—" if v is None else (f"{v:.2f}" if v < 100 else f"{v:.0f}")

    header = (
        "| operator | f32 inputs | from bundle | − steady | warm disk cache | cold compile "
        "| tpukit steady | XLA first call | XLA steady | tpukit / XLA steady | libtpu compile |"
    )
    lines = [header, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    over = []
    for op, r in rows.items():
        extra = r["bundle"] - r["steady"]
        over.append(extra)
        lines.append(
            f"| {op} | {describe(op)} | {f(r['bundle'])} | {f(extra)} | {f(r['disk'])} "
            f"| {f(r['cold'])} | {f(r['steady'])} | {f(r['xla_first'])} | {f(r['xla_steady'])} "
            f"| {r['steady'] / r['xla_steady']:.2f}× | {f(r.get('libtpu'))} |"
        )
    within = sum(e <= 1.0 for e in over)
    ratios = [r["steady"] / r["xla_steady"] for r in rows.values()]
    summary = (
        f"First call from the bundle, minus the steady-state time: median "
        f"{statistics.median(over):.2f} ms; within 1 ms for {within} of {len(over)} operators. "
        f"Steady state: median tpukit/XLA time ratio {statistics.median(ratios):.2f}×, "
        f"tpukit faster for {sum(x < 1 for x in ratios)} of {len(ratios)}."
    )
    return "\n".join(lines) + "\n\n" + summary + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--child", nargs=2, metavar=("SIDE", "OP"), help=argparse.SUPPRESS)
    p.add_argument("--write", action="store_true", help="replace the section in BENCHMARKS.md")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per measurement")
    p.add_argument("--ops", help="comma-separated operators (default: all)")
    a = p.parse_args()
    if a.child:
        child(*a.child)
        return 0
    sys.path.insert(0, str(ROOT / "python"))
    import tpukit.tpublas as tb

    names = [i.name.removeprefix("aten.").removesuffix(".default") for i in tb.ops()]
    names = [n for n in names if n not in TRAINING_STEP_OPS]
    ops = a.ops.split(",") if a.ops else names
    rows = measure(ops, a.repeats)
    header = (
        f"Run on {os.cpu_count()} CPUs ({platform.machine()}), {time.strftime('%Y-%m-%d')}; "
        f"medians over {a.repeats} fresh processes per cell, times in ms.\n\n"
    )
    text = header + table(rows)
    print(text)
    if a.write:
        write_section("tpublas-bench", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
