"""``pl.pallas_call`` on the CPU platform as tpukit's custom call (``tpukit.pallas.on_cpu``).

JAX lowers a TPU ``pallas_call`` on the CPU only in interpret mode. While tpukit's rule is
active (inside ``on_cpu()``, or everywhere after ``install()``), the CPU lowering of every
``pallas_call`` that is not in interpret mode does what ``custom_kernel`` does: it exports
that one call for the TPU platform (``jax.export``, no TPU needed), imports the Mosaic body
into tpukit's kernel IR and emits the kernel as a custom call (``tpukit._custom_call``) in
the program being lowered, beside XLA's ops. Imports are cached by the call's jaxpr and
operand types. Elsewhere (and for interpret-mode calls) JAX's own rule runs.

The rule is registered for the ``cpu`` platform once, at the first ``on_cpu()`` or
``install()``; whether it is active is read when a program is lowered, so a program jitted
inside ``on_cpu()`` keeps the custom call when later called outside it (JAX caches the
compiled program).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading

import jax
import jax.numpy as jnp
from jax._src.interpreters import mlir
from jax._src.pallas import mpmd as _mpmd
from jax._src.pallas import pallas_call as _pallas_call
from jax._src.state import types as _state_types

from tpukit._native import OutOfMemoryError, UnsupportedError
from tpukit.launch import check_device

_lock = threading.Lock()
_registered = False
# (device, debug) of `install()` and of the innermost `on_cpu()`, when in effect.
_installed: tuple[str, bool] | None = None
_active: contextvars.ContextVar[tuple[str, bool] | None] = contextvars.ContextVar(
    "tpukit_pallas_on_cpu", default=None
)
_imports: dict = {}


def _jax_rule(ctx, *in_nodes, **params):
    """JAX's own lowering of ``pallas_call`` (interpret mode on the CPU, or its error)."""
    return _pallas_call._pallas_call_lowering(ctx, *in_nodes, **params)


def _jax_mesh_rule(ctx, *in_nodes, **params):
    """JAX's own lowering of a mesh kernel (``pl.kernel``/``pl.core_map``): on the CPU, a
    ``pallas_call`` that only interpret mode runs."""
    return _mpmd._mpmd_map_lowering(ctx, *in_nodes, **params)


def _rule(ctx, *in_nodes, interpret, **params):
    return _lower(_pallas_call.pallas_call_p, _jax_rule, ctx, in_nodes, interpret, params)


def _mesh_rule(ctx, *in_nodes, interpret, **params):
    """A kernel over a TensorCore mesh (``pl.kernel(mesh=pltpu.create_tensorcore_mesh(..))``,
    ``pl.core_map``) — JAX's ``mpmd_map``, which it lowers on a TPU to one Mosaic kernel whose
    grid is the mesh, as it does a ``pallas_call``."""
    return _lower(_mpmd.mpmd_map_p, _jax_mesh_rule, ctx, in_nodes, interpret, params)


def _lower(primitive, jax_rule, ctx, in_nodes, interpret, params):
    """tpukit's kernel for one ``primitive`` (``pallas_call`` or ``mpmd_map``) when tpukit's
    rule is in effect and the call is not in interpret mode; ``jax_rule`` otherwise."""
    mode = _active.get() or _installed
    if mode is None or interpret:
        return jax_rule(ctx, *in_nodes, interpret=interpret, **params)
    device, debug = mode
    compiled = _compiled(primitive, ctx.avals_in, params)

    def run(*args):
        # Typed PRNG keys (`key<pl>`) cross the kernel as their data, as they do on a TPU.
        outs = compiled.trace([_key_data(a) for a in args], device, debug)
        return [_as_key(o, aval) for o, aval in zip(outs, ctx.avals_out, strict=True)]

    # Semaphores (`pltpu.SemaphoreType.DMA(())` results, `pltpu.SEMAPHORE` operands) cross
    # the kernel as their counts: int32 arrays, the type XLA already gives them.
    ctx = ctx.replace(
        avals_in=[_physical(a) for a in ctx.avals_in],
        avals_out=[_physical(a) for a in ctx.avals_out],
    )
    return mlir.lower_fun(run, multiple_results=True)(ctx, *in_nodes)


def _physical(aval):
    """``aval``, or for a semaphore array the int32 array of its counts."""
    from jax._src.pallas import core as pallas_core

    if isinstance(getattr(aval, "dtype", None), pallas_core.AbstractSemaphoreTy):
        return jax.core.ShapedArray(aval.shape, jnp.int32)
    return aval


def _is_key(aval) -> bool:
    return jax.dtypes.issubdtype(getattr(aval, "dtype", None), jax.dtypes.prng_key)


def _key_data(x):
    return jax.random.key_data(x) if _is_key(x) else x


def _as_key(x, aval):
    return jax.random.wrap_key_data(x, impl=aval.dtype._impl) if _is_key(aval) else x


