"""A Pallas kernel as a torch custom op: ``torch.ops.tpukit.<kernel>_<suffix>``.

Each ``custom_kernel`` called with torch tensors runs through one custom op (named for the
kernel and a random suffix, see ``op_name``), schema
``(Tensor[] args, str device) -> Tensor[]``, registered with ``torch.library``:

- a kernel for every device (tpukit's runtime; results come back on the inputs' device),
- a fake kernel from the kernel's ``propagate`` (empty tensors of the placeholders' shapes and
  dtypes), so ``torch.compile(fullgraph=True)`` and ``torch.export`` trace it,
- an autograd kernel: the kernel's ``backward`` if it has one, else an error raised by
  ``backward()`` naming the kernel (never a silent ``grad=None``).

The op is defined once per kernel object. Whether a call returns one tensor or a tuple is
decided once per kernel by ``propagate``, outside of any trace (``plan`` is marked
``assume_constant_result`` for dynamo), so tracing never enters tpukit's caches or JAX; the
fake kernel runs ``propagate`` on the fake tensors (symbolic shapes too, with a torch
``propagate``), and the kernel is lowered for each concrete shape at run time.
"""

from __future__ import annotations

import threading
import uuid

import torch

from tpukit import _arrays, _lowering
from tpukit._native import UnsupportedError
from tpukit.pallas import Context

_LIBRARY = torch.library.Library("tpukit", "FRAGMENT")


def op_name(kernel_name: str) -> str:
    """A new op's name: the kernel's, and a random suffix. Never reused across processes:
    torch's compile caches (AOTAutograd, inductor's FX graph cache, on disk) key a graph by
    its ops' names, while a kernel's behavior (its body, its backward) is not in the key —
    a name counted per process made a cached backward call another process's kernel."""
    from tpukit.pallas import _kernel_name

    return f"{_kernel_name(kernel_name)}_{uuid.uuid4().hex[:16]}"
_DEFINE = threading.Lock()

_TORCH_DTYPES = {
    "f32": torch.float32,
    "bf16": torch.bfloat16,
    "f16": torch.float16,
    "i32": torch.int32,
    "i16": torch.int16,
    "i8": torch.int8,
    "bool": torch.bool,
}


def takes(args) -> bool:
    """Whether a call goes through the torch op: every argument is a torch tensor."""
    return bool(args) and all(isinstance(a, torch.Tensor) for a in args)


def _placeholders(kernel, args) -> tuple[bool, list[tuple[tuple, torch.dtype]]]:
    """``propagate(*args)``: whether it gave one placeholder (not a tuple), and each
    placeholder's shape and torch dtype (symbolic shapes stay symbolic for a torch one)."""
    out = kernel.propagate(*args)
    single = not isinstance(out, (tuple, list))
    return single, [_shape_dtype(p) for p in ([out] if single else out)]


def _shape_dtype(placeholder) -> tuple[tuple, torch.dtype]:
    if isinstance(placeholder, torch.Tensor):
        return tuple(placeholder.shape), placeholder.dtype
    s = _lowering.shape_dtype(placeholder)
    return tuple(s.shape), _TORCH_DTYPES[_arrays.dtype_name(s.dtype)]


@torch.compiler.assume_constant_result
def plan(kernel, signature: tuple) -> tuple[str, bool]:
    """Defines ``kernel``'s op if it is not yet: ``(op name, whether the kernel returns one
    tensor, else a tuple)``, from ``propagate`` on empty CPU tensors of ``signature``
    (``((shape, dtype), …)``; never touched, so a numpy-minded propagate works too). Runs
    eagerly, also while dynamo traces a caller: its result is a constant of the trace."""
    op = TorchOp.of(kernel)
    if op.single is None:
        likes = [torch.empty(shape, dtype=dtype) for shape, dtype in signature]
        op.single = _placeholders(kernel, likes)[0]
    return op.name, op.single


@torch.compiler.assume_constant_result
def planned(kernel) -> tuple[str, bool] | None:
    """``plan``'s answer if the kernel has been planned, else None: read eagerly (also under
    dynamo, so the trace never reads, nor guards on, the kernel's changing state)."""
    op = kernel._torch_op
    return None if op is None or op.single is None else (op.name, op.single)


def call(kernel, args, device: str):
    """``kernel(*args, device=device)`` through its op (traceable by dynamo). The first call
    plans with the arguments' (static) shapes; later ones, dynamic shapes included, reuse it.
    The op is looked up by name, as ``plan`` may have just defined it."""
    known = planned(kernel)
    if known is None:
        known = plan(kernel, tuple((tuple(a.shape), a.dtype) for a in args))
    name, single = known
    outs = getattr(torch.ops.tpukit, name).default(list(args), device)
    return outs[0] if single else tuple(outs)


class KernelOp:
    """A kernel's custom op in the ``tpukit`` library: ``SCHEMA`` (the arguments after the
    name) defined once per kernel object, with the subclass's ``_run`` for every device,
    ``_fake`` as the fake kernel, and ``_backward``/``_setup_context`` as its autograd."""

    SCHEMA = "(Tensor[] args, str device) -> Tensor[]"

    def __init__(self, kernel, name: str):
        self.kernel = kernel
        self.name = op_name(name)
        _LIBRARY.define(self.name + self.SCHEMA)
        _LIBRARY.impl(self.name, self._run, "CompositeExplicitAutograd")
        qualified = f"tpukit::{self.name}"
        torch.library.register_fake(qualified, self._fake, lib=_LIBRARY)
        torch.library.register_autograd(
            qualified, self._backward, setup_context=self._setup_context, lib=_LIBRARY
        )
        self.op = getattr(torch.ops.tpukit, self.name).default

    @classmethod
    def of(cls, kernel):
        """The kernel's op, defined on first use (once, even when threads race)."""
        with _DEFINE:
            if kernel._torch_op is None:
                kernel._torch_op = cls(kernel)
            return kernel._torch_op


class TorchOp(KernelOp):
    """The custom op of one kernel (a ``PallasKernel``)."""

    def __init__(self, kernel):
        self.single: bool | None = None  # whether propagate gives one placeholder
        super().__init__(kernel, kernel.__name__)

    def _run(self, args, device):
        return list(self.kernel._run_arrays(tuple(args), device)[1])

    def _fake(self, args, device):
        single, specs = _placeholders(self.kernel, args)
        if self.single is not None and single != self.single:
            raise TypeError(
                f"custom_kernel `{self.kernel.__name__}`: propagate returns a tuple for some "
                "shapes and a single placeholder for others"
            )
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
        result = backward(Context(inputs, outputs, needs), *grads)
        result = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(result) != len(inputs):
            raise TypeError(
                f"custom_kernel `{self.kernel.__name__}`: backward returned {len(result)} "
                f"gradients for {len(inputs)} inputs"
            )
        return result, None
