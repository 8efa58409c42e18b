"""``helion.runtime``: the kernel classes and device queries of Helion's runtime.

``get_num_sm`` (the grid size of a persistent kernel) is 1, as Helion answers for TPU and
Pallas-interpret devices: a TPU v5e/v6e core runs one grid step at a time, so a persistent loop
over ``get_num_sm()`` workers is one program looping over every tile."""

from __future__ import annotations

from tpukit.helion._config import Config
from tpukit.helion._kernel import Kernel, kernel
from tpukit.helion.runtime import settings
from tpukit.helion.runtime.settings import Settings

__all__ = ["Config", "Kernel", "Settings", "get_num_sm", "get_num_xcd", "kernel", "settings"]


def get_num_sm(device=None, *, reserved_sms: int = 0) -> int:
    """Workers for a persistent kernel on ``device``: one TensorCore (``reserved_sms`` must
    leave it)."""
    if reserved_sms != 0:
        raise ValueError(f"reserved_sms={reserved_sms}: the device has one core to give")
    return 1


def get_num_xcd(device=None) -> int:
    """AMD's accelerator complex dies: a TPU chip counts as one."""
    return 1
