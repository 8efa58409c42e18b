"""tpuBLAS operators as torch custom ops: ``torch.ops.tpublas.<name>.<overload>``.

Each operator is defined with its ATen schema in the ``tpublas`` namespace, with a CPU
kernel that runs tpuBLAS and a fake kernel — ATen's own operator on the fake tensors, its
results made contiguous as tpuBLAS's are — so the ops trace (``torch.compile``,
``torch.export``) with the right shapes and dtypes — and an autograd kernel: the op's
derivative from ``_derivatives.FORMULAS`` (computed with tpuBLAS ops), or, for an op without
one, an ``UnsupportedError`` naming the op when ``backward()`` reaches it.
"""

from __future__ import annotations

import torch

from tpukit import _native
from tpukit._native import UnsupportedError
from tpukit.tpublas import _derivatives
from tpukit.tpublas._schema import bind

_LIBRARY = None


def qualified_name(op) -> str:
    """``add.Tensor``, or ``neg`` for a ``default`` overload (as torch names them)."""
    s = op.schema
    return s.name if s.overload == "default" else f"{s.name}.{s.overload}"


def _cpu_kernel(op):
    def kernel(*args, **kwargs):
        return op.run_as("torch", *args, **kwargs)

    kernel.__name__ = qualified_name(op)
    return kernel


def _fake_kernel(aten):
    def fake(*args, **kwargs):
        out = aten(*args, **kwargs)
        if isinstance(out, torch.Tensor):
            return torch.empty_like(out, memory_format=torch.contiguous_format)
        return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in out)

    return fake


def _layer_norm_backward_fake(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                              output_mask):
    """tpuBLAS computes all three gradients whatever ``output_mask`` says (ATen leaves the
    masked ones undefined); the last two have the weight's dtype, or the input's."""
    like = weight if weight is not None else input
    return (
        torch.empty_like(input, memory_format=torch.contiguous_format),
        input.new_empty(normalized_shape, dtype=like.dtype),
        input.new_empty(normalized_shape, dtype=like.dtype),
    )


def _convolution_backward_fake(grad_output, input, weight, bias_sizes, stride, padding,
                               dilation, transposed, output_padding, groups, output_mask):
    """tpuBLAS returns an empty ``[0]`` tensor for each gradient ``output_mask`` leaves out
    (a custom op cannot return ATen's undefined tensor)."""
    likes = (input, weight, input.new_empty(bias_sizes or [0]))
    return tuple(
        torch.empty_like(t, memory_format=torch.contiguous_format) if m else t.new_empty([0])
        for t, m in zip(likes, output_mask, strict=True)
    )


# Fake kernels where tpuBLAS's results differ from ATen's in more than their layout.
_FAKES = {"native_layer_norm_backward": _layer_norm_backward_fake,
          "convolution_backward": _convolution_backward_fake}


def _aten(op):
    packet = getattr(torch.ops.aten, op.schema.name, None)
    return getattr(packet, op.schema.overload, None) if packet is not None else None


def _autograd(op):
    """``(setup_context, backward)`` of an op for ``torch.library.register_autograd``."""
    name = qualified_name(op)
    names = [a.name for a in op.schema.arguments]
    positional = [a.name for a in op.schema.arguments if not a.kwarg_only]
    formula = _derivatives.FORMULAS.get(name)
    statistics = _derivatives.STATISTICS.get(name, ())

    def setup_context(ctx, inputs, output, keyword_only_inputs=None):
        values = dict(zip(positional, inputs, strict=True), **(keyword_only_inputs or {}))
        ctx.values = [values.get(n) for n in names]
        ctx.outputs = output if isinstance(output, tuple) else (output,)
        if statistics:
            ctx.mark_non_differentiable(*(ctx.outputs[i] for i in statistics))

    def backward(ctx, *grads):
        needs = dict(zip(positional, ctx.needs_input_grad, strict=False))
        needs = {k: bool(v) if not isinstance(v, (list, tuple)) else any(v)
                 for k, v in needs.items()}
        return _gradients(name, formula, names, ctx, needs, grads, positional)

    return setup_context, backward


def _gradients(name, formula, names, ctx, needs, grads, order):
    """The gradients of the arguments named in ``order`` (None where not needed) by the op's
    formula, given the call saved in ``ctx`` (``values`` by schema ``names``, ``outputs``);
    an op without a formula raises ``UnsupportedError`` naming it."""
    if formula is None:
        raise UnsupportedError(f"tpublas.{name} has no derivative: backward() cannot go through it")
    inputs = _derivatives.Inputs(names, ctx.values, ctx.outputs, needs)
    result = formula(inputs, *grads)
    return tuple(result.get(n) if needs.get(n) else None for n in order)


