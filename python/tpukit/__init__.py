"""tpukit: custom TPU kernels written once, run on the CPU and lowered to Mosaic.

``import tpukit`` needs only numpy. ``tpukit.pallas`` (``custom_kernel``,
``custom_jax_kernel``) also needs JAX; torch is optional everywhere: kernels accept and return
numpy arrays, torch tensors and JAX arrays alike. ``tpukit.tpublas`` holds ATen operators.

At import the package loads the bundle it ships (``tpukit/host.tpkb``, precompiled kernels
for this host, built by ``make setup`` or ``tpukit bundle build -o …``) — memory-mapped,
only its index read — and prepares the JIT, so the first call of a shipped kernel compiles
nothing. ``TPUKIT_BUNDLE=a.tpkb:b.tpkb`` loads those bundles instead (empty: none). A bundle
built for another host or tpukit version is refused with a message, and kernels are
compiled instead. Importing it also tells libtpu, on a host without a TPU, that it is only a
compiler (``tpukit._libtpu``), so lowering a kernel prints nothing.

``tpukit.__version__`` is the version of the native module (the Rust crates' version, which
is also the package's). ``tpukit.cache_stats()`` says where this process's kernels came from.
"""

import os
import pathlib

from tpukit import _libtpu

_libtpu.prepare_environment()  # before anything loads libtpu

from tpukit import _native  # noqa: E402 - after the environment is prepared
from tpukit._native import (  # noqa: E402
    BoundsError,
    DTypeError,
    InternalError,
    Kernel,
    Operand,
    ShapeError,
    TpukitError,
    UnsupportedError,
    __version__,
)
from tpukit.catalog import catalog, instantiate  # noqa: E402
from tpukit.launch import DEVICES, launch  # noqa: E402
from tpukit.stats import CacheStats, cache_stats  # noqa: E402

__all__ = [
    "DEVICES",
    "BoundsError",
    "CacheStats",
    "DTypeError",
    "InternalError",
    "Kernel",
    "Operand",
    "ShapeError",
    "TpukitError",
    "UnsupportedError",
    "__version__",
    "cache_stats",
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
del _libtpu, _native, _start_runtime
