"""A JAX function (``custom_jax_kernel``) as a torch op: ``torch.ops.tpukit.<name>_<suffix>``.

Called with torch tensors (every non-static argument), a ``custom_jax_kernel`` runs through
one custom op per function, schema ``(Tensor[] args, str device, int plan) -> Tensor[]``:

- ``plan`` numbers one *plan*: the static arguments and the structure of the results (one
  array, or a flat tuple, list or dict of arrays). ``plan`` (marked
  ``assume_constant_result``) makes it eagerly, also while dynamo traces a caller, so tracing
  never enters JAX;
- the fake kernel returns empty tensors of the results' shapes and dtypes from
  ``jax.eval_shape`` (a dynamic shape is specialized: JAX needs concrete ones);
- gradients are JAX's own derivative of the function (``jax.vjp`` with respect to its
  floating-point arrays), itself run through tpukit as another ``custom_jax_kernel``. A
  function JAX cannot differentiate (a ``pl.pallas_call`` has no derivative rule) raises
  ``UnsupportedError`` naming the function when ``backward()`` reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import torch

from tpukit import _arrays
from tpukit._native import UnsupportedError
from tpukit._torch_op import _TORCH_DTYPES, KernelOp


@dataclass
class Plan:
    """One (signature, static arguments) of a function; see the module."""

    statics: tuple  # ((position, value), …)
    structure: object  # None: one array; ("tuple" | "list", n); ("dict", keys)
    vjps: dict = field(default_factory=dict)  # derivative JaxKernels by floating arguments


def _structure(kernel, out):
    """The plan's ``structure`` of the function's result ``out`` (a pytree of shapes)."""
    leaves, tree = jax.tree_util.tree_flatten(out)
    if jax.tree_util.treedef_is_leaf(tree):
        return None
    if isinstance(out, (tuple, list)) and len(out) == len(leaves):
        return (type(out).__name__, len(leaves))
    if isinstance(out, dict) and len(out) == len(leaves):
        return ("dict", tuple(sorted(out)))  # JAX flattens dicts in sorted key order
    raise UnsupportedError(
        f"custom_jax_kernel `{kernel.name}` on torch tensors returns one array or a flat "
        f"tuple, list or dict of arrays, not {tree}"
    )


def _merge(arrays, statics) -> list:
    """The function's arguments: ``arrays`` with the static values at their positions."""
    fixed, it = dict(statics), iter(arrays)
    return [fixed[i] if i in fixed else next(it) for i in range(len(arrays) + len(fixed))]


def _results(kernel, signature, statics):
    """What ``jax.eval_shape`` says of the results: ``[(shape, torch dtype), …]`` and their
    ``structure``."""
    specs = [jax.ShapeDtypeStruct(s, _arrays.numpy_dtype(d)) for s, d in signature]
    out = jax.eval_shape(kernel.jitted, *_merge(specs, statics))
    outs = [(tuple(o.shape), _TORCH_DTYPES[_arrays.dtype_name(o.dtype)])
            for o in jax.tree_util.tree_leaves(out)]
    return outs, _structure(kernel, out)


@torch.compiler.assume_constant_result
def plan(kernel, signature: tuple, statics: tuple) -> tuple:
    """``(op name, plan number, result structure)`` of a call with these static arguments (the
    signature, static on the first call, gives the structure); see the module."""
    op = JaxOp.of(kernel)
    if statics not in op.numbers:
        op.plans.append(Plan(statics, _results(kernel, signature, statics)[1]))
        op.numbers[statics] = len(op.plans) - 1
    number = op.numbers[statics]
    return op.name, number, op.plans[number].structure


@torch.compiler.assume_constant_result
def planned(kernel, statics: tuple) -> tuple | None:
    """``plan``'s answer for these static arguments if there is one, else None (read eagerly,
    as ``_torch_op.planned``)."""
    op = kernel._torch_op
    if op is None or statics not in op.numbers:
        return None
    number = op.numbers[statics]
    return op.name, number, op.plans[number].structure


