"""tpukit: custom TPU kernels written once, run on the CPU and lowered to Mosaic.

``import tpukit`` needs only numpy. ``tpukit.pallas`` (``custom_kernel``,
``custom_jax_kernel``) also needs JAX; torch is optional everywhere: kernels accept and return
numpy arrays, torch tensors and JAX arrays alike. ``tpukit.tpublas`` holds ATen operators.

At import the package loads the bundle it ships (``tpukit/host.tpkb``, precompiled kernels
for this host, built by ``make setup`` or ``tpukit bundle build -o …``) — memory-mapped,
only its index read — and prepares the JIT, so the first call of a shipped kernel compiles
nothing. ``TPUKIT_BUNDLE=a.tpkb:b.tpkb`` loads those bundles instead (empty: none). A bundle
built for another host or tpukit version is refused with a message, and kernels are
compiled instead.
"""

import os
import pathlib

from tpukit import _native
from tpukit._native import (
    BoundsError,
    DTypeError,
    InternalError,
    Kernel,
    Operand,
    OutOfMemoryError,
    ShapeError,
    TpukitError,
    UnsupportedError,
)
from tpukit.catalog import catalog, instantiate
from tpukit.launch import DEVICES, launch

__all__ = [
    "DEVICES",
    "BoundsError",
    "DTypeError",
    "InternalError",
    "Kernel",
    "Operand",
    "OutOfMemoryError",
    "ShapeError",
    "TpukitError",
    "UnsupportedError",
    "catalog",
    "instantiate",
    "launch",
    "pallas",
    "helion",
    "tpublas",
]


def __getattr__(name):
    # `tpukit.pallas` imports JAX, so it loads on first use rather than with `import tpukit`.
    if name in ("pallas", "helion", "tpublas"):
        import importlib

        return importlib.import_module(f"tpukit.{name}")
    raise AttributeError(f"module 'tpukit' has no attribute {name!r}")


def _start_runtime(native):
    if "TPUKIT_BUNDLE" not in os.environ:  # else the runtime loads those, at first use
        shipped = pathlib.Path(__file__).with_name("host.tpkb")
        if shipped.exists():
            native.register_bundle(str(shipped))
    native.warm_up()


_start_runtime(_native)
del _native, _start_runtime
