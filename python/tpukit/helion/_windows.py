"""Loads and stores of a flat (1-D) tensor at computed indices that walk rows: windows.

Helion's jagged examples view a ``[N, M]`` tensor flat and index it as

    x_flat[(starts[:, None] + tile_k.index[None, :])[:, :, None] * M + tile_m.index[None, None, :]]

— for each lane ``b`` of a tile, ``K`` consecutive rows from a loaded offset and a tile of
columns. When the index's affine form (``_affine``) has that shape, the tensor is *folded*:
the kernel gets it as ``[rows, 1, M]`` (the rows a leading dimension, so that a window may
start at any row; padded with ``K`` zero rows before and after and its columns to whole
tiles), and each lane reads one window ``ref[pl.ds(row, K), :, pl.ds(col, TM)]`` whose start
row comes from scalar prefetch (SMEM). Stores write their windows back one lane after the
other (read-modify-write, masked). This replaces the one-hot select over the whole table
(``_memory.take``), whose intermediate has ``N·M × indices`` elements.

Exactness: a window row outside the tensor reads the zero padding (the one-hot select reads 0
there too) and a store there lands in padding; a start far outside is clamped into the
padding, where every row of the window is outside the tensor. A column past ``M`` reads the
padding, not the next row: such lanes are past the end of their (partial) column tile and
never observed — except with a jagged column tile whose lengths exceed ``M``, which indexes
past the rows it names (documented in python/tpukit/helion/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
from jax import lax

from tpukit.helion._affine import Affine


@dataclass(frozen=True)
class Window:
    """An index value decomposed as ``row(b) * width + col`` over its axes ``(b, k, m)``:
    ``row = row_const + Σ c·tile.begin + Σ c·S[b] + k`` for the ``k``-th of ``rows`` rows
    (``row_axis``), ``col = col_tile.begin + m`` (the last axis) and ``b`` along
    ``loop_axis`` (the lanes whose start rows come from the index vectors ``sources``)."""

    idx: object  # the DTensor of indices (a one-hot ``take`` when the tensor is not folded)
    width: int
    row_const: int
    row_scalars: tuple  # ((coeff, Tile), ...) in rows
    sources: tuple  # ((coeff, IndexSource), ...) in rows, along loop_axis
    loop_axis: int | None
    row_axis: int | None
    col_tile: object

    @property
    def shape(self) -> tuple:
        return self.idx.shape

    @property
    def lanes(self) -> int:
        return 1 if self.loop_axis is None else self.shape[self.loop_axis]

    @property
    def rows(self) -> int:
        return 1 if self.row_axis is None else self.shape[self.row_axis]

    @property
    def cols(self) -> int:
        return self.shape[-1]


def decompose(idx, form: Affine) -> Window | None:
    """``idx`` (with its affine ``form``) as a ``Window``, or None when it is not one: its
    last axis is a tile of columns (stride 1), the one before (if any, stride ``width``) walks
    rows, the one before that (if any) holds lanes of index-vector offsets, every other axis
    has extent 1, and every other term is a multiple of ``width``."""
    shape, rank = form.shape, len(form.shape)
    if rank == 0 or len(shape) != len(idx.shape):
        return None
    col_terms = [(c, t) for c, t in form.scalars if c == 1 and t.size == shape[-1]]
    if form.strides[-1] != 1 or len(col_terms) != 1 or shape[-1] < 2:
        return None
    col_tile = col_terms[0][1]
    loop_axes = {ax for ax, _, _ in form.rows}
    if len(loop_axes) > 1:
        return None
    loop_axis = next(iter(loop_axes)) if loop_axes else None
    row_axis = rank - 2 if rank >= 2 and form.strides[rank - 2] != 0 else None
    width = form.strides[row_axis] if row_axis is not None else None
    if width is None:
        coeffs = [c for _, c, _ in form.rows] + [c for c, t in form.scalars if t is not col_tile]
        width = coeffs[0] if coeffs else None
    if width is None or width < 2:
        return None
    if loop_axis is not None and loop_axis != (rank - 3 if row_axis is not None else rank - 2):
        return None
    for ax, n in enumerate(shape):
        if ax not in (rank - 1, row_axis, loop_axis) and (n != 1 or form.strides[ax] != 0):
            return None
        if ax == loop_axis and form.strides[ax] != 0:
            return None
    if not col_tile.dynamic and col_tile.range_end > width:
        return None  # valid columns past the row: not a window of rows
    others = [(c, t) for c, t in form.scalars if t is not col_tile]
    if form.const % width or any(c % width for c, _ in others) or any(
            c % width for _, c, _ in form.rows):
        return None
    return Window(idx, width, form.const // width, tuple((c // width, t) for c, t in others),
                  tuple((c // width, src) for _, c, src in form.rows), loop_axis, row_axis,
                  col_tile)


def row_start(trace, w: Window, lane):
    """The first row of lane ``lane``'s window (int32 scalar; rows of the unfolded tensor)."""
    row = jnp.asarray(w.row_const, jnp.int32)
    for c, t in w.row_scalars:
        row = row + c * jnp.asarray(t._begin, jnp.int32)
    for c, src in w.sources:
        row = row + c * trace._index_at(src, lane)
    return row


def window_index(trace, info, w: Window, lane):
    """The ref index of lane ``lane``'s window in the folded layout ``[rows, 1, cols]``."""
    from jax.experimental import pallas as pl

    n_rows = info.shape[0]
    start = jnp.clip(row_start(trace, w, lane), -w.rows, n_rows) + info.front
    col, _ = [], []
    trace._index_dim(info, 1, ("tile", w.col_tile), None, True, col, _)
    return (pl.ds(start, w.rows), slice(None), col[0])


def take(trace, info, w: Window, wide):
    """``flat[idx]`` by windows, as ``wide`` (f32 or i32), in ``idx``'s shape."""
    ref = trace._in_ref(info)
    rows = (w.rows, w.cols)

    def read(lane):
        return jnp.reshape(ref[window_index(trace, info, w, lane)].astype(wide), rows)

    if w.lanes == 1:
        return jnp.reshape(read(0), w.shape)
    full = (w.lanes,) + rows

    def step(lane, acc):
        at = lax.broadcasted_iota(jnp.int32, full, 0) == lane
        return jnp.where(at, jnp.broadcast_to(read(lane)[None], full), acc)

    acc = lax.fori_loop(0, w.lanes, step, jnp.zeros(full, wide))
    return jnp.reshape(acc, w.shape)


def put(trace, info, w: Window, v, keep, wide, pick_row):
    """``flat[idx] = v`` by windows, lane after lane (read-modify-write), where ``keep``
    (None: everywhere); ``v`` and ``keep`` in ``idx``'s shape."""
    ref = trace._out_ref(info)
    full = (w.lanes, w.rows, w.cols)
    win = (w.rows, 1, w.cols)
    vals = jnp.reshape(v.astype(wide), full)
    keeps = None if keep is None else jnp.reshape(keep.astype(jnp.int32), full)

    def write(lane):
        kidx = window_index(trace, info, w, lane)
        old = ref[kidx]
        new = jnp.reshape(pick_row(vals, lane), win)
        if keeps is not None:
            k = jnp.reshape(pick_row(keeps, lane), win) > 0
            new = jnp.where(k, new, old.astype(wide))
        ref[kidx] = new.astype(old.dtype)

    if w.lanes == 1:
        write(0)
        return

    def step(lane, carry):
        write(lane)
        return carry

    lax.fori_loop(0, w.lanes, step, 0)
