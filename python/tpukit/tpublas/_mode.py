"""``tpublas.mode()``: unmodified PyTorch programs on tpuBLAS, one ATen op at a time.

Inside ``with tpublas.mode() as m:`` every ATen operator a program issues (autograd's
backward operators included: the mode sits below autograd) reaches ``Mode``:

- operators returning views of their inputs (``view``, ``t``, ``expand``, ``permute``,
  ``slice``, …, any whose schema returns an alias that is not written, and
  ``_unsafe_view``) and operators that return no tensor run as torch runs them: views stay
  views, no data moves (``m.views`` counts them);
- factories (``zeros``, ``ones_like``, ``arange``, …) run tpuBLAS's fill kernels, and
  ``empty*`` allocate without a kernel (``m.allocated``), see ``_factory``;
- an in-place operator (``add_``, ``mul_``, ``fill_``, ``zero_``, ``copy_``, …) runs its
  out-of-place counterpart on tpuBLAS and writes the result into ``self`` (which it
  returns, as ATen does; autograd has already bumped its version counter), see
  ``_inplace``;
- an operator tpuBLAS has (``tpublas.ops()``), with every tensor argument on the CPU and of
  a dtype tpuBLAS takes, runs on tpuBLAS (``m.served``); tpuBLAS's errors are raised as they
  are, never hidden by a fallback;
- anything else runs on torch (``m.fallback``), or, with ``fallback="error"``, raises
  ``UnsupportedError`` naming the operator and the Python line that issued it.

Two ATen conventions tpuBLAS's functional operators cannot follow themselves are restored
here: ``native_batch_norm`` in training updates its running statistics in place (tpuBLAS's
``_native_batch_norm_legit_functional`` returns them and they are copied back), and backward
operators return the gradients their ``output_mask`` leaves out as ``None``.

The default is Strict Eager: one op at a time, no extra checks. ``debug=True`` is Debug
Eager: tpuBLAS operators run on the ``interpret`` device (exact, every access bounds-checked)
and after each operator its results are checked: a NaN or Inf that its inputs did not have
raises ``FloatingPointError`` naming the operator and the line. (tpuBLAS kernels expose no
scratch memory, so there is none to fill with NaNs.)

Counters are ``collections.Counter``s of ATen operator names (``"aten.mm.default"``).
In-place and factory operators are counted under their own names.
"""

from __future__ import annotations

import collections
import functools
import os
import traceback
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tpukit import _native, tpublas
from tpukit._native import UnsupportedError
from tpukit.tpublas import _factory, _inplace, _mode_stack, _permuted, _schema

_ATEN_PERMUTE = torch.ops.aten.permute.default
_FLOAT_DTYPES = (torch.float32, torch.bfloat16)
# Tensor arguments tpuBLAS takes as integers or booleans; every other one is f32 or bf16.
_INDEX_ARGUMENTS = {"index": (torch.int32, torch.int64), "indices": (torch.int32, torch.int64),
                    "target": (torch.int32, torch.int64), "condition": (torch.bool,),
                    "mask": (torch.bool,), "attn_mask": (torch.bool,) + _FLOAT_DTYPES}
# Overloads that are another's with fixed arguments: `x.sum()` is `sum.dim_IntList(x, None)`.
_ALIASES = {"aten.sum.default": (torch.ops.aten.sum.dim_IntList, lambda a: (a[0], None))}
# Operators returning a new tensor that is a reshape of a fresh row-major one: views.
_VIEWS = {"aten._unsafe_view.default"}
_NUMBER_DTYPES = (torch.float64, torch.int64, torch.int32)
_SKIPPED_DIRS = tuple(
    os.path.dirname(m.__file__) + os.sep for m in (torch, __import__("tpukit"))
)


