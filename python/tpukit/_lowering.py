"""JAX's side of an import: lower for TPU, find the Mosaic calls, decode their bodies.

Everything here needs jaxlib, which is why it lives in Python: jaxlib has the tpu dialect, so
it can read the MLIR bytecode of a ``tpu_custom_call`` body (whose memref types carry
``#tpu.memory_space<…>``, which upstream MLIR cannot parse) and print it as generic text. The
native importer takes it from there (``tpukit_import``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from dataclasses import dataclass

import jax
from jax import export
from jax._src import source_info_util
from jax._src.interpreters import mlir as jax_mlir
from jax._src.lib import tpu as jax_tpu
from jaxlib.mlir import ir

from tpukit import _native
from tpukit._native import UnsupportedError

# JAX records the innermost *user* frame as each op's location; tpukit's own files are not the
# user's, so an error points at the caller's line (a jnp call, the kernel call), not at ours.
source_info_util.register_exclusion(os.path.dirname(os.path.abspath(__file__)) + os.sep)


@dataclass(frozen=True)
class MosaicCall:
    """One ``tpu_custom_call``: its kernel, operand and result types, and aliases."""

    name: str
    body: str  # the Mosaic module, generic text with debug locations
    operand_types: list[str]  # printed tensor types
    result_types: list[str]
    aliases: dict[int, int]  # output index -> input index (input_output_aliases)
    unchecked: bool = False  # compiled with `disable_bounds_checks=True`
    vmem_limit_bytes: int | None = None  # the call's `vmem_limit_bytes`


_TPU_DEVICE = []


def _tpu_device():
    """A device of tpukit's default compile-only TPU topology (v5e), or None without libtpu.

    Pallas asks the *default* device for TPU facts (sublane counts, for 1-D blocks, say),
    which fails on a CPU-only host; lowering with this device as the default answers them.
    Nothing runs on it. Found once; a failure is not remembered (it may be passing).
    """
    if not _TPU_DEVICE:
        try:
            from jax.experimental import topologies

            default = _native.tpu_topologies()[0]
            desc = topologies.get_topology_desc(platform="tpu", topology_name=default)
            _TPU_DEVICE.append(desc.devices[0])
        except Exception:  # noqa: BLE001 - no libtpu, or a JAX without topologies: lower as is
            return None
    return _TPU_DEVICE[0]


def export_tpu(fn, arg_specs) -> str:
    """StableHLO text of ``fn`` (jitted) lowered for TPU, as ``jax.export`` produces it."""
    return export_tpu_tree(fn, arg_specs)[0]


def export_tpu_tree(fn, arg_specs):
    """``(StableHLO text, out_tree)`` of ``fn`` (jitted) lowered for TPU: the text as
    ``jax.export`` produces it, and the pytree structure of the function's results."""
    device = _tpu_device()
    with jax.default_device(device) if device is not None else contextlib.nullcontext():
        exported = export.export(fn, platforms=["tpu"])(*arg_specs)
    return exported.mlir_module(), exported.out_tree


def generic_module(stablehlo: str) -> str:
    """A StableHLO module printed generically with its locations, which upstream MLIR parses
    without the stablehlo dialect (what ``tpukit_import::import_stablehlo`` reads)."""
    with _context(), ir.Location.unknown():
        module = ir.Module.parse(stablehlo)
        return module.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)


def _context() -> ir.Context:
    ctx = jax_mlir.make_ir_context()
    jax_tpu.register_dialect(ctx)
    ctx.allow_unregistered_dialects = True
    return ctx


def decode_body(b64: str) -> str:
    """The Mosaic module in a custom call's ``backend_config`` body, printed generically with
    locations (ops keep their serialized ``stable_mosaic.*`` names)."""
    raw = base64.b64decode(b64)
    with _context(), ir.Location.unknown():
        module = ir.Module.parse(raw)
        return module.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)


