"""Pallas and JAX kernels, TorchTPU style: ``custom_kernel`` and ``custom_jax_kernel``.

Both lower the kernel through JAX for the TPU platform (``jax.export`` with
``platforms=["tpu"]``, which works on a machine without a TPU), import the Mosaic body JAX
produced into tpukit's kernel IR, and run it on ``device="cpu"`` (compiled, the default) or
``"interpret"`` (the reference interpreter). Lowering and import happen once per kernel,
argument shapes and dtypes, and static arguments; the compiled code is cached by the runtime.

    @pallas.custom_kernel(lambda x, y: torch.empty_like(x))
    def add_vectors(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    add_vectors(x, y)          # numpy arrays, torch tensors or JAX arrays in, same kind out
    add_vectors.lower(x, y)    # the StableHLO text JAX produced
"""

from __future__ import annotations

import functools
import threading

import jax
from jax.experimental import pallas as pl

from tpukit import _arrays, _lowering
from tpukit._native import Kernel, import_mosaic, import_stablehlo
from tpukit.launch import check_device, launch

__all__ = ["custom_kernel", "custom_jax_kernel", "CompiledKernel"]


class CompiledKernel:
    """One lowering of a kernel for one signature: JAX's StableHLO, tpukit's kernel, and how
    outputs alias inputs. A Pallas call with JAX ops around it in the same function also has a
    ``prologue`` kernel (the call's operands from the function's arguments) and/or an
    ``epilogue`` kernel (the function's results from its arguments and the call's results),
    run before and after it."""

    def __init__(self, stablehlo: str, kernel: Kernel, aliases: dict[int, int], n_out: int):
        self.stablehlo = stablehlo
        self.kernel = kernel
        self.aliases = aliases
        self.n_out = n_out
        self.out_tree = None  # the JAX function's result structure, when there is one
        self.prologue: Kernel | None = None
        self.epilogue: Kernel | None = None

    def run(self, arrays, device):
        """Runs on ``arrays``; aliased outputs start as their input's contents."""
        operands = launch(self.prologue, *arrays, device=device) if self.prologue else arrays
        outs = self._run_call(operands, device)
        if self.epilogue:
            outs = launch(self.epilogue, *arrays, *outs, device=device)
        return outs

    def _run_call(self, arrays, device):
        outputs = None
        if self.aliases:
            import numpy as np

            outs = [o for o in self.kernel.operands if o.role == "output"]
            outputs = [
                _arrays.to_numpy(arrays[self.aliases[i]])
                if i in self.aliases
                else np.zeros(o.shape, _arrays.numpy_dtype_of(o.dtype))
                for i, o in enumerate(outs)
            ]
        return launch(self.kernel, *arrays, device=device, outputs=outputs)


def _import(stablehlo: str, name: str) -> CompiledKernel:
    """The kernel of a lowered function: its Pallas call's Mosaic body (with the function's
    other ops as a prologue and an epilogue kernel), or, for a function without one, its
    StableHLO as a single-step kernel over whole arrays."""
    stages = _lowering.pallas_stages(stablehlo)
    if stages is None:
        kernel = import_stablehlo(_lowering.generic_module(stablehlo), name)
        n_out = kernel.count("output")
        return CompiledKernel(stablehlo, kernel, {}, n_out)
    call = stages.call
    kernel = import_mosaic(call.body, call.operand_types, call.result_types, call.name)
    compiled = CompiledKernel(stablehlo, kernel, call.aliases, len(call.result_types))
    if stages.prologue is not None:
        compiled.prologue = import_stablehlo(stages.prologue, f"{call.name}_prologue")
    if stages.epilogue is not None:
        compiled.epilogue = import_stablehlo(stages.epilogue, f"{call.name}_epilogue")
        compiled.n_out = compiled.epilogue.count("output")
    return compiled


def _kernel_name(name: str) -> str:
    """``name`` as an identifier (``<lambda>`` → ``lambda``)."""
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in name).strip("_")
    return ident or "jax_kernel"


def _signature(arrays) -> tuple:
    return tuple((tuple(a.shape), _arrays.dtype_name(a.dtype)) for a in arrays)


def _check_arrays(name: str, args) -> None:
    for i, a in enumerate(args):
        try:
            _arrays.kind(a)
        except TypeError as e:
            raise TypeError(f"{name}: argument {i}: {e}") from None


class _Cache:
    """Lowerings by key; one lowering per key even when threads race."""

    def __init__(self):
        self._entries: dict = {}
        self._lock = threading.Lock()

    def get(self, key, make):
        with self._lock:
            if key not in self._entries:
                self._entries[key] = make()
            return self._entries[key]


