"""``hl.rand`` / ``hl.randint``: counter-based random numbers, reproducible by construction.

As in Helion, a value depends only on the seed and the element's offset: its row-major
position in the logical shape the ``shape`` argument names (a tile counts as the whole range
it tiles, a number as ``range(n)``). So the same seed gives the same numbers whatever the block
sizes, on ``cpu``, ``interpret`` and TPU, and a forward and a backward kernel drawing with one
seed agree (a dropout mask need not be stored). The generator is tpukit's own, not Helion's
Philox: the numbers differ from Helion's and torch's, their distribution does not.

The bits are two rounds of a 32-bit integer mixer (xor-shift-multiply, "lowbias32") over the
offset and the seed, in int32 arithmetic Mosaic lowers (wrapping multiplies; logical shifts
as divisions).
``rand`` keeps the top 24 bits: uniform on ``[0, 1)`` in steps of 2**-24. ``randint`` reduces
31 bits modulo ``high - low`` (a bias below ``(high - low) / 2**31``).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from tpukit.helion import exc
from tpukit.helion._ops import shape_and_dims
from tpukit.helion._tiles import Tile
from tpukit.helion._values import DTensor, unwrap
from tpukit.helion._where import where

_M1 = np.int32(0x7FEB352D)
_M2 = np.int32(0x846CA68B - (1 << 32))  # the same 32 bits, as int32
_GOLDEN = np.int32(0x9E3779B9 - (1 << 32))


_SIGN = np.int32(-(1 << 31))


def _srl(x, n):
    """``x >>> n`` (logical) of int32 bits, from a truncating division: the runtime has no
    shift ops. With the sign bit cleared, ``x ^ INT_MIN`` is the unsigned value less 2**31,
    a multiple of 2**n, so its quotient is the shifted value less 2**(31 - n)."""
    d = np.int32(1 << n)
    neg = lax.div(x ^ _SIGN, d) + np.int32(1 << (31 - n))
    return jnp.where(x < 0, neg, lax.div(x, d))


def _mix(x):
    """A bijective avalanche of 32 bits (xor-shift-multiply)."""
    x = x ^ _srl(x, 16)
    x = x * _M1
    x = x ^ _srl(x, 15)
    x = x * _M2
    return x ^ _srl(x, 16)


def _offsets(shape):
    """The int32 row-major offset of each element of ``shape`` in its logical extent, and the
    partial tiles of its dimensions."""
    entries = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else shape
    sizes, dims = shape_and_dims(entries)
    off = jnp.zeros(sizes, jnp.int32)
    stride = 1
    for d in reversed(range(len(sizes))):
        e = entries[d]
        pos = lax.broadcasted_iota(jnp.int32, sizes, d)
        if isinstance(e, Tile):
            pos = pos + jnp.asarray(e._begin, jnp.int32)
            extent = e.range_end
        else:
            extent = sizes[d]
        off = off + pos * np.int32(stride)
        stride *= int(extent)
    return off, dims


def _bits(shape, seed, what):
    s = unwrap(seed)
    if isinstance(s, (bool, float)) or (hasattr(s, "dtype") and not jnp.issubdtype(
            s.dtype, jnp.integer)):
        raise exc.UnsupportedConstruct(f"`hl.{what}` with a non-integer seed {seed!r}{where()}")
    if hasattr(s, "shape") and tuple(s.shape) not in ((), (1,)):
        raise exc.UnsupportedConstruct(f"`hl.{what}` with a seed of shape {s.shape}{where()}")
    if hasattr(s, "shape"):
        s = jnp.asarray(s).reshape(()).astype(jnp.int32)
    else:  # any Python int: its low 32 bits
        s = np.array(int(s) & 0xFFFFFFFF, np.uint32).view(np.int32)
    off, dims = _offsets(shape)
    key = _mix(jnp.asarray(s, jnp.int32) ^ _GOLDEN)
    return _mix(_mix(off ^ key) + key), dims


def rand(shape, seed, device=None):
    """Uniform f32 on ``[0, 1)`` (see the module doc)."""
    h, dims = _bits(shape, seed, "rand")
    r = _srl(h, 8).astype(jnp.float32) * np.float32(2.0**-24)
    return DTensor(r, dims)


def randint(shape, low, high, seed, device=None):
    """Integers on ``[low, high)`` (int32; see the module doc)."""
    if int(high) <= int(low):
        raise exc.UnsupportedConstruct(f"`hl.randint` with high={high} <= low={low}{where()}")
    h, dims = _bits(shape, seed, "randint")
    r = _srl(h, 1) % np.int32(int(high) - int(low)) + np.int32(low)
    return DTensor(r, dims)
