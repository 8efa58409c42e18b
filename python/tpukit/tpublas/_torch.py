"""tpuBLAS operators as torch custom ops: ``torch.ops.tpublas.<name>.<overload>``.

Each operator is defined with its ATen schema in the ``tpublas`` namespace, with a CPU
kernel that runs tpuBLAS and a fake kernel — ATen's own operator on the fake tensors, its
results made contiguous as tpuBLAS's are — so the ops trace (``torch.compile``,
``torch.export``) with the right shapes and dtypes.
"""

from __future__ import annotations

import torch

_LIBRARY = None


def qualified_name(op) -> str:
    """``add.Tensor``, or ``neg`` for a ``default`` overload (as torch names them)."""
    s = op.schema
    return s.name if s.overload == "default" else f"{s.name}.{s.overload}"


def _cpu_kernel(op):
    def kernel(*args, **kwargs):
        return op(*args, **kwargs)

    kernel.__name__ = qualified_name(op)
    return kernel


def _fake_kernel(aten):
    def fake(*args, **kwargs):
        out = aten(*args, **kwargs)
        if isinstance(out, torch.Tensor):
            return torch.empty_like(out, memory_format=torch.contiguous_format)
        return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in out)

    return fake


def _aten(op):
    packet = getattr(torch.ops.aten, op.schema.name, None)
    return getattr(packet, op.schema.overload, None) if packet is not None else None


def register(packets):
    """Defines every overload of every packet once per process; returns the library."""
    global _LIBRARY
    if _LIBRARY is not None:
        return _LIBRARY
    library = torch.library.Library("tpublas", "DEF")
    for packet in packets.values():
        for op in packet._overloads.values():
            name = qualified_name(op)
            library.define(f"{name}{op.schema.signature}")
            library.impl(name, _cpu_kernel(op), "CPU")
            aten = _aten(op)
            if aten is not None:
                torch.library.register_fake(f"tpublas::{name}", _fake_kernel(aten), lib=library)
    _LIBRARY = library
    return library
