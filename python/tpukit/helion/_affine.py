"""Integer index values known as affine forms of tiles and loaded offsets.

A load at computed indices (``x_flat[(starts[:, None] + tile_k.index[None, :]) * M + ...]``)
needs to know where its indices come from to become a real gather rather than a one-hot
select over the whole table (``_memory.take``). Device values built from tile positions,
scalars and index vectors by ``+``, ``-``, ``*`` by a Python int and ``[:, None]``-style
views carry an ``Affine``: their exact value as

    value[i] = const + Σ c·scalar + Σ_axis stride[axis]·i[axis] + Σ c·S[i[axis]]

where a *scalar* is a tile's begin (a traced int32 scalar: the loop counter or program id)
or an integer device scalar of no known form (a loaded offset, ``i % n``: a ``Scalar``), and
``S`` an index vector loaded from a host tensor through a tile (``offsets[tile_b]``),
readable one element at a time from scalar prefetch (SMEM). Any other operation drops the
form (the value is then only an array). ``_memory`` turns a 1-D table indexed by such a
form into windows of rows (``window``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax.numpy as jnp


@dataclass(frozen=True)
class Affine:
    """``value[i] = const + Σ c·tile.begin (scalars) + Σ stride·i + Σ c·S[i[axis]] (rows)``.

    ``scalars`` are ``(coeff, Tile)``; ``rows`` are ``(axis, coeff, IndexSource)``, whose
    vector's element ``i[axis]`` is ``S[i[axis]]``; ``strides`` has one int per axis of
    ``shape`` (an axis of extent 1 has stride 0)."""

    shape: tuple
    const: int = 0
    scalars: tuple = ()
    strides: tuple = ()
    rows: tuple = ()

    def scaled(self, c: int) -> Affine:
        return Affine(self.shape, self.const * c, tuple((k * c, t) for k, t in self.scalars),
                      tuple(s * c for s in self.strides),
                      tuple((ax, k * c, src) for ax, k, src in self.rows))

    def broadcast(self, shape) -> Affine | None:
        """This form at ``shape`` (numpy broadcasting); None if the shapes do not broadcast."""
        off = len(shape) - len(self.shape)
        if off < 0:
            return None
        for n, m in zip(self.shape, shape[off:], strict=True):
            if n not in (1, m):
                return None
        strides = (0,) * off + tuple(
            s if n == m else 0 for s, n, m in zip(self.strides, self.shape, shape[off:],
                                                   strict=True))
        return Affine(tuple(shape), self.const, self.scalars, strides,
                      tuple((ax + off, k, src) for ax, k, src in self.rows))

    def expanded(self, items) -> Affine | None:
        """The form after ``value[items]`` with items among ``None``, ``:`` and ``...``."""
        explicit = sum(1 for it in items if it is not None and it is not Ellipsis)
        remap, shape, strides, d = {}, [], [], 0
        for it in items:
            if it is None:
                shape.append(1)
                strides.append(0)
            elif it is Ellipsis:
                for _ in range(len(self.shape) - explicit):
                    remap[d] = len(shape)
                    shape.append(self.shape[d])
                    strides.append(self.strides[d])
                    d += 1
            elif isinstance(it, slice) and it == slice(None):
                remap[d] = len(shape)
                shape.append(self.shape[d])
                strides.append(self.strides[d])
                d += 1
            else:
                return None
        while d < len(self.shape):
            remap[d] = len(shape)
            shape.append(self.shape[d])
            strides.append(self.strides[d])
            d += 1
        return Affine(tuple(shape), self.const, self.scalars, tuple(strides),
                      tuple((remap[ax], k, src) for ax, k, src in self.rows))


class Scalar:
    """An integer device scalar (0-d ``DTensor``) with no known form, as a term."""

    def __init__(self, value):
        self.value = value


def scalar_value(t):
    """The int32 value of a scalar term (a ``Tile``: its begin; a ``Scalar``: its value)."""
    if isinstance(t, Scalar):
        return t.value.a.astype(jnp.int32)
    return jnp.asarray(t._begin, jnp.int32)


def alignment(form: Affine) -> int:
    """The largest int every value of ``form`` at position 0 is a multiple of, whatever its
    scalars (the gcd of its constant and coefficients, a tile's begin counting as the
    multiple of its block size it is; 0 when all are 0)."""
    g = abs(form.const)
    for c, t in form.scalars:
        g = math.gcd(g, abs(c) * _step(t))
    for _, c, _ in form.rows:
        g = math.gcd(g, abs(c))
    return g


def _step(t) -> int:
    """What every value of scalar ``t`` is a multiple of: for a tile's begin (``range_begin
    + k · block_size``), the gcd of its range's start and its block size when both are
    Python ints; else 1."""
    from tpukit.helion._tiles import Tile

    if isinstance(t, Tile) and isinstance(t.block_size, int) and isinstance(t.range_begin, int):
        return math.gcd(t.block_size, t.range_begin) or 1
    return 1


def add(a: Affine, b: Affine, shape) -> Affine | None:
    """``a + b`` at the broadcast ``shape``."""
    a, b = a.broadcast(shape), b.broadcast(shape)
    if a is None or b is None:
        return None
    return Affine(tuple(shape), a.const + b.const, _merge(a.scalars + b.scalars),
                  tuple(x + y for x, y in zip(a.strides, b.strides, strict=True)),
                  a.rows + b.rows)


def _merge(scalars) -> tuple:
    out: dict = {}
    for k, t in scalars:
        key = id(t.value) if isinstance(t, Scalar) else id(t)
        out[key] = (out.get(key, (0, t))[0] + k, t)
    return tuple(v for v in out.values() if v[0] != 0)


def span(start, stop) -> Affine | None:
    """The form of ``arange(start, stop)`` for slice bounds whose difference is a positive
    constant (``h : h + 1`` with a device scalar ``h``), else None."""
    a, b = of(start if start is not None else 0), of(stop)
    if a is None or b is None or a.shape or b.shape:
        return None
    d = add(b, a.scaled(-1), ())
    if d is None or d.scalars or d.rows or d.const <= 0:
        return None
    return Affine((d.const,), a.const, a.scalars, (1,))


def of(x) -> Affine | None:
    """The affine form of ``x`` (a Python int, a tile bound, an index vector or a device value
    that carries one), else None."""
    from tpukit.helion._tiles import GridIndex, TileBound
    from tpukit.helion._values import DTensor, IndexVector

    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return Affine((), const=x)
    if isinstance(x, TileBound) and x.which == "begin":
        return Affine((), scalars=((1, x.tile),))
    if isinstance(x, GridIndex):
        return Affine((), scalars=((1, x.tile),))
    if isinstance(x, IndexVector):
        if len(x.shape) != 1 or x.source is None:
            return None
        return Affine(x.shape, strides=(0,), rows=((0, 1, x.source),))
    if isinstance(x, DTensor):
        if x.affine is None and x.ndim == 0 and jnp.issubdtype(x.a.dtype, jnp.integer):
            return Affine((), scalars=((1, Scalar(x)),))
        return x.affine
    return None


def binary(op: str, x, y, shape) -> Affine | None:
    """The form of ``x op y`` (``op``: add, sub, mul), when both have one (``mul``: one of
    them a Python int)."""
    fx, fy = of(x), of(y)
    if fx is None or fy is None:
        return None
    if op == "add":
        return add(fx, fy, shape)
    if op == "sub":
        return add(fx, fy.scaled(-1), shape)
    if op == "mul":
        if isinstance(y, int) and not isinstance(y, bool):
            return fx.scaled(y).broadcast(shape)
        if isinstance(x, int) and not isinstance(x, bool):
            return fy.scaled(x).broadcast(shape)
    return None
