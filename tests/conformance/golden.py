"""Structural comparison of Mosaic kernels: tpukit's body against JAX Pallas's.

Both bodies go the same way: base64 out of the custom call's `backend_config`, MLIR bytecode
parsed by jaxlib with its tpu dialect registered, `mosaic-serde{serialize=false}` (the inverse
of what wrote it: `stable_mosaic.*` ops back to registered ops, version upgrades applied), and
the MLIR verifier. What is compared is then a normal form of each module ([`Kernel`]):

- the kernel function's signature (argument types, memory spaces included) and attributes;
  `window_params` with every `transform_indices` symbol replaced by what that transform
  returns, as expressions of its arguments;
- the kernel body as a sequence of ops, each with its name, its operands (block argument,
  constant value, or the name of the op producing it), result types and attributes.

Ignored, on purpose: locations, SSA names, where constants are defined (a constant operand
is its value: `arith.constant` is not an op of the sequence, and neither is a
`vector.broadcast` of a scalar constant, which is a splat constant written another way), and
dead code (ops without side effects whose results nobody uses, such as the old-value load
Pallas emits before every store: `ref[...] = v` is a swap).
"""

import base64
import dataclasses
import io
import json
import re

# Ops without side effects: dead when nothing uses their results.
_PURE_PREFIXES = ("arith.", "math.", "vector.", "memref.load", "tpu.iota")


def backend_configs(stablehlo_text):
    """The `backend_config` JSON text of every `tpu_custom_call` in a StableHLO module."""
    out = []
    for m in re.finditer(r'backend_config = "((?:[^"\\]|\\.)*)"', stablehlo_text):
        text = (
            m.group(1).replace("\\22", '"').replace("\\0A", "\n").replace("\\5C", "\\")
        )
        out.append(text)
    return out


def body_of(stablehlo_text):
    """The base64 body of the module's only `tpu_custom_call`, and its config without it."""
    (config,) = backend_configs(stablehlo_text)
    body = json.loads(config)["custom_call_config"]["body"]
    return body, config.replace(body, "<body>")


class Deserializer:
    """jaxlib's MLIR with the tpu dialect, as JAX's own `tpu_custom_call` module uses it."""

    def __init__(self):
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib import tpu
        from jaxlib.mlir import ir
        from jaxlib.mlir.passmanager import PassManager

        self.ir, self._tpu, self._pm = ir, tpu, PassManager
        self._make_context = jax_mlir.make_ir_context

    def module(self, body_b64):
        """Deserializes and verifies a body; returns `(version, ir.Module)`.

        Raises `ValueError` (parser, pass or verifier) or `MLIRError` on a bad body.
        """
        ir = self.ir
        context = self._make_context()
        self._tpu.register_dialect(context)
        with context, ir.Location.unknown():
            # The serialized ops (`stable_mosaic.*`) are unregistered until the pass renames them.
            context.allow_unregistered_dialects = True
            module = ir.Module.parse(base64.b64decode(body_b64))
            attrs = module.operation.attributes
            version = ir.IntegerAttr(attrs["stable_mosaic.version"]).value
            serde = "builtin.module(mosaic-serde{serialize=false})"
            self._pm.parse(serde).run(module.operation)
            context.allow_unregistered_dialects = False
            unregistered = sorted(
                {
                    op.name
                    for op in walk(module.operation)
                    if not context.is_registered_operation(op.name)
                }
            )
            if unregistered:
                raise ValueError(
                    f"unregistered ops after deserializing: {unregistered}"
                )
            if not module.operation.verify():
                raise ValueError("the deserialized module does not verify")
        return version, Module(context, module)

    def verify_text(self, text):
        """Parses readable Mosaic (registered ops only) and verifies it; raises on failure."""
        ir = self.ir
        context = self._make_context()
        self._tpu.register_dialect(context)
        with context, ir.Location.unknown():
            module = ir.Module.parse(text)
            if not module.operation.verify():
                raise ValueError("the module does not verify")

    def serialized_text(self, body_b64):
        """A body's serialized form (`stable_mosaic.*` ops), generic, without locations."""
        ir = self.ir
        context = self._make_context()
        self._tpu.register_dialect(context)  # for `#tpu.memory_space` in memref types
        context.allow_unregistered_dialects = True
        with context:
            module = ir.Module.parse(base64.b64decode(body_b64))
            return module.operation.get_asm(
                print_generic_op_form=True, enable_debug_info=False
            )

    def body_of_serialized_text(self, text):
        """The inverse of `serialized_text`: bytecode v0, base64 (nothing is verified)."""
        ir = self.ir
        context = self._make_context()
        self._tpu.register_dialect(context)
        context.allow_unregistered_dialects = True
        with context:
            module = ir.Module.parse(text)
            out = io.BytesIO()
            module.operation.write_bytecode(out, desired_version=0)
            return base64.b64encode(out.getvalue()).decode()