def _is_view_or_metadata(func) -> bool:
    """Whether ``func`` returns only views of its inputs, or no tensor at all."""
    returns = func._schema.returns
    if not any(isinstance(r.type, torch.TensorType) for r in returns):
        return True
    return all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def _tensors(tree):
    """The tensors among a call's arguments or results (lists and tuples flattened)."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (list, tuple)):
        for x in tree:
            yield from _tensors(x)
    elif isinstance(tree, dict):
        for x in tree.values():
            yield from _tensors(x)


def _caller() -> str:
    """``file:line`` of the innermost frame outside torch and tpukit: the program's line
    that issued the operator."""
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(_SKIPPED_DIRS):
            return f"{frame.filename}:{frame.lineno}"
    return "<unknown>"


def _number(v):
    """``v`` as a Python number if it is one, or a 0-d float64 or integer tensor (a number
    ATen wrapped); else None."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    if isinstance(v, torch.Tensor) and v.dim() == 0 and v.dtype in _NUMBER_DTYPES:
        return v.item()
    return None


def _numbers_as_f32(func, args, kwargs):
    """The call with the numbers it passes as tensors (``x * 2.0`` reaches ``mul.Tensor`` with
    a Python float, or a 0-d float64 or integer tensor) as 0-d float32 tensors, when a tensor
    with dimensions sets the result's dtype: ATen computes with such a number in float32 (or
    wider) without promoting to its type, and tpuBLAS's 0-d operands behave the same."""
    if not any(t.dim() > 0 and t.dtype in _FLOAT_DTYPES for t in _tensors((args, kwargs))):
        return args, kwargs

    def convert(v):
        n = _number(v)
        return v if n is None else torch.tensor(float(n), dtype=torch.float32)

    tensor_args, positional = _number_arguments(func)
    args = [convert(v) if n in tensor_args else v for n, v in zip(positional, args, strict=False)]
    return args, {k: convert(v) if k in tensor_args else v for k, v in kwargs.items()}


_NUMBER_ARGUMENTS: dict = {}  # func -> (tensor argument names, positional names)


def _number_arguments(func):
    """The names of ``func``'s tensor arguments that may be numbers, and of its positional
    arguments (read from its schema once)."""
    known = _NUMBER_ARGUMENTS.get(func)
    if known is None:
        arguments = func._schema.arguments
        known = ({a.name for a in arguments
                  if isinstance(a.type, torch.TensorType) and a.name not in _INDEX_ARGUMENTS},
                 [a.name for a in arguments if not a.kwarg_only])
        _NUMBER_ARGUMENTS[func] = known
    return known


def _masked(op, mask):
    """``op`` with the results ``output_mask`` leaves out returned as ATen returns them:
    undefined (None)."""

    def call(*args, **kwargs):
        out = op(*args, **kwargs)
        return tuple(t if m else None for t, m in zip(out, mask, strict=True))

    return call


def _has_non_finite(tensors) -> bool:
    return any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in tensors)


def _direct(func, name: str, op):
    """``(op, most, planned)`` if calls of ``func`` with up to ``most`` positional arguments,
    all f32 or bf16 CPU tensors, run as ``op`` on those arguments bound as they are (see
    ``Mode._direct_call``): a tpuBLAS operator that is no view, factory, allocation, in-place
    write, alias or special case (batch norm's statistics), whose leading
    ``most`` arguments are tensors (or lists of tensors: ``Mode._direct_call`` takes no
    list) that may be floats, and whose other arguments' defaults pass ``_tpublas_call``'s
    checks; else None.

    ``planned`` (at least ``most``) is how many leading positional arguments the mode's
    native dispatch hands to the operator's plans (see ``Mode._planned``): the tensors and
    then the numbers, lists and flags after them (``pow(x, 3.0)``, ``sum(x, [0, 1])``,
    ``layer_norm(x, [768], w, b, 1e-5)``, ``cat([a, b], 2)``), up to an index tensor. A plan
    takes only arguments equal to those of the call it was made from, which passed
    ``_tpublas_call``'s checks in full, and that call's non-tensor arguments reached the
    operator as given (``_numbers_as_f32`` converts tensor positions only)."""
    if op is None or _is_view_or_metadata(func) or name in _VIEWS or name in _ALIASES \
            or _factory.is_factory(func) or _factory._name(func) in _factory.ALLOCATIONS \
            or name == "aten.native_batch_norm.default":
        return None
    if any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments):
        return None
    arguments = op.schema.arguments
    most = 0
    while most < len(arguments) and _plain_tensor(arguments[most]):
        most += 1
    if any(a.type == "ScalarType" and fill is not None and fill is not _schema.MISSING
           for a, fill in zip(arguments[most:], op._fills[most:], strict=True)):
        return None  # (a dtype the call gives reaches the plans, which compare it)
    planned = most
    while planned < len(arguments) and not arguments[planned].kwarg_only \
            and not (arguments[planned].type == "Tensor"
                     and not _plain_tensor(arguments[planned])):
        planned += 1
    return (op, most, planned) if most else None


