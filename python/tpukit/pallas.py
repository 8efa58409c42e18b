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
    add_vectors.mosaic(x, y)   # the Mosaic kernel in it, readable

or, as ``pl.pallas_call`` is written, with fixed output shapes:

    add = pallas.custom_kernel(body, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))
    add(x, y)

Called with JAX tracers (inside ``jax.jit``, ``jax.vmap``, ``jax.grad``, a ``lax.scan`` body),
a kernel becomes an XLA custom call that runs tpukit's kernel on the CPU (see
``tpukit._custom_call``); ``on_cpu()`` (and ``install()``) do the same for every TPU
``pl.pallas_call`` a jitted program lowers for the CPU (see ``tpukit._cpu_lowering``). Called
with torch tensors, it runs as a torch custom op (see ``tpukit._torch_op``). A kernel's
``backward`` makes it differentiable in both frameworks.
"""

from __future__ import annotations

import functools
import sys
import threading

import jax
import numpy as np
from jax.experimental import pallas as pl

from tpukit import _arrays, _custom_call, _fast, _inline, _lowering, _xla_program
from tpukit._cpu_lowering import install, on_cpu
from tpukit._native import (
    Kernel,
    TpukitError,
    UnsupportedError,
    import_mosaic,
    import_stablehlo,
    stablehlo_ops,
)
from tpukit.launch import check_device, launch

__all__ = [
    "custom_kernel",
    "custom_jax_kernel",
    "CompiledKernel",
    "PallasKernel",
    "JaxKernel",
    "print_output_code",
    "stablehlo_ops",
    "on_cpu",
    "install",
]


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
        # The unsigned dtype of each result the program declares unsigned (else None): the
        # kernel holds unsigned arrays as signed ones of their width (see `_arrays.signed`).
        self.out_dtypes = _lowering.unsigned_results(stablehlo)
        self._unsigned_results = any(self.out_dtypes)
        self.out_tree = None  # the JAX function's result structure, when there is one
        self.prologue: Kernel | None = None
        self.epilogue: Kernel | None = None

    def plain(self) -> bool:
        """Whether a run is the kernel's launch alone, its outputs new arrays: no prologue,
        epilogue, aliased output or unsigned result."""
        return self.prologue is None and self.epilogue is None and not self.aliases \
            and not self._unsigned_results

    def run(self, arrays, device):
        """Runs on ``arrays``; aliased outputs start as their input's contents."""
        if self.plain():
            # numpy arrays or plain CPU tensors tpukit holds as they are: straight to the
            # native launch, and the results straight back.
            wires = _arrays.plain_wires(arrays)
            if wires is not None:
                return [_arrays.from_wire(w) for w in self.kernel.launch(device, wires)]
            wires = _arrays.torch_wires(arrays)
            if wires is not None:
                return [_arrays.torch_from_wire(w) for w in self.kernel.launch(device, wires)]
        arrays = [_arrays.signed(a) for a in arrays]
        operands = launch(self.prologue, *arrays, device=device) if self.prologue else arrays
        outs = self._run_call(operands, device)
        if self.epilogue:
            outs = launch(self.epilogue, *arrays, *outs, device=device)
        return self._unsigned(outs)

    def _unsigned(self, outs):
        """The results with the unsigned dtypes the program declares (same bits)."""
        if not any(self.out_dtypes):
            return outs
        return [_arrays.bitcast_to(o, d) for o, d in zip(outs, self.out_dtypes, strict=False)]

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

    def trace(self, arrays, device, debug=False):
        """``run`` inside a traced JAX program: each kernel one custom call (in tpukit's
        debug mode if ``debug``)."""

        def call(kernel, xs, aliases=None):
            return _custom_call.call(kernel, xs, device, aliases, debug)

        arrays = [_arrays.signed(a) for a in arrays]
        operands = call(self.prologue, arrays) if self.prologue else list(arrays)
        outs = call(self.kernel, operands, self.aliases)
        if self.epilogue:
            outs = call(self.epilogue, [*arrays, *outs])
        return self._unsigned(outs)


