"""tpukit kernels as XLA custom calls inside traced JAX programs (``jax.jit``, ``vmap``, ``grad``,
``lax.scan``).

A kernel traced by JAX becomes ``jax.ffi.ffi_call("tpukit_kernel", ...)``: a
``stablehlo.custom_call`` whose ``kernel`` attribute is the id of the kernel in the native
registry (``tpukit._native.ffi_register``). XLA's CPU runtime calls tpukit's FFI handler
(``python/src/ffi.rs``) with the operand and result buffers; the handler runs the registered
kernel on its device. The target is registered for the CPU platform only, once per process,
at the first such call. Under ``jax.vmap`` the call runs once per batch element
(``vmap_method="sequential"``).
"""

from __future__ import annotations

import re
import threading

import jax
import numpy as np

import tpukit
from tpukit import _arrays, _native
from tpukit._native import Kernel, ShapeError

TARGET = "tpukit_kernel"

_lock = threading.Lock()
_registered = False
_ids: dict = {}


def traced(arrays) -> bool:
    """Whether any of ``arrays`` is a JAX tracer (the call is inside ``jit``, ``vmap``, ``grad``,
    a ``scan`` body, …)."""
    return any(isinstance(a, jax.core.Tracer) for a in arrays)


def cpu_arrays(arrays) -> bool:
    """Whether ``arrays`` are all concrete JAX arrays on the CPU: an eager call on them runs
    fastest as a jitted custom call (no conversion to numpy and back)."""
    return bool(arrays) and all(
        isinstance(a, jax.Array)
        and not isinstance(a, jax.core.Tracer)
        and all(d.platform == "cpu" for d in a.devices())
        for a in arrays
    )


# The handler's messages start `tpukit <kind> error: ` (see python/src/ffi.rs).
_MESSAGE = re.compile(r"tpukit (\w+) error: (.*)", re.DOTALL)
_CLASSES = {
    "invalid": "TpukitError",
    "unsupported": "UnsupportedError",
    "shape": "ShapeError",
    "dtype": "DTypeError",
    "bounds": "BoundsError",
    "internal": "InternalError",
}


def run_eager(jitted, args):
    """``jitted(*args)`` run to completion, a failure of tpukit's handler raised as the tpukit
    exception of its kind (as an eager launch raises it) rather than JAX's runtime error."""
    try:
        return jax.block_until_ready(jitted(*args))
    except jax.errors.JaxRuntimeError as e:
        found = _MESSAGE.search(str(e))
        if found is None:
            raise
        cls = getattr(tpukit, _CLASSES.get(found.group(1), "TpukitError"))
        raise cls(found.group(2)) from None


def _target() -> str:
    global _registered
    with _lock:
        if not _registered:
            jax.ffi.register_ffi_target(TARGET, _native.ffi_handler(), platform="cpu")
            _registered = True
    return TARGET


def _kernel_id(kernel: Kernel, device: str, aliases: dict[int, int], debug: bool) -> int:
    key = (kernel.hash, device, tuple(sorted(aliases.items())), debug)
    with _lock:
        if key not in _ids:
            _ids[key] = _native.ffi_register(kernel, device, dict(aliases), debug)
        return _ids[key]


def _result_specs(kernel: Kernel, arrays) -> list[jax.ShapeDtypeStruct]:
    """The kernel's outputs, their symbolic extents bound by the input arrays' shapes."""
    operands = [o for o in kernel.operands if o.role in ("prefetch", "input")]
    bindings: dict[str, int] = {}
    for o, a in zip(operands, arrays, strict=False):
        for extent, n in zip(o.shape, a.shape, strict=False):
            if isinstance(extent, str):
                bindings.setdefault(extent, n)
    specs = []
    for o in kernel.operands:
        if o.role != "output":
            continue
        unbound = [e for e in o.shape if isinstance(e, str) and e not in bindings]
        if unbound:
            raise ShapeError(
                f"kernel `{kernel.name}`: output `{o.name}` has extents {unbound} that no input "
                f"binds"
            )
        shape = tuple(bindings[e] if isinstance(e, str) else e for e in o.shape)
        specs.append(jax.ShapeDtypeStruct(shape, _arrays.numpy_dtype_of(o.dtype)))
    return specs


def call(
    kernel: Kernel, arrays, device: str, aliases: dict[int, int] | None = None, debug=False
) -> list:
    """``kernel`` on ``arrays`` (prefetch operands, then inputs; JAX arrays or tracers) as one
    custom call; returns its outputs. ``aliases`` maps output indices to the inputs whose
    contents they start with; ``debug`` runs the kernel in tpukit's debug mode (bounds checks
    on every access, as ``TPUKIT_DEBUG=1``)."""
    n_in = sum(o.role in ("prefetch", "input") for o in kernel.operands)
    if len(arrays) != n_in:
        raise TypeError(f"kernel `{kernel.name}` takes {n_in} arrays, got {len(arrays)}")
    specs = _result_specs(kernel, arrays)
    kid = _kernel_id(kernel, device, aliases or {}, debug)
    run = jax.ffi.ffi_call(_target(), specs, vmap_method="sequential")
    return list(run(*arrays, kernel=np.int64(kid)))
