"""``helion._testing`` on tpukit: the names Helion's example programs import from it.

Helion's examples build their inputs on ``DEVICE`` with ``HALF_DTYPE``/``LONG_INT_TYPE`` and end
with ``run_example(kernel, baseline, args)``; with ``from tpukit.helion._testing import …`` for
``from helion._testing import …`` they run unchanged on tpukit. What each name means here:

- ``DEVICE``: ``torch.device("cpu")``. tpukit kernels take and return host torch tensors,
  whichever tpukit device (``cpu``, ``interpret``) runs them.
- ``HALF_DTYPE``: ``torch.bfloat16``, the TPU's half type (Helion picks it on TPU too).
- ``LONG_INT_TYPE``: ``torch.int64``. Helion picks int32 on TPU, where its tensors live; here
  tensors stay on the host, where torch's reference ops want int64 (``F.cross_entropy``
  targets), and tpukit narrows int64 to int32 inside kernels when the values fit.
- ``do_bench``: wall-clock timing of a callable, Helion's ``do_bench`` signature, through
  ``tpukit.testing.do_bench``.
- ``run_example``: checks each kernel against the first baseline, then prints a timing table.
- ``assert_close_with_mismatch_tolerance``: ``assert_close`` that tolerates a few mismatches.

Helion's test-suite helpers (``TestCase``, ``code_and_output``, ``check_example``, …) are not
provided: importing one is an ``exc.UnsupportedConstruct`` naming it.
"""

from __future__ import annotations

import contextlib
import functools
import sys

import torch

from tpukit import testing
from tpukit.helion.exc import UnsupportedConstruct

__all__ = [
    "DEVICE",
    "HALF_DTYPE",
    "LONG_INT_TYPE",
    "assert_close_with_mismatch_tolerance",
    "do_bench",
    "run_example",
]

# Helion's test-suite helpers, refused by name (not an AttributeError that looks like a typo).
_NOT_SUPPORTED = {
    "TestCase", "RefEagerTestBase", "RefEagerTestDisabled", "AssertExpectedJournal",
    "code_and_output", "output_only", "check_example", "import_path",
}

DEVICE = torch.device("cpu")
HALF_DTYPE = torch.bfloat16
LONG_INT_TYPE = torch.int64


def _one_device(what: str, process_group_name) -> None:
    """Refuses a process group: tpukit runs one device."""
    if process_group_name is not None:
        raise UnsupportedConstruct(
            f"`{what}(process_group_name=...)`: tpukit runs one device, not a process group"
        )


def do_bench(
    fn,
    warmup: int = 25,
    rep: int = 100,
    grad_to_none=None,
    quantiles=None,
    return_mode: str = "mean",
    process_group_name=None,
    *,
    default_cudagraph: bool = False,
    fixed_repetitions: int | None = None,
):
    """Times ``fn()`` in ms: the ``return_mode`` (default ``"mean"``) of calls timed for ``rep``
    ms after ``warmup`` ms of untimed ones, or exactly ``fixed_repetitions`` calls; with
    ``quantiles``, those quantiles. ``grad_to_none`` tensors have ``.grad`` reset before each
    call. ``default_cudagraph`` has no meaning on the host (no CUDA graphs) and is ignored."""
    _one_device("do_bench", process_group_name)
    call = fn
    if grad_to_none is not None:

        def call():
            for t in grad_to_none:
                t.grad = None
            return fn()

    timing = {"warmup": warmup, "rep": rep}
    if fixed_repetitions is not None:  # exactly that many timed calls, after two untimed
        timing = {"warmup": 0.0, "rep": 0.0, "min_rep": fixed_repetitions,
                  "max_rep": fixed_repetitions}
    return testing.do_bench(call, quantiles=quantiles, return_mode=return_mode, **timing)