def _plain_tensor(a) -> bool:
    """Whether schema argument ``a`` is a positional tensor, or list of tensors (``cat``'s),
    that may be a float (not an index, mask or target)."""
    return a.type == "Tensor" and not a.kwarg_only and a.name not in _INDEX_ARGUMENTS


class Mode(TorchDispatchMode):
    """See the module. ``served``, ``fallback`` and ``views`` are the counters."""

    def __init__(self, operators, fallback: str = "torch", debug: bool = False):
        super().__init__()
        if fallback not in ("torch", "error"):
            raise ValueError(f"fallback must be 'torch' or 'error', got {fallback!r}")
        self._operators = operators
        self.fallback_policy = fallback
        self.debug = debug
        self.served: collections.Counter = collections.Counter()
        self.fallback: collections.Counter = collections.Counter()
        self.views: collections.Counter = collections.Counter()
        self.allocated: collections.Counter = collections.Counter()
        self._known: dict = {}  # operator -> what `_describe` read from its schema
        # `id(operator)` -> `(operator, tpuBLAS operator, least, most, defaults, name,
        # scalar, names, mask, in_place)` of a `_direct` operator (not in debug mode), or of
        # an in-place one whose counterpart is (`in_place`: its result is written into
        # `self`, `_inplace.plain_counterpart`), `scalar` its
        # packet's Scalar overload as `(operator, defaults, _number)` or None, `names` its
        # arguments' (keyword arguments bind to them), `mask` the position of its
        # `output_mask` or None (the results it leaves out are returned as None, as
        # `_masked`): a call that its tpuBLAS operator's plan takes (or,
        # given a tensor and a number, the Scalar overload's, as `_scalar_call`) is served by
        # the plan alone, natively (`python/src/dispatch.rs`), in front of this class's
        # `__torch_dispatch__` (as torch wrapped it) which serves the rest; and
        # `id(operator)` -> `(operator, name)` of the view and metadata operators, which it
        # calls itself (counted in `views`). An instance attribute: torch looks
        # `__torch_dispatch__` up on the mode. It holds the mode weakly (no reference cycle
        # through the mode's own attribute).
        self._planned: dict = {}
        self._viewed: dict = {}
        # An in-place operator -> `(direct, scalar)` of its plain counterpart (see
        # `_inplace.plain_counterpart`) when that is `_direct`: its calls that the native
        # dispatch leaves (no plan yet, other numbers) skip `_serve`'s walk.
        self._counterparts: dict = {}
        self.__torch_dispatch__ = _native.ModeDispatch(
            self._planned, self.served, self._viewed, self.views, tpublas._local,
            type(self).__torch_dispatch__, weakref.ref(self))
        # Flags saved by `_mode_stack.enter`, one entry per level this mode is entered.
        self._saved_flags: list = []

    def _describe(self, func):
        """``(name, whether it is a view or metadata operator, its tpuBLAS overload or None,
        the packet's Scalar overload for a Tensor one or None, whether it only allocates,
        its ``_direct`` form or None)``: read from the schema once per operator (a dispatched
        call then costs dictionary lookups, not schema walks)."""
        known = self._known.get(func)
        if known is None:
            op = scalar = None
            packet = self._operators.get(func._schema.name.removeprefix("aten::"))
            if packet is not None and func.namespace == "aten":
                op = packet._overloads.get(func._overloadname)
                if func._overloadname == "Tensor":
                    scalar = packet._overloads.get("Scalar")
            allocation = _factory._name(func) in _factory.ALLOCATIONS
            name = str(func)
            direct = _direct(func, name, op)
            known = (name, _is_view_or_metadata(func), op, scalar, allocation, direct)
            self._known[func] = known
            if direct is not None and not self.debug:
                self._plan(func, name, direct, scalar, in_place=False)
            if known[1] or name in _VIEWS:
                self._viewed[id(func)] = (func, name)
            counterpart = _inplace.plain_counterpart(func)
            if counterpart is not None:
                _, _, _, c_scalar, _, c_direct = self._describe(counterpart)
                if c_direct is not None:
                    self._counterparts[func] = (c_direct, c_scalar)
                    if not self.debug:
                        self._plan(func, name, c_direct, c_scalar, in_place=True)
        return known

    def _plan(self, func, name, direct, scalar, in_place: bool):
        """Enters ``func`` in ``_planned``: its calls served natively by the plans of the
        ``_direct`` operator ``direct`` (with ``in_place``, of its out-of-place counterpart,
        the result written into ``self``)."""
        op, _, planned = direct
        numbers = None if scalar is None else (scalar, tuple(scalar._fills), _number)
        names = tuple(a.name for a in op.schema.arguments)
        self._planned[id(func)] = (func, op, op._least, planned, tuple(op._fills), name,
                                   numbers, names, op.output_mask, in_place)

    def _direct_call(self, direct, args):
        """The call of a ``_direct`` operator on ``args`` (positional, no keywords) if they
        are what its direct form takes: f32 or bf16 CPU tensors for its leading tensor
        arguments, the rest defaults; else None (the full ``_serve`` decides). What
        ``_tpublas_call`` makes of such a call, without its per-call walks."""
        op, most, _ = direct
        if not op._least <= len(args) <= most or op.output_mask is not None:
            return None  # (an `output_mask` follows the tensors: `_tpublas_call` masks)
        for t in args:
            if not isinstance(t, torch.Tensor) or not t.is_cpu or t.dtype not in _FLOAT_DTYPES:
                return None
        return functools.partial(op._run, op._bind(args, {})), (), {}

    def _plain_call(self, direct, scalar, args):
        """The call of a ``_direct`` operator, or of its packet's ``Scalar`` overload
        ``scalar`` (None: none), on positional ``args`` (``_direct_call``, then
        ``_scalar_call``), or None."""
        call = self._direct_call(direct, args)
        if call is None and scalar is not None:
            call = self._scalar_call(scalar, args)
        return call

    @staticmethod
    def _scalar_call(scalar, args):
        """The call of a ``_direct`` operator's ``Scalar`` overload for ``x ⊕ number`` (its
        ``Tensor`` overload given an f32 or bf16 CPU tensor and a number, as ``x * 0.5``
        dispatches), or None: what ``_tpublas_call`` makes of such a call, without its
        per-call walks (which cost a call of a small tensor twice its kernel's time)."""
        if len(args) != 2:
            return None
        x, number = args[0], _number(args[1])
        if number is None or not isinstance(x, torch.Tensor) or not x.is_cpu \
                or x.dtype not in _FLOAT_DTYPES:
            return None
        values = scalar._fit([x, number], {})
        return None if values is None else (functools.partial(scalar._run, values), (), {})

    def _tpublas_call(self, func, args, kwargs):
        """``(operator, args, kwargs)`` serving this call on tpuBLAS, or None."""
        alias = _ALIASES.get(self._describe(func)[0])
        if alias is not None:
            func, args = alias[0], alias[1](args)
        name, _, op, scalar, _, _ = self._describe(func)
        if op is None:
            return None
        if scalar is not None and len(args) >= 2 and _number(args[1]) is not None:
            # `x * 2.1`: the number stays a number (ATen's `mul.Scalar`, no rounding to bf16).
            op, args = scalar, [args[0], _number(args[1]), *args[2:]]
        else:
            args, kwargs = _numbers_as_f32(func, args, kwargs)
        values = op._fit(args, kwargs)
        if values is None:
            return None
        for a, v in zip(op.schema.arguments, values, strict=True):
            if a.type == "ScalarType" and v is not None and v not in _FLOAT_DTYPES:
                return None  # `x.to(torch.int64)`, `sum(dtype=float64)`: not tpuBLAS's
            dtypes = _INDEX_ARGUMENTS.get(a.name, _FLOAT_DTYPES)
            if a.name == "self" and op.info.name in tpublas.INTEGER_SELF:
                dtypes = _FLOAT_DTYPES + (torch.int32, torch.int64)
            if a.name == "self" and op.info.name in tpublas.BOOL_SELF:
                dtypes = _FLOAT_DTYPES + (torch.bool,)
            for t in _tensors(v):
                if not t.is_cpu or t.dtype not in dtypes:
                    return None
        if name == "aten.native_batch_norm.default":
            return self._batch_norm_call(op, values), args, kwargs
        mask = op.output_mask
        if mask is not None:
            return _masked(op, values[mask]), args, kwargs
        # The values bound above, run as they are (calling `op` would bind them again).
        return functools.partial(op._run, values), (), {}

    def _batch_norm_call(self, op, values):
        """``native_batch_norm`` updates its running statistics in place; tpuBLAS's
        ``_native_batch_norm_legit_functional`` returns them, and they are written back into
        the caller's tensors (a copy of the result, as ATen's in-place update leaves it)."""
        _, _, _, running_mean, running_var, training, *_ = values
        if not training or running_mean is None or running_var is None:
            return op
        functional = self._operators["_native_batch_norm_legit_functional"].default

        def call(*args, **kwargs):
            out, mean, invstd, new_mean, new_var = functional(*args, **kwargs)
            running_mean.copy_(new_mean)
            running_var.copy_(new_var)
            return out, mean, invstd

        return call

    def _serve(self, func, args, kwargs):
        """A call ``(fn, args, kwargs)`` serving ``func`` on tpuBLAS, or None."""
        make = _factory.call(func, args, kwargs, self._operators)
        if make is not None:
            return make, (), {}
        write = _inplace.call(func, args, kwargs, self._serve)
        if write is not None:
            return write, (), {}
        permuted = _permuted.call(func, args, kwargs)
        if permuted is not None:
            copy = self._tpublas_call(_ATEN_PERMUTE, *permuted)
            if copy is not None:
                return copy
        return self._tpublas_call(func, args, kwargs)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name, view, _, scalar, allocation, direct = self._describe(func)
        call = None
        if direct is not None and not kwargs:
            call = self._plain_call(direct, scalar, args)
        elif not kwargs and func in self._counterparts:
            inner = self._plain_call(*self._counterparts[func], args)
            if inner is not None:
                call = _inplace.writer(func, args[0], inner), (), {}
        if call is None:
            kwargs = kwargs or {}
            if view or name in _VIEWS:
                self.views[name] += 1
                return func(*args, **kwargs)
            if allocation:
                self.allocated[name] += 1
                return func(*args, **kwargs)
            call = self._serve(func, args, kwargs)
        if call is not None:
            self.served[name] += 1
        elif self.fallback_policy == "error":
            raise UnsupportedError(
                f"tpublas.mode: {name} has no tpuBLAS kernel for these arguments "
                f"(at {_caller()}); mode(fallback='torch') runs it on torch"
            )
        else:
            self.fallback[name] += 1
            call = (func, args, kwargs)
        fn, fn_args, fn_kwargs = call
        if not self.debug:
            return fn(*fn_args, **fn_kwargs)
        return self._checked(name, call, args, kwargs, served=fn is not func)

    def _checked(self, name, call, args, kwargs, served):
        """Debug Eager: the operator (on the interpreter if tpuBLAS serves it), its results
        checked against new NaNs and Infs."""
        fn, fn_args, fn_kwargs = call
        with tpublas.device("interpret" if served else "cpu"):
            out = fn(*fn_args, **fn_kwargs)
        if _has_non_finite(_tensors(out)) and not _has_non_finite(_tensors((args, kwargs))):
            raise FloatingPointError(
                f"tpublas.mode(debug=True): {name} produced a NaN or Inf from finite inputs "
                f"(at {_caller()})"
            )
        return out


if _mode_stack.usable(Mode):
    # torch's own `__enter__`/`__exit__`, done directly (see `_mode_stack`): ~2 µs less for
    # `with mode:` around each call.
    Mode.__enter__ = _mode_stack.enter
    Mode.__exit__ = _mode_stack.leave
