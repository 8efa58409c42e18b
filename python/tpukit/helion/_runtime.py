"""Running a rewritten Helion kernel: host code in Python, device loops as Pallas kernels.

``launch`` (one per top-level device loop) traces the loop body twice:

1. *analysis* (under ``jax.eval_shape``): host tensors are ``TensorProxy``s that record how
   each dimension is indexed (by which tile, by ``:``, by an int), which tensors are read and
   which are written. That decides the Pallas grid (one axis per tiled dimension of the loop),
   each tensor's ``BlockSpec`` (a dimension always indexed by the same grid tile is blocked by
   it; any other dimension is a whole-dimension block, sliced in the kernel with ``pl.ds``),
   the inputs, the outputs (written tensors; aliased to their input when the kernel may not
   write all of them) and the default block sizes (legal TPU tilings).
2. *emission*, inside ``pl.pallas_call``: the same body runs on refs; loads and stores become
   ref reads and writes, torch code becomes ``jnp`` (``_values``), nested device loops become
   ``lax.fori_loop`` over whole tiles plus one statically-sized tail tile.

The kernel then goes through ``tpukit.pallas.custom_kernel`` (lowered by JAX for TPU, imported
into tpukit's IR, run on the CPU) and its outputs are copied into the host tensors.
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpukit import _arrays
from tpukit.helion import exc
from tpukit.helion._values import DeviceMode, DTensor, jdtype, tdtype, unwrap, wrap
from tpukit.helion._where import where, where_tb

_local = threading.local()

# JAX attributes each op to the innermost frame outside its own code; skipping this package's
# frames too makes tpukit's import errors name the line of the user's kernel.
try:
    from jax._src import source_info_util

    source_info_util.register_exclusion(os.path.dirname(os.path.abspath(__file__)))
except (ImportError, AttributeError):  # pragma: no cover - a JAX without it
    pass

DEFAULT_INNER_BLOCK = 128


def cdiv(a, b):
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


# --- per-call state ----------------------------------------------------------------------


@dataclass
class CallState:
    kernel: object  # the Kernel
    config: dict
    mode: str  # "run" | "lower"
    counter: int = 0  # next block-size id (Config.block_sizes index)
    lowered: list = field(default_factory=list)
    sizes: dict = field(default_factory=dict)  # block id -> size used


def current_call() -> CallState:
    st = getattr(_local, "call", None)
    if st is None:
        raise exc.NotInsideKernel(
            "this Helion API is only usable inside a @tpukit.helion.kernel function" + where()
        )
    return st


def current_trace():
    return getattr(_local, "trace", None)


def device_only(name):
    if current_trace() is None:
        raise exc.NotInsideKernel(f"`hl.{name}` can only be used inside a device loop{where()}")


def allocate_block_id() -> int:
    st = current_call()
    i = st.counter
    st.counter += 1
    return i


def configured_block(block_id: int):
    bs = current_call().config.get("block_sizes") or []
    if block_id < len(bs) and bs[block_id] is not None:
        v = bs[block_id]
        if isinstance(v, (list, tuple)):  # old nested form [[32, 32], [16]]
            raise exc.HelionError("nested block_sizes lists are not supported; flatten them")
        return int(v)
    return None


# --- tiles -------------------------------------------------------------------------------


def _static_int(v, what):
    if isinstance(v, DTensor):
        return v
    try:
        return int(v)
    except TypeError:
        raise exc.UnsupportedConstruct(f"{what} must be an int{where()}") from None


class TileSpec:
    """What ``hl.tile(...)`` / ``hl.grid(...)`` returns: the ranges and block sizes of a loop."""

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

    def block_size(self, i, extent):
        if self.explicit[i] is not None:
            return self.explicit[i]
        return configured_block(self.ids[i])


def make_spec(kind, begin_or_end, end_or_none, block_size):
    def seq(v):
        return isinstance(v, (list, tuple)) or type(v).__name__ == "Size"

    if end_or_none is None:
        ends = begin_or_end
        multi = seq(ends)
        ends = list(ends) if multi else [ends]
        begins = [0] * len(ends)
    else:
        multi = seq(begin_or_end)
        begins = list(begin_or_end) if multi else [begin_or_end]
        ends = list(end_or_none) if multi else [end_or_none]
    if block_size is None or kind == "grid":
        blocks = [block_size if kind == "grid" else None] * len(ends)
    else:
        blocks = list(block_size) if seq(block_size) else [block_size]
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
    """The scalar index ``hl.grid`` yields (a grid axis of block size 1)."""

    __slots__ = ("tile",)

    def __init__(self, a, tile):
        super().__init__(a)
        self.tile = tile


class Tile:
    """One tile of a ``hl.tile`` loop: ``index``, ``begin``, ``end``, ``block_size``, ``id``,
    ``count``. ``size`` (not Helion API) is the static extent of the values it indexes."""

    def __init__(self, begin, size, block_size, range_begin, range_end, axis=None, iv=None):
        self._begin = begin  # Python int or traced int32 scalar
        self.size = size
        self.block_size = block_size
        self.range_begin = range_begin
        self.range_end = range_end
        self.axis = axis  # grid axis, or None for an inner-loop tile
        self._iv = iv  # the iteration number (traced), for `id`

    @property
    def begin(self):
        return TileBound(jnp.asarray(self._begin, jnp.int32), self, "begin")

    @property
    def end(self):
        e = jnp.minimum(jnp.asarray(self._begin, jnp.int32) + self.block_size, self.range_end)
        return TileBound(e, self, "end")

    @property
    def index(self):
        return DTensor(jnp.asarray(self._begin, jnp.int32) + lax.iota(jnp.int32, self.size))

    @property
    def id(self):
        return DTensor(jnp.asarray(self._iv, jnp.int32))

    @property
    def count(self):
        return cdiv(self.range_end - self.range_begin, self.block_size)

    def __index__(self):
        return self.block_size

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


# --- host tensors seen from device code ----------------------------------------------------


def _is_host_array(x) -> bool:
    try:
        _arrays.kind(x)
        return True
    except TypeError:
        return False


@dataclass
class Access:
    entries: list  # per index item: ("tile", Tile) | ("full",) | ("slice", a, b) | ("int", i)
    #                                 | ("dyn", scalar) | ("new",)
    store: bool


@dataclass
class HostInfo:
    obj: object
    name: str
    shape: tuple
    dtype: np.dtype
    accesses: list = field(default_factory=list)
    # decided after analysis:
    blocked: list = field(default_factory=list)  # per dim: grid axis or None
    squeezed: list = field(default_factory=list)  # per dim: bool (hl.grid index)


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
        return len(self._info.shape)

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
        return math.prod(self._info.shape)

    def __getitem__(self, index):
        return self._trace.load(self._info, index)

    def __setitem__(self, index, value):
        self._trace.store(self._info, index, value)

    def __repr__(self):
        return f"TensorProxy({self._info.name}, shape={self._info.shape})"

    def __getattr__(self, name):
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
    """The proxy of a host tensor captured by device code (a closure, a global)."""
    trace = current_trace()
    if trace is None:
        raise exc.NotInsideKernel("host tensor indexed with a tile outside a device loop")
    return trace.proxy(obj, name=None)


# --- traces --------------------------------------------------------------------------------


def _np_dtype(obj):
    d = _arrays.numpy_dtype(obj.dtype)
    if d == np.dtype(np.int64):
        return np.dtype(np.int32)  # TPUs have no int64: indices travel as int32
    if d == np.dtype(np.float64):
        raise exc.HelionError(
            "float64 tensors are not supported on TPU (tpukit supports "
            f"{_arrays.SUPPORTED}; int64 is converted to int32)"
        )
    _arrays.dtype_name(d)
    return d


class Trace:
    """One trace of a device loop: ``analyze`` (records accesses) or ``emit`` (Pallas refs)."""

    def __init__(self, mode, launch):
        self.mode = mode
        self.launch = launch
        self.infos: dict[int, HostInfo] = launch.infos if mode == "emit" else {}
        self.order: list[int] = launch.order if mode == "emit" else []
        self.refs: dict[int, tuple] = {}  # id -> (in_ref or None, out_ref or None)

    def proxy(self, obj, name):
        key = id(obj)
        info = self.infos.get(key)
        if info is None:
            if self.mode == "emit":
                raise exc.HelionError(
                    f"host tensor {name or ''} was not seen while analysing the kernel"
                )
            info = HostInfo(obj, name or f"captured_{len(self.infos)}", tuple(obj.shape),
                            _np_dtype(obj))
            self.infos[key] = info
            self.order.append(key)
        return TensorProxy(info, self)

    # --- indexing ---
    def entries(self, info: HostInfo, index):
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
            if it is Ellipsis:
                out.extend([("full",)] * (rank - used))
                used = rank
            elif it is None:
                out.append(("new",))
            elif isinstance(it, Tile):
                out.append(("tile", it))
            elif isinstance(it, GridIndex):
                out.append(("grid", it.tile))
            elif isinstance(it, slice):
                if it == slice(None):
                    out.append(("full",))
                elif all(isinstance(v, (int, type(None))) for v in (it.start, it.stop)) and (
                    it.step in (None, 1)
                ):
                    d = len([e for e in out if e[0] != "new"])
                    a, b, _ = it.indices(info.shape[d])
                    out.append(("slice", a, b))
                else:
                    raise exc.UnsupportedConstruct(
                        f"slice {it} indexing `{info.name}` (static slices only){where()}"
                    )
            elif isinstance(it, (int, np.integer)):
                d = len([e for e in out if e[0] != "new"])
                out.append(("int", int(it) % info.shape[d]))
            elif isinstance(it, DTensor) and it.a.ndim == 0:
                out.append(("dyn", it))
            elif isinstance(it, DTensor):
                raise exc.UnsupportedConstruct(
                    f"indexing `{info.name}` with a tensor of indices (gather){where()}"
                )
            else:
                raise exc.UnsupportedConstruct(
                    f"index {type(it).__name__} on `{info.name}`{where()}"
                )
        dims = len([e for e in out if e[0] != "new"])
        out.extend([("full",)] * (rank - dims))
        return out

    def load(self, info, index):
        entries = self.entries(info, index)
        info.accesses.append(Access(entries, store=False)) if self.mode == "analyze" else None
        shape = self._shape(info, entries, with_new=True)
        if self.mode == "analyze":
            return DTensor(jnp.zeros(shape, info.dtype))
        in_ref, out_ref = self.refs[id(info.obj)]
        ref = in_ref if in_ref is not None else out_ref
        v = ref[self._ref_index(info, entries)]
        return DTensor(jnp.reshape(v, shape))

    def store(self, info, index, value):
        entries = self.entries(info, index)
        shape = self._shape(info, entries, with_new=False)
        if isinstance(value, DTensor):
            v = value.a
        else:
            v = jnp.asarray(unwrap(value), info.dtype)
        if v.ndim > len(shape) and math.prod(v.shape) == math.prod(shape):
            v = jnp.reshape(v, shape)
        try:
            v = jnp.broadcast_to(v, shape)
        except ValueError:
            raise exc.UnsupportedConstruct(
                f"storing a value of shape {tuple(v.shape)} into `{info.name}` indexed as "
                f"{tuple(shape)}{where()}"
            ) from None
        v = v.astype(info.dtype)
        if self.mode == "analyze":
            info.accesses.append(Access(entries, store=True))
            return
        _, out_ref = self.refs[id(info.obj)]
        out_ref[self._ref_index(info, entries)] = v

    def _shape(self, info, entries, with_new):
        shape = []
        d = 0
        for e in entries:
            k = e[0]
            if k == "new":
                if with_new:
                    shape.append(1)
                continue
            if k == "tile":
                shape.append(e[1].size)
            elif k == "full":
                shape.append(info.shape[d])
            elif k == "slice":
                shape.append(e[2] - e[1])
            d += 1
        return tuple(shape)

    def _ref_index(self, info, entries):
        idx = []
        d = 0
        for e in entries:
            k = e[0]
            if k == "new":
                continue
            blocked = info.blocked[d]
            if k in ("tile", "grid") and blocked is not None:
                if not info.squeezed[d]:
                    idx.append(slice(None))
            elif k == "tile":
                t = e[1]
                if t.axis is not None and t.range_end % t.block_size:
                    raise exc.UnsupportedConstruct(
                        f"`{info.name}` dimension {d} is indexed by a grid tile and also in "
                        f"other ways, and {t.range_end} is not a multiple of its block size "
                        f"{t.block_size}{where()}"
                    )
                idx.append(pl.ds(t._begin, t.size))
            elif k == "grid":
                idx.append(e[1]._begin)
            elif k == "full":
                idx.append(slice(None))
            elif k == "slice":
                idx.append(slice(e[1], e[2]))
            elif k == "int":
                idx.append(e[1])
            elif k == "dyn":
                idx.append(e[1].a.astype(jnp.int32))
            d += 1
        return tuple(idx)


# --- launches ------------------------------------------------------------------------------


class LaunchPlan:
    """Everything decided about one device loop for one signature."""

    def __init__(self):
        self.infos: dict[int, HostInfo] = {}
        self.order: list[int] = []
        self.grid_sizes: list[int] = []
        self.counter_after = 0
        self.pallas = None
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.sources: dict[int, object] = {}  # id -> env name or weakref
        self.sizes: dict[int, int] = {}  # block id -> size


def _legal(bs, requirements, extent) -> bool:
    """Whether ``bs`` tiles every dimension it blocks legally on TPU (Pallas's rules)."""
    if bs == extent:
        return True
    for req, rank, bits in requirements:
        if rank == 1 and req == 128:
            tiling = 128 * 32 // bits
            if not (bs % 1024 == 0 or (bs & (bs - 1) == 0 and bs >= tiling)):
                return False
        elif bs % req:
            return False
    return True


def _legal_block(requirements, extent, provisional):
    """The smallest TPU-legal block size >= ``provisional`` (at most the whole extent)."""
    bs = max(1, min(provisional, extent))
    while bs < extent and not _legal(bs, requirements, extent):
        bs += 1
    return bs


def _default_block(requirements, extent):
    rank1 = any(r == 128 and rank == 1 for r, rank, _ in requirements)
    if rank1:
        d = 1024
    elif any(r == 128 for r, _, _ in requirements):
        d = 128
    elif any(r == 8 for r, _, _ in requirements):
        d = 32
    elif requirements:
        d = 1
    else:
        d = 128
    return min(d, extent)


def _wrap_errors(kernel_name, fn):
    try:
        return fn()
    except exc.HelionError:
        raise
    except Exception as e:  # noqa: BLE001 - re-raised with the kernel's source line
        from tpukit._native import TpukitError

        if isinstance(e, TpukitError):
            raise
        raise exc.HelionError(
            f"kernel `{kernel_name}`: {type(e).__name__}: {e}{where_tb(e.__traceback__)}"
        ) from e


def _grid_tiles(spec: TileSpec, sizes, mode):
    tiles = []
    for g, (b, e, bs) in enumerate(zip(spec.begins, spec.ends, sizes, strict=True)):
        if mode == "emit":
            pid = pl.program_id(g)
            begin = pid * bs + b
        else:
            pid = jnp.zeros((), jnp.int32)
            begin = pid + b
        tiles.append(Tile(begin, bs, bs, b, e, axis=g, iv=pid))
    return tiles


def _loop_index(spec: TileSpec, tiles):
    if spec.kind == "grid":
        vals = [GridIndex(t._begin, t) for t in tiles]
    else:
        vals = tiles
    return tuple(vals) if spec.multi else vals[0]


def _run_body(trace, device_fn, idx, env):
    prev = current_trace()
    _local.trace = trace
    try:
        kwargs = {
            k: (trace.proxy(v, k) if _is_host_array(v) else v) for k, v in env.items()
        }
        with DeviceMode():
            device_fn(idx, **kwargs)
    finally:
        _local.trace = prev


def _plan(st: CallState, spec: TileSpec, device_fn, env, c0):
    name = st.kernel.name
    plan = LaunchPlan()
    for b in spec.begins + spec.ends:
        if isinstance(b, DTensor):
            raise exc.UnsupportedConstruct("a top-level device loop with device-value bounds")
    extents = [e - b for b, e in zip(spec.begins, spec.ends, strict=True)]
    if any(x <= 0 for x in extents):
        raise exc.HelionError(f"kernel `{name}`: an empty device loop (extents {extents})")
    provisional = []
    for i, x in enumerate(extents):
        bs = spec.block_size(i, x)
        provisional.append(min(bs, x) if bs is not None else min(DEFAULT_INNER_BLOCK, x))

    # 1. analysis
    trace = Trace("analyze", plan)

    def analyze():
        st.counter = c0
        tiles = _grid_tiles(spec, provisional, "analyze")
        _run_body(trace, device_fn, _loop_index(spec, tiles), env)
        return 0

    _wrap_errors(name, lambda: jax.eval_shape(analyze))
    plan.counter_after = st.counter
    plan.infos, plan.order = trace.infos, trace.order
    for k, v in env.items():
        if _is_host_array(v) and id(v) in plan.infos:
            plan.sources.setdefault(id(v), k)
    for key in plan.order:
        if key not in plan.sources:
            plan.sources[key] = weakref.ref(plan.infos[key].obj)

    # 2. blocks: a dimension always indexed by the same grid tile is blocked by it
    requirements = [[] for _ in extents]
    for key in plan.order:
        info = plan.infos[key]
        rank = len(info.shape)
        info.blocked, info.squeezed = [], []
        for d in range(rank):
            kinds = set()
            for acc in info.accesses:
                e = [x for x in acc.entries if x[0] != "new"][d]
                if e[0] in ("tile", "grid") and e[1].axis is not None:
                    kinds.add((e[0], e[1].axis))
                else:
                    kinds.add(("other",))
            if len(kinds) == 1 and next(iter(kinds))[0] in ("tile", "grid"):
                kind, axis = next(iter(kinds))
                info.blocked.append(axis)
                info.squeezed.append(kind == "grid")
                if kind == "tile":
                    req = 128 if d == rank - 1 else 8 if d == rank - 2 else 1
                    requirements[axis].append((req, rank, info.dtype.itemsize * 8))
            else:
                info.blocked.append(None)
                info.squeezed.append(False)
    sizes = []
    for i, x in enumerate(extents):
        if spec.kind == "grid":
            sizes.append(1)
            continue
        bs = spec.block_size(i, x)
        if bs is None:
            bs = _default_block(requirements[i], x)
            if spec.ids[i] is not None:
                pass
        sizes.append(_legal_block(requirements[i], x, bs))
    for i, bid in enumerate(spec.ids):
        if bid is not None:
            st.sizes[bid] = sizes[i]
    plan.grid_sizes = sizes

    # 3. operands
    for key in plan.order:
        info = plan.infos[key]
        loads = any(not a.store for a in info.accesses)
        stores = [a for a in info.accesses if a.store]
        covered = any(_covers(info, a) for a in stores)
        if loads or (stores and not covered):
            plan.inputs.append(key)
        if stores:
            plan.outputs.append(key)
    if not plan.outputs:
        raise exc.HelionError(
            f"kernel `{name}`: a device loop that stores to no host tensor (write results with "
            f"`out[tile] = …`)"
        )

    grid = tuple(cdiv(x, bs) for x, bs in zip(extents, sizes, strict=True))
    offsets = [b // bs if b % bs == 0 else None for b, bs in zip(spec.begins, sizes, strict=True)]
    if None in offsets:
        raise exc.UnsupportedConstruct(
            f"kernel `{name}`: a top-level loop whose begin is not a multiple of its block size"
        )

    def block_spec(info):
        block = []
        for d, axis in enumerate(info.blocked):
            if axis is None:
                block.append(info.shape[d])
            elif info.squeezed[d]:
                block.append(None)
            else:
                block.append(sizes[axis])
        axes = list(info.blocked)

        def index_map(*pids):
            return tuple(0 if a is None else pids[a] + offsets[a] for a in axes)

        return pl.BlockSpec(tuple(block), index_map)

    in_specs = [block_spec(plan.infos[k]) for k in plan.inputs]
    out_specs = [block_spec(plan.infos[k]) for k in plan.outputs]
    aliases = {plan.inputs.index(k): j for j, k in enumerate(plan.outputs) if k in plan.inputs}
    parallel = all(
        set(a for a in plan.infos[k].blocked if a is not None) == set(range(len(grid)))
        for k in plan.outputs
    )
    semantics = ("parallel" if parallel else "arbitrary",) * len(grid)
    n_in = len(plan.inputs)

    def body(*refs):
        emit = Trace("emit", plan)
        for j, k in enumerate(plan.inputs):
            emit.refs[k] = (refs[j], None)
        for j, k in enumerate(plan.outputs):
            prev = emit.refs.get(k, (None, None))[0]
            emit.refs[k] = (prev, refs[n_in + j])
        st.counter = c0
        tiles = _grid_tiles(spec, sizes, "emit")
        _run_body(emit, device_fn, _loop_index(spec, tiles), env)

    out_shapes = tuple(
        jax.ShapeDtypeStruct(plan.infos[k].shape, plan.infos[k].dtype) for k in plan.outputs
    )
    from tpukit import pallas

    plan.pallas = pallas.custom_kernel(
        lambda *a: out_shapes,
        body,
        grid=grid,
        in_specs=in_specs,
        out_specs=out_specs,
        input_output_aliases=aliases,
        compiler_params=pltpu.CompilerParams(dimension_semantics=semantics),
        name=name,
        device=st.kernel.device,
    )
    return plan


def _covers(info: HostInfo, access: Access) -> bool:
    d = 0
    for e in access.entries:
        if e[0] == "new":
            continue
        if e[0] == "full":
            pass
        elif e[0] in ("tile", "grid"):
            t = e[1]
            if not (t.range_begin == 0 and t.range_end == info.shape[d]):
                return False
        elif e[0] == "slice":
            if not (e[1] == 0 and e[2] == info.shape[d]):
                return False
        else:
            return False
        d += 1
    return True


def _key_of(v):
    if _is_host_array(v):
        return ("T", tuple(v.shape), str(v.dtype))
    if isinstance(v, (int, float, bool, str, type(None))):
        return ("S", type(v).__name__, v)
    if isinstance(v, (tuple, list)):
        return ("L", tuple(_key_of(x) for x in v))
    try:
        hash(v)
        return ("H", v)
    except TypeError:
        return ("O", id(v))


def _host_arrays(plan, env):
    out = {}
    for key in plan.order:
        src = plan.sources[key]
        obj = env[src] if isinstance(src, str) else src()
        if obj is None:
            return None
        out[key] = obj
    return out


def launch(site, spec, device_fn, env):
    """Runs one top-level device loop (called by the rewritten kernel)."""
    st = current_call()
    if not isinstance(spec, TileSpec):
        raise exc.HelionError(
            f"kernel `{st.kernel.name}`: a device loop must iterate over `hl.tile(...)` or "
            f"`hl.grid(...)`, got {type(spec).__name__}"
        )
    c0 = st.counter
    key = (
        site,
        c0,
        spec.kind,
        tuple(spec.begins),
        tuple(spec.ends),
        tuple(spec.explicit),
        tuple(sorted((k, _key_of(v)) for k, v in env.items())),
    )
    cache = st.kernel._plans
    plan = cache.get(key)
    hosts = _host_arrays(plan, env) if plan is not None else None
    if hosts is None or any(
        tuple(hosts[k].shape) != plan.infos[k].shape for k in plan.order
    ):
        before = dict(st.sizes)
        plan = _plan(st, spec, device_fn, env, c0)
        plan.sizes = {k: v for k, v in st.sizes.items() if before.get(k) != v}
        cache[key] = plan
        hosts = _host_arrays(plan, env)
    st.counter = plan.counter_after
    st.sizes.update(plan.sizes)
    arrays = [_to_input(hosts[k], plan.infos[k]) for k in plan.inputs]
    if not arrays:
        # Pallas needs no inputs, but tpukit launches want one array to know the result kind
        raise exc.UnsupportedConstruct(
            f"kernel `{st.kernel.name}`: a device loop that reads no host tensor"
        )
    if st.mode == "lower":
        st.lowered.append(_wrap_errors(st.kernel.name, lambda: plan.pallas.lower(*arrays)))
        return
    results = _wrap_errors(st.kernel.name, lambda: plan.pallas(*arrays))
    if not isinstance(results, tuple):
        results = (results,)
    for k, r in zip(plan.outputs, results, strict=True):
        _copy_into(hosts[k], r)


def _to_input(obj, info):
    a = _arrays.to_numpy(obj)
    if a.dtype != info.dtype:
        a = a.astype(info.dtype)
    return a


def _copy_into(obj, result):
    if isinstance(obj, np.ndarray):
        obj[...] = result.astype(obj.dtype, copy=False)
        return
    k = _arrays.kind(obj)
    if k == "torch":
        t = _arrays.to_kind(np.ascontiguousarray(result), "torch")
        obj.copy_(t.to(obj.dtype))
        return
    raise exc.HelionError("JAX arrays are immutable: pass torch tensors or numpy arrays")


# --- inner loops ---------------------------------------------------------------------------


def _carry_in(v):
    if isinstance(v, DTensor):
        return v.a
    if isinstance(v, (int, float, bool)):
        return jnp.asarray(v)
    raise exc.UnsupportedConstruct(
        f"a loop-carried variable of type {type(v).__name__} in a device loop{where()}"
    )


def inner_loop(spec, fn, carry):
    """Runs a nested device loop ``for tile in spec: carry = fn(tile, carry)``."""
    trace = current_trace()
    if trace is None:
        raise exc.HelionError("a nested device loop outside a device loop" + where())
    if not isinstance(spec, TileSpec):
        raise exc.UnsupportedConstruct(
            f"a `for` loop over {type(spec).__name__} inside a device loop{where()}"
        )
    if spec.multi and len(spec) > 1:
        # tile([a, b]) inside: nested loops, the last dimension innermost
        return _inner_multi(spec, fn, carry, 0, [])
    return _inner_dim(spec, 0, lambda t, c: fn(t if not spec.multi else (t,), c), carry)


def _inner_multi(spec, fn, carry, d, outer):
    if d == len(spec) - 1:
        return _inner_dim(spec, d, lambda t, c: fn(tuple(outer + [t]), c), carry)
    return _inner_dim(spec, d, lambda t, c: _inner_multi(spec, fn, c, d + 1, outer + [t]), carry)


def _bounds(spec, d):
    """(begin, static extent) of dimension ``d`` of an inner loop."""
    b, e = spec.begins[d], spec.ends[d]
    if not isinstance(b, DTensor) and not isinstance(e, DTensor):
        return b, e - b, e
    if (
        isinstance(b, TileBound)
        and isinstance(e, TileBound)
        and b.tile is e.tile
        and (b.which, e.which) == ("begin", "end")
    ):
        t = b.tile
        if (t.range_end - t.range_begin) % t.block_size:
            raise exc.UnsupportedConstruct(
                f"hl.tile(tile.begin, tile.end) over a tile whose range "
                f"({t.range_end - t.range_begin}) is not a multiple of its block size "
                f"({t.block_size}){where()}"
            )
        return t._begin, t.block_size, t.range_end
    raise exc.UnsupportedConstruct(
        "a nested device loop whose bounds are device values (other than "
        f"`hl.tile(t.begin, t.end)`){where()}"
    )


def _inner_dim(spec, d, body, carry):
    trace = current_trace()
    begin, extent, range_end = _bounds(spec, d)
    if spec.kind == "grid":
        bs = 1
    else:
        bs = spec.block_size(d, extent)
        if bs is None:
            bs = min(DEFAULT_INNER_BLOCK, extent)
        bs = max(1, min(bs, extent))
        if spec.ids[d] is not None:
            current_call().sizes[spec.ids[d]] = bs

    def make(start, size, iv):
        t = Tile(start, size, bs, begin if isinstance(begin, int) else 0, range_end, iv=iv)
        return GridIndex(jnp.asarray(start, jnp.int32), t) if spec.kind == "grid" else t

    if extent <= 0:
        return carry
    if trace.mode == "analyze":
        out = body(make(begin, min(bs, extent), jnp.zeros((), jnp.int32)), carry)
        _check_carry(carry, out)
        return out
    n_full, tail = divmod(extent, bs)
    if n_full == 1:
        carry = body(make(begin, bs, 0), carry)
    elif n_full > 1:
        init = tuple(_carry_in(c) for c in carry)

        def step(i, c):
            out = body(make(begin + i * bs, bs, i), tuple(wrap(x) for x in c))
            _check_carry(c, out)
            return tuple(
                jnp.asarray(unwrap(o)).astype(ci.dtype) for o, ci in zip(out, c, strict=True)
            )

        res = lax.fori_loop(0, n_full, step, init)
        carry = tuple(DTensor(r) for r in res)
    if tail:
        carry = body(make(begin + n_full * bs, tail, n_full), carry)
    return carry


def _check_carry(before, after):
    if len(before) != len(after):
        raise exc.HelionError("internal: loop-carried variables changed number")
    for b, a in zip(before, after, strict=True):
        bs = getattr(unwrap(b), "shape", ())
        as_ = getattr(unwrap(a), "shape", ())
        if tuple(bs) != tuple(as_):
            raise exc.UnsupportedConstruct(
                f"a loop-carried variable changes shape from {tuple(bs)} to {tuple(as_)} in a "
                f"device loop{where()}"
            )


__all__ = ["launch", "inner_loop", "Tile", "TileSpec", "TensorProxy", "tdtype", "jdtype"]
