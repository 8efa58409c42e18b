"""Per-call and per-trace state shared by the Helion runtime modules.

A kernel call runs the rewritten kernel (host code) with a ``CallState`` installed; each device
loop it reaches is traced with a ``Trace`` installed (``_memory.Trace``). Both live in one
thread-local, so kernels may run concurrently on different threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tpukit.helion import exc
from tpukit.helion._where import where

_local = threading.local()


@dataclass
class CallState:
    """One call of a kernel (``run``) or of ``kernel.lower``/``kernel.ir`` (``lower``)."""

    kernel: object  # the Kernel
    config: dict
    mode: str  # "run" | "lower"
    device: str = "cpu"  # the tpukit device the device loops run on
    counter: int = 0  # next block-size id (Config.block_sizes index)
    lowered: list = field(default_factory=list)  # StableHLO per device loop (lower mode)
    kernels: list = field(default_factory=list)  # tpukit kernel IR per device loop (lower mode)
    sizes: dict = field(default_factory=dict)  # block id -> size used
    site: int | None = None  # the loop whose `hl.tile(...)` is being evaluated
    site_next: int = 0  # how many block ids that evaluation has taken so far
    site_ids: dict = field(default_factory=dict)  # loop site -> its block ids, in order


def current_call() -> CallState:
    st = getattr(_local, "call", None)
    if st is None:
        raise exc.NotInsideKernel(
            "this Helion API is only usable inside a @tpukit.helion.kernel function" + where()
        )
    return st


def current_trace():
    """The ``Trace`` of the device loop being traced, or None on the host."""
    return getattr(_local, "trace", None)


def device_only(name: str) -> None:
    if current_trace() is None:
        raise exc.NotInsideKernel(f"`hl.{name}` can only be used inside a device loop{where()}")


def allocate_block_id() -> int:
    """The next ``Config.block_sizes`` index (order of first appearance).

    As in Helion, a loop's ``hl.tile`` has its block ids once per kernel source location, not
    once per evaluation: a nested loop whose enclosing body is traced twice (whole tiles, then
    the partial last one) or a loop in a host ``for`` reuses the ids it took first."""
    st = current_call()
    if st.site is None:
        i = st.counter
        st.counter += 1
        return i
    ids = st.site_ids.setdefault(st.site, [])
    if st.site_next < len(ids):
        i = ids[st.site_next]
    else:
        i = st.counter
        ids.append(i)
    st.site_next += 1
    st.counter = max(st.counter, i + 1)
    return i


def enter_site(site) -> None:
    """The block ids allocated until ``leave_site`` belong to loop ``site``."""
    st = current_call()
    st.site = site
    st.site_next = 0


def leave_site() -> None:
    current_call().site = None


def configured_block(block_id: int):
    """``Config.block_sizes[block_id]``, or None when the config has no entry for it."""
    bs = current_call().config.get("block_sizes") or []
    if block_id < len(bs) and bs[block_id] is not None:
        v = bs[block_id]
        if isinstance(v, (list, tuple)):  # old nested form [[32, 32], [16]]
            raise exc.InvalidConfig("nested block_sizes lists are not supported; flatten them")
        return int(v)
    return None


def cdiv(a, b):
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()
