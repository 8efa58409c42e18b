"""``helion.autotuner.benchmarking``: timing a callable on the host."""

from __future__ import annotations

import time


def do_bench_generic(fn, *, warmup: int = 1, rep: int = 3, **_ignored) -> float:
    """The best of ``rep`` wall-clock runs of ``fn()`` in milliseconds, after ``warmup`` runs
    (tpukit runs kernels synchronously on the host, so wall-clock time is the kernel's)."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(max(1, rep)):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3
