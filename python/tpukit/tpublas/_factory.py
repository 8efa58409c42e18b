"""ATen's factories in ``tpublas.mode()``: every operator that makes a tensor from numbers
(``zeros``, ``ones``, ``full``, ``*_like``, ``new_*``, ``scalar_tensor``, ``arange``) runs as
tpuBLAS's ``full`` or ``arange.start_step`` kernel; ``empty*`` allocate without a kernel.

- The kernels make f32, bf16 and int32. An int64, int32 or bool result is the int32
  kernel's, converted on the host (so its values must fit in int32: larger ones are an
  ``UnsupportedError``, as is every other dtype).
- ``*_like`` results have the strides ATen gives them when ``memory_format`` is
  ``preserve_format`` and ``self`` is not row-major (the host lays the kernel's row-major
  result out in them).
- ``empty``, ``empty_like``, ``new_empty``, ``empty_strided``: an allocation has no kernel
  (its contents are unspecified); ``mode.allocated`` counts them, not ``mode.served``. A
  factory's result without elements (``zeros([0])``, which autograd makes for an empty
  part of a ``cat``) is allocated too, no kernel (counted in ``served``).
- The kernels' calls are planned (``Operator._made``): a repeated factory call replays the
  fill of its plan, without the operator's host code.
"""

from __future__ import annotations

import torch

from tpukit._native import UnsupportedError

_KERNEL_DTYPES = (torch.float32, torch.bfloat16)
_VIA_INT32 = (torch.int64, torch.int32, torch.bool)
_INT32 = (-(2**31), 2**31 - 1)

# Allocations: no kernel, contents unspecified.
ALLOCATIONS = {"empty.memory_format", "empty_like.default", "new_empty.default",
               "empty_strided.default"}


# The factories `_request` reads (and every `arange.*` overload).
FACTORIES = frozenset({
    "zeros.default", "ones.default", "full.default", "scalar_tensor.default",
    "zeros_like.default", "ones_like.default", "full_like.default",
    "new_zeros.default", "new_ones.default", "new_full.default"})


def is_factory(func) -> bool:
    """Whether ``func`` is a factory this module serves (for some arguments)."""
    name = _name(func)
    return name in FACTORIES or name.startswith("arange.")


def _name(func) -> str:
    """``"zeros.default"`` for ``aten.zeros.default``; read once per operator (every call on
    the mode's Python path asks)."""
    name = _NAMES.get(func)
    if name is None:
        name = _NAMES[func] = f"{func._schema.name.removeprefix('aten::')}.{func._overloadname}"
    return name


_NAMES: dict = {}


def _check_placement(kwargs):
    device = kwargs.get("device")
    if device is not None and torch.device(device).type != "cpu":
        raise UnsupportedError(f"tpublas.mode: tpuBLAS makes CPU tensors, not {device}")
    layout = kwargs.get("layout")
    if layout not in (None, torch.strided):
        raise UnsupportedError(f"tpublas.mode: tpuBLAS makes strided tensors, not {layout}")


def _fill_dtype(value) -> torch.dtype:
    """ATen's dtype of ``full`` without one: from the fill value."""
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    return torch.get_default_dtype()


def _arange_dtype(*numbers) -> torch.dtype:
    if all(isinstance(n, int) for n in numbers):
        return torch.int64
    return torch.get_default_dtype()


def _number(v):
    if isinstance(v, torch.Tensor):
        return v.item()
    return v


def _request(func, args, kwargs):
    """``(kind, numbers, shape, dtype, like)`` of a factory call: kind ``"full"`` (numbers:
    the fill value) or ``"arange"`` (start, end, step); ``like`` is the tensor whose strides
    a ``*_like`` result keeps. None if ``func`` is not a factory."""
    if not is_factory(func):
        return None
    name = _name(func)
    kw = dict(kwargs)
    if name in ("zeros.default", "ones.default"):
        size, value = args[0], 0 if name.startswith("zeros") else 1
        return "full", (value,), list(size), kw.get("dtype") or torch.get_default_dtype(), None
    if name == "full.default":
        size, value = args[0], _number(args[1])
        return "full", (value,), list(size), kw.get("dtype") or _fill_dtype(value), None
    if name == "scalar_tensor.default":
        value = _number(args[0])
        return "full", (value,), [], kw.get("dtype") or torch.get_default_dtype(), None
    if name in ("zeros_like.default", "ones_like.default", "full_like.default"):
        self = args[0]
        value = {"zeros_like": 0, "ones_like": 1}.get(name.split(".")[0])
        if value is None:
            value = _number(args[1] if len(args) > 1 else kw["fill_value"])
        like = self if kw.get("memory_format", torch.preserve_format) == torch.preserve_format \
            else None
        return "full", (value,), list(self.shape), kw.get("dtype") or self.dtype, like
    if name in ("new_zeros.default", "new_ones.default", "new_full.default"):
        self, size = args[0], args[1]
        value = {"new_zeros": 0, "new_ones": 1}.get(name.split(".")[0])
        if value is None:
            value = _number(args[2] if len(args) > 2 else kw["fill_value"])
        return "full", (value,), list(size), kw.get("dtype") or self.dtype, None
    if name.startswith("arange."):
        numbers = [_number(a) for a in args]
        start, end, step = {1: lambda: (0, numbers[0], 1), 2: lambda: (*numbers, 1),
                            3: lambda: tuple(numbers)}[len(numbers)]()
        dtype = kw.get("dtype") or _arange_dtype(start, end, step)
        return "arange", (start, end, step), None, dtype, None
    return None


def call(func, args, kwargs, operators):
    """A callable making the factory's result on tpuBLAS, or None if ``func`` is not a
    factory (or asks for a dtype tpuBLAS cannot make)."""
    request = _request(func, args, kwargs)
    if request is None:
        return None
    kind, numbers, shape, dtype, like = request
    if dtype not in _KERNEL_DTYPES + _VIA_INT32:
        return None
    _check_placement(kwargs)
    kernel_dtype = dtype if dtype in _KERNEL_DTYPES else torch.int32
    if kernel_dtype == torch.int32:
        numbers = tuple(int(n) for n in numbers) if dtype != torch.bool else \
            tuple(int(bool(n)) for n in numbers)
        if any(not _INT32[0] <= n <= _INT32[1] for n in numbers):
            raise UnsupportedError(
                f"tpublas.mode: {_name(func)}: {numbers} do not fit in int32 (tpuBLAS makes "
                f"{dtype} tensors with its int32 kernels)")

    def run():
        if kind == "full" and 0 in shape:
            # No element to fill: an allocation, no kernel (as `empty`).
            if like is not None:
                return torch.empty_like(like, dtype=dtype)
            return torch.empty(shape, dtype=dtype)
        if kind == "full":
            out = operators["full"].default.run_as("torch", shape, numbers[0],
                                                   dtype=kernel_dtype)
        else:
            out = operators["arange"].start_step.run_as("torch", *numbers, dtype=kernel_dtype)
        if out.dtype != dtype:
            out = out.to(dtype)
        if like is not None and not like.is_contiguous():
            out = torch.empty_like(like, dtype=dtype).copy_(out)  # ATen's strides for `like`
        return out

    return run
