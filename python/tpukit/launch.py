"""Running a native kernel on arrays of any kind."""

from __future__ import annotations

import sys

from tpukit import _arrays, _native
from tpukit._native import Kernel

DEVICES = tuple(_native.devices())  # the default first


def check_device(device: str) -> str:
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r} (expected one of {', '.join(DEVICES)})")
    return device


def launch(kernel: Kernel, *arrays, device: str = "cpu", outputs=None):
    """Runs ``kernel`` on ``arrays`` (its scalar-prefetch operands, then its inputs).

    Returns a list of new output arrays of the first array's kind (numpy for a kernel of no
    array operands, such as one that only writes iotas). ``outputs``, if given, are the
    outputs' initial contents (for kernels that read their outputs, as aliased Pallas outputs
    do).

    Called with JAX tracers (inside ``jax.jit``, ``vmap``, a ``scan`` body), the kernel is one
    custom call in the traced program (see ``tpukit._custom_call``): on the CPU it runs on
    ``device``; exported for a TPU it is tpukit's Mosaic of the kernel.
    """
    check_device(device)
    if "jax" in sys.modules:
        from tpukit import _custom_call

        if _custom_call.traced(arrays):
            if outputs is not None:
                raise TypeError(f"kernel `{kernel.name}`: outputs= is for arrays, not tracers")
            return _custom_call.call(kernel, arrays, device)
    k = _arrays.kind(arrays[0]) if arrays else "numpy"
    wires = [_arrays.to_wire(_arrays.to_numpy(a)) for a in arrays]
    out_wires = None
    if outputs is not None:
        out_wires = [_arrays.to_wire(_arrays.to_numpy(a)) for a in outputs]
    results = kernel.launch(device, wires, out_wires)
    like = arrays[0] if arrays else None
    return [_arrays.to_kind(_arrays.from_wire(w), k, like) for w in results]