def _function_kernel(op):
    """The autograd kernel of an op ``register_autograd`` cannot take (a keyword-only tensor
    argument, as attention's ``attn_mask``): a ``torch.autograd.Function`` over every argument
    in schema order, differentiated by the op's formula like every other op; without one,
    ``backward()`` raises ``UnsupportedError`` naming the op (never a silent ``grad=None``)."""
    name = qualified_name(op)
    arguments = op.schema.arguments
    names = [a.name for a in arguments]
    formula = _derivatives.FORMULAS.get(name)
    statistics = _derivatives.STATISTICS.get(name, ())
    target = getattr(getattr(torch.ops.tpublas, op.schema.name), op.schema.overload)

    class Call(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *values):
            positional = [v for a, v in zip(arguments, values, strict=True) if not a.kwarg_only]
            keyword = {a.name: v for a, v in zip(arguments, values, strict=True) if a.kwarg_only}
            with torch._C._AutoDispatchBelowAutograd():
                out = target(*positional, **keyword)
            ctx.values = values
            ctx.outputs = out if isinstance(out, tuple) else (out,)
            if statistics:
                ctx.mark_non_differentiable(*(ctx.outputs[i] for i in statistics))
            return out

        @staticmethod
        def backward(ctx, *grads):
            needs = dict(zip(names, map(bool, ctx.needs_input_grad), strict=True))
            return _gradients(name, formula, names, ctx, needs, grads, names)

    def kernel(*args, **kwargs):
        return Call.apply(*bind(op.schema, args, kwargs, f"tpublas.{name}"))

    return kernel


def _register_autograd(library, op, name, backward, setup_context):
    """``torch.library.register_autograd`` of ``backward``, with a first step: a call the
    operator's tpuBLAS plan takes (exact CPU ``torch.Tensor``s needing no gradient, so no
    tensor subclass's Python key, with no dispatch mode on the stack and no functorch
    transform: nothing below autograd but the CPU kernel) is served by the plan there, as
    the CPU kernel would serve it after torch's autograd kernel redispatched it (a Python
    round trip through the dispatcher). Without the torch internals this needs, torch's
    kernel alone."""
    autograd = getattr(torch._library, "autograd", None)
    make = getattr(autograd, "make_autograd_impl", None)
    modes = getattr(torch._C, "_len_torch_dispatch_stack", None)
    functorch = getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack", None)
    if make is None or modes is None or functorch is None or not hasattr(autograd, "Info"):
        torch.library.register_autograd(
            f"tpublas::{name}", backward, setup_context=setup_context, lib=library
        )
        return
    target = getattr(getattr(torch.ops.tpublas, op.schema.name), op.schema.overload)
    impl = make(target, autograd.Info(backward, setup_context))
    # Native (`python/src/dispatch.rs`): no Python frame between torch and the plan.
    kernel = _native.PlannedKernel(op, op._least, op._most, tuple(op._fills), modes, functorch,
                                   op_local(), impl)
    library.impl(name, kernel, "Autograd", with_keyset=True)


def op_local():
    """tpuBLAS's thread-local state (the device ``tpublas.device`` chose)."""
    from tpukit import tpublas

    return tpublas._local


def register(packets):
    """Defines every overload of every packet once per process; returns the library."""
    global _LIBRARY
    if _LIBRARY is not None:
        return _LIBRARY
    library = torch.library.Library("tpublas", "DEF")
    for packet in packets.values():
        for op in packet._overloads.values():
            name = qualified_name(op)
            library.define(f"{name}{op.schema.signature}")
            tensors = [a for a in op.schema.arguments if a.type == "Tensor"]
            if not tensors:  # a factory: no tensor decides the backend, nothing to differentiate
                library.impl(name, _cpu_kernel(op), "CompositeExplicitAutograd")
                continue
            library.impl(name, _cpu_kernel(op), "CPU")
            aten = _aten(op)
            fake = _FAKES.get(name) or (_fake_kernel(aten) if aten is not None else None)
            if fake is not None:
                torch.library.register_fake(f"tpublas::{name}", fake, lib=library)
            if any(a.kwarg_only and a.type == "Tensor" for a in op.schema.arguments):
                library.impl(name, _function_kernel(op), "Autograd")
                continue
            setup_context, backward = _autograd(op)
            _register_autograd(library, op, name, backward, setup_context)
    _LIBRARY = library
    return library
