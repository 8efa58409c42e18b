"""tpukit kernels as XLA custom calls inside traced JAX programs (``jax.jit``, ``vmap``, ``grad``,
``lax.scan``).

A kernel traced by JAX becomes one ``tpukit_kernel`` primitive. On the CPU platform it lowers
to ``jax.ffi.ffi_call("tpukit_kernel", ...)``: a ``stablehlo.custom_call`` whose ``kernel``
attribute is the id of the kernel in the native registry (``tpukit._native.ffi_register``; a
fingerprint of the kernel, the same in every process). XLA's CPU runtime calls tpukit's FFI
handler (``python/src/ffi.rs``) with the operand and result buffers; the handler runs the
registered kernel on its device. The FFI target is registered for the CPU platform once per
process, at the first such lowering. On the TPU platform (``jax.export(...,
platforms=["tpu"])``) it lowers to tpukit's own Mosaic ``tpu_custom_call`` of the kernel
(``tpukit._tpu_lowering``). Under ``jax.vmap`` the call runs once per batch element (a
``lax.map``); it has no derivative of its own (a kernel's ``backward`` gives it one).
"""

from __future__ import annotations

import re
import threading

import jax
import numpy as np
from jax._src import core
from jax._src.interpreters import ad, batching, mlir

import tpukit
from tpukit import _arrays, _native, _tpu_lowering
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


def _bindings(kernel: Kernel, shapes) -> dict[str, int]:
    """The kernel's symbolic extents bound by its input arrays' ``shapes``."""
    operands = [o for o in kernel.operands if o.role in ("prefetch", "input")]
    bindings: dict[str, int] = {}
    for o, shape in zip(operands, shapes, strict=False):
        for extent, n in zip(o.shape, shape, strict=False):
            if isinstance(extent, str):
                bindings.setdefault(extent, n)
    return bindings


def _result_specs(kernel: Kernel, bindings: dict[str, int]) -> list[jax.ShapeDtypeStruct]:
    """The kernel's outputs, their symbolic extents bound by ``bindings``."""
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


# Kernels by structural hash: the primitive's parameters name a kernel by its hash (a kernel
# object is not a hashable parameter); entries live as long as the programs that call them.
_kernels: dict[str, Kernel] = {}

kernel_p = core.Primitive("tpukit_kernel")
kernel_p.multiple_results = True


@kernel_p.def_abstract_eval
def _abstract_eval(*avals, kernel, device, aliases, debug):
    del device, aliases, debug
    bindings = _bindings(_kernels[kernel], [a.shape for a in avals])
    return [core.ShapedArray(s.shape, s.dtype) for s in _result_specs(_kernels[kernel], bindings)]


def _lower_cpu(ctx, *args, kernel, device, aliases, debug):
    k = _kernels[kernel]
    kid = _kernel_id(k, device, dict(aliases), debug)
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in ctx.avals_out]
    # An aliased output is its input's buffer, as on a TPU (no second buffer when the input
    # is donated); the handler reads that input as it was before the call.
    run = jax.ffi.ffi_call(_target(), specs, input_output_aliases={i: o for o, i in aliases})
    return mlir.lower_fun(lambda *a: run(*a, kernel=np.int64(kid)), multiple_results=True)(
        ctx, *args
    )


def _lower_tpu(ctx, *args, kernel, device, aliases, debug):
    del device, debug
    k = _kernels[kernel]
    bindings = _bindings(k, [a.shape for a in ctx.avals_in])
    return _tpu_lowering.lower(ctx, args, k, bindings, dict(aliases))


def _batch(args, dims, **params):
    """One call per batch element, the unbatched operands shared (``lax.map``)."""
    mapped = [jax.numpy.moveaxis(a, d, 0) for a, d in zip(args, dims, strict=True) if d is not None]

    def one(xs):
        it = iter(xs)
        operands = [a if d is None else next(it) for a, d in zip(args, dims, strict=True)]
        return kernel_p.bind(*operands, **params)

    outs = jax.lax.map(one, mapped)
    return outs, [0] * len(outs)


def _no_derivative(primals, tangents, *, kernel, **params):
    raise ValueError(
        f"`tpukit_kernel` cannot be differentiated: kernel `{_kernels[kernel].name}` has no "
        f"derivative; give it one with `backward=` (custom_kernel(..., backward=...))"
    )


kernel_p.def_impl(lambda *args, **params: jax.jit(lambda *a: kernel_p.bind(*a, **params))(*args))
mlir.register_lowering(kernel_p, _lower_cpu, platform="cpu")
mlir.register_lowering(kernel_p, _lower_tpu, platform="tpu")
batching.primitive_batchers[kernel_p] = _batch
ad.primitive_jvps[kernel_p] = _no_derivative


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
    _result_specs(kernel, _bindings(kernel, [np.shape(a) for a in arrays]))  # errors early
    with _lock:
        _kernels.setdefault(kernel.hash, kernel)
    return list(
        kernel_p.bind(
            *arrays,
            kernel=kernel.hash,
            device=device,
            aliases=tuple(sorted((aliases or {}).items())),
            debug=bool(debug),
        )
    )