def _import(stablehlo: str, name: str) -> CompiledKernel:
    """The kernel of a lowered function: its Pallas call's Mosaic body (with the function's
    other ops as a prologue and an epilogue kernel), or, for a function without one, its
    StableHLO as a single-step kernel over whole arrays. Calls of nested ``jax.jit``
    functions are inlined first."""
    flat = _inline.inline_calls(stablehlo)
    stages = _lowering.pallas_stages(flat)
    if stages is None:
        kernel = import_stablehlo(_lowering.generic_module(flat), name)
        n_out = kernel.count("output")
        return CompiledKernel(stablehlo, kernel, {}, n_out)
    call = stages.call
    try:
        kernel = import_mosaic(
            call.body,
            call.operand_types,
            call.result_types,
            call.name,
            sorted(call.aliases.items()),
            call.vmem_limit_bytes,
        )
    except TpukitError as e:
        if call.unchecked and " are outside " in str(e):
            raise UnsupportedError(
                f"{e} (the call sets disable_bounds_checks=True, under which Mosaic compiles "
                f"the access; what it reads outside the array is undefined on a TPU, and tpukit "
                f"refuses any access outside an array)"
            ) from None
        raise
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
    return tuple((tuple(a.shape), _arrays.boundary_dtype_name(a.dtype)) for a in arrays)


def _mosaic(name: str, stablehlo: str) -> str:
    """The readable Mosaic of the Pallas call in ``stablehlo``, which tpukit need not be able
    to import (it is JAX's lowering)."""
    call = _lowering.mosaic_call(_inline.inline_calls(stablehlo))
    if call is None:
        raise TypeError(
            f"`{name}` has no Pallas call: JAX lowered it to plain StableHLO (see `.lower(...)`), "
            "which tpukit imports as one kernel; tpukit's own lowering of that kernel to a "
            "Mosaic custom call is `.kernel(...).lower()`"
        )
    return _lowering.readable_body(call.body)


def _check_arrays(name: str, args) -> None:
    for i, a in enumerate(args):
        try:
            _arrays.kind(a)
        except TypeError as e:
            raise TypeError(f"{name}: argument {i}: {e}") from None

class _Cache:
    """Lowerings (or imports) by key; one per key even when threads race."""

    def __init__(self):
        self._entries: dict = {}
        self._lock = threading.Lock()

    def get(self, key, make):
        with self._lock:
            if key not in self._entries:
                self._entries[key] = make()
            return self._entries[key]


def _torch_call(args) -> bool:
    """Whether a call goes through the kernel's torch op (torch is loaded and every argument
    is a torch tensor)."""
    if "torch" not in sys.modules:
        return False
    from tpukit import _torch_op

    return _torch_op.takes(args)


class Context:
    """What a kernel's ``backward(ctx, *grad_outputs)`` sees, in JAX and in torch:
    ``ctx.inputs`` and ``ctx.outputs`` (the forward's arrays or tensors, tuples) and
    ``ctx.needs_input_grad`` (a bool per input)."""

    def __init__(self, inputs, outputs, needs_input_grad):
        self.inputs = inputs
        self.outputs = outputs
        self.needs_input_grad = needs_input_grad