def readable_body(generic: str) -> str:
    """A Mosaic body as ``decode_body`` gives it (serialized op names, generic form) turned
    back into Mosaic by jaxlib's own deserializer (``mosaic-serde``) and printed in custom form,
    without locations: ``func.func``, ``vector.load``, ``tpu.matmul``, … as Mosaic's passes
    and libtpu read it."""
    from jaxlib.mlir import passmanager

    with _context(), ir.Location.unknown():
        module = ir.Module.parse(generic)
        passmanager.PassManager.parse("builtin.module(mosaic-serde{serialize=false})").run(
            module.operation
        )
        return module.operation.get_asm(enable_debug_info=False)


def _main(module: ir.Module):
    for op in module.body.operations:
        if op.operation.name != "func.func":
            continue
        if ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise UnsupportedError("the lowered module has no @main")


def _op_names(block) -> list[str]:
    return [op.operation.name for op in block.operations]


@dataclass(frozen=True)
class Stages:
    """A function around one Pallas call: ``prologue`` computes the call's operands from
    ``@main``'s arguments, ``epilogue`` main's results from its arguments followed by the
    call's results (both StableHLO modules printed generically, or None where the call takes
    main's arguments, or gives main's results, as they are)."""

    prologue: str | None
    call: MosaicCall
    epilogue: str | None


def _is_pallas_call(op) -> bool:
    return (
        op.operation.name == "stablehlo.custom_call"
        and ir.StringAttr(op.attributes["call_target_name"]).value == "tpu_custom_call"
    )


def _main_block(module: ir.Module):
    main = _main(module)
    return main, main.regions[0].blocks[0]


def _drop_dead_ops(block, keep) -> None:
    """Erases the ops of ``block`` whose results are all unused (``keep`` excepted), last
    first, until none is left: what remains computes what ``keep`` uses."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.operations)):
            if op.operation == keep.operation or len(op.results) == 0:
                continue
            if all(len(list(r.uses)) == 0 for r in op.results):
                op.operation.erase()
                changed = True


def _set_signature(main, block, results) -> None:
    inputs = [a.type for a in block.arguments]
    main.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(inputs, [r.type for r in results])
    )
    for name in ("arg_attrs", "res_attrs"):
        if name in main.attributes:
            del main.attributes[name]


def _asm(module: ir.Module) -> str:
    return module.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)


def _prologue(stablehlo: str, index: int) -> str:
    """@main cut to compute the operands of its ``index``-th op (the Pallas call)."""
    module = ir.Module.parse(stablehlo)
    main, block = _main_block(module)
    ops = list(block.operations)
    call, ret = ops[index], ops[-1]
    with ir.InsertionPoint(ret), ret.location:
        new_ret = ir.Operation.create("func.return", operands=list(call.operands))
    ret.operation.erase()
    _drop_dead_ops(block, new_ret)
    _set_signature(main, block, list(new_ret.operands))
    return _asm(module)


def _epilogue(stablehlo: str, index: int) -> str:
    """@main with the ``index``-th op (the Pallas call) replaced by extra arguments, one per
    call result, after main's own."""
    module = ir.Module.parse(stablehlo)
    main, block = _main_block(module)
    ops = list(block.operations)
    call, ret = ops[index], ops[-1]
    for r in call.results:
        r.replace_all_uses_with(block.add_argument(r.type, call.location))
    call.operation.erase()
    _drop_dead_ops(block, ret)
    _set_signature(main, block, list(ret.operands))
    return _asm(module)


