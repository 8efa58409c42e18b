"""tpukit where users call it: from Python, on torch tensors, beside torch eager and XLA.

Two tables, timed in one process with the implementations interleaved (each round times every
implementation once, the figure is the median over rounds), so that load on the shared machine
hits all of them alike:

- per-call overhead on an (8, 128) f32 tensor: a tiny ``custom_kernel`` (numpy and torch
  arguments), a tpuBLAS add (its Python API and ``torch.ops.tpublas``), an add inside
  ``tpublas.mode()`` (entered per call, and entered once around many calls), beside torch's
  eager add, a jitted JAX add, and torch's own floors for the ``torch.ops`` and mode rows (a
  Python kernel and a dispatch mode that do no work);
- steady state of tpuBLAS operators on torch CPU tensors (add, sum over dim 1, gelu, softmax,
  layer norm on 4096×1024; mm on 1024²; f32 and bf16) and a sweep of sizes from 16 KB to 64 MB
  for add and softmax, and rows of 128, 768 and 1000 elements for sum, softmax and layer
  norm, beside torch eager and ``jax.jit`` (XLA CPU), each with its ratio and
  its fraction of the machine's copy bandwidth (bytes read and written once per call over the
  time, against a torch ``copy_`` of one input timed in the same rounds: the bandwidth at
  that size and that moment), or for mm of its FMA peak (``fma_peak.c``, one process per
  thread torch uses).

``--write`` replaces the Python section of BENCHMARKS.md; with matplotlib installed, it also
writes ``benches/python_speed.png`` (time against size, tpukit beside torch and XLA).

    PYTHONPATH=python .venv/bin/python benches/python_speed.py [--write] [--quick]
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn.functional as F
from report import arguments, fma_peak, write_section
from tpukit import pallas, tpublas

ROOT = Path(__file__).resolve().parent.parent
PLOT = ROOT / "benches" / "python_speed.png"


def _batch(fn, seconds: float) -> tuple[float, float]:
    """Wall seconds and process CPU seconds (all threads) per call of ``fn`` over a batch of
    about ``seconds``."""
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        n += 1
        t = time.perf_counter() - t0
        if t >= seconds:
            return t / n, (time.process_time() - c0) / n


CPU = {}  # (implementation, label) -> median CPU seconds per call, of the last `interleaved`


def interleaved(impls: dict, rounds: int, seconds: float) -> dict:
    """Median wall seconds per call of each implementation, over ``rounds`` rounds that each
    time every implementation for a batch of about ``seconds`` (after two untimed calls); the
    median CPU seconds go to ``CPU[name]``. CPU time moves less than wall time on a loaded
    machine (a descheduled thread costs none), so it is the column to read there. An
    implementation given as ``(fn, context)`` runs its batches inside ``with context:``."""
    impls = {name: fn if isinstance(fn, tuple) else (fn, contextlib.nullcontext())
             for name, fn in impls.items()}
    for fn, context in impls.values():
        with context:
            fn()
            fn()
    times = {name: [] for name in impls}
    for _ in range(rounds):
        for name, (fn, context) in impls.items():
            with context:
                times[name].append(_batch(fn, seconds))
    CPU.clear()
    CPU.update({name: statistics.median(c for _, c in ts) for name, ts in times.items()})
    return {name: statistics.median(w for w, _ in ts) for name, ts in times.items()}


def overhead_rows(rounds: int) -> list[tuple[str, float]]:
    def body(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    add = pallas.custom_kernel(lambda x, y: x, body)
    xn = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
    xt = torch.from_numpy(xn.copy())
    xj = jnp.asarray(xn)
    jit_add = jax.jit(lambda a, b: a + b)
    op = torch.ops.tpublas.add.Tensor
    mode = tpublas.mode()

    def in_mode():
        with mode:
            return xt + xt

    floor_op, floor_mode = _torch_floors(torch.empty(8, 128))

    def in_floor_mode():
        with floor_mode:
            return xt + xt

    impls = {
        "`custom_kernel`, numpy arrays": lambda: add(xn, xn),
        "`custom_kernel`, torch tensors": lambda: add(xt, xt),
        "tpuBLAS `tpublas.add`, torch tensors": lambda: tpublas.add.Tensor(xt, xt),
        "tpuBLAS `torch.ops.tpublas.add.Tensor`": lambda: op(xt, xt),
        "`x + y` inside `tpublas.mode()` (mode entered per call)": in_mode,
        "`x + y` inside an entered `tpublas.mode()`": (lambda: xt + xt, mode),
        "torch eager `x + y`": lambda: xt + xt,
        "`jax.jit(x + y)`, JAX arrays": lambda: jit_add(xj, xj).block_until_ready(),
        "torch's floor: `torch.ops` call of a Python kernel returning a ready tensor":
            lambda: floor_op(xt, xt),
        "torch's floor: `x + y` in a mode returning a ready tensor (entered per call)":
            in_floor_mode,
        "torch's floor: `x + y` in an entered mode returning a ready tensor":
            (lambda: xt + xt, floor_mode),
    }
    times = interleaved(impls, rounds, 0.05)
    return [(name, times[name] * 1e6) for name in impls]


_FLOOR_LIBRARY = []  # the floor operator's library, kept alive


def _torch_floors(ready: torch.Tensor):
    """What torch's own mechanisms cost with no work in them: an operator (the schema of
    ``aten::add.Tensor``) whose Autograd kernel is a Python function, registered as
    tpuBLAS's are, and a ``TorchDispatchMode``, both handing back ``ready``. The tpuBLAS rows
    that go through ``torch.ops`` or a mode pay these before any work of their own."""
    from torch.utils._python_dispatch import TorchDispatchMode

    library = torch.library.Library("tpukit_bench_floor", "DEF")
    library.define("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    library.impl("add.Tensor", lambda x, y, alpha=1: ready, "CPU")
    library.impl("add.Tensor", lambda keys, x, y, alpha=1: ready, "Autograd",
                 with_keyset=True)
    _FLOOR_LIBRARY.append(library)

    class Ready(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return ready

    return torch.ops.tpukit_bench_floor.add.Tensor, Ready()


def _jax(x: torch.Tensor):
    a = jnp.asarray(x.float().numpy())
    return a.astype(jnp.bfloat16) if x.dtype == torch.bfloat16 else a


def layer_norm_jax(x, w, b):
    xf = x.astype(jnp.float32)
    mean = xf.mean(-1, keepdims=True)
    var = ((xf - mean) ** 2).mean(-1, keepdims=True)
    return ((xf - mean) * jax.lax.rsqrt(var + 1e-5) * w + b).astype(x.dtype)


def softmax_jax(x):
    return jax.nn.softmax(x.astype(jnp.float32), -1).astype(x.dtype)


def operators(shape, dtype):
    """``{op: (bytes moved, {impl: fn}, its input)}`` on random torch tensors of ``shape`` and
    ``dtype``."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(shape, generator=g).to(dtype)
    y = torch.rand(shape, generator=g).to(dtype)
    n = shape[-1]
    w, b = torch.rand(n, generator=g).to(dtype), torch.rand(n, generator=g).to(dtype)
    xj, yj, wj, bj = _jax(x), _jax(y), _jax(w), _jax(b)
    size = x.numel() * x.element_size()
    add_j = jax.jit(lambda a, c: a + c)
    sum_j = jax.jit(lambda a: a.sum(1))
    gelu_j = jax.jit(lambda a: jax.nn.gelu(a, approximate=False))
    softmax_j = jax.jit(softmax_jax)
    norm_j = jax.jit(layer_norm_jax)
    return {
        "add": (3 * size, {
            "tpukit": lambda: tpublas.add.Tensor(x, y),
            "torch": lambda: x + y,
            "xla": lambda: add_j(xj, yj).block_until_ready(),
        }, x),
        "sum dim 1": (size, {
            "tpukit": lambda: tpublas.sum.dim_IntList(x, [1]),
            "torch": lambda: x.sum(1),
            "xla": lambda: sum_j(xj).block_until_ready(),
        }, x),
        "gelu": (2 * size, {
            "tpukit": lambda: tpublas.gelu(x),
            "torch": lambda: F.gelu(x),
            "xla": lambda: gelu_j(xj).block_until_ready(),
        }, x),
        "softmax": (2 * size, {
            "tpukit": lambda: tpublas._softmax(x, -1, False),
            "torch": lambda: torch.softmax(x, -1),
            "xla": lambda: softmax_j(xj).block_until_ready(),
        }, x),
        "layer norm": (2 * size, {
            "tpukit": lambda: tpublas.native_layer_norm(x, [n], w, b, 1e-5),
            "torch": lambda: F.layer_norm(x, (n,), w, b),
            "xla": lambda: norm_j(xj, wj, bj).block_until_ready(),
        }, x),
    }


