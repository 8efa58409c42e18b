"""tpuBLAS from Python: ATen operators as precompiled tpukit kernels.

Operators are called as in ``torch.ops.aten``: ``tpublas.add(x, y, alpha=2)`` picks the
overload from the arguments (``add.Tensor`` or ``add.Scalar``), ``tpublas.add.Tensor(x, y)``
names one. Arguments follow each operator's ATen schema (``tpublas.ops()`` lists them);
tensors may be numpy arrays, torch tensors or JAX arrays (f32 or bf16; index tensors int32,
or int64 when every index fits in int32), and results come back as the first tensor's kind.
They run on tpukit's compiled CPU backend; the package ships a bundle with every operator's
kernels precompiled for this host, so no call waits for a compiler. ``with
tpublas.device("interpret"):`` runs the operators called inside on the reference interpreter
instead (exact, every access checked; this thread only).

With torch installed the operators are also torch custom ops, ``torch.ops.tpublas.<name>``
(registered at import, which imports torch; ``TPUKIT_TORCH=0`` skips that, see
``tpukit.tpublas.torch_library``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import numbers
import os
import sys
import threading
from dataclasses import dataclass

import numpy as np

from tpukit import _arrays, _native
from tpukit.launch import check_device
from tpukit.tpublas import _schema

__all__ = ["OpInfo", "Operator", "Packet", "device", "mode", "ops", "torch_library"]

class _Local(threading.local):
    """tpuBLAS's per-thread state: ``device``, what ``tpublas.device`` chose. A class
    attribute is every thread's default, so reading it never misses (``getattr`` with a
    default raised and formatted an ``AttributeError`` per call: 0.4 µs of a 6 µs call)."""

    device = "cpu"


_local = _Local()


@contextlib.contextmanager
def device(name: str):
    """``with tpublas.device("interpret"):`` runs the operators called inside on that tpukit
    device (``"cpu"``, the default, or ``"interpret"``), on this thread."""
    check_device(name)
    prev = _local.device
    _local.device = name
    try:
        yield
    finally:
        _local.device = prev


@dataclass(frozen=True)
class OpInfo:
    """One operator: ``name`` (``aten.add.Tensor``), ATen ``schema``, and what it computes."""

    name: str
    schema: str
    about: str


def ops() -> list[OpInfo]:
    """Every tpuBLAS operator."""
    return [OpInfo(*row) for row in _native.tpublas_ops()]


def _is_array(x) -> bool:
    try:
        _arrays.kind(x)
        return True
    except TypeError:
        return False


# Operators whose int32 results are indices, int64 in ATen.
_INDEX_RESULTS = {"aten.max_pool2d_with_indices.default"}

# The schema names of index arguments: the only tensors an int64 array may be passed as.
_INDEX_ARGUMENTS = ("index", "indices", "target")
# Operators whose ``self`` may also be an integer tensor: int32, or int64 narrowed to int32
# when every value fits (their results are widened back to int64).
INTEGER_SELF = ("aten.add.Scalar", "aten.sub.Scalar", "aten.mul.Scalar", "aten.clone.default",
                "aten.constant_pad_nd.default")
# Operators whose ``self`` may also be a bool tensor.
BOOL_SELF = ("aten.tril.default", "aten.triu.default")
# Argument types accepted only at their default (a CPU, strided, contiguous tensor).
_PLACEMENT_TYPES = ("Layout", "Device", "MemoryFormat")


def _index_dtype(a: np.ndarray, qualified: str, argument: str) -> np.ndarray:
    """int64 indices narrowed to int32 (tpukit's index type) when every one fits; an int64
    tensor anywhere else is refused naming its dtype (not the int32 it would narrow to)."""
    integer_self = argument == "self" and qualified in INTEGER_SELF
    if a.dtype == np.int64 and argument not in _INDEX_ARGUMENTS and not integer_self:
        raise _native.DTypeError(
            f"{qualified}: argument {argument!r}: tpuBLAS serves f32 and bf16 tensors "
            "(and int32 or int64 indices), got int64"
        )
    if a.dtype == np.int64:
        if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
            what = "a value" if integer_self else "an index"
            raise _native.BoundsError(f"{qualified}: {what} does not fit in int32")
        return a.astype(np.int32)
    return a


class Operator(_native.OperatorCall):
    """One overload of an operator (``aten.add.Tensor``): binds a call to its schema,
    converts the arguments, runs it natively. A call goes through ``_native.OperatorCall``'s
    ``__call__``: the last plan (``_fast``) where it takes the call, else
    ``self._run(self._bind(args, kwargs))``."""

    def __init__(self, info: OpInfo):
        self.info = info
        self.schema = _schema.parse(info.schema)
        # The position of a backward operator's `output_mask` argument, or None.
        self.output_mask = next((i for i, a in enumerate(self.schema.arguments)
                                 if a.name == "output_mask"), None)
        # Whether some result may need widening to int64 (see `_run`).
        self._widens = info.name in INTEGER_SELF or info.name in _INDEX_RESULTS
        # Binding a call of positional arguments only (see `_schema.positional_fills`).
        self._least, self._most, self._fills = _schema.positional_fills(self.schema)
        # Per argument, what `_run` converts without `_convert`: 1 a tensor (`torch_wire`),
        # 2 an int for a number argument, 3 a float for a Scalar or float one, 4 a list of
        # tensors (`torch_wires`); else 0.
        self._codes = tuple(
            (1 if not a.list else 4) if a.type == "Tensor" else
            (2 if a.type in ("int", "SymInt", "Scalar", "float") else 0) if not a.list else 0
            for a in self.schema.arguments)
        # A factory (no tensor argument): its plans make torch tensors, so they serve only
        # calls that ask for those (`run_as("torch", ...)`, `tpublas.mode()`'s factories), by
        # `_plan_key` of the call (`_made`); `_fast` and `_plans` stay empty.
        self._factory = not any(a.type == "Tensor" for a in self.schema.arguments)
        self._made: dict = {}
        # The native plan (`_native.BlasPlan`) of the last call that could be planned (plain
        # CPU torch tensors, on the "cpu" device), tried first by every call; None before.
        # Operators drawing a seed per call, or returning indices ATen widens, are never
        # planned.
        self._fast = None
        # Every plan made, by `_plan_key` of its call (at most `_PLANS` of them, the oldest
        # dropped first): a model calls one operator on several shapes in turn (each Linear
        # layer's `addmm`), and a call `_fast` does not take finds its own plan here instead
        # of being planned again (natively too: `python/src/operator_call.rs`).
        self._plans: dict = {}
        self._set_arity(self._least, self._most, tuple(self._fills), _local)
        self._plannable = info.name not in _INDEX_RESULTS and not any(
            a.type == "Generator" for a in self.schema.arguments)
        self.__name__ = info.name
        self.__doc__ = f"{info.schema}\n\n{info.about}"

    def __repr__(self):
        return f"<tpublas {self.info.name}>"

    def accepts(self, args, kwargs) -> bool:
        """Whether the call fits this overload: arity, names, and tensors where the schema
        has tensors and numbers where it has scalars."""
        return self._fit(args, kwargs) is not None

    def _fit(self, args, kwargs) -> list | None:
        """The call's values bound to the schema (see ``_schema.bind``) if it fits this
        overload (see ``accepts``), else None."""
        try:
            values = self._bind(args, kwargs)
        except TypeError:
            return None
        for a, v in zip(self.schema.arguments, values, strict=True):
            if v is None:
                continue
            if a.type == "Tensor" and not a.list and not _is_array(v):
                return None
            if a.type == "Scalar" and not isinstance(v, numbers.Number):
                return None
        return values

    def _bind(self, args, kwargs) -> list:
        """The call's values in schema order (see ``_schema.bind``)."""
        if not kwargs and self._least <= len(args) <= self._most:
            return [*args, *self._fills[len(args):]]
        return _schema.bind(self.schema, args, kwargs, self.info.name)

    def run_as(self, kind: str, *args, **kwargs):
        """The call, its results of array kind ``kind`` (``"torch"``, ``"numpy"``, ``"jax"``)
        when no tensor argument decides it (a factory's)."""
        return self._run(self._bind(args, kwargs), kind)

    def _run(self, values: list, kind: str = "numpy"):
        """Runs the overload on the call's bound values: through the last call's plan if
        they are what it was made for (see ``python/src/blas_plan.rs``), else in full."""
        fast = self._fast
        device = _local.device
        key = None
        if self._factory and kind == "torch" and device == "cpu":
            key = _plan_key(values)
            plan = self._made.get(key) if key is not None else None
            if plan is not None:
                out = plan.run(values)
                if out is not None:
                    return out
        elif fast is not None and device == "cpu":
            out = fast.run(values)
            if out is not None:
                return out
            key = _plan_key(values)
            plan = self._plans.get(key) if key is not None else None
            if plan is not None:
                out = plan.run(values)
                if out is not None:
                    self._fast = plan
                    return out
        name = self.info.name
        native, first, plain = [], None, False  # plain: `first` is a plain CPU tensor
        wired = True  # every tensor argument went through `torch_wire`
        for code, a, v in zip(self._codes, self.schema.arguments, values, strict=True):
            if code == 1:  # the common case first: a plain contiguous CPU tensor
                wire = _arrays.torch_wire(v)
                if wire is not None:
                    native.append(("tensor", wire))
                    if first is None:
                        first, plain = v, True
                    continue
            elif code == 4:  # a list of plain CPU tensors (`cat`'s), read natively
                wires = _arrays.torch_wires(v) if isinstance(v, (list, tuple)) else None
                if wires is not None:
                    native.extend(("tensor", w) for w in wires)
                    if first is None:
                        first, plain = v[0], True
                    continue
            elif code and type(v) is int:  # what `_convert` makes of them, in fewer steps
                native.append(("int", v))
                continue
            elif code and type(v) is float and a.type in ("Scalar", "float"):
                native.append(("float", v))
                continue
            for kind_, x, array in _convert(a, v, name):
                native.append((kind_, x))
                if array is not None:
                    wired = False
                    if first is None:
                        first = array
        made = self._factory and kind == "torch"
        if (plain or made) and wired and device == "cpu" and self._plannable:
            results, plan = _native.tpublas_run_planned(name, native, values)
            if plan is not None:
                key = key if key is not None else _plan_key(values)
                if not made:
                    self._fast = plan
                if key is not None:
                    _keep(self._made if made else self._plans, key, plan)
        else:
            results = _native.tpublas_run(name, native, device)
        k = "torch" if plain else _arrays.kind(first) if first is not None else kind
        if k == "torch" and (plain or first is None or first.is_cpu) and not self._widens:
            # Straight to CPU tensors over the native results (as `to_kind` makes them).
            out = [_arrays.torch_from_wire(w) for w in results]
            return out[0] if self.schema.results == 1 else tuple(out)
        widen = first is not None and name in INTEGER_SELF and \
            str(first.dtype).removeprefix("torch.") == "int64"
        arrays = [_arrays.from_wire(w) for w in results]
        if widen or name in _INDEX_RESULTS:
            # An int64 `self` was narrowed to int32, or the result is indices (tpukit's
            # int32): int64 again, as ATen's.
            arrays = [a.astype(np.int64) if a.dtype == np.int32 else a for a in arrays]
        out = [_arrays.to_kind(a, k, first) for a in arrays]
        return out[0] if self.schema.results == 1 else tuple(out)


# The most plans an operator keeps (see `Operator._plans`).
_PLANS = 64


def _keep(plans: dict, key, plan) -> None:
    """``plans[key] = plan``, the oldest plan dropped first when ``plans`` holds ``_PLANS``."""
    if len(plans) >= _PLANS:
        del plans[next(iter(plans))]
    plans[key] = plan


def _plan_key(values: list):
    """The key of a call's plan in ``Operator._plans``: ``_native.plan_key``, which the
    native callers (``OperatorCall``, the mode's and torch's dispatch) look plans up by."""
    return _native.plan_key(values)


def _convert(a: _schema.Argument, v, qualified: str):
    """The native ``(kind, value, original array or None)`` triples of one argument."""
    what = _What(qualified, a)
    if a.type == "Generator":  # None too: a seed from the default generator
        return [("int", _seed(v), None)]
    if v is None:
        if not a.optional:
            raise TypeError(f"{what} may not be None")
        return [("none", None, None)]
    if a.type == "Tensor":
        arrays = v if a.list else [v]
        if a.list and not isinstance(v, (list, tuple)):
            raise TypeError(f"{what} must be a list of tensors")
        out = []
        for x in arrays:
            if not _is_array(x):
                raise TypeError(f"{what} must be a tensor, got {type(x).__name__}")
            # A plain CPU tensor is read natively (gathered there if strided), as `_run` reads
            # one in a tensor position; others (int64 indices, numpy and JAX arrays) through
            # numpy.
            wire = _arrays.torch_wire(x)
            if wire is None:
                wire = _arrays.to_wire(_index_dtype(_arrays.to_numpy(x), qualified, a.name))
            out.append(("tensor", wire, x))
        return out
    if a.type == "ScalarType":
        return [("str", v if isinstance(v, str) else _arrays.dtype_name(v), None)]
    if a.type in _PLACEMENT_TYPES:
        if str(v) not in ("cpu", "torch.strided", "torch.contiguous_format",
                          "torch.preserve_format"):
            raise TypeError(f"{what}: tpuBLAS makes CPU, strided, contiguous tensors, not {v}")
        return [("none", None, None)]
    if a.list:
        items = [v] if isinstance(v, numbers.Integral) else list(v)
        if a.type == "bool":  # `bool[3] output_mask`, passed as 0/1
            return [("ints", [int(bool(i)) for i in items], None)]
        return [("ints", [_integer(i, what) for i in items], None)]
    if a.type in ("int", "SymInt"):
        return [("int", _integer(v, what), None)]
    if a.type == "bool":
        return [("bool", bool(v), None)]
    if a.type == "str":
        if not isinstance(v, str):
            raise TypeError(f"{what} must be a string")
        return [("str", v, None)]
    if a.type in ("Scalar", "float"):
        if isinstance(v, numbers.Integral) and not isinstance(v, bool):
            return [("int", int(v), None)]
        if not isinstance(v, numbers.Real):
            raise TypeError(f"{what} must be a number, got {type(v).__name__}")
        return [("float", float(v), None)]
    raise TypeError(f"{what}: unsupported argument type")


def _seed(generator) -> int:
    """A 62-bit seed for tpuBLAS's random kernels, drawn from ``generator`` (a
    ``torch.Generator``), or from torch's default generator (numpy's without torch): so
    ``torch.manual_seed`` makes tpuBLAS's random tensors repeatable."""
    if generator is None and "torch" not in sys.modules:
        return int(np.random.randint(0, 2**62, dtype=np.int64))
    import torch

    return int(torch.randint(0, 2**62, (1,), generator=generator).item())




class _What:
    """``qualified: argument 'name' (type name)``, the start of a conversion error's message:
    formatted only when an error is raised (most calls have none)."""

    __slots__ = ("argument", "qualified")

    def __init__(self, qualified: str, argument: _schema.Argument):
        self.qualified, self.argument = qualified, argument

    def __format__(self, spec) -> str:
        return f"{self.qualified}: argument {self.argument.name!r} ({self.argument})"


def _integer(v, what: _What) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{what} must be an int, got {v!r}")
    return int(v)


class Packet(_native.OperatorCall):
    """All overloads of one operator name (``tpublas.add``): calling it picks the first
    overload the arguments fit; ``packet.Tensor`` is one overload. A call goes through
    ``_native.OperatorCall``'s ``__call__``: the plan (``_fast``) of the overload picked for
    an earlier call where that plan takes the call, else ``_run``, which picks again."""

    def __init__(self, name: str):
        self.__name__ = name
        self._overloads: dict[str, Operator] = {}

    def _add(self, op: Operator):
        overload = op.schema.overload
        self._overloads[overload] = op
        if not hasattr(type(self), overload):
            # An instance attribute: `packet.Tensor` is a plain lookup, not `__getattr__`.
            setattr(self, overload, op)
        self.__doc__ = "\n\n".join(o.__doc__ for o in self._overloads.values())

    def overloads(self) -> list[str]:
        return list(self._overloads)

    def __getattr__(self, overload):
        try:
            return self.__dict__["_overloads"][overload]
        except KeyError:
            raise AttributeError(f"tpublas.{self.__name__} has no overload {overload!r}") from None

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        return args, kwargs

    def _run(self, call: tuple):
        """Runs the first overload ``call`` (``(args, kwargs)``) fits."""
        args, kwargs = call
        for op in self._overloads.values():
            values = op._fit(args, kwargs)
            if values is not None:
                out = op._run(values)
                plan = op._fast
                if plan is not None and plan.takes(values):
                    # The plan takes only arguments of the types (tensors of the dtypes and
                    # shapes) of this call, for which `op` was picked: as it would be again.
                    self._set_arity(op._least, op._most, tuple(op._fills), _local)
                    self._fast = plan
                return out
        if len(self._overloads) == 1:
            return next(iter(self._overloads.values()))(*args, **kwargs)  # its own error
        schemas = "; ".join(o.info.schema for o in self._overloads.values())
        raise TypeError(f"tpublas.{self.__name__}: no overload takes these arguments ({schemas})")

    def __repr__(self):
        return f"<tpublas {self.__name__} ({', '.join(self._overloads)})>"


def _packets() -> dict[str, Packet]:
    packets: dict[str, Packet] = {}
    for info in ops():
        op = Operator(info)
        packets.setdefault(op.schema.name, Packet(op.schema.name))._add(op)
    return packets


_PACKETS = _packets()
globals().update(_PACKETS)
__all__ += sorted(_PACKETS)


def torch_library():
    """Registers every operator as a torch custom op, ``torch.ops.tpublas.<name>.<overload>``,
    with a CPU kernel (tpuBLAS) and a fake kernel (ATen's own operator on fake tensors, for
    tracing and ``torch.compile``). Done at import when torch is installed; safe to repeat."""
    from tpukit.tpublas import _torch

    return _torch.register(_PACKETS)


def mode(fallback: str = "torch", debug: bool = False):
    """A context manager (a torch ``TorchDispatchMode``) inside which the ATen operators of
    an unmodified PyTorch program run on tpuBLAS: views stay views, ``mode.served`` and
    ``mode.fallback`` count the operators served and those left to torch
    (``fallback="error"`` raises on those instead), ``debug=True`` runs on the interpreter
    and checks each result for new NaNs and Infs. See ``tpukit.tpublas._mode``."""
    from tpukit.tpublas import _mode

    return _mode.Mode(_PACKETS, fallback=fallback, debug=debug)


if os.environ.get("TPUKIT_TORCH") != "0" and (
    "torch" in sys.modules or importlib.util.find_spec("torch") is not None
):
    torch_library()
