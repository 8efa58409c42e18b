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
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpukit.helion._affine import Affine, alignment, scalar_value
from tpukit.helion._tiles import Tile


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
    col_terms = [(c, t) for c, t in form.scalars
                 if c == 1 and isinstance(t, Tile) and t.size == shape[-1]]
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
        row = row + c * scalar_value(t)
    for c, src in w.sources:
        row = row + c * trace._index_at(src, lane)
    return row


def window_index(trace, info, w: Window, lane):
    """The ref index of lane ``lane``'s window in the folded layout ``[rows, 1, cols]``."""
    n_rows = info.shape[0]
    start = jnp.clip(row_start(trace, w, lane), -w.rows, n_rows) + info.front(0)
    col, _ = [], []
    trace._index_dim(info, 1, ("tile", w.col_tile), None, True, col, _)
    return (pl.ds(start, w.rows), slice(None), col[0])


def take(trace, info, w: Window, wide):
    """``flat[idx]`` by windows, as ``wide`` (f32 or i32), in ``idx``'s shape: each lane's
    window is copied into a scoped VMEM buffer ``[lanes, rows, cols]``, then read whole."""
    ref = trace._in_ref(info)
    rows = (w.rows, w.cols)

    def read(lane):
        return jnp.reshape(ref[window_index(trace, info, w, lane)].astype(wide), rows)

    if w.lanes == 1:
        return jnp.reshape(read(0), w.shape)

    def gather(buf):
        def step(lane, carry):
            buf[lane] = read(lane)
            return carry

        lax.fori_loop(0, w.lanes, step, 0)
        return buf[...]

    acc = pl.run_scoped(gather, pltpu.VMEM((w.lanes,) + rows, wide))
    return jnp.reshape(acc, w.shape)


def put(trace, info, w: Window, v, keep, wide):
    """``flat[idx] = v`` by windows, lane after lane (read-modify-write), where ``keep``
    (None: everywhere); ``v`` and ``keep`` in ``idx``'s shape, staged in scoped VMEM buffers
    from which each lane reads its window's values."""
    ref = trace._out_ref(info)
    full = (w.lanes, w.rows, w.cols)
    win = (w.rows, 1, w.cols)
    vals = jnp.reshape(v.astype(wide), full)
    keeps = jnp.reshape((jnp.ones(v.shape, jnp.int32) if keep is None
                         else keep.astype(jnp.int32)), full)

    def scatter(vbuf, kbuf):
        vbuf[...] = vals
        kbuf[...] = keeps

        def step(lane, carry):
            kidx = window_index(trace, info, w, lane)
            old = ref[kidx]
            new = jnp.reshape(vbuf[lane], win)
            k = jnp.reshape(kbuf[lane], win) > 0
            ref[kidx] = jnp.where(k, new, old.astype(wide)).astype(old.dtype)
            return carry

        lax.fori_loop(0, w.lanes, step, 0)

    pl.run_scoped(scatter, pltpu.VMEM(full, wide), pltpu.VMEM(full, jnp.int32))


@dataclass(frozen=True)
class DSlice:
    """A dimension indexed by ``start + arange(size)`` with a device-value ``start`` (an affine
    ``form`` of stride 1 with scalars): a dynamic slice. ``align``: what ``start`` is always
    a multiple of (on a last dimension, of 128: Mosaic slices lanes at aligned starts)."""

    form: Affine
    dims: tuple  # the partial tiles of the indices (one)
    size: int
    align: int


def as_slice(idx, extent: int, last: bool):
    """The entry for a dimension (of ``extent``; ``last``: the kernel array's last) indexed by
    ``idx``: a tile when ``idx`` is ``tile.index``, a ``dslice`` when it is a scalar plus a
    range, else None (a one-hot ``take``)."""
    form = idx.affine
    if form is None or len(form.shape) != 1 or form.strides != (1,) or form.rows:
        return None
    n = form.shape[0]
    if not form.scalars:
        return None
    if form.const == 0 and len(form.scalars) == 1:
        c, t = form.scalars[0]
        if c == 1 and isinstance(t, Tile) and t.size == n:
            return ("tile", t)
    align = alignment(form)
    if last and (align % 128 or n % 128):
        return None
    return ("dslice", DSlice(form, idx.dims, n, 128 if last else 1))


def slice_index(ds: DSlice, extent: int, front: int):
    """The ref index of a ``dslice`` in a dimension padded with ``front`` zeros before and
    enough after (``_plan._padding``): a start outside ``[-size, extent]`` is clamped there
    (every position of the slice stays outside the tensor, reading zeros)."""
    start = jnp.asarray(ds.form.const, jnp.int32)
    for c, t in ds.form.scalars:
        start = start + c * scalar_value(t)
    a = ds.align
    if a == 1:
        return pl.ds(jnp.clip(start, -ds.size, extent) + front, ds.size)
    # a visible product of the alignment (both Mosaic lowerings prove aligned lane slices so);
    # `start` is a multiple of `a`, as are the bounds and `front`: the division is exact
    block = jnp.clip(start // a, -ds.size // a, -(-extent // a)) + front // a
    return pl.ds(pl.multiple_of(block * a, a), ds.size)
