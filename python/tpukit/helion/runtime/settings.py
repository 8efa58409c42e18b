"""``helion.runtime.settings``: a kernel's settings."""

from __future__ import annotations

import enum


class RefMode(enum.Enum):
    """Helion's reference (eager PyTorch) mode; tpukit always compiles (``OFF``)."""

    OFF = "off"
    EAGER = "eager"


class Settings:
    """``helion.Settings(**kw)``: keyword settings kept as attributes. tpukit reads
    ``device`` ("cpu" or "interpret", its own), ``static_shapes`` (every signature is its own
    specialization either way) and ``autotune_effort`` (``"none"``: no autotuning among
    ``configs``); the others (``ignore_warnings``, ``index_dtype``, …) are accepted and
    ignored."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


def _get_backend() -> str:
    """The code generation backend: tpukit's Helion always produces Pallas kernels."""
    return "pallas"
