"""Inlining of ``func.call`` into ``@main`` for a Pallas call in a nested ``jax.jit``: such a
function lowers to ``call @inner(...)`` of a private function holding the
``tpu_custom_call``, which ``_lowering.pallas_stages`` (reading ``@main``'s ops) cannot see.
``inline_calls`` copies each callee's body into ``@main`` in place of its call, until
``@main`` calls nothing. Functions without a Pallas call are left as they are (the StableHLO
importer inlines calls itself, keeping their call sites in its locations), and so are the
private functions (a ``stablehlo.composite`` may still name its decomposition)."""

from jaxlib.mlir import ir

from . import _lowering


def inline_calls(stablehlo: str) -> str:
    """``stablehlo`` with every ``func.call`` in ``@main`` (at any depth of calls) replaced by
    the callee's body, when a Pallas call sits in a called function; else unchanged."""
    if "call @" not in stablehlo or "tpu_custom_call" not in stablehlo:
        return stablehlo
    with _lowering._context(), ir.Location.unknown():
        module = ir.Module.parse(stablehlo)
        funcs = {
            ir.StringAttr(op.attributes["sym_name"]).value: op
            for op in module.body.operations
            if op.operation.name == "func.func"
        }
        _, block = _lowering._main_block(module)
        if any(_lowering._is_pallas_call(op) for op in block.operations):
            return stablehlo
        while (call := _first_call(block)) is not None:
            _inline(call, funcs[ir.FlatSymbolRefAttr(call.attributes["callee"]).value])
        return module.operation.get_asm(enable_debug_info=True)


def _first_call(block):
    return next((op for op in block.operations if op.operation.name == "func.call"), None)


def _inline(call, callee) -> None:
    """Copies ``callee``'s body before ``call``, its arguments bound to the call's operands,
    and replaces the call's results with what the body returns."""
    body = callee.regions[0].blocks[0]
    mapping = dict(zip(body.arguments, call.operands, strict=True))
    at = ir.InsertionPoint(call)
    for op in body.operations:
        if op.operation.name == "func.return":
            returned = [mapping.get(v, v) for v in op.operands]
            break
        copy = op.operation.clone(ip=at)
        _rebind(copy, mapping)
        mapping.update(zip(op.results, copy.results, strict=True))
    for result, value in zip(call.results, returned, strict=True):
        result.replace_all_uses_with(value)
    call.operation.erase()


def _rebind(op, mapping) -> None:
    """Points ``op``'s operands, and those of the ops nested in its regions, that name the
    callee's values at their copies in ``@main``."""
    for i, v in enumerate(op.operands):
        if v in mapping:
            op.operands[i] = mapping[v]
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                _rebind(inner.operation, mapping)