def pallas_stages(stablehlo: str) -> Stages | None:
    """The Pallas call in ``@main`` and the StableHLO before and after it, or None when main
    has no ``tpu_custom_call`` (a pure JAX function). Several Pallas calls are an
    UnsupportedError."""
    with _context(), ir.Location.unknown():
        module = ir.Module.parse(stablehlo)
        _, block = _main_block(module)
        ops = list(block.operations)
        calls = [i for i, op in enumerate(ops) if _is_pallas_call(op)]
        if not calls:
            return None
        if len(calls) != 1:
            raise UnsupportedError(
                f"unsupported: {len(calls)} Pallas calls in one function (tpukit imports one)"
            )
        index = calls[0]
        call, ret = ops[index], ops[-1]
        args, operands, results = list(block.arguments), list(call.operands), list(call.results)
        direct_in = len(operands) == len(args) and all(
            o == a for o, a in zip(operands, args, strict=True)
        )
        direct_out = list(ret.operands) == results
        mosaic = _mosaic_call(call)
        return Stages(
            prologue=None if direct_in else _prologue(stablehlo, index),
            call=mosaic,
            epilogue=None if direct_out else _epilogue(stablehlo, index),
        )


def mosaic_call(stablehlo: str) -> MosaicCall | None:
    """The Pallas call of ``@main`` (see ``pallas_stages``), or None without one."""
    stages = pallas_stages(stablehlo)
    return None if stages is None else stages.call


def _mosaic_call(call) -> MosaicCall:
    """The Mosaic body, types and aliases of a ``tpu_custom_call`` op."""
    operands, results = list(call.operands), list(call.results)
    config = json.loads(ir.StringAttr(call.attributes["backend_config"]).value)
    body = config["custom_call_config"]["body"]
    name = (
        ir.StringAttr(call.attributes["kernel_name"]).value
        if "kernel_name" in call.attributes
        else "pallas_kernel"
    )
    aliases = {}
    if "output_operand_aliases" in call.attributes:
        for a in ir.ArrayAttr(call.attributes["output_operand_aliases"]):
            text = str(a)
            out = _field(text, "output_tuple_indices")
            operand = int(text.split("operand_index = ")[1].split(",")[0])
            aliases[out[0] if out else 0] = operand
    return MosaicCall(
        name=name,
        body=decode_body(body),
        operand_types=[str(v.type) for v in operands],
        result_types=[str(v.type) for v in results],
        aliases=aliases,
        unchecked=bool(
            config.get("disable_bounds_checks")
            or config["custom_call_config"].get("disable_bounds_checks")
        ),
        vmem_limit_bytes=_vmem_limit(config),
    )


def _vmem_limit(config: dict) -> int | None:
    """The VMEM limit (``vmem_limit_bytes``) of a custom call's config: the size of its scoped
    memory config for memory space 1 (VMEM), if any."""
    for where in (config, config.get("custom_call_config", {})):
        for scoped in where.get("scoped_memory_configs", []):
            if int(scoped.get("memory_space", -1)) == 1:
                return int(scoped["size"])
    return None


def _field(text: str, name: str) -> list[int]:
    inner = text.split(f"{name} = [")[1].split("]")[0]
    return [int(x) for x in inner.split(",") if x.strip()]


def unsigned_results(stablehlo: str) -> list:
    """Per result of ``@main``: its numpy dtype where it is unsigned (``ui32``, ``ui16``,
    ``ui8``), else None."""
    from tpukit import _arrays

    with _context(), ir.Location.unknown():
        main = _main(ir.Module.parse(stablehlo))
        results = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results
        # `tensor<4x8xui32>`, `tensor<ui32>`: the element type follows the last `x` of the dims.
        dims = [str(t).removeprefix("tensor<").removesuffix(">") for t in results]
        elements = [d.split("x")[-1] for d in dims]
        return [_arrays.UNSIGNED_MLIR.get(e) for e in elements]


def shape_dtype(x) -> jax.ShapeDtypeStruct:
    """A ShapeDtypeStruct for anything with ``shape`` and ``dtype`` (numpy, torch, JAX); a
    semaphore placeholder (``pltpu.SemaphoreType.DMA(...)``) as it is (its result is the
    int32 array of its counts)."""
    from jax._src.pallas import core as pallas_core

    from tpukit import _arrays

    if isinstance(getattr(x, "dtype", None), pallas_core.AbstractSemaphoreTy):
        return x
    return jax.ShapeDtypeStruct(tuple(x.shape), _arrays.numpy_dtype(x.dtype))
