"""Helpers for testing and timing kernels: ``do_bench``, after Triton's ``triton.testing``."""

from __future__ import annotations

import math
import statistics
import time

__all__ = ["do_bench"]

_MODES = ("median", "mean", "min", "max", "all")


def do_bench(
    fn,
    *args,
    warmup: float = 25.0,
    rep: float = 100.0,
    quantiles=None,
    return_mode: str = "median",
    min_rep: int = 5,
    max_rep: int = 10_000,
    **kwargs,
):
    """Times ``fn(*args, **kwargs)`` in milliseconds, as Triton's ``do_bench`` does.

    The first call is not timed (it may compile); then calls are made for ``warmup`` ms
    (at least one) and not timed; then each call is timed, for ``rep`` ms, at least
    ``min_rep`` and at most ``max_rep`` calls. A result with a ``block_until_ready`` method
    (a JAX array) is waited for inside the timed call; tpukit's own results are ready when
    returned.

    Returns, in ms: the median time of one call (``return_mode="median"``, the default), or
    its ``"mean"``, ``"min"`` or ``"max"``, or ``"all"``: every timed call's time, a list in
    call order. With ``quantiles`` (for example ``(0.2, 0.5, 0.8)``: the spread around the
    median), the list of those quantiles instead, in the order given.
    """
    if return_mode not in _MODES:
        raise ValueError(f"return_mode is one of {', '.join(_MODES)}, not {return_mode!r}")
    if quantiles is not None and any(not 0.0 <= q <= 1.0 for q in quantiles):
        raise ValueError(f"quantiles are between 0 and 1, got {list(quantiles)}")
    if min_rep < 1 or max_rep < min_rep:
        raise ValueError(f"need 1 <= min_rep <= max_rep, got {min_rep} and {max_rep}")

    def call():
        out = fn(*args, **kwargs)
        if hasattr(out, "block_until_ready"):
            out.block_until_ready()

    call()
    start = time.perf_counter()
    while True:
        call()
        if time.perf_counter() - start >= warmup / 1e3:
            break
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < max_rep and (
        len(times) < min_rep or time.perf_counter() - start < rep / 1e3
    ):
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1e3)
    if quantiles is not None:
        return [_quantile(sorted(times), q) for q in quantiles]
    if return_mode == "all":
        return times
    return {"median": statistics.median, "mean": statistics.fmean, "min": min, "max": max}[
        return_mode
    ](times)


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolated linearly between neighbours."""
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