class PallasKernel:
    """A Pallas kernel body wrapped for ``pl.pallas_call`` (what ``custom_kernel`` returns)."""

    def __init__(self, propagate, body, call_kwargs, device):
        self.propagate = propagate
        self.body = body
        self.call_kwargs = call_kwargs
        self.device = check_device(device)
        self._cache = _Cache()
        functools.update_wrapper(self, body)
        self.__name__ = getattr(body, "__name__", "pallas_kernel")

    def _out_specs(self, args):
        placeholders = self.propagate(*args)
        single = not isinstance(placeholders, (tuple, list))
        items = [placeholders] if single else list(placeholders)
        return single, [_lowering.shape_dtype(p) for p in items]

    def _compiled(self, args):
        single, out_specs = self._out_specs(args)
        key = (_signature(args), tuple((s.shape, str(s.dtype)) for s in out_specs))

        def make():
            out_shape = out_specs[0] if single else tuple(out_specs)

            def call(*xs):
                return pl.pallas_call(self.body, out_shape=out_shape, **self.call_kwargs)(*xs)

            specs = [_lowering.shape_dtype(a) for a in args]
            return _import(_lowering.export_tpu(jax.jit(call), specs), _kernel_name(self.__name__))

        return single, out_specs, self._cache.get(key, make)

    def lower(self, *args) -> str:
        """The StableHLO text JAX produced for these arguments' shapes and dtypes."""
        _check_arrays(self.__name__, args)
        return self._compiled(args)[2].stablehlo

    def kernel(self, *args) -> Kernel:
        """tpukit's kernel IR imported for these arguments' shapes and dtypes."""
        _check_arrays(self.__name__, args)
        return self._compiled(args)[2].kernel

    def __call__(self, *args, device: str | None = None):
        _check_arrays(self.__name__, args)
        single, out_specs, compiled = self._compiled(args)
        outs = compiled.run(args, check_device(device or self.device))
        return outs[0] if single else tuple(outs)


def custom_kernel(propagate, pallas_kernel=None, *, device: str = "cpu", **pallas_call_kwargs):
    """Wraps a Pallas kernel body.

    ``propagate(*args)`` returns the output placeholders (``torch.empty_like(x)``, numpy
    arrays or ``jax.ShapeDtypeStruct``; one, or a tuple). ``pallas_call_kwargs`` go to
    ``pl.pallas_call`` (``grid``, ``in_specs``, ``out_specs``, ``scratch_shapes``,
    ``compiler_params``, ``input_output_aliases``, ``name``, ``grid_spec``, …). Usable as
    ``@custom_kernel(propagate, **kwargs)`` or ``custom_kernel(propagate, body, **kwargs)``.
    """
    if pallas_kernel is None:
        return lambda body: PallasKernel(propagate, body, pallas_call_kwargs, device)
    return PallasKernel(propagate, pallas_kernel, pallas_call_kwargs, device)


class JaxKernel:
    """A JAX function (possibly calling ``pl.pallas_call``) run through tpukit."""

    def __init__(self, fn, name, static_argnums, jit_kwargs, device):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "jax_kernel")
        self.static_argnums = tuple(
            (static_argnums,) if isinstance(static_argnums, int) else static_argnums
        )
        # JAX drops arguments the function does not use unless told to keep them; the kernel
        # must still take every array it is called with.
        jit_kwargs = {"keep_unused": True, **jit_kwargs}
        self.jitted = jax.jit(fn, static_argnums=self.static_argnums, **jit_kwargs)
        self.device = check_device(device)
        self._cache = _Cache()
        functools.update_wrapper(self, fn)

    def _split(self, args):
        arrays = [a for i, a in enumerate(args) if i not in self.static_argnums]
        statics = tuple((i, args[i]) for i in self.static_argnums if i < len(args))
        _check_arrays(self.name, arrays)
        return arrays, statics

    def _compiled(self, args):
        arrays, statics = self._split(args)
        key = (_signature(arrays), statics)

        def make():
            specs = [
                a if i in self.static_argnums else _lowering.shape_dtype(a)
                for i, a in enumerate(args)
            ]
            stablehlo, out_tree = _lowering.export_tpu_tree(self.jitted, specs)
            compiled = _import(stablehlo, _kernel_name(self.name))
            compiled.out_tree = out_tree
            return compiled

        return arrays, self._cache.get(key, make)

    def lower(self, *args) -> str:
        """The StableHLO text JAX produced for these arguments."""
        return self._compiled(args)[1].stablehlo

    def kernel(self, *args) -> Kernel:
        return self._compiled(args)[1].kernel

    def __call__(self, *args, device: str | None = None):
        arrays, compiled = self._compiled(args)
        outs = compiled.run(arrays, check_device(device or self.device))
        return jax.tree_util.tree_unflatten(compiled.out_tree, list(outs))


def custom_jax_kernel(jax_fn=None, name=None, static_argnums=(), *, device="cpu", **jit_kwargs):
    """Wraps a JAX function: one that calls ``pl.pallas_call`` (its Mosaic body is imported),
    or one written with ordinary JAX ops (its StableHLO is imported as one kernel step over
    whole arrays; see ``tpukit._native.stablehlo_ops()`` for the ops). Results keep the
    function's structure (an array, a tuple, a dict). Usable bare (``@custom_jax_kernel``) or
    with arguments (``@custom_jax_kernel(static_argnums=(1,))``).
    """
    if jax_fn is None:
        return lambda fn: JaxKernel(fn, name, static_argnums, jit_kwargs, device)
    return JaxKernel(jax_fn, name, static_argnums, jit_kwargs, device)
