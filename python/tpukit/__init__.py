"""tpukit: custom TPU kernels written once, run on the CPU and lowered to Mosaic.

``import tpukit`` needs only numpy. ``tpukit.pallas`` (``custom_kernel``,
``custom_jax_kernel``) also needs JAX; torch is optional everywhere: kernels accept and return
numpy arrays, torch tensors and JAX arrays alike. ``tpukit.tpublas`` holds ATen operators.

At import the package registers the best bundle it ships that this machine can use — only
its index is read — so the first call of a shipped kernel compiles nothing: ``host.tpkb``
(precompiled kernels tuned for the machine that built the package, by ``make setup``, ``make
wheel`` or ``tpukit bundle build -o …``), else ``x86-64-v3.tpkb`` (the same kernels for the
portable x86-64-v3 baseline, which a wheel carries: any AVX2 machine runs it).
``TPUKIT_BUNDLE=a.tpkb:b.tpkb`` loads those bundles instead (empty: none). If no shipped
bundle fits (another tpukit version, a CPU without AVX2), one message says so and kernels are
compiled instead.

Import does no other work: no thread, no JIT, no heap warm-up, so ``import tpukit`` is cheap
and safe before ``os.fork()``. The worker threads and the JIT start at the first launch (and
again in a forked child); ``tpukit.warm_up()`` starts them ahead of time and brings the
allocator to its steady state (a few ms), which a latency-sensitive first call wants.
Importing it also tells libtpu, on a host without a TPU, that it is only a compiler
(``tpukit._libtpu``), so lowering a kernel prints nothing.

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
    OutOfMemoryError,
    ShapeError,
    TpukitError,
    UnsupportedError,
    __version__,
)
from tpukit.catalog import catalog, instantiate  # noqa: E402
from tpukit.launch import DEVICES, launch  # noqa: E402
from tpukit.stats import CacheStats, cache_stats, torch_interop  # noqa: E402

__all__ = [
    "DEVICES",
    "BoundsError",
    "CacheStats",
    "DTypeError",
    "InternalError",
    "Kernel",
    "Operand",
    "OutOfMemoryError",
    "ShapeError",
    "TpukitError",
    "UnsupportedError",
    "__version__",
    "cache_stats",
    "catalog",
    "instantiate",
    "launch",
    "torch_interop",
    "warm_up",
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


def warm_up() -> None:
    """Prepares the compiled backend ahead of the first launch: the host target, the JIT, the
    worker threads, the allocator, the bundles' warm-up kernel, tpuBLAS's first kernel build.
    Optional (each starts at its first use otherwise); a few milliseconds, which the first
    calls would pay. Call it again after ``os.fork()`` to warm the child."""
    _native.warm_up()
    _native.tpublas_warm_up()


def _register_bundle(native):
    if "TPUKIT_BUNDLE" not in os.environ:  # else the runtime loads those, at first use
        here = pathlib.Path(__file__).parent
        shipped = [here / name for name in ("host.tpkb", "x86-64-v3.tpkb")]
        if candidates := [str(p) for p in shipped if p.exists()]:
            native.register_first_bundle(candidates)


_register_bundle(_native)
del _libtpu, _register_bundle
