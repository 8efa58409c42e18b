"""``hl.arange`` values with static bounds, remembered as such.

``rows = 16 + hl.arange(16)`` indexing a tensor (``A[tile, rows, cols] = v``, as Helion's
linear-attention engine writes its sub-blocks) is the static slice ``16:32``: loaded and stored
as a block, not as a gather at computed indices (which allows one index tensor per access and
costs a one-hot select). Invariant: ``a == arange(start, stop)`` (int32 or the requested
integer dtype); any arithmetic but adding or subtracting a Python int gives a plain value.
"""

from __future__ import annotations

import jax.numpy as jnp

from tpukit.helion._affine import Affine
from tpukit.helion._values import DTensor


class StaticRange(DTensor):
    """``[start, stop)`` with step 1, both Python ints."""

    __slots__ = ("start", "stop")

    def __init__(self, start: int, stop: int, dtype=jnp.int32):
        super().__init__(jnp.arange(start, stop, dtype=dtype),
                         affine=Affine((stop - start,), const=start, strides=(1,)))
        self.start, self.stop = start, stop

    def _shifted(self, k):
        if isinstance(k, int) and not isinstance(k, bool):
            return StaticRange(self.start + k, self.stop + k, self.a.dtype)
        return None

    def __add__(self, other):
        r = self._shifted(other)
        return r if r is not None else DTensor.__add__(self, other)

    def __radd__(self, other):
        r = self._shifted(other)
        return r if r is not None else DTensor.__radd__(self, other)

    def __sub__(self, other):
        r = self._shifted(-other) if isinstance(other, int) else None
        return r if r is not None else DTensor.__sub__(self, other)

    def slice_of(self, extent: int):
        """The static slice ``(start, stop)`` this range selects of a dimension of ``extent``,
        or None when it reaches outside (then it indexes as a gather, out-of-range reading 0)."""
        if 0 <= self.start and self.stop <= extent and self.stop > self.start:
            return self.start, self.stop
        return None
