"""``helion.autotuner``: the config fragments of ``hl.register_tunable`` and the benchmarking
helper examples import. Autotuning itself is ``Kernel.autotune`` (``tpukit.helion._autotune``);
Helion's search algorithms and caches have no counterpart here."""

from __future__ import annotations

from tpukit.helion.autotuner.config_fragment import (
    BooleanFragment,
    EnumFragment,
    IntegerFragment,
    PowerOfTwoFragment,
    default_of,
)

__all__ = [
    "BooleanFragment",
    "EnumFragment",
    "IntegerFragment",
    "PowerOfTwoFragment",
    "default_of",
]
