"""The kernels tpukit ships (``tpukit list`` from Python)."""

from __future__ import annotations

from dataclasses import dataclass

from tpukit import _arrays, _native


@dataclass(frozen=True)
class Entry:
    name: str
    about: str
    shape: tuple[str, ...]
    dtypes: tuple[str, ...]


def catalog() -> list[Entry]:
    """Every catalog kernel, with the meaning of its problem shape and its dtypes."""
    return [Entry(n, a, tuple(s), tuple(d)) for n, a, s, d in _native.catalog()]


def instantiate(name: str, shape, dtype="f32") -> _native.Kernel:
    """The catalog kernel ``name`` for a problem ``shape`` and ``dtype`` (a name such as
    ``"bf16"`` or a numpy dtype)."""
    if not isinstance(dtype, str):
        dtype = _arrays.dtype_name(dtype)
    kernel, _bindings = _native.instantiate(name, [int(n) for n in shape], dtype)
    return kernel