def assert_close_with_mismatch_tolerance(
    actual,
    expected,
    *,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    max_mismatch_pct: float = 0.01,
    max_mismatched_abs_diff: float | None = None,
    max_abs_diff: float | None = None,
    max_rel_diff: float | None = None,
) -> None:
    """``torch.testing.assert_close(actual, expected, atol=, rtol=)``, except that tensors may
    differ in a fraction ``max_mismatch_pct`` (0.01: 1%) of their elements, an element
    mismatching when ``|actual - expected| > atol + rtol * |expected|`` (as ``assert_close``
    counts). Optional bounds: the largest difference among mismatched elements
    (``max_mismatched_abs_diff``), over all elements (``max_abs_diff``), and the largest
    relative difference (``max_rel_diff``). Raises ``AssertionError`` saying which failed."""
    try:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)
        return
    except AssertionError:
        if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)):
            raise
    if actual.shape != expected.shape:
        raise AssertionError(f"shapes differ: {tuple(actual.shape)} and {tuple(expected.shape)}")
    diff = (actual.double() - expected.double()).abs()
    bad = ~(diff <= atol + rtol * expected.double().abs())  # NaN differences mismatch
    share = bad.double().mean().item() if bad.numel() else 0.0
    if share > max_mismatch_pct:
        raise AssertionError(
            f"{share:.4%} of {bad.numel()} elements mismatch (at most {max_mismatch_pct:.4%})"
        )
    checks = [
        ("largest mismatched difference", diff[bad], max_mismatched_abs_diff),
        ("largest absolute difference", diff, max_abs_diff),
        ("largest relative difference", diff / expected.double().abs().clamp(min=1e-6),
         max_rel_diff),
    ]
    for what, values, bound in checks:
        if bound is not None and values.numel() and not values.max().item() <= bound:
            raise AssertionError(f"{what} {values.max().item()} exceeds {bound}")


def _named(fn_or_dict, name: str, what: str) -> dict:
    """``{name: fn}`` for one function, the dict itself for a dict of named functions."""
    named = dict(fn_or_dict) if isinstance(fn_or_dict, dict) else {name: fn_or_dict}
    if not named:
        raise ValueError(f"run_example: no {what} to run")
    return named


def _clone(value):
    """A copy of every tensor in ``value`` (tuples, lists and dicts walked), keeping its
    ``requires_grad``: a kernel that writes its inputs cannot change the next one's."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    if isinstance(value, (tuple, list)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _call(name: str, fn, args):
    """``fn(*args)``; an exception it raises gets a note naming the implementation (a Triton or
    CUDA baseline, say, cannot run here) and keeps its type."""
    try:
        return fn(*args)
    except Exception as err:
        err.add_note(f"(raised by `{name}`, called by run_example)")
        raise


def _outputs(result, name: str) -> list[torch.Tensor]:
    """The tensors ``name`` returned (one, or a tuple/list of them), copied."""
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    for i, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            raise TypeError(f"run_example: `{name}` returned {type(item).__name__} (output {i}), "
                            "not a tensor or a tuple of tensors")
    return [t.detach().clone() for t in items]


def _check_outputs(name, got, ref_name, expected, rtol, atol, max_mismatch_pct,
                   max_mismatched_abs_diff) -> None:
    """Compares ``name``'s outputs with the reference's, in f32; the error names the kernel."""
    if len(got) != len(expected):
        raise AssertionError(f"{name}: returned {len(got)} outputs, {ref_name} {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        where = f"{name}" + (f" (output {i})" if len(got) > 1 else "")
        g, e = g.to(torch.float32), e.to(torch.float32)
        try:
            if max_mismatch_pct is None:
                torch.testing.assert_close(g, e, rtol=rtol, atol=atol)
            else:
                assert_close_with_mismatch_tolerance(
                    g, e, rtol=rtol, atol=atol, max_mismatch_pct=max_mismatch_pct,
                    max_mismatched_abs_diff=max_mismatched_abs_diff)
        except AssertionError as err:
            raise AssertionError(f"{where} differs from {ref_name}: {err}") from None


def _check_grads(candidates, ref_name, ref_fn, args, rtol, atol) -> None:
    """Backward check: the gradients each candidate leaves on the arguments that require grad
    equal the reference's, for the same random output gradient."""
    leaves = {i: a for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad}
    if not leaves:
        raise ValueError("run_example(bwd=True): no argument requires grad")
    out = ref_fn(*args)
    grad_out = torch.randn_like(out)
    out.backward(grad_out, retain_graph=True)
    expected = {i: None if t.grad is None else t.grad.clone() for i, t in leaves.items()}
    if all(g is None for g in expected.values()):
        raise ValueError(f"run_example(bwd=True): {ref_name} gives no gradient to any argument")
    for t in leaves.values():
        t.grad = None
    for name, fn in candidates.items():
        fn(*args).backward(grad_out, retain_graph=True)
        for i, t in leaves.items():
            e = expected[i]
            if (t.grad is None) != (e is None):
                raise AssertionError(f"{name}: gradient of argument {i} is "
                                     f"{'missing' if t.grad is None else 'extra'} "
                                     f"(vs {ref_name})")
            if e is not None:
                torch.testing.assert_close(
                    t.grad.to(torch.float32), e.to(torch.float32), rtol=rtol, atol=atol,
                    msg=lambda m, i=i, name=name: f"{name}: gradient of argument {i}: {m}")
        for t in leaves.values():
            t.grad = None