@dataclasses.dataclass
class Module:
    """A deserialized module and the context that owns it."""

    context: object
    module: object


def walk(op):
    """`op` and every op nested in it, in order (as `ir.Operation`s)."""
    op = op.operation
    yield op
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield from walk(inner)


@dataclasses.dataclass
class Kernel:
    """The normal form of one Mosaic module."""

    name: str
    version: int
    signature: list  # argument types, as text
    attributes: dict  # kernel function attributes, window_params resolved
    body: list  # op entries: (name, operands, result types, attributes) or "{" / "}"
    functions: list  # the module's function names, in order
    masks: int = 0  # edge-block masks taken out (`unmask`)

    def op_names(self):
        return [e[0] for e in self.body]


KERNEL_ATTRIBUTES = (
    "dimension_semantics",
    "iteration_bounds",
    "scalar_prefetch",
    "scratch_operands",
    "tpu.core_type",
)
WINDOW_KEYS = ("window_bounds", "pipeline_mode", "revisit_mode", "window_kind")


def normal_form(version, deserialized, unmask=False):
    """The [`Kernel`] of a deserialized module (one kernel function and its transforms);
    `unmask` as in [`body_entries`]."""
    from jaxlib.mlir import ir

    module = deserialized.module
    with deserialized.context:
        funcs = [op.operation for op in module.body.operations]
        by_name = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in funcs}
        kernels = [n for n in by_name if not re.fullmatch(r"transform_\d+", n)]
        if len(kernels) != 1:
            raise ValueError(f"expected one kernel function, got {kernels}")
        (name,) = kernels
        kernel = by_name[name]
        fn_type = ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value)
        attributes = {}
        for key in KERNEL_ATTRIBUTES:
            if key in kernel.attributes:
                attributes[key] = str(kernel.attributes[key])
        if "window_params" in kernel.attributes:
            params = []
            for entry in ir.ArrayAttr(kernel.attributes["window_params"]):
                d = ir.DictAttr(entry)
                p = {key: str(d[key]) for key in WINDOW_KEYS if key in d}
                if "transform_indices" in d:
                    symbol = ir.FlatSymbolRefAttr(d["transform_indices"]).value
                    p["transform"] = transform_results(ir, by_name[symbol])
                params.append(p)
            attributes["window_params"] = params
        known = {"sym_name", "function_type", "window_params", *KERNEL_ATTRIBUTES}
        other = {k: str(a) for k, a in named(kernel) if k not in known}
        if other:
            attributes["other"] = other
        body, masks = body_entries(ir, kernel, unmask)
        return Kernel(
            name=name,
            version=version,
            signature=[str(t) for t in fn_type.inputs],
            attributes=attributes,
            body=body,
            functions=list(by_name),
            masks=masks,
        )


def named(op):
    """`[(name, attribute)]` of an op (iterating the map itself gives names only)."""
    attrs = op.attributes
    return [(attrs[i].name, attrs[i].attr) for i in range(len(attrs))]


def _constant_text(op):
    """`value : type` of an `arith.constant`, or None when `op` is no constant."""
    if op.name != "arith.constant":
        return None
    return str(op.attributes["value"])


def _splat(ir, op):
    """The normal text of a constant: scalar or splat vector, however written; else None."""
    text = _constant_text(op)
    if text is not None:
        m = re.fullmatch(r"dense<([^<>]*)> : (.*)", text)
        return f"splat({m.group(1)}) : {m.group(2)}" if m else text
    if op.name == "vector.broadcast":
        src = op.operands[0]
        if not isinstance(src.owner, ir.Block):
            scalar = _constant_text(src.owner.operation)
            if scalar is not None:
                value = scalar.rsplit(" : ", 1)[0]
                return f"splat({value}) : {op.results[0].type}"
    return None


def _reaches_iota(ir, value, seen=None):
    """Whether `value` is computed from a `tpu.iota` (tpukit's edge masks are)."""
    seen = set() if seen is None else seen
    if isinstance(value.owner, ir.Block):
        return False
    op = value.owner.operation
    if op in seen:
        return False
    seen.add(op)
    return op.name == "tpu.iota" or any(_reaches_iota(ir, v, seen) for v in op.operands)


