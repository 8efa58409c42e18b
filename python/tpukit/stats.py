"""Where this process's compiled kernels came from (``tpukit.cache_stats()``), and how its
torch tensors cross into tpukit (``tpukit.torch_interop()``)."""

from typing import NamedTuple

from tpukit import _native


class CacheStats(NamedTuple):
    """Counts since the process started, of kernels the CPU backend needed: ``compiled`` (by
    LLVM, here), ``disk_hits`` (from ``TPUKIT_CACHE_DIR``), ``bundle_hits`` (precompiled, from a
    loaded bundle) and ``damaged`` (disk-cache entries refused as damaged, then compiled)."""

    compiled: int
    disk_hits: int
    bundle_hits: int
    damaged: int


def cache_stats() -> CacheStats:
    """This process's :class:`CacheStats` (a tuple: ``compiled, disk, bundle, damaged``)."""
    return CacheStats(*_native.cache_stats())


def torch_interop() -> str | None:
    """How torch tensors cross into tpukit and back in this process: ``"exchange"`` (torch's
    DLPack C exchange API: one C call a tensor each way) or ``"capsule"`` (``to_dlpack`` and
    ``from_dlpack``: a torch without that API, or ``TPUKIT_TORCH_EXCHANGE=0`` when torch was
    first read); None before torch is imported."""
    return _native.torch_interop()
