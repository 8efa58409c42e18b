"""Tiles: what ``hl.tile``/``hl.grid`` loops iterate over.

``hl.tile(...)`` returns a ``TileSpec`` (the ranges and block sizes of a loop); the runtime turns
it into ``Tile`` objects, one per iteration it traces: a grid tile (the outermost loop, whose
begin is ``program_id * block_size``) or an inner tile (a ``lax.fori_loop`` iteration, or the
statically-sized tail). ``hl.grid`` yields ``GridIndex`` scalars backed by a tile of size 1.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from tpukit.helion import exc
from tpukit.helion._affine import Affine
from tpukit.helion._state import allocate_block_id, cdiv, configured_block
from tpukit.helion._values import DTensor
from tpukit.helion._where import where


class TileSpec:
    """What ``hl.tile(...)`` / ``hl.grid(...)`` returns: the ranges and block sizes of a loop.

    ``explicit[i]`` is the block size given in the program (``block_size=``; 1 for
    ``hl.grid``), else None and ``ids[i]`` is the dimension's ``Config.block_sizes`` index."""

    def __init__(self, kind, begins, ends, block_sizes, multi):
        self.kind = kind  # "tile" | "grid"
        self.begins = begins
        self.ends = ends
        self.multi = multi
        self.explicit = []
        self.ids = []
        for b in block_sizes:
            if b is None and kind == "tile":
                self.ids.append(allocate_block_id())
                self.explicit.append(None)
            else:
                self.ids.append(None)
                self.explicit.append(1 if kind == "grid" else int(b))

    def __iter__(self):
        raise exc.HelionError(
            f"`hl.{self.kind}` must be the iterator of a `for` loop in a @helion.kernel function"
            + where()
        )

    def __len__(self):
        return len(self.begins)

    def block_size(self, i):
        """The program's or the config's block size of dimension ``i``, or None."""
        if self.explicit[i] is not None:
            return self.explicit[i]
        return configured_block(self.ids[i])


def _static_int(v, what):
    if isinstance(v, DTensor):
        return v
    try:
        return int(v)
    except TypeError:
        raise exc.UnsupportedConstruct(f"{what} must be an int{where()}") from None


def _is_seq(v) -> bool:
    return isinstance(v, (list, tuple)) or type(v).__name__ == "Size"


def make_spec(kind, begin_or_end, end_or_none, block_size) -> TileSpec:
    """The ``TileSpec`` of ``hl.tile``/``hl.grid`` called with these arguments (all forms:
    ``(end)``, ``(begin, end)``, ``([m, n])``, ``([b0, b1], [e0, e1])``, ``block_size=``)."""
    if end_or_none is None:
        ends = begin_or_end
        multi = _is_seq(ends)
        ends = list(ends) if multi else [ends]
        begins = [0] * len(ends)
    else:
        multi = _is_seq(begin_or_end)
        begins = list(begin_or_end) if multi else [begin_or_end]
        ends = list(end_or_none) if multi else [end_or_none]
    if block_size is None or kind == "grid":
        blocks = [None] * len(ends)
    else:
        blocks = list(block_size) if _is_seq(block_size) else [block_size]
    if not (len(begins) == len(ends) == len(blocks)):
        raise exc.HelionError(f"hl.{kind}: begin, end and block_size lengths differ{where()}")
    begins = [_static_int(b, f"hl.{kind} begin") for b in begins]
    ends = [_static_int(e, f"hl.{kind} end") for e in ends]
    return TileSpec(kind, begins, ends, blocks, multi)


class TileBound(DTensor):
    """``tile.begin`` / ``tile.end``: a device scalar that remembers its tile."""

    __slots__ = ("tile", "which")

    def __init__(self, a, tile, which):
        super().__init__(a)
        self.tile = tile
        self.which = which


class GridIndex(DTensor):
    """The scalar index ``hl.grid`` yields (a tile of block size 1)."""

    __slots__ = ("tile",)

    def __init__(self, a, tile):
        super().__init__(a)
        self.tile = tile