class PallasKernel:
    """A Pallas kernel body wrapped for ``pl.pallas_call`` (what ``custom_kernel`` returns).

    Called with JAX tracers it is an XLA custom call; with torch tensors, a torch custom op
    (traceable by ``torch.compile`` and ``torch.export``). ``backward(ctx, *grad_outputs)``
    (see :class:`Context`) returns one gradient per input, ``None`` where there is none; it
    makes the kernel differentiable under ``jax.grad`` (through ``jax.custom_vjp``, written in
    JAX or with tpukit kernels) and torch autograd (written with torch ops or tpukit kernels).
    """

    def __init__(self, propagate, body, call_kwargs, device, backward=None):
        self.propagate = propagate
        self.body = body
        self.call_kwargs = call_kwargs
        self.device = check_device(device)
        self.backward = backward
        self._lowered_cache = _Cache()  # JAX's StableHLO
        self._cache = _Cache()  # tpukit's import of it
        self._differentiable = _Cache()  # jax.custom_vjp functions by device
        self._jitted = _Cache()  # eager calls on JAX arrays: jitted custom calls by device
        self._torch_op = None  # defined at the first call with torch tensors
        # Eager calls already run once: (device, signature) -> (single, CompiledKernel, the
        # signature's `_fast` run or None).
        self._plans: dict[tuple, tuple] = {}
        self._fast = None  # the `_fast` run of the last eager signature run on "cpu", or None
        functools.update_wrapper(self, body)
        # pl.pallas_call's `name=` names the kernel, else the body does
        self.__name__ = call_kwargs.get("name") or getattr(body, "__name__", "pallas_kernel")

    def register_autograd(self, backward):
        """Sets the kernel's derivative (see the class); usable as a decorator."""
        self.backward = backward
        return backward

    def _out_specs(self, args):
        placeholders = self.propagate(*args)
        single = not isinstance(placeholders, (tuple, list))
        items = [placeholders] if single else list(placeholders)
        return single, [_lowering.shape_dtype(p) for p in items]

    def _call(self, args):
        """``(single output?, out specs, the pl.pallas_call function for args)``."""
        _check_arrays(self.__name__, args)
        single, out_specs = self._out_specs(args)
        out_shape = out_specs[0] if single else tuple(out_specs)

        def call(*xs):
            return pl.pallas_call(self.body, out_shape=out_shape, **self.call_kwargs)(*xs)

        return single, out_specs, call

    def _lowered(self, args):
        """``(single output?, cache key, StableHLO)`` of JAX's lowering for ``args``."""
        single, out_specs, call = self._call(args)
        key = (_signature(args), tuple((s.shape, str(s.dtype)) for s in out_specs))

        def make():
            specs = [_lowering.shape_dtype(a) for a in args]
            return _lowering.export_tpu(jax.jit(call), specs)

        return single, key, self._lowered_cache.get(key, make)

    def _compiled(self, args):
        single, key, stablehlo = self._lowered(args)
        return single, self._cache.get(key, lambda: _import(stablehlo, _kernel_name(self.__name__)))

    def lower(self, *args) -> str:
        """The StableHLO text JAX produced for these arguments' shapes and dtypes."""
        return self._lowered(args)[2]

    def kernel(self, *args) -> Kernel:
        """tpukit's kernel IR imported for these arguments' shapes and dtypes."""
        return self._compiled(args)[1].kernel

    def mosaic(self, *args) -> str:
        """The Mosaic kernel JAX produced for these arguments' shapes and dtypes, as readable
        MLIR text (``.lower()`` carries it only as base64 bytecode in the custom call)."""
        return _mosaic(self.__name__, self._lowered(args)[2])

    def jaxpr(self, *args) -> str:
        """The Pallas program for these arguments' shapes and dtypes: the jaxpr of the
        ``pl.pallas_call``, with the kernel body as JAX traced it (reads and writes of refs)."""
        _, _, call = self._call(args)
        return str(jax.make_jaxpr(call)(*[_lowering.shape_dtype(a) for a in args]))

    def __call__(self, *args, device: str | None = None):
        fast = self._fast
        if fast is not None and (device or self.device) == "cpu":
            out = fast(args)  # the last signature's native plan, None if `args` differ
            if out is not None:
                return out
        plan = self._plans.get((device or self.device, _arrays.eager_signature(args)))
        if plan is not None:  # a signature run before: no checks, no lowering, no propagate
            single, compiled, fast = plan
            outs = compiled.run(args, device or self.device)
            if fast is not None:
                self._fast = fast
            return outs[0] if single else tuple(outs)
        device = check_device(device or self.device)
        if _torch_call(args):
            from tpukit import _torch_op

            return _torch_op.call(self, args, device)
        if _custom_call.traced(args):
            if self.backward is not None:
                return self._differentiable.get(device, lambda: self._vjp(device))(*args)
            return self._trace(args, device)
        if _custom_call.cpu_arrays(args):
            jitted = self._jitted.get(device, lambda: jax.jit(lambda *a: self(*a, device=device)))
            return _custom_call.run_eager(jitted, args)
        single, outs = self._run_arrays(args, device)
        return outs[0] if single else tuple(outs)

    def _run_arrays(self, args, device: str) -> tuple[bool, list]:
        """Runs the kernel on arrays of any kind: whether ``propagate`` gave one output (not a
        tuple), and the list of outputs."""
        single, compiled = self._compiled(args)
        outs = compiled.run(args, device)
        signature = _arrays.eager_signature(args)
        if signature is not None:
            fast = _fast.make(compiled.kernel, args, single) \
                if device == "cpu" and compiled.plain() else None
            self._plans[(device, signature)] = (single, compiled, fast)
            if fast is not None:
                self._fast = fast
        return single, outs

    def _trace(self, args, device):
        """The kernel on JAX values (tracers or arrays) as custom calls."""
        single, compiled = self._compiled(args)
        outs = compiled.trace(args, device)
        return outs[0] if single else tuple(outs)

    def _vjp(self, device):
        """The kernel as a ``jax.custom_vjp`` function whose backward pass is ``backward``."""

        @jax.custom_vjp
        def forward(*args):
            return self._trace(args, device)

        def forward_with_residuals(*args):
            out = self._trace(args, device)
            return out, (args, out)

        def backward(residuals, grad):
            args, out = residuals
            outs = out if isinstance(out, tuple) else (out,)
            grads = grad if isinstance(grad, tuple) else (grad,)
            ctx = Context(tuple(args), outs, (True,) * len(args))
            result = self.backward(ctx, *grads)
            result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
            if len(result) != len(args):
                raise TypeError(
                    f"{self.__name__}: backward returned {len(result)} gradients for "
                    f"{len(args)} arguments"
                )
            return tuple(
                jax.numpy.zeros_like(a) if g is None else g
                for a, g in zip(args, result, strict=True)
            )

        forward.defvjp(forward_with_residuals, backward)
        return forward


