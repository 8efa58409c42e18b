"""ATen operator schemas (``add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor``)
and binding a call's arguments to one: the order, types and defaults tpuBLAS's native
``run`` takes its arguments in come from the schema, as in ATen."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_NO_DEFAULT = object()


@dataclass(frozen=True)
class Argument:
    name: str
    type: str  # the base type: Tensor, Scalar, int, float, bool, str, ScalarType, SymInt
    list: bool  # `int[]`, `int[1]`, `Tensor[]`, `bool[3]`
    optional: bool  # `Tensor?`, `int[1]?`
    kwarg_only: bool
    default: object = _NO_DEFAULT

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT and not self.optional

    def __str__(self):
        t = self.type + ("[]" if self.list else "") + ("?" if self.optional else "")
        return f"{t} {self.name}"


@dataclass(frozen=True)
class Schema:
    """A parsed schema: ``name`` (``add``), ``overload`` (``Tensor``, or ``default``), the
    arguments in order and the number of results."""

    name: str
    overload: str
    arguments: tuple[Argument, ...]
    results: int
    text: str

    @property
    def signature(self) -> str:
        """The schema without the name: what ``torch.library.define`` takes."""
        return self.text[self.text.index("(") :]


_ARG = re.compile(r"^(\w+)(\[\d*\])?(\?)?\s+(\w+)(?:=(.+))?$")


def _default(text: str, list_: bool):
    if text == "None":
        return None
    if list_ and re.fullmatch(r"\d+", text):
        return [int(text)]  # `int[1] dim=0` means [0]
    return ast.literal_eval(text)


def parse(text: str) -> Schema:
    """Parses an ATen schema; malformed text is a ValueError naming it."""
    m = re.fullmatch(r"([\w.]+)\((.*)\)\s*->\s*(.+)", text.strip())
    if not m:
        raise ValueError(f"not an ATen schema: {text!r}")
    full, args_text, returns = m.groups()
    name, _, overload = full.partition(".")
    arguments = []
    kwarg_only = False
    for part in filter(None, (p.strip() for p in args_text.split(","))):
        if part == "*":
            kwarg_only = True
            continue
        a = _ARG.match(part)
        if not a:
            raise ValueError(f"cannot read argument {part!r} of {text!r}")
        type_, brackets, optional, arg_name, default = a.groups()
        is_list = brackets is not None
        arguments.append(
            Argument(
                name=arg_name,
                type=type_,
                list=is_list,
                optional=bool(optional),
                kwarg_only=kwarg_only,
                default=_NO_DEFAULT if default is None else _default(default, is_list),
            )
        )
    results = returns.count("Tensor")
    return Schema(name, overload or "default", tuple(arguments), results, text)


# The fill of an argument without a default (a call binds only if it gives one).
MISSING = object()


def positional_fills(schema: Schema) -> tuple[int, int, list]:
    """``(least, most, fills)``: a call of only positional arguments, ``least <= len(args) <=
    most`` of them, binds to ``[*args, *fills[len(args):]]`` (what ``bind`` gives it, without
    its checks, none of which such a call can fail); no call does if ``least > most``."""
    fills = [a.default if a.default is not _NO_DEFAULT else None if a.optional else MISSING
             for a in schema.arguments]
    most = sum(not a.kwarg_only for a in schema.arguments)
    least = len(fills)
    while least > 0 and fills[least - 1] is not MISSING:
        least -= 1
    return least, most, fills


def bind(schema: Schema, args: tuple, kwargs: dict, qualified: str) -> list:
    """The call's argument values in schema order, defaults filled in (``None`` for an
    absent optional). Wrong arity or names are a TypeError naming ``qualified``."""
    positional = [a for a in schema.arguments if not a.kwarg_only]
    if len(args) > len(positional):
        raise TypeError(
            f"{qualified}() takes {len(positional)} positional arguments but {len(args)} were given"
        )
    names = {a.name for a in schema.arguments}
    for k in kwargs:
        if k not in names:
            raise TypeError(f"{qualified}() got an unexpected keyword argument {k!r}")
    values = []
    for i, a in enumerate(schema.arguments):
        if i < len(args) and not a.kwarg_only:
            if a.name in kwargs:
                raise TypeError(f"{qualified}() got multiple values for argument {a.name!r}")
            values.append(args[i])
        elif a.name in kwargs:
            values.append(kwargs[a.name])
        elif a.default is not _NO_DEFAULT:
            values.append(a.default)
        elif a.optional:
            values.append(None)
        else:
            raise TypeError(f"{qualified}() missing required argument {a.name!r} ({a})")
    return values