def matmul(n, dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.rand((n, n), generator=g).to(dtype)
    y = torch.rand((n, n), generator=g).to(dtype)
    xj, yj = _jax(x), _jax(y)
    mm_j = jax.jit(lambda a, c: jnp.dot(a, c, preferred_element_type=jnp.float32).astype(a.dtype))
    return {
        "tpukit": lambda: tpublas.mm(x, y),
        "torch": lambda: x @ y,
        "xla": lambda: mm_j(xj, yj).block_until_ready(),
    }


def with_copy(impls: dict, x: torch.Tensor) -> dict:
    """``impls`` and a torch ``copy_`` of ``x`` into a tensor like it, timed in the same
    rounds: the copy bandwidth at this size and load, for the row's "of copy"."""
    dst = torch.empty_like(x)
    return {**impls, "copy": lambda: dst.copy_(x)}


def _row(name, times, moved=None, flops=None, size=None, fma=None):
    t, to, x = times["tpukit"], times["torch"], times["xla"]
    cells = [name, f"{t * 1e3:.3f}", f"{to * 1e3:.3f}", f"{x * 1e3:.3f}",
             f"{t / to:.2f}×", f"{t / x:.2f}×",
             f"{CPU['tpukit'] * 1e3:.3f} / {CPU['torch'] * 1e3:.3f}"]
    if moved is not None:
        copy_gbs = 2 * size / times["copy"] / 1e9
        cells.append(f"{moved / t / 1e9:.1f} GB/s ({moved / t / 1e9 / copy_gbs:.2f} of copy)")
    else:
        rate = flops / t / 1e9
        share = f" ({rate / fma:.2f} of FMA peak)" if fma else " (FMA peak not measured)"
        cells.append(f"{rate:.0f} GFLOP/s{share}")
    return "| " + " | ".join(cells) + " |"


HEAD = ("| work | tpukit (ms) | torch eager (ms) | XLA (ms) | tpukit / torch | tpukit / XLA "
        "| CPU ms, tpukit / torch | tpukit rate |\n|---|---:|---:|---:|---:|---:|---:|---:|")


def main() -> int:
    args, rounds, seconds = arguments(__doc__, seconds=(0.02, 0.1))
    tpublas.add.Tensor(np.zeros(1, np.float32), np.zeros(1, np.float32))  # warm the runtime

    run = (f"Run on {os.cpu_count()} CPUs ({platform.machine()}), "
           f"{time.strftime('%Y-%m-%d')}; torch {torch.__version__} with "
           f"{torch.get_num_threads()} threads, jax {jax.__version__}. Medians of "
           f"{rounds} interleaved rounds.")
    lines = [run, ""]
    lines += ["Per call, (8, 128) f32:", "", "| call | µs per call |", "|---|---:|"]
    for name, us in overhead_rows(rounds * 3):
        lines.append(f"| {name} | {us:.1f} |")
    print("\n".join(lines), flush=True)

    peak = fma_peak(torch.get_num_threads())
    measured = ", ".join(f"{d} {g:.0f} GFLOP/s" for d, g in peak.items()) or "not measured"
    title = ("Steady state, torch CPU tensors in and out (\"of copy\": the rate over that of "
             "a torch `copy_` of one input, timed in the same rounds; FMA peak of "
             f"{torch.get_num_threads()} cores, `benches/fma_peak.c`: {measured}):")
    steady = ["", title, "", HEAD]
    for dtype, dname in [(torch.float32, "f32"), (torch.bfloat16, "bf16")]:
        for op, (moved, impls, x) in operators((4096, 1024), dtype).items():
            times = interleaved(with_copy(impls, x), rounds, seconds)
            steady.append(_row(f"{op} 4096×1024 {dname}", times, moved, size=x.nbytes))
            print(steady[-1], flush=True)
        times = interleaved(matmul(1024, dtype), rounds, seconds)
        steady.append(_row(f"mm 1024² {dname}", times, flops=2 * 1024**3, fma=peak.get(dname)))
        print(steady[-1], flush=True)
    lines += steady

    sweep = ["", "Sizes, f32 (rows × 1024; size of one input):", "", HEAD]
    points = {}
    for kb in [16, 256, 1024, 4096, 16384, 65536]:
        rows = kb * 1024 // 4096
        ops = operators((rows, 1024), torch.float32)
        for op in ["add", "softmax"]:
            moved, impls, x = ops[op]
            times = interleaved(with_copy(impls, x), rounds, seconds)
            points.setdefault(op, []).append((kb, times))
            label = f"{kb} KB" if kb < 1024 else f"{kb // 1024} MB"
            sweep.append(_row(f"{op} {label}", times, moved, size=x.nbytes))
            print(sweep[-1], flush=True)
    lines += sweep

    title = ("Row widths, f32 (16 MB: 4 Mi / n rows of n; tpuBLAS's row windows are the "
             "width of 4096, 2048, 1024, 768, 512, 256 and 128 columns that covers n in the "
             "fewest windows: one for every n here, 2304 in one of 4096):")
    widths = ["", title, "", HEAD]
    for n in [128, 768, 1000, 2304]:
        ops = operators((4 * 1024 * 1024 // n, n), torch.float32)
        for op in ["sum dim 1", "softmax", "layer norm"]:
            moved, impls, x = ops[op]
            times = interleaved(with_copy(impls, x), rounds, seconds)
            widths.append(_row(f"{op}, rows of {n}", times, moved, size=x.nbytes))
            print(widths[-1], flush=True)
    lines += widths

    body = "\n".join(lines)
    if args.write:
        write_section("python-bench", body)
        plot(points)
    return 0


def plot(points: dict) -> None:
    """Time against size per operator, tpukit beside torch and XLA (if matplotlib is
    installed; a message otherwise)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: {PLOT.name} not written", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, len(points), figsize=(5 * len(points), 4))
    for ax, (op, series) in zip(np.atleast_1d(axes), points.items(), strict=True):
        sizes = [kb for kb, _ in series]
        for impl in ["tpukit", "torch", "xla"]:
            ax.plot(sizes, [t[impl] * 1e3 for _, t in series], marker="o", label=impl)
        ax.set(xscale="log", yscale="log", xlabel="input size (KB)", ylabel="ms per call",
               title=f"{op}, f32")
        ax.legend()
    fig.tight_layout()
    fig.savefig(PLOT, dpi=100)
    print(f"wrote {PLOT}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