def print_output_code(kernel: PallasKernel, *args, file=None) -> None:
    """Prints ``kernel``'s Pallas program (``.jaxpr``) and its Mosaic (``.mosaic``) for
    ``args`` to ``file`` (stderr): what ``HELION_PRINT_OUTPUT_CODE=1`` shows for each kernel
    tpukit generates from a Helion program."""
    import sys

    out = file or sys.stderr
    print(f"# kernel `{kernel.__name__}`: the Pallas program (jaxpr)", file=out)
    print(kernel.jaxpr(*args), file=out)
    print(f"# kernel `{kernel.__name__}`: its Mosaic, as JAX lowers it for TPU", file=out)
    print(kernel.mosaic(*args), file=out, flush=True)


def custom_kernel(
    propagate=None,
    pallas_kernel=None,
    *,
    out_shape=None,
    device: str = "cpu",
    backward=None,
    **pallas_call_kwargs,
):
    """Wraps a Pallas kernel body.

    The output shapes come from ``propagate(*args)``, which returns the output placeholders
    (``torch.empty_like(x)``, numpy arrays or ``jax.ShapeDtypeStruct``; one, or a tuple), or,
    as ``pl.pallas_call`` takes them, from ``out_shape=`` (fixed placeholders). The other
    ``pallas_call_kwargs`` go to ``pl.pallas_call`` (``grid``, ``in_specs``, ``out_specs``,
    ``scratch_shapes``, ``compiler_params``, ``input_output_aliases``, ``name``,
    ``grid_spec``, …). The forms:

    - ``@custom_kernel(propagate, **kwargs)`` or ``custom_kernel(propagate, body, **kwargs)``;
    - ``custom_kernel(body, out_shape=..., **kwargs)`` or ``@custom_kernel(out_shape=...)``.

    ``backward(ctx, *grad_outputs)`` makes the kernel differentiable in JAX and torch (see
    :class:`PallasKernel`); without one, differentiating through it is an error.

    Each returns a :class:`PallasKernel`, called on arrays. Anything else (a bare
    ``@custom_kernel``, both a propagate function and ``out_shape``, shapes where a function
    belongs) is a TypeError saying what to write.
    """
    if "interpret" in pallas_call_kwargs:
        raise TypeError(
            "custom_kernel: `interpret=` is Pallas's interpreter; tpukit's is "
            "device='interpret' (on the kernel, or per call: kernel(x, device='interpret'))"
        )
    if out_shape is not None:
        fixed = _fixed_out_shape(out_shape)
        if propagate is not None and pallas_kernel is not None:
            raise TypeError(
                "custom_kernel: the output shapes are given twice (a propagate function and "
                "out_shape=): write custom_kernel(body, out_shape=...) or "
                "custom_kernel(propagate, body)"
            )
        body = propagate if propagate is not None else pallas_kernel
        if body is not None and not callable(body):
            raise TypeError(
                f"custom_kernel: the kernel body is a function of refs, not a "
                f"{type(body).__name__}: custom_kernel(body, out_shape=...)"
            )
        return _decorate(fixed, body, pallas_call_kwargs, device, backward)
    if propagate is None:
        raise TypeError(
            "custom_kernel needs the output shapes: "
            "custom_kernel(lambda x, y: torch.empty_like(x)) or custom_kernel(out_shape=...)"
        )
    if not callable(propagate):
        raise TypeError(
            f"custom_kernel: the first argument is a function of the kernel's arguments that "
            f"returns the output placeholders (`lambda x, y: torch.empty_like(x)`), not a "
            f"{type(propagate).__name__}; fixed output shapes are written "
            f"custom_kernel(body, out_shape=jax.ShapeDtypeStruct(shape, dtype))"
        )
    return _decorate(propagate, pallas_kernel, pallas_call_kwargs, device, backward)


