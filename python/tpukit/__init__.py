"""tpukit: custom TPU kernels written once, run on the CPU and lowered to Mosaic.

``import tpukit`` needs only numpy. ``tpukit.pallas`` (``custom_kernel``,
``custom_jax_kernel``) also needs JAX; torch is optional everywhere: kernels accept and return
numpy arrays, torch tensors and JAX arrays alike.
"""

from tpukit import _native
from tpukit._native import Kernel, TpukitError, UnsupportedError
from tpukit.catalog import catalog, instantiate
from tpukit.launch import launch

__all__ = [
    "Kernel",
    "TpukitError",
    "UnsupportedError",
    "catalog",
    "instantiate",
    "launch",
    "pallas",
]


def __getattr__(name):
    # `tpukit.pallas` imports JAX, so it loads on first use rather than with `import tpukit`.
    if name in ("pallas", "helion"):
        import importlib

        return importlib.import_module(f"tpukit.{name}")
    raise AttributeError(f"module 'tpukit' has no attribute {name!r}")


del _native
