"""A tpukit kernel called in a traced JAX program, lowered for the TPU platform: the Mosaic
``tpu_custom_call`` of tpukit's own lowering of the kernel (``Kernel.lower``).

``jax.export(..., platforms=["tpu"])`` of a jitted program that calls a tpukit kernel (a Rust
``#[tpu_kernel]``, a catalog kernel, an imported Pallas kernel) thus carries that kernel's
Mosaic, which libtpu compiles. ``Kernel.lower`` returns a module whose ``@main`` is one
``stablehlo.custom_call @tpu_custom_call``; its attributes (the serialized Mosaic body, the
kernel name, layouts, aliases) are copied onto a custom call built on the program's operands.

An output the kernel reads (``o_ref[...] += x``) is one more operand of tpukit's custom call,
after the inputs, aliased to that result: its initial contents, which are the input the
output aliases (Pallas' ``input_output_aliases``) or zeros, as on tpukit's CPU devices. An
aliased output the kernel does not read aliases its input operand, as JAX's own Pallas
lowering does, so that blocks it does not write keep the input's contents.
"""

from __future__ import annotations

import re

from jax._src.interpreters import mlir
from jaxlib.mlir import ir

from tpukit._native import Kernel

# Attributes `mlir.custom_call` sets itself from its arguments.
_SET_BY_BUILDER = {
    "call_target_name",
    "backend_config",
    "api_version",
    "has_side_effect",
    "called_computations",
    "output_operand_aliases",
}

_ALIAS = re.compile(r"output_tuple_indices = \[(\d*)\], operand_index = (\d+)")


def _mosaic_op(kernel: Kernel, bindings: dict[str, int], context) -> ir.Operation:
    """The ``tpu_custom_call`` op of tpukit's lowering of ``kernel``, parsed in ``context``."""
    module = ir.Module.parse(kernel.lower(bindings), context=context)
    for func in module.body.operations:
        for block in func.regions[0].blocks:
            for op in block.operations:
                if op.operation.name == "stablehlo.custom_call":
                    return op.operation
    raise RuntimeError(f"kernel `{kernel.name}`: its lowering has no tpu_custom_call")


def _aliases(op: ir.Operation) -> dict[int, int]:
    """The lowered call's own aliases: operand index → output index."""
    if "output_operand_aliases" not in op.attributes:
        return {}
    found = _ALIAS.findall(str(op.attributes["output_operand_aliases"]))
    return {int(operand): int(output or 0) for output, operand in found}


def lower(ctx, args, kernel: Kernel, bindings: dict[str, int], aliases: dict[int, int]):
    """The custom call of ``kernel`` on ``args`` in the module being lowered (``ctx``), its
    results ``ctx.avals_out``; ``aliases`` maps outputs to the inputs they start as."""
    op = _mosaic_op(kernel, bindings, ctx.module_context.context)
    own = _aliases(op)  # operands after the inputs: outputs the kernel reads
    operands = list(args)
    for index in range(len(args), len(op.operands)):
        out = own[index]
        if out in aliases:
            operands.append(args[aliases[out]])
        else:
            operands.append(mlir.full_like_aval(ctx, 0, ctx.avals_out[out]))
    for out, index in aliases.items():
        if out not in own.values():
            own[index] = out
    config = ir.StringAttr(op.attributes["backend_config"]).value
    named = [op.attributes[i] for i in range(len(op.attributes))]
    extra = {a.name: a.attr for a in named if a.name not in _SET_BY_BUILDER}
    call = mlir.custom_call(
        "tpu_custom_call",
        result_types=[mlir.aval_to_ir_type(ctx.module_context, a) for a in ctx.avals_out],
        operands=operands,
        backend_config=config,
        api_version=1,
        operand_output_aliases=own or None,
        extra_attributes=extra,
    )
    return list(call.results)
