"""A GPT-2-style training step's first iteration: tpuBLAS (``tpublas.mode()``) beside torch
eager and ``torch.compile``, each in a fresh process.

The step is HF ``transformers``' GPT2LMHeadModel (2 layers, 128 wide, 4 heads, sequence 64,
vocabulary 1000, random weights, dropout off; batch 2): forward with labels, loss,
backward. For each side a fresh Python builds the model and its inputs (not timed), then
times the first iteration and the steady state (median of ``--steps`` more):

- ``tpublas``: inside ``tpublas.mode(fallback="error")``; after ``tpukit.warm_up()`` (as
  ``benches/tpublas.py``). The child asserts that the first iteration compiled nothing —
  every kernel came from the shipped bundle (``tpukit.cache_stats()``) — and that no
  operator fell back to torch.
- ``eager``: torch's own CPU kernels.
- ``compile``: ``torch.compile(model)`` (inductor); its first iteration includes compiling
  the forward and backward graphs.

Medians over ``--repeats`` fresh processes. Prints a markdown table; ``--write`` replaces
the section of BENCHMARKS.md. Not a test: the machine is noisy.

    .venv/bin/python benches/first_iteration.py [--write] [--repeats 3] [--steps 10]
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

from report import write_section

ROOT = Path(__file__).resolve().parent.parent
SIDES = ("tpublas", "eager", "compile")


def gpt2():
    """The model and a ``step()`` (forward, loss, backward) on fixed tokens."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, n_positions=64,
                                  vocab_size=1000, resid_pdrop=0.0, embd_pdrop=0.0,
                                  attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)
    x = torch.randint(0, 1000, (2, 64), generator=torch.Generator().manual_seed(1))
    return model, x


def child(side: str, steps: int) -> None:
    import torch

    model, x = gpt2()
    run = model
    if side == "compile":
        run = torch.compile(model)

    def step():
        model.zero_grad(set_to_none=True)
        run(x, labels=x).loss.backward()

    if side == "tpublas":
        import tpukit
        import tpukit.tpublas as tb

        tpukit.warm_up()
        before = tpukit.cache_stats()
        with tb.mode(fallback="error") as m:
            t = time.perf_counter()
            step()
            first = time.perf_counter() - t
            compiled = tpukit.cache_stats().compiled - before.compiled
            assert compiled == 0, f"the first iteration compiled {compiled} kernels"
            assert not m.fallback, m.fallback
            times = []
            for _ in range(steps):
                t = time.perf_counter()
                step()
                times.append(time.perf_counter() - t)
        served = {"ops": len(m.served), "calls": sum(m.served.values()) // (steps + 1)}
    else:
        t = time.perf_counter()
        step()
        first = time.perf_counter() - t
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
        served = {}
    print(json.dumps({"first_ms": first * 1e3, "steady_ms": statistics.median(times) * 1e3,
                      **served}))


def run_child(side: str, steps: int) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("TPUKIT_BUNDLE", "TPUKIT_CACHE_DIR")}
    done = subprocess.run([sys.executable, __file__, "--child", side, str(steps)],
                          env={**base, "TPUKIT_CACHE_DIR": ""}, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{side}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def table(rows: dict) -> str:
    med = {s: {k: statistics.median(r[k] for r in rows[s]) for k in ("first_ms", "steady_ms")}
           for s in rows}
    t = med["tpublas"]
    served = rows["tpublas"][0]
    lines = [
        "| | first iteration (ms) | steady state (ms) | first / steady |",
        "|---|---:|---:|---:|",
    ]
    names = {"tpublas": "tpuBLAS `mode()` (kernels from the bundle)", "eager": "torch eager",
             "compile": "`torch.compile` (inductor)"}
    for s in rows:
        m = med[s]
        lines.append(f"| {names[s]} | {m['first_ms']:.0f} | {m['steady_ms']:.1f} | "
                     f"{m['first_ms'] / m['steady_ms']:.1f}× |")
    note = (f"\ntpuBLAS served {served['ops']} distinct ATen operators ({served['calls']} calls "
            f"per step), none fell back to torch, and its first iteration compiled 0 kernels "
            f"(asserted). First iteration minus steady state: tpuBLAS "
            f"{t['first_ms'] - t['steady_ms']:.0f} ms.\n")
    return "\n".join(lines) + "\n" + note


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--child", nargs=2, metavar=("SIDE", "STEPS"), help=argparse.SUPPRESS)
    p.add_argument("--write", action="store_true", help="replace the section in BENCHMARKS.md")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per side")
    p.add_argument("--steps", type=int, default=10, help="steady-state iterations")
    a = p.parse_args()
    if a.child:
        child(a.child[0], int(a.child[1]))
        return 0
    rows = {s: [run_child(s, a.steps) for _ in range(a.repeats)] for s in SIDES}
    header = (
        f"Run on {os.cpu_count()} CPUs ({platform.machine()}), {time.strftime('%Y-%m-%d')}; "
        f"GPT2LMHeadModel (2 layers, 128 wide, sequence 64, batch 2), forward + loss + "
        f"backward; medians over {a.repeats} fresh processes, steady state the median of "
        f"{a.steps} iterations.\n\n"
    )
    text = header + table(rows)
    print(text)
    if a.write:
        write_section("first-iteration", text,
                      intro="## A GPT-2-style training step's first iteration\n\n"
                            "`make bench` (`benches/first_iteration.py`).\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