def _bench(functions: dict, args, trace_path) -> dict[str, float]:
    """Median ms of each function on one copy of ``args``; with ``trace_path``, a torch profiler
    Chrome trace of the timing runs, each function's under its name."""
    copied = _clone(args)
    profile = torch.profiler.profile() if trace_path is not None else contextlib.nullcontext()
    times = {}
    with profile:
        for name, fn in functions.items():
            with torch.profiler.record_function(name):
                times[name] = testing.do_bench(functools.partial(fn, *copied))
    if trace_path is not None:
        profile.export_chrome_trace(trace_path)
        print(f"Write profile to {trace_path}")
    return times


def _print_table(times: dict[str, float], baselines: dict) -> None:
    """Each implementation's time and speedup over the fastest baseline, on stderr."""
    best = min(times[name] for name in baselines)
    rule = "=" * 65
    lines = [rule, "Benchmark Results", rule,
             f"{'Implementation':<20} {'Time (ms)':<12} {'Speedup':<15}", "-" * 65]
    for name, ms in times.items():
        ref = name in baselines and ms == best
        lines.append(f"{name:<20} {ms:<12.4f} {'1.00x (ref)' if ref else f'{best / ms:.2f}x':<15}")
    print("\n" + "\n".join(lines + [rule]) + "\n", file=sys.stderr)


def run_example(
    kernel_fn,
    baseline_fn,
    args: tuple,
    kernel_name: str = "helion",
    baseline_name: str = "torch",
    rtol: float = 1e-2,
    atol: float = 1e-1,
    max_mismatch_pct: float | None = None,
    max_mismatched_abs_diff: float | None = None,
    bwd: bool = False,
    trace_path: str | None = None,
    process_group_name: str | None = None,
    interleaved: bool = True,
) -> dict[str, float]:
    """Helion's example driver: correctness, then timing.

    ``kernel_fn``/``baseline_fn`` are one function (named ``kernel_name``/``baseline_name``) or
    a dict ``{name: function}``. The first baseline, called on ``args``, is the reference; every
    other kernel and baseline is called on a copy of ``args`` and each of its outputs (a tensor
    or a tuple of them) compared with the reference's in f32 (``torch.testing.assert_close``
    with ``rtol``/``atol``, or ``assert_close_with_mismatch_tolerance`` when
    ``max_mismatch_pct`` is given): a difference raises ``AssertionError`` naming the kernel.
    ``bwd=True`` also compares the gradients each leaves on the arguments that require grad.
    Then each function is timed (``tpukit.testing.do_bench``, median; one after the other:
    ``interleaved`` has nothing to even out on the host), a table of times and speedups over
    the fastest baseline printed on stderr, and ``{name: ms}`` returned. ``trace_path`` saves
    a torch profiler Chrome trace of the timing runs."""
    _one_device("run_example", process_group_name)
    kernels = _named(kernel_fn, kernel_name, "kernel")
    baselines = _named(baseline_fn, baseline_name, "baseline")
    if shared := kernels.keys() & baselines.keys():
        raise ValueError(f"run_example: {sorted(shared)} name both a kernel and a baseline")
    ref_name, ref_fn = next(iter(baselines.items()))
    candidates = {n: f for n, f in {**kernels, **baselines}.items() if n != ref_name}
    expected = _outputs(_call(ref_name, ref_fn, args), ref_name)
    for name, fn in candidates.items():
        print(f"Testing {name} correctness...", file=sys.stderr)
        got = _outputs(_call(name, fn, _clone(args)), name)
        _check_outputs(name, got, ref_name, expected, rtol, atol, max_mismatch_pct,
                       max_mismatched_abs_diff)
    if bwd:
        _check_grads(candidates, ref_name, ref_fn, args, rtol, atol)
    times = _bench({**kernels, **baselines}, args, trace_path)
    _print_table(times, baselines)
    return times


def __getattr__(name):
    if name in _NOT_SUPPORTED:
        raise UnsupportedConstruct(
            f"`helion._testing.{name}` (Helion's test-suite helper) is not provided by tpukit"
        )
    raise AttributeError(f"module 'tpukit.helion._testing' has no attribute {name!r}")