class Tile:
    """One tile of a ``hl.tile`` loop.

    Invariants: ``begin`` is a Python int or a traced int32 scalar; the values the tile indexes
    have the static extent ``size`` (the block size, or the tail's size for the last tile of an
    inner loop); the valid elements are those with ``begin + i < range_end``. ``partial`` says
    whether a tile of this loop may extend past ``range_end`` (a grid tile whose range the block
    size does not divide, or an inner tile within such a tile): loads through it read 0 there
    and reductions over its dimension ignore those elements (``_values``).

    ``axis`` is the grid axis of a grid tile; ``key`` (``(site, dim)``) names the inner loop
    dimension of an inner tile, for its TPU-legal block size.
    """

    def __init__(self, begin, size, block_size, range_begin, range_end, *, axis=None, key=None,
                 partial=False, window_end=None, count=None, dynamic=False):
        self._begin = begin
        self.size = size
        self.block_size = block_size
        self.range_begin = range_begin
        self.range_end = range_end
        self.axis = axis
        self.key = key
        self.partial = partial
        # the range end is a device value (data-dependent bounds): accesses through the tile
        # are padded by one block past the tensor and their starts clamped (``_memory``)
        self.dynamic = dynamic
        # the largest `begin + size` of any tile of the loop (static): how far accesses reach
        self.window_end = range_end if window_end is None else window_end
        self._count = cdiv(range_end - range_begin, block_size) if count is None else count

    @property
    def begin(self):
        return TileBound(jnp.asarray(self._begin, jnp.int32), self, "begin")

    @property
    def end(self):
        e = jnp.minimum(jnp.asarray(self._begin, jnp.int32) + self.block_size, self.range_end)
        return TileBound(e, self, "end")

    @property
    def index(self):
        """``[begin, begin + 1, …]`` (int32), one per element the tile indexes."""
        form = Affine((self.size,), scalars=((1, self),), strides=(1,))
        return DTensor(self.positions(), dims=(self if self.partial else None,), affine=form)

    @property
    def id(self):
        """``begin // block_size`` (Helion's definition)."""
        return DTensor(jnp.asarray(self._begin, jnp.int32) // self.block_size)

    @property
    def count(self):
        """The number of tiles of the loop (a Python int; for ``tile(t.begin, t.end)`` the
        number in a whole tile ``t``)."""
        return self._count

    def positions(self):
        return jnp.asarray(self._begin, jnp.int32) + lax.iota(jnp.int32, self.size)

    def _inside(self, pos):
        """Whether positions ``pos`` are inside the range: below its end and, for a tile with
        data-dependent bounds (whose tiles are aligned to the block size, so that Mosaic sees
        aligned slice starts), not before its begin."""
        ok = pos < self.range_end
        if self.dynamic:
            ok = ok & (pos >= self.range_begin)
        return ok

    def valid(self):
        """A bool vector: which of the tile's ``size`` elements are inside the range."""
        return self._inside(self.positions())

    def valid_along(self, shape, axis, dims=None):
        """A bool array of ``shape``: whether the element's position along ``axis`` (which
        this tile indexes) is inside the range. Built at full shape from an iota, as Mosaic
        cannot broadcast a bool vector across sublanes of a packed (bf16) value. ``dims``:
        the value's partial tiles, when known (see ``JaggedTile``)."""
        pos = jnp.asarray(self._begin, jnp.int32) + lax.broadcasted_iota(jnp.int32, shape, axis)
        return self._inside(pos)

    def valid_count(self):
        """How many of the tile's elements are inside the range (int32 scalar)."""
        begin = jnp.asarray(self._begin, jnp.int32)
        lo = jnp.maximum(begin, self.range_begin) if self.dynamic else begin
        hi = jnp.minimum(begin + self.size, jnp.asarray(self.range_end, jnp.int32))
        return jnp.clip(hi - lo, 0, self.size)

    def __index__(self):
        return self.size

    def __repr__(self):
        kind = f"grid axis {self.axis}" if self.axis is not None else "inner"
        return f"Tile({kind}, block_size={self.block_size})"

    def __bool__(self):
        return True

    def _misuse(self, *_):
        raise exc.UnsupportedConstruct(
            "a tile used as a value (use `tile.index`, or index a tensor with it)" + where()
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _misuse
    __lt__ = __gt__ = __le__ = __ge__ = _misuse

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from tpukit.helion._values import torch_function

        return torch_function(func, args, kwargs)


class JaggedTile(Tile):
    """A tile of ``hl.jagged_tile(parent)``: a loop to ``parent.amax()`` whose element ``k`` is
    valid for lane ``i`` of the enclosing tiles when ``k < parent[i]`` (``parent``'s axes are
    tiles of enclosing loops). A value's axis of the enclosing tile is found as the nearest
    axes before the jagged one with ``parent``'s extents (Helion's rule: a jagged tile is
    indexed together with its parent axes, outer first); an axis the value's ``dims`` name as
    another partial tile's (say a jagged ``tile_k`` of the same extent) is skipped."""

    def __init__(self, *args, parent, **kwargs):
        super().__init__(*args, **kwargs)
        self.parent = parent

    def valid_along(self, shape, axis, dims=None):
        ends = self.parent.a
        lanes, want = [], list(ends.shape)
        mine = {id(t) for t in self.parent.dims if t is not None}
        for ax in range(axis - 1, -1, -1):
            other = dims[ax] if dims is not None else None
            if other is not None and id(other) not in mine:
                continue  # the axis of another tile
            if want and shape[ax] == want[-1]:
                lanes.insert(0, ax)
                want.pop()
        if want:
            raise exc.UnsupportedConstruct(
                f"a value of shape {tuple(shape)} indexed by a jagged tile without its parent "
                f"tile's axes before it (index with `[tile_b, tile_k]`){where()}"
            )
        view = [1] * len(shape)
        for ax, n in zip(lanes, ends.shape, strict=True):
            view[ax] = n
        ends = jnp.broadcast_to(jnp.reshape(ends.astype(jnp.int32), view), shape)
        pos = jnp.asarray(self._begin, jnp.int32) + lax.broadcasted_iota(jnp.int32, shape, axis)
        return pos < ends

    def valid_count(self):
        raise exc.UnsupportedConstruct(
            "a mean over a jagged tile's dimension (its valid count differs per lane: sum, "
            "then divide by the lengths)" + where()
        )
