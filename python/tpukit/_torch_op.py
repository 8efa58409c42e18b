"""A Pallas kernel as a torch custom op: ``torch.ops.tpukit.<kernel>_<n>``.

Each ``custom_kernel`` called with torch tensors runs through one custom op, schema
``(Tensor[] args, str device) -> Tensor[]``, registered with ``torch.library``:

- a kernel for every device (tpukit's runtime; results come back on the inputs' device),
- a fake kernel from the kernel's ``propagate`` (empty tensors of the placeholders' shapes and
  dtypes), so ``torch.compile(fullgraph=True)`` and ``torch.export`` trace it,
- an autograd kernel: the kernel's ``backward`` if it has one, else an error raised by
  ``backward()`` naming the kernel (never a silent ``grad=None``).

The op is defined once per kernel object. Whether a call returns one tensor or a tuple is
decided by ``propagate`` on empty tensors of the arguments' shapes, outside of any trace
(``plan`` is marked ``assume_constant_result`` for dynamo), so tracing never enters tpukit's
caches or JAX. Shapes must be static under ``torch.compile`` (kernels are lowered per shape).
"""

from __future__ import annotations

import itertools
import threading

import torch

from tpukit import _arrays, _lowering
from tpukit._native import UnsupportedError

_LIBRARY = torch.library.Library("tpukit", "FRAGMENT")
_NUMBERS = itertools.count()
_DEFINE = threading.Lock()

_TORCH_DTYPES = {
    "f32": torch.float32,
    "bf16": torch.bfloat16,
    "f16": torch.float16,
    "i32": torch.int32,
    "i8": torch.int8,
    "bool": torch.bool,
}


def takes(args) -> bool:
    """Whether a call goes through the torch op: every argument is a torch tensor."""
    return bool(args) and all(isinstance(a, torch.Tensor) for a in args)


def _placeholders(kernel, args) -> tuple[bool, list[tuple[tuple[int, ...], torch.dtype]]]:
    """``propagate(*args)``: whether it gave one placeholder (not a tuple), and each
    placeholder's shape and torch dtype."""
    out = kernel.propagate(*args)
    single = not isinstance(out, (tuple, list))
    specs = [_lowering.shape_dtype(p) for p in ([out] if single else out)]
    return single, [(tuple(s.shape), _TORCH_DTYPES[_arrays.dtype_name(s.dtype)]) for s in specs]


@torch.compiler.assume_constant_result
def plan(kernel, signature: tuple) -> bool:
    """Defines ``kernel``'s op if it is not yet, and says whether a call with arguments of
    this signature (``((shape, dtype), …)``) returns one tensor (else a tuple). Runs eagerly,
    also while dynamo traces a caller: its result is a constant of the trace."""
    op = TorchOp.of(kernel)
    if signature not in op.singles:
        # CPU tensors (never touched), so that a numpy-minded propagate works as in eager.
        likes = [torch.empty(shape, dtype=dtype) for shape, dtype in signature]
        op.singles[signature] = _placeholders(kernel, likes)[0]
    return op.singles[signature]


def signature(arrays) -> tuple:
    """``((shape, dtype), …)`` of a call's tensors. ``int`` makes dynamo specialize a shape
    it had made dynamic (kernels are lowered per shape), so the plan's key is a constant."""
    return tuple((tuple(int(n) for n in a.shape), a.dtype) for a in arrays)


def call(kernel, args, device: str):
    """``kernel(*args, device=device)`` through its op (traceable by dynamo)."""
    single = plan(kernel, signature(args))
    outs = kernel._torch_op.op(list(args), device)
    return outs[0] if single else tuple(outs)


class _Context:
    """What a kernel's ``backward(ctx, *grad_outputs)`` sees: ``ctx.inputs`` and
    ``ctx.outputs`` (the forward's tensors) and ``ctx.needs_input_grad``."""

    def __init__(self, inputs, outputs, needs_input_grad):
        self.inputs = inputs
        self.outputs = outputs
        self.needs_input_grad = needs_input_grad


class TorchOp:
    """The custom op of one kernel (a ``PallasKernel``)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.singles: dict[tuple, bool] = {}
        from tpukit.pallas import _kernel_name

        self.name = f"{_kernel_name(kernel.__name__)}_{next(_NUMBERS)}"
        _LIBRARY.define(f"{self.name}(Tensor[] args, str device) -> Tensor[]")
        _LIBRARY.impl(self.name, self._run, "CompositeExplicitAutograd")
        qualified = f"tpukit::{self.name}"
        torch.library.register_fake(qualified, self._fake, lib=_LIBRARY)
        torch.library.register_autograd(
            qualified, self._backward, setup_context=self._setup_context, lib=_LIBRARY
        )
        self.op = getattr(torch.ops.tpukit, self.name).default

    @staticmethod
    def of(kernel) -> TorchOp:
        """The kernel's op, defined on first use (once, even when threads race)."""
        with _DEFINE:
            if kernel._torch_op is None:
                kernel._torch_op = TorchOp(kernel)
            return kernel._torch_op

    def _run(self, args, device):
        return list(self.kernel._run_arrays(tuple(args), device)[1])

    def _fake(self, args, device):
        _, specs = _placeholders(self.kernel, args)
        where = args[0].device if args else torch.device("cpu")
        return [torch.empty(shape, dtype=dtype, device=where) for shape, dtype in specs]

    def _setup_context(self, ctx, inputs, output):
        args, _device = inputs
        ctx.n_inputs = len(args)
        ctx.save_for_backward(*args, *output)

    def _backward(self, ctx, grads):
        backward = self.kernel.backward
        if backward is None:
            raise UnsupportedError(
                f"custom_kernel `{self.kernel.__name__}` has no derivative: pass backward= to "
                f"custom_kernel, or register one with `{self.kernel.__name__}.register_autograd`"
            )
        saved = ctx.saved_tensors
        inputs, outputs = saved[: ctx.n_inputs], saved[ctx.n_inputs :]
        needs = tuple(ctx.needs_input_grad[0]) if ctx.n_inputs else ()
        result = backward(_Context(inputs, outputs, needs), *grads)
        result = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(result) != len(inputs):
            raise TypeError(
                f"custom_kernel `{self.kernel.__name__}`: backward returned {len(result)} "
                f"gradients for {len(inputs)} inputs"
            )
        return result, None