def _is_load(ir, value):
    return not isinstance(value.owner, ir.Block) and value.owner.operation.name == "vector.load"


def body_entries(ir, func, unmask=False):
    """The kernel body as op entries (see the module doc), and the number of edge masks.

    With `unmask`, a select of a loaded value whose condition comes from an iota (tpukit's
    edge-block mask, `select(inside, loaded, fill)`) stands for the loaded value, and the
    mask computation becomes dead code: what remains is the kernel as it would be on a
    divisible shape. Selects of computed values under iota conditions are the kernel's own
    (a causal mask) and stay.
    """
    ops = list(walk(func))[1:]
    masks = set()
    if unmask:
        masks = {
            op
            for op in ops
            if op.name == "arith.select"
            and _is_load(ir, op.operands[1])
            and _reaches_iota(ir, op.operands[0])
        }

    def forward(v):
        while not isinstance(v.owner, ir.Block) and v.owner.operation in masks:
            v = v.owner.operation.operands[1]
        return v

    users = {op: set() for op in ops}
    for op in ops:
        if op in masks:
            continue
        for v in op.operands:
            v = forward(v)
            if not isinstance(v.owner, ir.Block):
                users[v.owner.operation].add(op)
    dead = set(masks)
    changed = True
    while changed:
        changed = False
        for op in ops:
            if op in dead or not op.name.startswith(_PURE_PREFIXES) or len(op.regions):
                continue
            if users[op] <= dead:
                dead.add(op)
                changed = True

    entries = []

    def operand(v):
        v = forward(v)
        if isinstance(v.owner, ir.Block):
            return f"arg{ir.BlockArgument(v).arg_number}"
        producer = v.owner.operation
        return _splat(ir, producer) or producer.name

    def emit(block):
        for o in block.operations:
            o = o.operation
            if o in dead or _splat(ir, o) is not None:
                continue
            attrs = tuple(
                sorted((k, str(a)) for k, a in named(o) if k != "operandSegmentSizes")
            )
            operands = tuple(operand(v) for v in o.operands)
            results = tuple(str(r.type) for r in o.results)
            entries.append((o.name, operands, results, attrs))
            for region in o.regions:
                entries.append(("{",))
                for b in region.blocks:
                    emit(b)
                entries.append(("}",))

    (block,) = func.regions[0].blocks
    emit(block)
    return entries, len(masks)


def transform_results(ir, func):
    """What a `@transform_i` returns, each result an expression of its arguments."""

    def expr(v):
        if isinstance(v.owner, ir.Block):
            return f"arg{ir.BlockArgument(v).arg_number}"
        op = v.owner.operation
        const = _constant_text(op)
        if const is not None:
            return const
        return f"{op.name}({', '.join(expr(x) for x in op.operands)})"

    (block,) = func.regions[0].blocks
    ret = list(block.operations)[-1].operation
    return [expr(v) for v in ret.operands]


# `stablehlo.custom_call` attributes at their default value: jax.export's module leaves them
# out, tpukit writes them; the same op either way.
CUSTOM_CALL_DEFAULTS = {
    ("api_version", "1 : i32"),
    ("called_computations", "[]"),
    ("has_side_effect", "false"),
}


def stablehlo_form(text):
    """The ops of a StableHLO module's `main`: name, operand and result types, attributes
    (locations and default-valued attributes dropped; a custom call's body replaced by
    `<body>`, so `backend_config` is compared byte for byte otherwise)."""
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir

    with jax_mlir.make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        funcs = [op.operation for op in module.body.operations]
        (main,) = [
            f for f in funcs if ir.StringAttr(f.attributes["sym_name"]).value == "main"
        ]
        form = []
        for op in walk(main):
            if op is main or op.name == "func.func":
                continue
            attrs = []
            for k, a in named(op):
                value = str(a)
                if k == "backend_config":
                    raw = ir.StringAttr(a).value
                    body = json.loads(raw)["custom_call_config"]["body"]
                    value = raw.replace(body, "<body>")
                if (k, value) not in CUSTOM_CALL_DEFAULTS:
                    attrs.append((k, value))
            form.append(
                (
                    op.name,
                    tuple(str(v.type) for v in op.operands),
                    tuple(str(r.type) for r in op.results),
                    tuple(sorted(attrs)),
                )
            )
        return form