def _fixed_out_shape(out_shape):
    """A propagate function returning ``out_shape`` (one placeholder, or a tuple or list)."""
    items = list(out_shape) if isinstance(out_shape, (tuple, list)) else [out_shape]
    for item in items:
        if callable(item) or not (hasattr(item, "shape") and hasattr(item, "dtype")):
            raise TypeError(
                f"custom_kernel: out_shape= takes the output placeholders "
                f"(jax.ShapeDtypeStruct(shape, dtype), an array, or a tuple of them), not a "
                f"{type(item).__name__}; output shapes computed from the arguments come from a "
                f"function: custom_kernel(lambda x, y: jax.ShapeDtypeStruct(x.shape, x.dtype), "
                f"body)"
            )
    fixed = tuple(items) if isinstance(out_shape, (tuple, list)) else out_shape
    return lambda *args: fixed


def _decorate(propagate, body, call_kwargs, device, backward):
    if body is None:
        return _Decorator(propagate, call_kwargs, device, backward)
    return PallasKernel(propagate, body, call_kwargs, device, backward)


class _Decorator:
    """``custom_kernel(propagate)`` waiting for its kernel body. Called with anything else,
    it was written as a bare ``@custom_kernel`` over a body (which it took for the propagate
    function), and says what to write instead."""

    def __init__(self, propagate, call_kwargs, device, backward):
        self._propagate = propagate
        self._call_kwargs = call_kwargs
        self._device = device
        self._backward = backward

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return PallasKernel(
                self._propagate, args[0], self._call_kwargs, self._device, self._backward
            )
        name = getattr(self._propagate, "__name__", "kernel")
        raise TypeError(
            f"`{name}` was decorated with a bare `@pallas.custom_kernel`, which cannot know the "
            f"kernel's output shapes: write `@pallas.custom_kernel(lambda x, y: "
            f"torch.empty_like(x))` (a function of the arguments returning output "
            f"placeholders: tensors, arrays or jax.ShapeDtypeStruct) or "
            f"`@pallas.custom_kernel(out_shape=jax.ShapeDtypeStruct(shape, dtype))`"
        )