def call(kernel, arrays, statics, device: str):
    """``kernel(*args, device=device)`` through its op (traceable by dynamo)."""
    known = planned(kernel, statics)
    if known is None:
        known = plan(kernel, tuple((tuple(a.shape), a.dtype) for a in arrays), statics)
    name, number, structure = known
    outs = getattr(torch.ops.tpukit, name).default(list(arrays), device, number)
    if structure is None:
        return outs[0]
    if structure[0] == "dict":
        return dict(zip(structure[1], outs, strict=True))
    return tuple(outs) if structure[0] == "tuple" else list(outs)


class JaxOp(KernelOp):
    """The custom op of one ``JaxKernel``."""

    SCHEMA = "(Tensor[] args, str device, int plan) -> Tensor[]"

    def __init__(self, kernel):
        self.plans: list[Plan] = []
        self.numbers: dict[tuple, int] = {}
        super().__init__(kernel, kernel.name)

    def _run(self, args, device, number):
        statics = self.plans[number].statics
        arrays, compiled = self.kernel._compiled(_merge(args, statics))
        return list(compiled.run(arrays, device))

    def _fake(self, args, device, number):
        # ``int`` specializes a dynamic shape (JAX needs concrete ones): the trace is guarded
        # on these shapes and made again for others.
        signature = tuple((tuple(int(n) for n in a.shape), a.dtype) for a in args)
        outs, _ = _results(self.kernel, signature, self.plans[number].statics)
        where = args[0].device if args else torch.device("cpu")
        return [torch.empty(s, dtype=d, device=where) for s, d in outs]

    def _setup_context(self, ctx, inputs, output):
        args, _device, number = inputs
        ctx.n_inputs, ctx.number = len(args), number
        ctx.save_for_backward(*args, *output)

    def _backward(self, ctx, grads):
        saved = ctx.saved_tensors
        arrays, outputs = saved[: ctx.n_inputs], saved[ctx.n_inputs :]
        wrt = [i for i, a in enumerate(arrays) if a.is_floating_point()]
        cotangents = [g for g, o in zip(grads, outputs, strict=True) if o.is_floating_point()]
        vjp = self._vjp(ctx.number, arrays, outputs)
        try:
            result = vjp(*arrays, *cotangents)
        except UnsupportedError:
            raise
        except Exception as e:  # JAX's error: no derivative rule, say
            raise UnsupportedError(
                f"custom_jax_kernel `{self.kernel.name}`: JAX cannot differentiate it ({e})"
            ) from e
        by_input = dict(zip(wrt, result, strict=True))
        return [by_input.get(i) for i in range(len(arrays))], None, None

    def _vjp(self, number, arrays, outputs):
        """The derivative of plan ``number`` as a ``custom_jax_kernel`` of
        ``(*arrays, *cotangents of the floating outputs)`` → gradients of the floating
        arrays (made once per plan and choice of floating arguments and results)."""
        p = self.plans[number]
        wrt = [i for i, a in enumerate(arrays) if a.is_floating_point()]
        float_outs = [i for i, o in enumerate(outputs) if o.is_floating_point()]
        key = (tuple(wrt), tuple(float_outs))
        if key in p.vjps:
            return p.vjps[key]
        from tpukit.pallas import JaxKernel

        fn, n = self.kernel.fn, len(arrays)

        def derivative(*xs):
            primals, cotangents = list(xs[:n]), xs[n:]

            def floating(*wrt_values):
                values = list(primals)
                for i, v in zip(wrt, wrt_values, strict=True):
                    values[i] = v
                leaves = jax.tree_util.tree_leaves(fn(*_merge(values, p.statics)))
                return [leaves[i] for i in float_outs]

            _, pull = jax.vjp(floating, *[primals[i] for i in wrt])
            return tuple(pull(list(cotangents)))

        p.vjps[key] = JaxKernel(derivative, f"{self.kernel.name}_vjp", (), {}, self.kernel.device)
        return p.vjps[key]

