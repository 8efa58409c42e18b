"""Eager calls in microseconds: a kernel's native launch plan (``_native.LaunchPlan``) for
the signature of a call that took the full path, run on the next call's arrays with nothing
re-derived in Python.

A run is made only for what the plan reads as it is: C-contiguous numpy arrays (exactly
``numpy.ndarray``) or plain CPU torch tensors (see ``_arrays.torch_direct``; read without a
numpy view, see ``python/src/tensor.rs``), of a dtype tpukit holds as it is (bool excluded:
only a copy normalises its bytes; bf16 numpy arrays, which export no buffer, too), on the
compiled CPU backend, for a kernel whose outputs are new arrays. A run returns None when
the call is not what its plan was made for — another kind of array, a gradient or a
dispatch mode on a tensor, a lazy negation, another dtype, shape, or layout (the plan checks
each argument's element format, shape, C-contiguity and alignment) — and the caller takes
the full path, which raises what a bad call raises.
Results are new arrays (never an argument's memory) of the arguments' kind.
"""

from __future__ import annotations

import sys

import numpy as np

from tpukit import _arrays


class NumpyRun:
    """A plan's run on numpy arrays."""

    __slots__ = ("plan", "single")

    def __init__(self, plan, single: bool):
        self.plan, self.single = plan, single

    def __call__(self, args):
        for a in args:
            if type(a) is not np.ndarray:
                return None
        outs = self.plan.run(args)
        if outs is None:
            return None
        return outs[0] if self.single else tuple(outs)


class TorchRun:
    """A plan's run on plain CPU torch tensors (read in place through their DLPack
    description and lazy negation; results are tensors over new memory, by DLPack)."""

    __slots__ = ("plan", "single")

    def __init__(self, plan, single: bool):
        self.plan, self.single = plan, single

    def __call__(self, args):
        if not _arrays.torch_direct(args):
            return None
        outs = self.plan.run(args)
        if outs is None:
            return None
        return outs[0] if self.single else tuple(outs)


def make(kernel, args, single: bool):
    """The run of ``kernel`` for calls like this one on ``args`` (see the module), or None
    where none applies."""
    if not args:
        return None
    torch = sys.modules.get("torch")
    if type(args[0]) is np.ndarray:
        names = [_arrays.plan_dtype_name(a) if type(a) is np.ndarray else None for a in args]
        kind = "numpy"
    elif torch is not None and _arrays.torch_direct(args):
        names = [_arrays.torch_plan_dtype_name(a) for a in args]
        kind = "torch"
    else:
        return None
    if any(n is None or n == "bool" for n in names) or (kind == "numpy" and "bf16" in names):
        return None
    outs = [o.dtype for o in kernel.operands if o.role == "output"]
    plan = kernel.plan([(n, tuple(a.shape)) for n, a in zip(names, args, strict=True)],
                       [_wrap(d, kind) for d in outs])
    if kind == "numpy":
        return NumpyRun(plan, single)
    return TorchRun(plan, single)


def _wrap(dtype: str, kind: str):
    """What makes a plan's output buffer of tpukit ``dtype`` an array of ``kind``, over it
    (None: the plan makes a torch tensor over it itself, by DLPack)."""
    if kind == "numpy":
        return _numpy_bf16 if dtype == "bf16" else np.asarray
    return None


def _numpy_bf16(buffer):
    return np.asarray(buffer).view(_arrays._BF16)
