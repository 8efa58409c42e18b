"""Host tensors seen from device code: indexing records accesses, then emits ref reads/writes.

Device code indexes host tensors (``x[tile_m, :]``, ``out[tile] = v``, ``hl.atomic_add``). Each
top-level device loop is traced by a ``Trace``:

* in ``analyze`` mode (under ``jax.eval_shape``) an access only records how each dimension is
  indexed (an ``Access``; ``_plan`` decides blocks, roles and layouts from them) and returns a
  value of the right shape;
* in ``emit`` mode (inside the Pallas kernel body) an access reads or writes the tensor's ref
  as the plan laid it out (``HostInfo``: padding, inserted unit dimensions, blocks).

Index entries, one per indexed dimension: ``("tile", Tile)``, ``("grid", Tile)`` (a
``hl.grid`` index: one element), ``("full",)``, ``("slice", a, b)``, ``("int", i)``,
``("dyn", DTensor)`` (a device scalar), ``("gather", IndexVector)`` (a vector of indices loaded
from another host tensor), ``("take", DTensor)`` (a computed integer tensor of indices:
``t[tile.index + 1]``, ``t[base + tile.index]``, ``t[idx[tile] * n + k]``; a one-hot select
over the whole dimension, ``take``) and ``("new",)`` (``None``: a new unit dimension).

Semantics kept from Helion: elements of a partial tile past the end are not written, and
never observed: every value carries its partial tiles (``DTensor.dims``) and every operation
that combines elements along a dimension (reductions, scans, matmul contractions,
``hl.reduce``) first replaces them by its identity, so loads need no mask (Helion's
``other=0``; on a TPU those elements of an edge block are unspecified). A load with
``extra_mask`` reads 0 where the mask is false and a store with it leaves those elements
unchanged; ``hl.atomic_add`` adds into the target and returns the values it held. Gathers and
scatters read their indices from scalar prefetch (SMEM), one row at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from tpukit import _arrays
from tpukit.helion import _affine, _windows, exc
from tpukit.helion._ranges import StaticRange
from tpukit.helion._state import current_trace
from tpukit.helion._tiles import GridIndex, Tile
from tpukit.helion._values import MIXED, DTensor, IndexVector, is_float, lowest, select, unwrap
from tpukit.helion._where import where

ATOMIC_SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")


@dataclass
class Access:
    """One indexing of a host tensor: ``kind`` is ``load``, ``index`` (a load whose value
    indexes another tensor), ``store`` or ``rmw`` (reads then writes: ``hl.atomic_add``, a
    store with ``extra_mask``)."""

    entries: list
    kind: str
    where: str


@dataclass
class IndexSource:
    """Where an ``IndexVector`` came from: ``info[entries]``, whose one tile entry (at logical
    dimension ``dim``) is ``tile``."""

    info: HostInfo
    entries: list
    tile: Tile
    dim: int


@dataclass
class HostInfo:
    """A host tensor used by a device loop: what the analysis saw, then how the plan lays it
    out for the kernel (``_plan.layout``)."""

    obj: object  # the tensor, while the loop is planned and traced (then released)
    name: str
    shape: tuple
    dtype: np.dtype
    key: int = 0  # id() of the tensor of the call that planned the loop
    accesses: list = field(default_factory=list)
    value_used: bool = False  # an index vector loaded from it was used as a value
    # decided by the plan, per logical dimension:
    pad: tuple = ()  # padded extent (>= shape)
    units: tuple = ()  # unit dimensions inserted after it (0, 1 or 2)
    blocked: tuple = ()  # the grid axis blocking it, or None
    squeezed: tuple = ()  # blocked by a hl.grid axis (no block dimension)
    flat: tuple = ()  # a 1-D tensor folded into rows (``_windows``): its shape (``shape`` is
    # then the folded one)
    fronts: tuple = ()  # per dimension, the zero elements padded before its first element
    # (dynamic windows and slices may start before it; empty: none)
    # roles
    is_input: bool = False
    is_output: bool = False
    is_prefetch: bool = False
    init: str | None = None  # how an input+output block starts: "step" | "first"
    init_axes: tuple = ()  # for "first": the grid axes whose first step initialises it

    def front(self, d: int) -> int:
        return self.fronts[d] if self.fronts else 0

    @property
    def kshape(self) -> tuple:
        """The shape of the array the kernel gets (padded, with the unit dimensions)."""
        out = []
        for n, u in zip(self.pad, self.units, strict=True):
            out.append(n)
            out.extend([1] * u)
        return tuple(out)


class TensorProxy:
    """A host tensor (torch tensor / numpy array) as device code sees it: indexing it with
    tiles loads and stores blocks."""

    def __init__(self, info: HostInfo, trace):
        self._info = info
        self._trace = trace

    @property
    def shape(self):
        return self._info.obj.shape

    @property
    def dtype(self):
        return getattr(self._info.obj, "dtype", None)

    @property
    def ndim(self):
        return len(self._info.flat or self._info.shape)

    @property
    def device(self):
        return getattr(self._info.obj, "device", "cpu")

    def size(self, dim=None):
        s = self._info.obj.shape
        return tuple(s) if dim is None else s[dim]

    def dim(self):
        return len(self._info.shape)

    def stride(self, dim=None):
        return self._info.obj.stride(dim) if dim is not None else self._info.obj.stride()

    def numel(self):
        return math.prod(self._info.flat or self._info.shape)

    def __getitem__(self, index):
        return self._trace.load(self._info, index)

    def __setitem__(self, index, value):
        self._trace.store(self._info, index, value)

    def __repr__(self):
        return f"TensorProxy({self._info.name}, shape={self._info.shape})"

    def __getattr__(self, name):
        from tpukit.helion._ops import NEW

        if name in NEW:  # `weight.new_zeros(n)`: a device value of weight's dtype
            return lambda *args, **kwargs: NEW[name](self, *args, **kwargs)
        raise exc.UnsupportedConstruct(
            f"`{self._info.name}.{name}` on a host tensor in device code (load a tile first, "
            f"e.g. `{self._info.name}[tile]`){where()}"
        )

    def _misuse(self, *_):
        raise exc.UnsupportedConstruct(
            f"host tensor `{self._info.name}` used directly in device code (index it with "
            f"tiles, e.g. `{self._info.name}[tile]`){where()}"
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _misuse
    __truediv__ = __rtruediv__ = __matmul__ = __rmatmul__ = __neg__ = _misuse

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        from tpukit.helion._values import torch_function

        return torch_function(func, args, kwargs)


def proxy_for(obj):
    """The proxy of a host tensor met in device code (a closure, a global, ``hl.load``)."""
    if isinstance(obj, TensorProxy):
        return obj
    trace = current_trace()
    if trace is None:
        raise exc.NotInsideKernel("host tensor indexed with a tile outside a device loop")
    return trace.proxy(obj, name=None)


def load(tensor, index, extra_mask=None):
    """``hl.load``: ``tensor[index]`` (masked-off elements read 0)."""
    p = proxy_for(tensor)
    return p._trace.load(p._info, index, extra_mask)


def store(tensor, index, value, extra_mask=None):
    """``hl.store``: ``tensor[index] = value`` (masked-off elements keep their value)."""
    p = proxy_for(tensor)
    p._trace.store(p._info, index, value, extra_mask)


def atomic_add(target, index, value, sem):
    """``hl.atomic_add``: ``target[index] += value``, returning the previous values."""
    return atomic(target, index, value, sem, "add")


def atomic(target, index, value, sem, op):
    """``hl.atomic_<op>``: ``target[index] = op(target[index], value)``, returning the previous
    values (``ATOMIC_OPS``)."""
    p = proxy_for(target)
    return p._trace.atomic(p._info, index, value, sem, op)


def is_host_array(x) -> bool:
    try:
        _arrays.kind(x)
        return True
    except TypeError:
        return False


# Integer dtypes the runtime has no arrays of travel as int32: uint8 widened (exactly), int64
# narrowed (checked to fit when the kernel runs: ``_plan.to_kernel``).
_WIDENED = ("uint8", "int64")


def host_dtype(obj) -> np.dtype:
    """The dtype a host tensor has in the kernel (see ``_WIDENED``)."""
    if str(obj.dtype).removeprefix("torch.") in _WIDENED:
        return np.dtype(np.int32)
    d = _arrays.numpy_dtype(obj.dtype)
    if d == np.dtype(np.float64):
        raise exc.HelionError(
            "float64 tensors are not supported on TPU (tpukit supports "
            f"{_arrays.SUPPORTED}; uint8 and int64 travel as int32)"
        )
    _arrays.dtype_name(d)
    return d


def _is_point(e) -> bool:
    return e[0] in ("int", "grid", "dyn")


def logical_dims(entries):
    """The entries that index a dimension of the tensor (all but ``("new",)``)."""
    return [e for e in entries if e[0] != "new"]


class Trace:
    """One trace of a device loop: ``analyze`` (records accesses) or ``emit`` (Pallas refs).

    ``masks`` says whether partial tiles are masked (off in the first analysis, whose block
    sizes are provisional); ``inner_sizes`` are the plan's inner-loop block sizes."""

    def __init__(self, mode, plan, *, masks=True, inner_sizes=None):
        self.mode = mode
        self.plan = plan
        self.masks = masks
        self.inner_sizes = inner_sizes or {}
        # (site, dim) -> (static extent, block size) of every inner loop dimension entered
        self.inner_loops: dict = {}
        self.infos: dict[int, HostInfo] = plan.infos if mode == "emit" else {}
        self.order: list[int] = plan.order if mode == "emit" else []
        self.refs: dict[int, tuple] = {}  # id -> (in_ref, out_ref, prefetch_ref)

    def proxy(self, obj, name):
        key = id(obj)
        info = self.infos.get(key)
        if info is None:
            if self.mode == "emit":
                raise exc.HelionError(
                    f"host tensor {name or ''} was not seen while analysing the kernel"
                )
            info = HostInfo(obj, name or f"captured_{len(self.infos)}", tuple(obj.shape),
                            host_dtype(obj), key)
            self.infos[key] = info
            self.order.append(key)
        return TensorProxy(info, self)

    # --- index entries -----------------------------------------------------------------------

    def entries(self, info: HostInfo, index) -> list:
        if info.flat:  # folded (emit): the user's index is into the flat tensor
            return self.entries(_Unfolded(info), index)
        items = index if isinstance(index, tuple) else (index,)
        flat = []
        for it in items:
            if isinstance(it, (tuple, list)) and all(isinstance(t, Tile) for t in it):
                flat.extend(it)
            else:
                flat.append(it)
        rank = len(info.shape)
        used = sum(1 for it in flat if it is not None and it is not Ellipsis)
        if used > rank:
            raise exc.UnsupportedConstruct(
                f"too many indices for `{info.name}` of rank {rank}{where()}"
            )
        out = []
        for it in flat:
            d = len(logical_dims(out))
            if it is Ellipsis:
                out.extend([("full",)] * (rank - used))
                used = rank
            elif it is None:
                out.append(("new",))
            else:
                out.append(self._entry(info, it, d))
        out.extend([("full",)] * (rank - len(logical_dims(out))))
        if sum(1 for e in out if e[0] in ("gather", "take")) > 1:
            raise exc.UnsupportedConstruct(
                f"indexing `{info.name}` with several index tensors (one gather per access)"
                f"{where()}"
            )
        if len(out) == 1 and out[0][0] == "take" and out[0][1].affine is not None:
            w = _windows.decompose(out[0][1], out[0][1].affine)
            if w is not None:
                return [("window", w)]
        return out

    def _entry(self, info, it, d):
        if isinstance(it, Tile):
            return ("tile", it)
        if isinstance(it, GridIndex):
            return ("grid", it.tile)
        if isinstance(it, slice):
            return self._slice_entry(info, it, d)
        if isinstance(it, (int, np.integer)):
            return ("int", int(it) % info.shape[d])
        if isinstance(it, IndexVector) and d < len(info.shape) - 1:
            return ("gather", it)
        if isinstance(it, StaticRange) and it.slice_of(info.shape[d]) is not None:
            return ("slice", *it.slice_of(info.shape[d]))
        if isinstance(it, DTensor) and it.ndim == 0:
            return ("dyn", it)
        if isinstance(it, DTensor):
            if not jnp.issubdtype(it.a.dtype, jnp.integer):
                raise exc.UnsupportedConstruct(
                    f"indexing `{info.name}` with a tensor of dtype {it.a.dtype} (indices must "
                    f"be integers; use `torch.where` to select with a mask){where()}"
                )
            entry = _windows.as_slice(it, info.shape[d], d == len(info.shape) - 1)
            return entry if entry is not None else ("take", it)
        raise exc.UnsupportedConstruct(f"index {type(it).__name__} on `{info.name}`{where()}")

    @staticmethod
    def _slice_entry(info, it, d):
        if any(isinstance(v, DTensor) for v in (it.start, it.stop, it.step)):
            form = _affine.span(it.start, it.stop) if it.step in (None, 1) else None
            if form is not None:  # `t[h : h + 1]`: a dynamic slice of static size
                d_last = d == len(info.shape) - 1
                n = form.shape[0]
                if not d_last or (_affine.alignment(form) % 128 == 0 and n % 128 == 0):
                    return ("dslice", _windows.DSlice(form, (None,), n, 128 if d_last else 1))
            raise exc.UnsupportedConstruct(
                f"a slice of `{info.name}` with bounds that are device values (supported: "
                f"`h : h + n` with a Python int `n`, on the last dimension at starts and of "
                f"lengths that are multiples of 128; else index with the scalar, "
                f"`{info.name}[h]`, or with a tile){where()}"
            )
        if it == slice(None):
            return ("full",)
        if all(isinstance(v, (int, type(None))) for v in (it.start, it.stop)) and (
            it.step in (None, 1)
        ):
            a, b, _ = it.indices(info.shape[d])
            return ("slice", a, b)
        raise exc.UnsupportedConstruct(
            f"slice {it} indexing `{info.name}` (static slices only){where()}"
        )

    @staticmethod
    def value_shape(info, entries, with_new=True) -> tuple:
        """The shape of ``info[entries]`` (numpy rules; a gather's rows in its place)."""
        shape, d = [], 0
        for e in entries:
            k = e[0]
            if k == "new":
                if with_new:
                    shape.append(1)
                continue
            if k == "tile":
                shape.append(e[1].size)
            elif k == "gather":
                shape.append(e[1].shape[0])
            elif k in ("take", "window"):
                shape.extend(e[1].shape)
            elif k == "dslice":
                shape.append(e[1].size)
            elif k == "full":
                shape.append(info.shape[d])
            elif k == "slice":
                shape.append(e[2] - e[1])
            d += 1
        return tuple(shape)

    def _value_dims(self, entries, with_new=True) -> tuple:
        """The partial tiles of ``info[entries]``'s dimensions."""
        dims = []
        for e in entries:
            k = e[0]
            if k == "new" and with_new:
                dims.append(None)
            elif k == "tile":
                dims.append(e[1] if e[1].partial else None)
            elif k == "gather":
                t = e[1].source.tile
                dims.append(t if t.partial else None)
            elif k in ("take", "window"):
                dims.extend(e[1].idx.dims if k == "window" else e[1].dims)
            elif k == "dslice":
                dims.extend(e[1].dims)
            elif k in ("full", "slice"):
                dims.append(None)
        return tuple(dims)

    # --- accesses ------------------------------------------------------------------------------

    def _record(self, info, entries, kind):
        if self.mode == "analyze":
            info.accesses.append(Access(entries, kind, where()))

    def load(self, info: HostInfo, index, extra_mask=None):
        entries = self.entries(info, index)
        shape = self.value_shape(info, entries)
        dims = self._value_dims(entries)
        source = self._index_source(info, entries, shape, extra_mask)
        self._record(info, entries, "index" if source is not None else "load")
        if self.mode == "analyze":
            a = jnp.zeros(shape, info.dtype)
            if source is not None:
                return IndexVector(a, dims, source, shape, info.dtype)
            return DTensor(a, dims)
        if source is not None and not info.is_input:
            # only ever used to index: it lives in SMEM (scalar prefetch), not in VMEM
            return IndexVector(None, dims, source, shape, info.dtype)
        if any(e[0] == "gather" for e in entries):
            v = self._gather(info, entries, shape)
        elif any(e[0] == "take" for e in entries):
            v = self._take(info, entries)
        elif entries[0][0] == "window":
            w = entries[0][1]
            if info.flat:
                v = _windows.take(self, info, w, _wide(info.dtype)).astype(info.dtype)
            else:
                v = self._take(info, [("take", w.idx)])
        else:
            v = self._read(info, entries, shape)
        mask = _bounds_mask(dims, v.shape, extra_mask)
        if mask is not None:
            v = select(mask, v, jnp.zeros((), v.dtype))
        if source is not None:
            return IndexVector(v, dims, source, shape, info.dtype)
        return DTensor(v, dims)

    def _index_source(self, info, entries, shape, extra_mask):
        """An ``IndexSource`` when ``info[entries]`` can serve as gather indices: an integer
        vector indexed by one tile, every other dimension by a single element."""
        tiles = [(d, e[1]) for d, e in enumerate(logical_dims(entries)) if e[0] == "tile"]
        points = all(e[0] in ("tile", "int", "grid", "dyn") for e in logical_dims(entries))
        if (len(shape) != 1 or len(tiles) != 1 or not points or extra_mask is not None
                or not np.issubdtype(info.dtype, np.integer)):
            return None
        d, t = tiles[0]
        return IndexSource(info, entries, t, d)

    def store(self, info: HostInfo, index, value, extra_mask=None):
        entries = self.entries(info, index)
        v = self._store_value(info, entries, value)
        dims = self._value_dims(entries, with_new=False)
        if any(getattr(t, "dynamic", False) for t in dims):
            extra_mask = _bounds_mask(dims, v.shape, extra_mask)
        taking = any(e[0] in ("take", "window") for e in entries)
        kind = "store" if extra_mask is None and not taking else "rmw"
        self._record(info, entries, kind)
        if self.mode == "analyze":
            return
        if entries[0][0] == "window" and info.flat:
            _windows.put(self, info, entries[0][1], v, _keep(v, dims, extra_mask),
                         _wide(info.dtype))
            return
        if entries[0][0] == "window":
            entries = [("take", entries[0][1].idx)]
        if taking:
            self._put(info, entries, v, dims, extra_mask)
            return
        if any(e[0] == "gather" for e in entries):
            self._scatter(info, entries, v, lambda old, new: new, extra_mask)
            return
        if extra_mask is not None:
            old = self._read(info, entries, v.shape, from_output=True)
            v = select(unwrap(extra_mask), v, old)
        self._write(info, entries, v)

    def atomic(self, info: HostInfo, index, value, sem, op):
        if sem not in ATOMIC_SEMANTICS:
            raise exc.HelionError(
                f"hl.atomic_{op}: sem={sem!r} (expected one of {', '.join(ATOMIC_SEMANTICS)})"
                f"{where()}"
            )
        if op in ("and", "or", "xor") and not np.issubdtype(info.dtype, np.integer):
            raise exc.HelionError(
                f"hl.atomic_{op} on `{info.name}` of dtype {info.dtype} (integers only){where()}"
            )
        combine = ATOMIC_OPS[op]
        entries = self.entries(info, index)
        _refuse_take(info, entries, f"hl.atomic_{op} into")
        v = self._store_value(info, entries, value)
        self._record(info, entries, "rmw")
        shape = v.shape
        dims = self._value_dims(entries, with_new=False)
        if self.mode == "analyze":
            return DTensor(jnp.zeros(shape, info.dtype), dims)
        if any(e[0] == "gather" for e in entries):
            old = self._scatter(info, entries, v, combine, None)
        else:
            old = self._read(info, entries, shape, from_output=True)
            self._write(info, entries, combine(old, v))
        return DTensor(old, dims)

    def _store_value(self, info, entries, value):
        """``value`` as an array of ``info``'s dtype and the access's shape (broadcast)."""
        shape = self.value_shape(info, entries, with_new=False)
        v = value.a if isinstance(value, DTensor) else jnp.asarray(unwrap(value), info.dtype)
        if v.ndim > len(shape) and math.prod(v.shape) == math.prod(shape):
            v = jnp.reshape(v, shape)
        try:
            v = jnp.broadcast_to(v, shape)
        except ValueError:
            raise exc.UnsupportedConstruct(
                f"storing a value of shape {tuple(v.shape)} into `{info.name}` indexed as "
                f"{tuple(shape)}{where()}"
            ) from None
        return v.astype(info.dtype)

    # --- emission ----------------------------------------------------------------------------

    def _in_ref(self, info, from_output=False):
        in_ref, out_ref, _ = self.refs[info.key]
        if out_ref is not None and (from_output or info.init is not None or in_ref is None):
            return out_ref
        return in_ref

    def _out_ref(self, info):
        return self.refs[info.key][1]

    def _read(self, info, entries, shape, from_output=False):
        ref = self._in_ref(info, from_output)
        kidx, _ = self.kernel_index(info, entries)
        return jnp.reshape(ref[kidx], shape)

    def _write(self, info, entries, v):
        kidx, kshape = self.kernel_index(info, entries)
        self._out_ref(info)[kidx] = jnp.reshape(v, kshape)

    def kernel_index(self, info, entries, point=None):
        """The ref index of ``info[entries]`` in the kernel's layout, and the shape it gives.

        Blocked dimensions take the whole block (a squeezed one nothing); others are sliced
        with ``pl.ds`` from the tensor's start. Inserted unit dimensions are taken whole, so
        no access reads a scalar from VMEM; a static element of the last dimension is a slice
        of one. ``point`` replaces a gather entry by that (row) index."""
        kidx, kshape = [], []
        ldims = logical_dims(entries)
        last = len(info.kshape) - 1
        kpos = 0
        for d, e in enumerate(ldims):
            self._index_dim(info, d, e, point, kpos == last, kidx, kshape)
            for _ in range(info.units[d]):
                kidx.append(slice(None))
                kshape.append(1)
            kpos += 1 + info.units[d]
        return tuple(kidx), tuple(kshape)

    def _index_dim(self, info, d, e, point, is_last, kidx, kshape):
        k = e[0]
        if info.blocked[d] is not None:
            if not info.squeezed[d]:
                kidx.append(slice(None))
                kshape.append(e[1].size)
            return
        f = info.front(d)  # positions shift by the zero elements padded before the first
        if k == "tile":
            start = _start(e[1])
            n = e[1].size
            if e[1].dynamic:
                # data-dependent bounds: stay inside the padded dimension, at a start that is
                # visibly a multiple of the block (a product: both Mosaic lowerings prove it)
                block = jnp.clip(jnp.asarray(start, jnp.int32) // n, 0,
                                 (info.pad[d] - f - n) // n)
                start = pl.multiple_of(block * n + f, n) if f % n == 0 else block * n + f
            elif f:
                start = start + f
            kidx.append(pl.ds(start, n))
            kshape.append(n)
        elif k == "dslice":
            kidx.append(_windows.slice_index(e[1], info.shape[d], f))
            kshape.append(e[1].size)
        elif k in ("full", "take"):
            kidx.append(slice(f, f + info.shape[d]))
            kshape.append(info.shape[d])
        elif k == "slice":
            kidx.append(slice(e[1] + f, e[2] + f))
            kshape.append(e[2] - e[1])
        elif k == "int" and is_last:
            kidx.append(pl.ds(_shift(e[1], f), 1))
            kshape.append(1)
        elif k == "int":
            kidx.append(_shift(e[1], f))
        elif k in ("grid", "dyn") and info.shape[d] == 1:
            # Helion drops a size-1 dimension's offset: any index reads its one element
            kidx.append(f)
        elif k == "grid":
            kidx.append(_shift(jnp.asarray(e[1]._begin, jnp.int32), f))
        elif k == "dyn":
            kidx.append(_shift(e[1].a.astype(jnp.int32), f))
        elif k == "gather":
            kidx.append(_shift(point, f))

    # --- gathers and scatters ------------------------------------------------------------------

    def _put(self, info, entries, v, dims, extra_mask):
        """``info[…, idx, …] = v`` with ``idx`` a computed integer tensor: the indexed
        dimension is read whole, each of its positions takes the value stored to it (one of
        them when several indices coincide) and keeps its old value otherwise; elements past a
        partial tile and those ``extra_mask`` turns off are not stored (see ``put``)."""
        k = next(i for i, e in enumerate(entries) if e[0] == "take")
        idx = unwrap(entries[k][1]).astype(jnp.int32)
        whole = entries[:k] + [("full",)] + entries[k + 1 :]
        old = self._read(info, whole, self.value_shape(info, whole, with_new=False),
                         from_output=True)
        pos = sum(1 for e in entries[:k] if e[0] not in ("int", "grid", "dyn", "new"))
        self._write(info, whole, put(old, pos, idx, v, _keep(v, dims, extra_mask)))

    def _take(self, info, entries):
        """``info[…, idx, …]`` with ``idx`` a computed integer tensor: the indexed dimension
        is read whole, then each index selects its element by comparing it with every
        position (a one-hot select, reduced with a maximum over the lowest value: exact for
        every value, NaN and -0.0 included). Costs ``idx.size × extent`` per other element,
        for small tables (offsets, labels, a shifted tile); an index outside the dimension
        reads 0 (as a masked load does)."""
        k = next(i for i, e in enumerate(entries) if e[0] == "take")
        idx = entries[k][1]
        whole = entries[:k] + [("full",)] + entries[k + 1 :]
        base_shape = self.value_shape(info, whole)
        table = self._read(info, whole, base_shape)
        pos = sum(1 for e in entries[:k] if not _is_point(e))
        return take(table, pos, unwrap(idx).astype(jnp.int32))

    def _index_at(self, source: IndexSource, r):
        """The ``r``-th index of an index vector, read from the prefetched (flattened) index
        tensor; rows past the end of a partial tile read the last index (always valid)."""
        info = source.info
        pref = self.refs[info.key][2]
        flat = 0
        strides = np.cumprod((1,) + info.shape[::-1])[::-1][1:]
        for d, e in enumerate(logical_dims(source.entries)):
            if e[0] == "tile":
                pos = jnp.asarray(e[1]._begin, jnp.int32) + r
            elif e[0] == "int":
                pos = e[1]
            elif e[0] == "grid":
                pos = jnp.asarray(e[1]._begin, jnp.int32)
            else:  # dyn
                pos = e[1].a.astype(jnp.int32)
            if info.shape[d] == 1:
                pos = 0  # Helion drops a size-1 dimension's offset
            flat = flat + pos * int(strides[d])
        n = math.prod(info.shape)
        return pref[jnp.clip(flat, 0, n - 1)]

    @staticmethod
    def _rows_layout(shape, entries):
        """(position of the gathered dimension in the value, the value's shape with the
        gathered dimension first)."""
        pos = 0
        for e in entries:
            if e[0] == "gather":
                break
            if e[0] not in ("int", "grid", "dyn"):
                pos += 1
        rows = (shape[pos],) + shape[:pos] + shape[pos + 1 :]
        return pos, rows

    def _gather(self, info, entries, shape):
        """``info[…, idx[t], …]``: one row per index, read in a loop (indices from SMEM) and
        assembled with selects (values have no dynamic insert); rows in 32 bits, as Mosaic
        moves single rows of packed types only along leading dimensions."""
        gather = next(e for e in entries if e[0] == "gather")
        source = gather[1].source
        pos, rows_shape = self._rows_layout(shape, entries)
        wide = _wide(info.dtype)
        ref = self._in_ref(info)
        row_shape = (1,) + rows_shape[1:]

        def step(r, acc):
            i = self._index_at(source, r)
            kidx, _ = self.kernel_index(info, entries, point=i)
            row = jnp.reshape(ref[kidx], row_shape).astype(wide)
            at = lax.broadcasted_iota(jnp.int32, rows_shape, 0) == r
            return jnp.where(at, row, acc)

        acc = lax.fori_loop(0, rows_shape[0], step, jnp.zeros(rows_shape, wide))
        return jnp.moveaxis(acc, 0, pos).astype(info.dtype) if pos else acc.astype(info.dtype)

    def _scatter(self, info, entries, v, combine, extra_mask):
        """``info[…, idx[t], …] = combine(old, v)`` one row at a time, in index order (so
        repeated indices accumulate, as atomics must); returns the old rows. Rows past the end
        of a partial tile and rows ``extra_mask`` turns off write back what they read."""
        gather = next(e for e in entries if e[0] == "gather")
        source = gather[1].source
        pos, rows_shape = self._rows_layout(v.shape, entries)
        wide = _wide(info.dtype)
        rows = jnp.moveaxis(v, pos, 0).astype(wide) if pos else v.astype(wide)
        keep = source.tile.valid_along(rows_shape, 0) if source.tile.partial else None
        if extra_mask is not None:
            m = jnp.broadcast_to(unwrap(extra_mask), v.shape)
            m = jnp.moveaxis(m, pos, 0) if pos else m
            keep = m if keep is None else m & keep
        ref = self._out_ref(info)
        row_shape = (1,) + rows_shape[1:]

        def step(r, olds):
            i = self._index_at(source, r)
            kidx, kshape = self.kernel_index(info, entries, point=i)
            old = jnp.reshape(ref[kidx], row_shape)
            new = _pick_row(rows, r).astype(info.dtype)
            new = combine(old, new)
            if keep is not None:
                new = jnp.where(_pick_row(keep.astype(jnp.int32), r) > 0, new, old)
            ref[kidx] = jnp.reshape(new, kshape)
            at = lax.broadcasted_iota(jnp.int32, rows_shape, 0) == r
            return jnp.where(at, old.astype(wide), olds)

        olds = lax.fori_loop(0, rows_shape[0], step, jnp.zeros(rows_shape, wide))
        return (jnp.moveaxis(olds, 0, pos) if pos else olds).astype(info.dtype)


def _bounds_mask(dims, shape, extra_mask):
    """``extra_mask`` and, per axis indexed by a tile with data-dependent bounds (``dynamic``:
    ``hl.tile(start, end)`` of loaded bounds, ``hl.jagged_tile`` per lane), its validity; None
    when nothing is masked. Such tiles read 0 and write nothing past their end, as Helion
    masks them (their static padding cannot absorb the writes)."""
    mask = None if extra_mask is None else unwrap(extra_mask)
    for ax, t in enumerate(dims):
        if getattr(t, "dynamic", False):
            v = t.valid_along(shape, ax, dims)
            if mask is not None:  # bool broadcast as int32 (see ``select``)
                v = (jnp.broadcast_to(jnp.asarray(mask).astype(jnp.int32), shape) != 0) & v
            mask = v
    return mask


def _shift(x, f):
    """``x + f`` (no operation when ``f`` is 0)."""
    return x + f if f else x


def _keep(v, dims, extra_mask):
    """Which elements of ``v`` a store at computed indices writes (None: all): those under
    ``extra_mask`` and inside their partial tiles."""
    keep = None if extra_mask is None else (
        jnp.broadcast_to(jnp.asarray(unwrap(extra_mask)).astype(jnp.int32), v.shape) != 0)
    for ax, t in enumerate(dims):
        if t is not None and t is not MIXED and t.partial:
            ok = t.valid_along(v.shape, ax, dims)
            keep = ok if keep is None else keep & ok
    return keep


class _Unfolded:
    """A folded tensor's ``HostInfo`` as the user indexes it (its flat shape)."""

    def __init__(self, info):
        self.name, self.shape, self.flat = info.name, info.flat, ()


def _start(tile):
    """Where ``tile`` starts: a static 0 for the one tile of a grid axis (a dimension the
    tile reaches past is whole: Mosaic must see its slice start aligned), else its begin."""
    if tile.axis is not None and tile.count == 1 and isinstance(tile.range_begin, int):
        return tile.range_begin
    return tile._begin


def take(table, pos, idx):
    """``table`` with its dimension ``pos`` (of extent n) indexed by the integer array ``idx``
    (numpy's rule for one index array: ``idx``'s dimensions replace dimension ``pos``); an
    index outside ``[0, n)`` gives 0. A one-hot select over the n positions and a maximum,
    in 32 bits (see ``Trace._take``)."""
    n, m = table.shape[pos], idx.ndim
    wide = _wide(table.dtype)
    head, tail = table.shape[:pos], table.shape[pos + 1 :]
    # the n positions come before idx's dimensions, so that the reduction is not over lanes
    # (its result would have a layout masks cannot be relaid to); compared at the full shape,
    # as Mosaic cannot broadcast a bool vector across sublanes
    full = head + (n,) + idx.shape + tail
    t = jnp.broadcast_to(jnp.reshape(table.astype(wide), head + (n,) + (1,) * m + tail), full)
    at = jnp.reshape(idx, (1,) * (pos + 1) + idx.shape + (1,) * len(tail))
    hit = jnp.broadcast_to(at, full) == lax.broadcasted_iota(jnp.int32, full, pos)
    low = jnp.asarray(lowest(wide), wide)
    picked = jnp.max(jnp.where(hit, t, low), axis=pos)
    inside = jnp.max(jnp.where(hit, 1, 0), axis=pos) > 0
    return jnp.where(inside, picked, jnp.zeros((), wide)).astype(table.dtype)


def put(table, pos, idx, v, keep):
    """``table`` with ``table[…, idx, …] = v`` along dimension ``pos`` (``v``: ``table``'s
    shape with ``idx``'s dimensions in place of ``pos``), where ``keep`` (None: everywhere);
    the dual of ``take``: a one-hot compare of every index with every position, the value a
    position receives picked by a maximum (exact). When indices coincide the first one (in
    ``idx``'s row-major order) wins, as the lowest lane does in Helion's examples (masked-off
    lanes of moe_matmul_ogs store back what they read, at the index of a valid first lane)."""
    n, m = table.shape[pos], idx.ndim
    wide = _wide(table.dtype)
    head, tail = table.shape[:pos], table.shape[pos + 1 :]
    full = head + (n,) + idx.shape + tail
    at = jnp.reshape(idx, (1,) * (pos + 1) + idx.shape + (1,) * len(tail))
    hit = jnp.broadcast_to(at, full) == lax.broadcasted_iota(jnp.int32, full, pos)
    if keep is not None:  # broadcast as int32: Mosaic cannot broadcast bool vectors
        k = jnp.reshape(keep.astype(jnp.int32), head + (1,) + idx.shape + tail)
        hit = hit & (jnp.broadcast_to(k, full) != 0)
    vals = jnp.broadcast_to(jnp.reshape(v.astype(wide), head + (1,) + idx.shape + tail), full)
    axes = tuple(range(pos + 1, pos + 1 + m))
    order = jnp.zeros(full, jnp.int32)  # each index's row-major position in idx
    for ax, stride in zip(axes, np.cumprod((1,) + idx.shape[::-1])[::-1][1:], strict=True):
        order = order + lax.broadcasted_iota(jnp.int32, full, ax) * int(stride)
    last = math.prod(idx.shape)
    first = jnp.min(jnp.where(hit, order, last), axis=axes, keepdims=True)
    hit = hit & (order == jnp.broadcast_to(first, full))
    low = jnp.asarray(lowest(wide), wide)
    picked = jnp.max(jnp.where(hit, vals, low), axis=axes)
    written = jnp.max(jnp.where(hit, 1, 0), axis=axes) > 0
    return jnp.where(written, picked, table.astype(wide)).astype(table.dtype)


def _refuse_take(info, entries, what):
    if any(e[0] in ("take", "window") for e in entries):
        raise exc.UnsupportedConstruct(
            f"{what} `{info.name}` at computed indices (a scatter through a computed index "
            f"tensor; index with tiles, or with indices loaded from a host tensor, "
            f"`{info.name}[idx[tile]] = v`){where()}"
        )


def _wide(dtype):
    """The 32-bit type rows of ``dtype`` travel in (f32 for floats, i32 otherwise)."""
    return jnp.float32 if is_float(dtype) else jnp.int32


def _pick_row(rows, r):
    """Row ``r`` (dynamic) of ``rows``, keeping a leading dimension of 1: a maximum over the
    rows in which every other row is the lowest value (exact, NaN included)."""
    at = lax.broadcasted_iota(jnp.int32, rows.shape, 0) == r
    masked = jnp.where(at, rows, jnp.asarray(lowest(rows.dtype), rows.dtype))
    return jnp.max(masked, axis=0, keepdims=True)


def _in_dtype(f):
    def combine(old, new):
        return f(old, new.astype(old.dtype)).astype(old.dtype)

    return combine


def _add_in_dtype(old, new):
    """``old + new`` rounded to ``old``'s dtype (low-precision floats add in f32)."""
    if is_float(old.dtype):
        return (old.astype(jnp.float32) + new.astype(jnp.float32)).astype(old.dtype)
    return old + new.astype(old.dtype)


ATOMIC_OPS = {
    "add": _add_in_dtype,
    "max": _in_dtype(jnp.maximum),
    "min": _in_dtype(jnp.minimum),
    "and": _in_dtype(jnp.bitwise_and),
    "or": _in_dtype(jnp.bitwise_or),
    "xor": _in_dtype(jnp.bitwise_xor),
    "xchg": _in_dtype(lambda old, new: new),
}
"""How each ``hl.atomic_<op>`` combines the old value with the new one, in the tensor's
dtype. Every one is exact under collisions, as ``atomic_add`` is (see ``hl.atomic_add``)."""
