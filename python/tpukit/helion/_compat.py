"""``helion._compat``: the feature probes examples call; on tpukit each answers for its backend
(Pallas on TPU, run on the CPU), which has none of the GPU features they test for."""

from __future__ import annotations


def use_tileir_tunables() -> bool:
    """Whether NVIDIA's TileIR tunables apply: never on tpukit."""
    return False


def supports_tensor_descriptor() -> bool:
    """Whether Triton tensor descriptors exist: never on tpukit."""
    return False
