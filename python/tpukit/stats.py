"""Where this process's compiled kernels came from (``tpukit.cache_stats()``)."""

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