def _compiled(primitive, avals, params):
    """The imported kernel of the ``primitive`` call with ``params`` on operands ``avals``."""
    if any(isinstance(a, _state_types.AbstractLinVal) for a in avals):
        raise UnsupportedError(
            "tpukit.pallas.on_cpu: a pallas_call on a pinned buffer (`pin`/`unpin`, a linear "
            "value) is not supported: XLA's CPU runtime has no implementation of its Pin and "
            "Unpin custom calls"
        )
    if not all(isinstance(a, jax.core.ShapedArray) for a in avals):
        raise UnsupportedError(
            "tpukit.pallas.on_cpu: a pallas_call with closed-over refs or dynamic grid bounds "
            "is not supported"
        )
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    # Every parameter (grid, block specs and index maps, compiler params), not just the body.
    key = (
        primitive,
        tuple(sorted(params.items())),
        tuple((s.shape, str(s.dtype)) for s in specs),
    )
    with _lock:
        found = _imports.get(key)
    if found is not None:
        return found
    from tpukit import _lowering, pallas

    def call(*args):
        return primitive.bind(*args, interpret=False, **params)

    name = pallas._kernel_name(_call_name(params))
    try:
        compiled = pallas._import(_lowering.export_tpu(jax.jit(call), specs), name)
    except OutOfMemoryError as e:
        # Windows and scratch beyond a TPU's VMEM: what the TPU's compile of the call raises.
        raise jax.errors.JaxRuntimeError(f"RESOURCE_EXHAUSTED: {e}") from e
    with _lock:
        return _imports.setdefault(key, compiled)


def _call_name(params) -> str:
    """The user's name of the call: ``pallas_call``'s ``name_and_src_info``, a mesh kernel's
    ``name`` (``pl.kernel(name=...)`` or the body's)."""
    named = params.get("name_and_src_info")
    if named is not None:
        return named.name
    return params.get("name") or "pallas_call"


def imported() -> list:
    """The kernels imported so far (``Kernel``s, in import order): what the conformance suite
    lowers back to Mosaic for libtpu."""
    with _lock:
        return [c.kernel for c in _imports.values()]


def _cpu_tpu_info():
    """What Pallas's ``pltpu.get_tpu_info()`` answers on a CPU device once tpukit's rule is
    registered: the facts of the chip tpukit compiles for (a v5e TensorCore, its default
    topology), since the kernels are lowered for that TPU. ``emit_pipeline`` asks for them
    (tilings) while a kernel is traced, before any lowering rule runs; without an answer JAX
    refuses the CPU's device kind. Pallas caches what it derives from them, so the answer
    does not depend on being inside ``on_cpu()``."""
    from jax._src.pallas.mosaic import tpu_info

    return tpu_info.get_tpu_info_for_chip(tpu_info.ChipVersion.TPU_V5E, 1)


def _install_num_cores():
    """Give CPU devices the ``num_cores`` a TPU device reports: 1, the TensorCores of the v5e
    chip tpukit compiles for. ``pltpu.create_tensorcore_mesh`` and kernels that size their grid
    by ``jax.devices()[0].num_cores`` read it while they are traced; a CPU device has no such
    attribute, so without it they fail before tpukit's rule could run them. Other devices keep
    answering from their own attributes (``Device.__getattr__``)."""
    device_type = type(jax.devices("cpu")[0])
    if isinstance(device_type.__dict__.get("num_cores"), property):
        return
    device_attribute = device_type.__getattr__

    def num_cores(device):
        return 1 if device.platform == "cpu" else device_attribute(device, "num_cores")

    device_type.num_cores = property(num_cores)


def _register():
    global _registered
    with _lock:
        if not _registered:
            from jax._src.pallas.mosaic import tpu_info

            mlir.register_lowering(_pallas_call.pallas_call_p, _rule, platform="cpu")
            mlir.register_lowering(_mpmd.mpmd_map_p, _mesh_rule, platform="cpu")
            # JAX's hook for device kinds it does not know (the CPU's is "cpu").
            tpu_info.registry.setdefault("cpu", _cpu_tpu_info)
            _install_num_cores()
            _registered = True


@contextlib.contextmanager
def on_cpu(device: str = "cpu", debug: bool = False):
    """Inside it, every TPU ``pl.pallas_call`` lowered for the CPU runs as tpukit's kernel on
    ``device``; with ``debug``, in tpukit's debug mode (a bounds check on every access, NaN
    scratch; errors name the kernel, op, source line and grid step)."""
    _register()
    token = _active.set((check_device(device), bool(debug)))
    try:
        yield
    finally:
        _active.reset(token)


def install(device: str | None = "cpu", debug: bool = False) -> None:
    """``on_cpu(device, debug)`` for the rest of the process (until ``install(None)``)."""
    global _installed
    _register()
    _installed = None if device is None else (check_device(device), bool(debug))