class JaxKernel:
    """A JAX function (possibly calling ``pl.pallas_call``) run through tpukit (see
    ``custom_jax_kernel``). Called with torch tensors it runs as a torch custom op whose
    gradients are JAX's derivative of the function (see ``tpukit._torch_jax_op``); with JAX
    tracers, inline in the traced program (differentiable by JAX's VJP of the function)."""

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
        self._lowered_cache = _Cache()  # JAX's StableHLO and the result structure
        self._cache = _Cache()  # tpukit's import of it
        self._jitted = _Cache()  # eager calls on JAX arrays: jitted custom calls by device
        self._torch_op = None  # defined at the first call with torch tensors
        # Eager calls already run once: (device, signature) -> (single, CompiledKernel).
        self._plans: dict[tuple, tuple[bool, CompiledKernel]] = {}
        functools.update_wrapper(self, fn)

    def _split(self, args):
        arrays = [a for i, a in enumerate(args) if i not in self.static_argnums]
        statics = tuple((i, args[i]) for i in self.static_argnums if i < len(args))
        _check_arrays(self.name, arrays)
        return arrays, statics

    def _lowered(self, args):
        """``(array arguments, cache key, (StableHLO, result structure))`` for ``args``."""
        arrays, statics = self._split(args)
        key = (_signature(arrays), statics)

        def make():
            specs = [
                a if i in self.static_argnums else _lowering.shape_dtype(a)
                for i, a in enumerate(args)
            ]
            return _lowering.export_tpu_tree(self.jitted, specs)

        return arrays, key, self._lowered_cache.get(key, make)

    def _compiled(self, args):
        arrays, key, (stablehlo, out_tree) = self._lowered(args)

        def make():
            compiled = _import(stablehlo, _kernel_name(self.name))
            compiled.out_tree = out_tree
            return compiled

        return arrays, self._cache.get(key, make)

    def lower(self, *args) -> str:
        """The StableHLO text JAX produced for these arguments."""
        return self._lowered(args)[2][0]

    def kernel(self, *args) -> Kernel:
        """tpukit's kernel IR imported for these arguments."""
        return self._compiled(args)[1].kernel

    def mosaic(self, *args) -> str:
        """The Mosaic kernel of the function's Pallas call for these arguments, as readable MLIR
        text; a TypeError for a function without one."""
        return _mosaic(self.name, self._lowered(args)[2][0])

    def __call__(self, *args, device: str | None = None):
        device = check_device(device or self.device)
        arrays = [a for i, a in enumerate(args) if i not in self.static_argnums]
        if _torch_call(arrays):
            from tpukit import _torch_jax_op

            statics = tuple((i, args[i]) for i in self.static_argnums if i < len(args))
            return _torch_jax_op.call(self, arrays, statics, device)
        if device == "cpu" or self._calls_pallas(args):
            return self._xla(args, device)
        if _custom_call.cpu_arrays(self._split(args)[0]):
            jitted = self._jitted.get(
                device,
                lambda: jax.jit(
                    lambda *a: self(*a, device=device), static_argnums=self.static_argnums
                ),
            )
            return _custom_call.run_eager(jitted, args)
        arrays, compiled = self._compiled(args)
        if _custom_call.traced(arrays):
            outs = compiled.trace(arrays, device)
        else:
            outs = compiled.run(arrays, device)
        return jax.tree_util.tree_unflatten(compiled.out_tree, list(outs))

    def _calls_pallas(self, args) -> bool:
        """Whether the function calls ``pl.pallas_call`` (at any depth: its TPU lowering has a
        ``tpu_custom_call``)."""
        return "tpu_custom_call" in self._lowered(args)[2][0]

    def _xla(self, args, device):
        """The function as one XLA program, its Pallas calls (at any depth) tpukit's custom
        calls on ``device`` (``tpukit._xla_program``). Eager calls run it jitted; numpy
        arguments give numpy results."""
        arrays, _ = self._split(args)
        if not _custom_call.traced(arrays):
            jitted = self._jitted.get(
                ("xla", device),
                lambda: jax.jit(
                    functools.partial(self._program, device), static_argnums=self.static_argnums
                ),
            )
            out = _custom_call.run_eager(jitted, args)
            if arrays and _arrays.kind(arrays[0]) == "numpy":
                out = jax.tree_util.tree_map(np.asarray, out)
            return out
        return self._program(device, *args)

    def _program(self, device, *args):
        statics = dict((i, args[i]) for i in self.static_argnums if i < len(args))
        positions = [i for i in range(len(args)) if i not in statics]
        out_tree = []

        def flat(*arrays):
            full = dict(statics) | dict(zip(positions, arrays, strict=True))
            leaves, tree = jax.tree_util.tree_flatten(self.fn(*(full[i] for i in range(len(args)))))
            out_tree[:] = [tree]
            return leaves

        outs = _xla_program.call(flat, [args[i] for i in positions], device)
        return jax.tree_util.tree_unflatten(out_tree[0], outs)


def custom_jax_kernel(jax_fn=None, name=None, static_argnums=(), *, device="cpu", **jit_kwargs):
    """Wraps a JAX function. On ``device="cpu"`` it runs as one XLA program (jitted), each
    ``pl.pallas_call`` inside it (at any depth: in a nested ``jax.jit``, a ``scan``, a
    ``custom_vjp``; any number of them) a custom call running tpukit's import of its Mosaic
    body; on ``"interpret"`` the same, those kernels on tpukit's interpreter. A function with
    no Pallas call on ``"interpret"`` (and on torch tensors) is imported whole instead: its
    StableHLO as one kernel step over whole arrays (``stablehlo_ops()`` lists the ops), run
    on tpukit's interpreter. Results keep the function's structure (an array, a tuple, a
    dict). Usable bare (``@custom_jax_kernel``) or with arguments
    (``@custom_jax_kernel(static_argnums=(1,))``).
    """
    if jax_fn is None:
        return lambda fn: JaxKernel(fn, name, static_argnums, jit_kwargs, device)
    return JaxKernel(jax_fn, name, static_argnums, jit_kwargs, device)
