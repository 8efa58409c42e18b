"""tpukit's CPU backend beside numpy and XLA CPU (jax.jit), in one run.

Runs `cargo bench --bench cpu` (tpukit; JSON lines), times the same problems with numpy, with
`jax.jit` on the CPU and, for the small add, Pallas `interpret=True`; prints a markdown table
of medians and ratios and, with `--write`, replaces the CPU section of BENCHMARKS.md.

    make bench            # = .venv/bin/python benches/compare.py --write
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from report import fma_peak, write_section

ROOT = Path(__file__).resolve().parent.parent


def median_seconds(f, min_repeats: int = 15, budget: float = 1.5) -> float:
    """Median wall time of one call of `f` (two untimed calls first), over `budget` seconds and
    at least `min_repeats` calls (`tpukit.testing.do_bench`)."""
    from tpukit.testing import do_bench

    return do_bench(f, warmup=0, rep=budget * 1e3, min_rep=min_repeats, max_rep=2000) / 1e3


def run_tpukit() -> tuple[dict, dict, dict]:
    out = subprocess.run(
        ["cargo", "bench", "-q", "--bench", "cpu"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    cases, compiles, limits = {}, {}, {}
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "case" in r:
            cases[r["case"]] = r["seconds"]
        elif "compile" in r:
            compiles[r["compile"]] = r["seconds"]
        elif "limit" in r:
            limits[r["limit"]] = r["value"]
    return cases, compiles, limits


def random(shape, dtype, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def numpy_cases() -> dict[str, float]:
    x, y = random((4096, 1024), np.float32, 1), random((4096, 1024), np.float32, 2)
    xs, ys = x[:256], y[:256]
    xf, yf = x.reshape(-1), y.reshape(-1)
    a, b = random((1024, 1024), np.float32, 6), random((1024, 1024), np.float32, 7)
    w, bias = random((1024,), np.float32, 4), random((1024,), np.float32, 5)

    def softmax(v):
        e = np.exp(v - v.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def layer_norm(v):
        mean = v.mean(-1, keepdims=True)
        d = v - mean
        var = (d * d).mean(-1, keepdims=True)
        return d / np.sqrt(var + 1e-5) * w + bias

    return {
        "add_4m_f32": median_seconds(lambda: np.add(xf, yf)),
        "add_256x1024_8x128_f32": median_seconds(lambda: np.add(xs, ys)),
        "softmax_4096x1024_f32": median_seconds(lambda: softmax(x)),
        "layer_norm_4096x1024_f32": median_seconds(lambda: layer_norm(x)),
        "matmul_1024_f32": median_seconds(lambda: a @ b),
    }


def jax_cases() -> tuple[dict[str, float], dict[str, float]]:
    os.environ.setdefault(
        "JAX_PLATFORMS", "cpu"
    )  # libtpu is installed, but no TPU is here
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    cpu = jax.devices("cpu")[0]
    times, compiles = {}, {}

    def put(v, dtype):
        return jax.device_put(jnp.asarray(v, dtype=dtype), cpu)

    def bench(name, f, *args):
        jf = jax.jit(f)
        t = time.perf_counter()
        jf.lower(*args).compile()
        compiles[name] = time.perf_counter() - t
        times[name] = median_seconds(lambda: jf(*args).block_until_ready())

    def softmax(v):
        return jax.nn.softmax(v, axis=-1)

    # XLA computes `softmax` of bf16 this way already (it drops the roundings between ops);
    # written out, it is the reference of the bench's `softmax_in_f32` kernel.
    def softmax_in_f32(v):
        return jax.nn.softmax(v.astype(jnp.float32), axis=-1).astype(v.dtype)

    # As the catalog kernels compute: layer norm in f32 with f32 weight and bias, matmul with
    # f32 accumulation; both return the input dtype.
    def layer_norm(v, w, b):
        x = v.astype(jnp.float32)
        mean = x.mean(-1, keepdims=True)
        d = x - mean
        var = (d * d).mean(-1, keepdims=True)
        return (d * jax.lax.rsqrt(var + 1e-5) * w + b).astype(v.dtype)

    def matmul(a, b):
        return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)

    x32 = random((4096, 1024), np.float32, 1)
    y32 = random((4096, 1024), np.float32, 2)
    bench(
        "add_4m_f32",
        jnp.add,
        put(x32.reshape(-1), jnp.float32),
        put(y32.reshape(-1), jnp.float32),
    )
    xs, ys = put(x32[:256], jnp.float32), put(y32[:256], jnp.float32)
    bench("add_256x1024_8x128_f32", jnp.add, xs, ys)
    for name, dt in (("f32", jnp.float32), ("bf16", jnp.bfloat16)):
        x = put(random((4096, 1024), np.float32, 3), dt)
        w = put(random((1024,), np.float32, 4), jnp.float32)
        b = put(random((1024,), np.float32, 5), jnp.float32)
        bench(f"softmax_4096x1024_{name}", softmax, x)
        if name == "bf16":
            bench("softmax_4096x1024_bf16_in_f32", softmax_in_f32, x)
        bench(f"layer_norm_4096x1024_{name}", layer_norm, x, w, b)
        a = put(random((1024, 1024), np.float32, 6), dt)
        bm = put(random((1024, 1024), np.float32, 7), dt)
        bench(f"matmul_1024_{name}", matmul, a, bm)

    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    pallas_add = jax.jit(
        pl.pallas_call(
            add_kernel,
            out_shape=jax.ShapeDtypeStruct((256, 1024), jnp.float32),
            grid=(32, 8),
            in_specs=[spec, spec],
            out_specs=spec,
            interpret=True,
        )
    )
    pallas = median_seconds(lambda: pallas_add(xs, ys).block_until_ready(), 5, 3.0)
    return times, compiles, pallas


FIRST_CALL_KERNELS = {  # catalog kernel -> shape, as in benches/first_call.rs
    "add_vectors": (1 << 20,),
    "softmax": (4096, 1024),
    "layer_norm": (4096, 1024),
    "matmul": (1024, 1024, 1024),
}


def run_first_call() -> dict[tuple[str, str], dict[str, float]]:
    """tpukit's first call per kernel and source, from `cargo bench --bench first_call`."""
    out = subprocess.run(
        ["cargo", "bench", "-q", "--bench", "first_call"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            rows.setdefault((r["kernel"], "steady"), {})["ms"] = r["steady_ms"]
            rows[(r["kernel"], r["source"])] = {"ms": r["first_ms"]}
    return rows


def xla_first_call(name: str, dtype: str) -> tuple[float, float]:
    """In a fresh process: XLA CPU's first call (trace + compile + run) and steady state."""
    code = f"""
import os, sys, time
os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, {str(ROOT / "benches")!r})
import jax, jax.numpy as jnp, numpy as np
from compare import FIRST_CALL_KERNELS, xla_op
from tpukit.testing import do_bench
f, args = xla_op({name!r}, {dtype!r})
jax.block_until_ready(args)
t = time.perf_counter(); jax.block_until_ready(f(*args)); first = time.perf_counter() - t
print(first * 1e3, do_bench(f, *args, warmup=0, rep=0, min_rep=9, max_rep=9))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    return float(out[0]), float(out[1])


def xla_op(name: str, dtype: str):
    """The catalog kernel `name` as a jitted JAX function and its arguments."""
    import jax
    import jax.numpy as jnp

    dt = jnp.float32 if dtype == "f32" else jnp.bfloat16
    shape = FIRST_CALL_KERNELS[name]
    if name == "add_vectors":
        args = [jnp.asarray(random(shape, np.float32, s), dt) for s in (1, 2)]
        return jax.jit(jnp.add), args
    if name == "softmax":
        return jax.jit(lambda v: jax.nn.softmax(v, axis=-1)), [
            jnp.asarray(random(shape, np.float32, 1), dt)
        ]
    if name == "layer_norm":
        x = jnp.asarray(random(shape, np.float32, 1), dt)
        w = jnp.asarray(random(shape[1:], np.float32, 2))
        b = jnp.asarray(random(shape[1:], np.float32, 3))

        def ln(v, w, b):
            x = v.astype(jnp.float32)
            d = x - x.mean(-1, keepdims=True)
            var = (d * d).mean(-1, keepdims=True)
            return (d * jax.lax.rsqrt(var + 1e-5) * w + b).astype(v.dtype)

        return jax.jit(ln), [x, w, b]
    m, k, n = shape
    a = jnp.asarray(random((m, k), np.float32, 1), dt)
    b = jnp.asarray(random((k, n), np.float32, 2), dt)
    return jax.jit(
        lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)
    ), [a, b]


def libtpu_compile_ms(name: str, dtype: str) -> float | None:
    """libtpu's compile time (v5e) for tpukit's lowering of the kernel."""
    from tpukit.tpu import TOPOLOGIES  # the default (v5e) first

    shape = "x".join(map(str, FIRST_CALL_KERNELS[name]))
    path = ROOT / "target" / "bench" / f"{name}_{dtype}.mlir"
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "cargo",
            "run",
            "-q",
            "-p",
            "tpukit-cli",
            "--",
            "lower",
            name,
            "--shape",
            shape,
            "--dtype",
            dtype,
            "-o",
            str(path),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests/conformance/tpu_compile.py"),
            "--topology",
            TOPOLOGIES[0],
            str(path),
        ],
        check=False,
        capture_output=True,
        text=True,
    ).stdout
    for line in out.splitlines():
        if line.startswith("{") and json.loads(line).get("ok"):
            return json.loads(line)["compile_ms"]
    return None


def first_call_table(rows) -> str:
    lines = [
        (
            "| kernel | tpukit: from bundle | from disk cache | cold compile | tpukit steady | "
            "XLA CPU first call | XLA steady | libtpu compile (v5e) |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in FIRST_CALL_KERNELS:
        for dtype in ("f32", "bf16"):
            k = f"{name}_{dtype}"
            xf, xs = xla_first_call(name, dtype)
            tpu = libtpu_compile_ms(name, dtype)
            cells = [
                rows.get((k, src), {}).get("ms")
                for src in ("bundle", "disk cache", "cold compile", "steady")
            ]
            fmt = [f"{c:.2f}" if c is not None else "—" for c in cells]
            lines.append(
                f"| {k} | {' | '.join(fmt)} | {xf:.2f} | {xs:.2f} | "
                f"{f'{tpu:.0f}' if tpu else '—'} |"
            )
    return "\n".join(lines)


FLOPS = {"matmul_1024_f32": 2 * 1024**3, "matmul_1024_bf16": 2 * 1024**3}
BYTES = {  # bytes moved at minimum (read inputs once, write outputs once)
    "add_4m_f32": 3 * 4 * 4096 * 1024,
    "add_256x1024_8x128_f32": 3 * 4 * 256 * 1024,
    "softmax_4096x1024_f32": 2 * 4 * 4096 * 1024,
    "softmax_4096x1024_bf16": 2 * 2 * 4096 * 1024,
    "softmax_4096x1024_bf16_in_f32": 2 * 2 * 4096 * 1024,
    "layer_norm_4096x1024_f32": 2 * 4 * 4096 * 1024,
    "layer_norm_4096x1024_bf16": 2 * 2 * 4096 * 1024,
}


def table(tk, tk_compile, limits, np_t, jx, jx_compile, pallas) -> str:
    def ms(s: float) -> str:
        return f"{s * 1e3:.3f}"

    copy = limits.get("copy_gbs_2t", 0.0)
    # f32 products against the harness's FMA peak; bf16 ones against `fma_peak.c`'s
    # `vdpbf16ps` peak where the CPU has it (~1.9× the f32 peak here), else the f32 one.
    bf16_peak = fma_peak(2).get("bf16")
    peaks = {"f32": (limits.get("fma_gflops_2t", 0.0), "FMA peak"),
             "bf16": (bf16_peak, "bf16 dot peak") if bf16_peak
             else (limits.get("fma_gflops_2t", 0.0), "f32 FMA peak")}
    lines = [
        (
            "| case | tpukit cpu (ms) | XLA CPU (ms) | numpy (ms) | tpukit / XLA time | "
            "tpukit / numpy time | tpukit rate | fraction of machine limit |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case, t in tk.items():
        x, n = jx.get(case), np_t.get(case)
        if case in FLOPS:
            rate = FLOPS[case] / t / 1e9
            peak, what = peaks["bf16" if case.endswith("bf16") else "f32"]
            rate_s, frac = (
                f"{rate:.0f} GFLOP/s",
                f"{rate / peak:.2f} of {what}" if peak else "",
            )
            xla_rate = f" ({FLOPS[case] / x / 1e9:.0f} GFLOP/s)" if x else ""
        else:
            rate = BYTES[case] / t / 1e9
            rate_s, frac = (
                f"{rate:.1f} GB/s",
                f"{rate / copy:.2f} of copy bw" if copy else "",
            )
            xla_rate = ""
        lines.append(
            f"| {case} | {ms(t)} | {ms(x) + xla_rate if x else '—'} | "
            f"{ms(n) if n else '— (no bf16)'} | {t / x:.2f}× | "
            f"{f'{t / n:.2f}×' if n else '—'} | {rate_s} | {frac} |"
        )
    small = tk["add_256x1024_8x128_f32"]
    lines += [
        "",
        (
            f"Pallas `interpret=True`, add 256×1024 in 8×128 blocks: {ms(pallas)} ms "
            f"(tpukit cpu is {pallas / small:.0f}× faster on the same kernel)."
        ),
        "",
        "| kernel | tpukit compile, IR → callable (ms) | XLA CPU jit compile of the op (ms) |",
        "|---|---:|---:|",
    ]
    xla_of = {
        "add_vectors": "add_4m_f32",
        "add_8x128": "add_256x1024_8x128_f32",
        "softmax_f32": "softmax_4096x1024_f32",
        "layer_norm_f32": "layer_norm_4096x1024_f32",
        "matmul_f32": "matmul_1024_f32",
        "softmax_bf16": "softmax_4096x1024_bf16",
        "layer_norm_bf16": "layer_norm_4096x1024_bf16",
        "matmul_bf16": "matmul_1024_bf16",
    }
    for k, t in tk_compile.items():
        x = jx_compile.get(xla_of.get(k, ""))
        lines.append(f"| {k} | {ms(t)} | {ms(x) if x else '—'} |")
    lines.append(
        f"| **median** | **{ms(statistics.median(tk_compile.values()))}** | "
        f"**{ms(statistics.median(jx_compile.values()))}** |"
    )
    lines += [
        "",
        "Machine limits measured by the harness: "
        + ", ".join(f"{k} = {v}" for k, v in limits.items())
        + ".",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = ap.parse_args()
    tk, tk_compile, limits = run_tpukit()
    np_t = numpy_cases()
    jx, jx_compile, pallas = jax_cases()
    body = table(tk, tk_compile, limits, np_t, jx, jx_compile, pallas)
    body += (
        "\n\n### First call in a fresh process (ms)\n\n"
        "Each tpukit child process first does what `import tpukit` does (registers the bundle, "
        "warms up the JIT), then times its first launch; medians of 5 processes "
        "(`cargo bench --bench first_call`). XLA's first call is trace + compile + run in a "
        "fresh process. libtpu's compile is of tpukit's StableHLO for the same kernel.\n\n"
        + first_call_table(run_first_call())
    )
    cpu = platform.processor() or platform.machine()
    header = (
        f"Run on {os.cpu_count()} CPUs ({cpu}), {time.strftime('%Y-%m-%d')}. Medians of "
        "repeated calls after two warm-ups; all three in one `make bench` run.\n\n"
    )
    print(header + body)
    if args.write:
        write_section("cpu-bench", header + body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
