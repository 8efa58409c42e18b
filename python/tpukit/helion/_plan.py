"""Planning one top-level device loop: from its traced accesses to a Pallas kernel.

``make_plan`` traces the loop body under ``jax.eval_shape`` twice — once with provisional block
sizes (to see how tensors are indexed, hence the TPU tiling each block size must respect), once
with the final sizes (partial tiles known) — and decides, per host tensor (``HostInfo``):

* its *layout*: a dimension always indexed by the same grid tile is blocked by it
  (``BlockSpec``); every other dimension is whole and sliced in the kernel. A dimension
  indexed by a single dynamic element (``hl.grid``, a device scalar, a gather) among the last
  two gets unit dimensions after it, so that it is a leading dimension (Mosaic moves single
  rows of any type only there). A whole dimension that tiles read past its end is padded.
* its *roles*: scalar prefetch (indices of gathers and scatters), input (read, or not entirely
  overwritten), output (written).
* for a tensor both read and written: how its output block starts from its input block —
  every step (its block changes every step), at the first visit (it is revisited on
  consecutive steps of the innermost axes, which become ``arbitrary``), or once, with the whole
  tensor resident for the kernel's run (revisited on non-consecutive steps, e.g. by atomics
  across an outer axis; every axis becomes ``arbitrary``). This makes ``hl.atomic_add`` and
  read-modify-write correct when several grid steps touch the same elements.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpukit import _arrays
from tpukit.helion import exc
from tpukit.helion._memory import HostInfo, Trace, is_host_array, logical_dims
from tpukit.helion._state import _local, cdiv, current_trace
from tpukit.helion._tiles import GridIndex, Tile, TileSpec
from tpukit.helion._values import DeviceMode, DTensor
from tpukit.helion._where import where, where_tb

DEFAULT_INNER_BLOCK = 128
VMEM_BYTES = 128 << 20  # a v5e or v6e TensorCore's VMEM
_DYNAMIC_POINTS = ("grid", "dyn", "gather", "wrows")


class LaunchPlan:
    """Everything decided about one device loop for one signature."""

    def __init__(self):
        self.infos: dict[int, HostInfo] = {}
        self.order: list[int] = []
        self.grid_sizes: list[int] = []
        self.inner_sizes: dict = {}  # (site, dim) -> block size of an inner loop dimension
        self.counter_after = 0
        self.pallas = None
        self.prefetch: list[int] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.sources: dict[int, object] = {}  # id -> env name or weakref
        self.sizes: dict[int, int] = {}  # block id -> size
        self.gathers: list = []  # (index key, extent, where): indices to check before a run
        self.placeholder = False  # a one-element input for a loop that reads no host tensor
        self.env = None  # the loop's free variables, for tracing its kernel (then released)

    def release_tensors(self):
        """Drops the references to the tensors of the call that made the plan, once its
        kernel is traced: a cached plan must not keep a caller's tensors alive."""
        for info in self.infos.values():
            info.obj = None
        self.env = None


# --- tracing ---------------------------------------------------------------------------------


def wrap_errors(kernel_name, fn):
    """Runs ``fn``; an error that is not tpukit's own gets the kernel's source line."""
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


def grid_tiles(spec: TileSpec, sizes, mode, masks):
    """The tiles of one grid step: ``begin = program_id * block_size + range begin``."""
    tiles = []
    for g, (b, e, bs) in enumerate(zip(spec.begins, spec.ends, sizes, strict=True)):
        pid = pl.program_id(g) if mode == "emit" else jnp.zeros((), jnp.int32)
        begin = pid * bs + b
        window_end = b + cdiv(e - b, bs) * bs
        partial = masks and window_end > e
        tiles.append(Tile(begin, bs, bs, b, e, axis=g, partial=partial, window_end=window_end))
    return tiles


def loop_index(spec: TileSpec, tiles):
    """What the loop variable is bound to: tiles, or ``hl.grid`` scalars; one or a tuple."""
    vals = [GridIndex(t._begin, t) for t in tiles] if spec.kind == "grid" else tiles
    return tuple(vals) if spec.multi else vals[0]


def run_body(trace, device_fn, idx, env):
    """Runs the loop body with host tensors replaced by proxies, under ``trace``."""
    prev = current_trace()
    _local.trace = trace
    try:
        kwargs = {k: (trace.proxy(v, k) if is_host_array(v) else v) for k, v in env.items()}
        with DeviceMode():
            device_fn(idx, **kwargs)
    finally:
        _local.trace = prev


def _analyze(st, spec, device_fn, env, c0, sizes, inner_sizes, masks) -> Trace:
    plan = LaunchPlan()
    trace = Trace("analyze", plan, masks=masks, inner_sizes=inner_sizes)

    def run():
        st.counter = c0
        tiles = grid_tiles(spec, sizes, "analyze", masks)
        run_body(trace, device_fn, loop_index(spec, tiles), env)
        return 0

    wrap_errors(st.kernel.name, lambda: jax.eval_shape(run))
    return trace


# --- layouts -----------------------------------------------------------------------------------


def _kind(e):
    """How an entry indexes its dimension: ``(kind, grid axis or None)``."""
    if e[0] in ("tile", "grid"):
        return (e[0], e[1].axis)
    return (e[0], None)


def fold(info: HostInfo) -> None:
    """Folds a 1-D tensor that every access indexes by windows of rows (``_windows``) into
    ``[rows, width]``: ``shape`` becomes the folded shape (``flat`` keeps the user's) and each
    access's entries index rows (``wrows``) and a tile of columns. A tensor also accessed
    otherwise, or whose accesses disagree on the width, keeps the one-hot ``take``."""
    wins = [a for a in info.accesses if a.entries and a.entries[0][0] == "window"]
    if not wins or info.flat:
        return
    widths = {a.entries[0][1].width for a in wins}
    width = next(iter(widths))
    if len(wins) == len(info.accesses) and len(widths) == 1 and info.shape[0] % width == 0:
        info.flat, info.shape = info.shape, (info.shape[0] // width, width)
        for a in wins:
            w = a.entries[0][1]
            a.entries = [("wrows", w), ("tile", w.col_tile)]
        return
    for a in wins:
        a.entries = [("take", a.entries[0][1].idx)]


def layout(info: HostInfo) -> None:
    """Sets ``units``, ``blocked`` and ``squeezed`` of ``info`` from its accesses."""
    rank = len(info.shape)
    kinds = [set() for _ in range(rank)]
    beyond = [False] * rank  # a tile's range reaches past the dimension: not blockable
    ones = [False] * rank  # indexed by a tile of one element (`block_size=1`)
    for acc in info.accesses:
        for d, e in enumerate(logical_dims(acc.entries)):
            kinds[d].add(_kind(e))
            ones[d] |= e[0] == "tile" and e[1].block_size == 1 and not e[1].dynamic
            if e[0] == "tile" and not e[1].dynamic and e[1].range_end > info.shape[d]:
                beyond[d] = True
    units, blocked, squeezed = [], [], []
    for d in range(rank):
        # a dynamic slice of a dimension before the last: a leading one too (any start)
        # a tile of one element there too: its block size stays 1 (rounded up to the 8 or 128
        # of a last two dimension, `tile.begin` would no longer be every element's)
        dynamic = ones[d] or any(k in _DYNAMIC_POINTS or (k == "dslice" and d < rank - 1)
                                 for k, _ in kinds[d])
        # the last dimension gets two, the one before it one: both become leading dimensions
        units.append(d - rank + 3 if dynamic and d >= rank - 2 else 0)
        only = next(iter(kinds[d])) if len(kinds[d]) == 1 else (None, None)
        if only[0] in ("tile", "grid") and only[1] is not None and not beyond[d]:
            blocked.append(only[1])
            squeezed.append(only[0] == "grid")
        else:
            blocked.append(None)
            squeezed.append(False)
    info.units, info.blocked, info.squeezed = tuple(units), tuple(blocked), tuple(squeezed)


def _requirements(infos, order, n_axes):
    """Per grid axis and per inner loop dimension: the TPU tilings their block size must
    respect, as ``(multiple, kernel rank, bits, extent)``: 128 on a kernel array's last
    dimension, 8 on the one before (for blocks and for ``pl.ds`` slices alike), unless the block
    is that dimension's whole ``extent``."""
    grid = [[] for _ in range(n_axes)]
    inner: dict = {}
    for key in order:
        info = infos[key]
        krank = len(info.shape) + sum(info.units)
        bits = info.dtype.itemsize * 8
        for acc in info.accesses:
            if acc.kind == "index" and not info.value_used:
                continue  # indices only: read from SMEM, no tiling
            kpos = 0
            for d, e in enumerate(logical_dims(acc.entries)):
                if e[0] == "tile":
                    req = 128 if kpos == krank - 1 else 8 if kpos == krank - 2 else 1
                    t, r = e[1], (req, krank, bits, info.shape[d])
                    if t.axis is not None:
                        grid[t.axis].append(r)
                    elif t.key is not None:
                        inner.setdefault(t.key, []).append(r)
                kpos += 1 + info.units[d]
    return grid, inner


def _legal(bs, requirements) -> bool:
    """Whether ``bs`` tiles every dimension it indexes legally on TPU (Pallas's rules): the
    whole dimension, or a multiple of its tiling. A tile may index dimensions of different
    extents (``grad[tile_b, tile_l]`` of extent ``L + 1`` while ``tile_l`` ranges over ``L``):
    the whole of one is not the whole of the other."""
    for req, rank, bits, n in requirements:
        if bs == n:
            continue
        if rank == 1 and req == 128:
            tiling = 128 * 32 // bits
            if not (bs % 1024 == 0 or (bs & (bs - 1) == 0 and bs >= tiling)):
                return False
        elif bs % req:
            return False
    return True


def legal_block(requirements, extent, provisional):
    """The smallest TPU-legal block size >= ``provisional``: at most the whole extent, unless
    ``provisional`` is already larger (an inner loop's explicit block size; its tile is masked
    and the tensor padded)."""
    bs = max(1, provisional)
    if bs >= extent and all(n == extent for *_, n in requirements) and provisional <= extent:
        return extent
    while not _legal(bs, requirements):
        bs += 1
    return bs


def default_block(requirements, extent):
    """A grid dimension without a configured block size: 1024 for the last dimension of a
    1-D tensor, 128 for a last dimension, 32 for a second-to-last, 1 for a leading one."""
    if any(r == 128 and rank == 1 for r, rank, *_ in requirements):
        d = 1024
    elif any(r == 128 for r, *_ in requirements):
        d = 128
    elif any(r == 8 for r, *_ in requirements):
        d = 32
    elif requirements:
        d = 1
    else:
        d = 128
    return min(d, extent)


def _inner_block_sizes(trace, requirements):
    """The TPU-legal block size of every inner loop dimension the trace entered."""
    out = {}
    for key, (extent, provisional) in trace.inner_loops.items():
        out[key] = legal_block(requirements.get(key, []), extent, provisional)
    return out


# --- roles ------------------------------------------------------------------------------------


def _covers(info: HostInfo, entries) -> bool:
    """Whether a store through ``entries`` writes every element of the tensor."""
    for d, e in enumerate(logical_dims(entries)):
        if e[0] == "full":
            continue
        if e[0] in ("tile", "grid"):
            t = e[1]
            if t.dynamic or not (t.range_begin == 0 and t.range_end == info.shape[d]):
                return False
        elif e[0] == "slice":
            if not (e[1] == 0 and e[2] == info.shape[d]):
                return False
        else:
            return False
    return True


def _roles(plan: LaunchPlan, n_axes) -> set:
    """Sets every tensor's roles and init policy; returns the grid axes that must run in
    order (``arbitrary``)."""
    prefetch = set()
    for key in plan.order:
        for acc in plan.infos[key].accesses:
            for d, e in enumerate(logical_dims(acc.entries)):
                if e[0] == "gather":
                    src = e[1].source.info
                    prefetch.add(src.key)
                    plan.gathers.append((src.key, plan.infos[key].shape[d], acc.where))
                if e[0] == "wrows":  # window start rows are read from SMEM
                    prefetch.update(src.info.key for _, src in e[1].sources)
    arbitrary: set = set()
    for key in plan.order:
        info = plan.infos[key]
        kinds = [a.kind for a in info.accesses]
        loads = "load" in kinds or ("index" in kinds and info.value_used)
        stores = [a for a in info.accesses if a.kind in ("store", "rmw")]
        covered = any(a.kind == "store" and _covers(info, a.entries) for a in stores)
        info.is_prefetch = key in prefetch
        info.is_output = bool(stores)
        info.is_input = loads or "rmw" in kinds or bool(stores and not covered)
        if info.is_output:
            arbitrary |= _revisits(info, n_axes)
    return arbitrary


def _revisits(info: HostInfo, n_axes) -> set:
    """Sets the init policy of an output; returns the axes along which its block is revisited
    (they run in order)."""
    revisit = tuple(a for a in range(n_axes) if a not in info.blocked)
    if not info.is_input:
        return set(revisit)
    if not revisit:
        info.init = "step"
    elif revisit == tuple(range(n_axes - len(revisit), n_axes)):
        info.init, info.init_axes = "first", revisit
    else:
        # revisited on steps that are not consecutive: keep the whole tensor resident
        rank = len(info.shape)
        info.blocked, info.squeezed = (None,) * rank, (False,) * rank
        info.init, info.init_axes = "first", tuple(range(n_axes))
        revisit = tuple(range(n_axes))
    return set(revisit)


def _padding(info: HostInfo) -> None:
    """Pads whole (unblocked) dimensions that tiles read or write past the end."""
    pad = list(info.shape)
    fronts = [0] * len(info.shape)
    for acc in info.accesses:
        for d, e in enumerate(logical_dims(acc.entries)):
            if e[0] in ("wrows", "dslice"):  # they start anywhere: zeros before and after
                fronts[d] = max(fronts[d], e[1].rows if e[0] == "wrows" else e[1].size)
                pad[d] = max(pad[d], _slice_reach(info.shape[d], fronts[d], e))
            if info.blocked[d] is None and e[0] == "tile":
                t = e[1]
                # data-dependent bounds: one block past the last whole block (clamped starts)
                reach = (cdiv(info.shape[d], t.size) + 1) * t.size if t.dynamic else t.window_end
                pad[d] = max(pad[d], reach)
    info.pad = tuple(p + f for p, f in zip(pad, fronts, strict=True))
    info.fronts = tuple(fronts) if any(fronts) else ()


def _slice_reach(extent, front, e) -> int:
    """How far past the front padding a dynamic window or slice reaches: its start is clamped
    to ``[-size, extent]`` (rounded up to its alignment), then it spans ``size``."""
    if e[0] == "wrows":
        return extent + e[1].rows
    return -(-extent // e[1].align) * e[1].align + e[1].size


# --- the Pallas call --------------------------------------------------------------------------


def _block_spec(info: HostInfo, sizes, offsets, n_axes):
    block, axes = [], []
    for d, n in enumerate(info.pad):
        axis = info.blocked[d]
        if axis is None:
            block.append(n)
        else:
            block.append(None if info.squeezed[d] else sizes[axis])
        axes.append(axis)
        block.extend([1] * info.units[d])
        axes.extend([None] * info.units[d])

    def index_map(*args):
        pids = args[:n_axes]
        return tuple(0 if a is None else pids[a] + offsets[a] for a in axes)

    return pl.BlockSpec(tuple(block), index_map)


def _init_outputs(plan, trace, n_axes):
    """Output blocks that are also read start as their input block (see the module docs)."""
    for key in plan.outputs:
        info = plan.infos[key]
        if info.init is None:
            continue
        in_ref, out_ref, _ = trace.refs[key]

        def copy(in_ref=in_ref, out_ref=out_ref):
            out_ref[...] = in_ref[...]

        if info.init == "step":
            copy()
            continue
        first = None
        for a in info.init_axes:
            at_start = pl.program_id(a) == 0
            first = at_start if first is None else first & at_start
        pl.when(first)(copy)


def make_plan(st, spec: TileSpec, device_fn, env, c0) -> LaunchPlan:
    """Plans one top-level device loop for the current arguments (see the module docs)."""
    name = st.kernel.name
    for b in spec.begins + spec.ends:
        if isinstance(b, DTensor):
            raise exc.UnsupportedConstruct(
                f"a top-level device loop with device-value bounds{where()}")
    extents = [e - b for b, e in zip(spec.begins, spec.ends, strict=True)]
    if any(x <= 0 for x in extents):
        raise exc.HelionError(
            f"kernel `{name}`: an empty device loop (extents {extents}){where()}")
    sizes, inner_sizes = _block_sizes(st, spec, device_fn, env, c0, extents)

    # the final trace: partial tiles known, accesses as the kernel will make them
    final = _analyze(st, spec, device_fn, env, c0, sizes, inner_sizes, masks=True)
    plan = LaunchPlan()
    plan.counter_after = st.counter
    plan.infos, plan.order = final.infos, final.order
    plan.grid_sizes, plan.inner_sizes = sizes, inner_sizes
    for i, bid in enumerate(spec.ids):
        if bid is not None:
            st.sizes[bid] = sizes[i]
    for key in plan.order:
        fold(plan.infos[key])
        layout(plan.infos[key])
    arbitrary = _roles(plan, len(extents))
    for key in plan.order:
        _padding(plan.infos[key])
    plan.prefetch = [k for k in plan.order if plan.infos[k].is_prefetch]
    plan.inputs = [k for k in plan.order if plan.infos[k].is_input]
    plan.outputs = [k for k in plan.order if plan.infos[k].is_output]
    if not plan.outputs:
        raise exc.HelionError(
            f"kernel `{name}`: a device loop that stores to no host tensor (write results with "
            f"`out[tile] = …`){where()}"
        )
    # a loop that reads nothing (`out[tile] = tile.index`) gets a one-element placeholder
    # input: a launch needs an array to run on
    plan.placeholder = not plan.prefetch and not plan.inputs
    _sources(plan, env)
    plan.env = env
    plan.pallas = _pallas_call(st, spec, plan, extents, arbitrary, device_fn, c0)
    return plan


def _block_sizes(st, spec, device_fn, env, c0, extents):
    """The TPU-legal block sizes of the grid axes and of the inner loop dimensions, from a
    first trace with provisional sizes (which shows what each tile indexes)."""
    provisional = []
    for i, x in enumerate(extents):
        bs = spec.block_size(i)
        provisional.append(min(bs, x) if bs is not None else min(DEFAULT_INNER_BLOCK, x))
    first = _analyze(st, spec, device_fn, env, c0, provisional, {}, masks=False)
    for key in first.order:
        fold(first.infos[key])
        layout(first.infos[key])
    grid_reqs, inner_reqs = _requirements(first.infos, first.order, len(extents))
    sizes = []
    for i, x in enumerate(extents):
        if spec.kind == "grid":
            sizes.append(1)
            continue
        bs = spec.block_size(i)
        bs = bs if bs is not None else default_block(grid_reqs[i], x)
        sizes.append(legal_block(grid_reqs[i], x, min(bs, x)))
    return sizes, _inner_block_sizes(first, inner_reqs)


def _sources(plan, env):
    """How to find each host tensor again on the next call: by argument name, else (a
    captured tensor) by weak reference."""
    import weakref

    for k, v in env.items():
        if is_host_array(v) and id(v) in plan.infos:
            plan.sources.setdefault(id(v), k)
    for key in plan.order:
        if key not in plan.sources:
            plan.sources[key] = weakref.ref(plan.infos[key].obj)


def _pallas_call(st, spec, plan, extents, arbitrary, device_fn, c0):
    sizes = plan.grid_sizes
    n_axes = len(extents)
    grid = tuple(cdiv(x, bs) for x, bs in zip(extents, sizes, strict=True))
    offsets = [b // bs if b % bs == 0 else None for b, bs in zip(spec.begins, sizes, strict=True)]
    if None in offsets:
        raise exc.UnsupportedConstruct(
            f"kernel `{st.kernel.name}`: a top-level loop whose begin is not a multiple of its "
            f"block size {sizes}{where()}"
        )
    in_specs = [_block_spec(plan.infos[k], sizes, offsets, n_axes) for k in plan.inputs]
    if plan.placeholder:
        in_specs.append(pl.BlockSpec((1,), lambda *_: (0,)))
    out_specs = [_block_spec(plan.infos[k], sizes, offsets, n_axes) for k in plan.outputs]
    n_pre, n_in = len(plan.prefetch), len(in_specs)
    aliases = {n_pre + plan.inputs.index(k): j for j, k in enumerate(plan.outputs)
               if k in plan.inputs}
    semantics = tuple("arbitrary" if a in arbitrary else "parallel" for a in range(n_axes))

    def body(*refs):
        emit = Trace("emit", plan, masks=True, inner_sizes=plan.inner_sizes)
        for j, k in enumerate(plan.prefetch):
            emit.refs[k] = (None, None, refs[j])
        for j, k in enumerate(plan.inputs):
            emit.refs[k] = (refs[n_pre + j], None, emit.refs.get(k, (None, None, None))[2])
        for j, k in enumerate(plan.outputs):
            in_ref, _, pref = emit.refs.get(k, (None, None, None))
            emit.refs[k] = (in_ref, refs[n_pre + n_in + j], pref)
        _init_outputs(plan, emit, n_axes)
        st.counter = c0
        tiles = grid_tiles(spec, sizes, "emit", masks=True)
        run_body(emit, device_fn, loop_index(spec, tiles), plan.env)

    out_shapes = tuple(
        jax.ShapeDtypeStruct(plan.infos[k].kshape, plan.infos[k].dtype) for k in plan.outputs
    )
    if n_pre:
        call = dict(grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=n_pre, grid=grid, in_specs=in_specs, out_specs=out_specs))
    else:
        call = dict(grid=grid, in_specs=in_specs, out_specs=out_specs)
    from tpukit import pallas

    return pallas.custom_kernel(
        lambda *a: out_shapes,
        body,
        input_output_aliases=aliases,
        # A Helion kernel's whole-array operands (gather tables) may take all of a
        # TensorCore's VMEM, not only the scoped default a Pallas call gets.
        compiler_params=pltpu.CompilerParams(dimension_semantics=semantics,
                                             vmem_limit_bytes=VMEM_BYTES),
        name=st.kernel.name,
        **call,
    )


# --- host arrays ----------------------------------------------------------------------------


def kernel_arrays(plan, hosts):
    """The arrays a launch passes: prefetched index tensors (flattened, int32), then inputs
    (cast, padded and reshaped to the kernel's layout)."""
    pre = [narrowed(np.ascontiguousarray(_arrays.to_numpy(hosts[k])).reshape(-1), np.int32,
                    plan.infos[k].name) for k in plan.prefetch]
    placeholder = [np.zeros(1, np.int32)] if plan.placeholder else []
    return pre + [to_kernel(hosts[k], plan.infos[k]) for k in plan.inputs] + placeholder


def narrowed(a: np.ndarray, dtype, name: str) -> np.ndarray:
    """``a`` as ``dtype``; an int64 tensor whose values do not fit int32 is an error (TPUs
    have no 64-bit integers), never a silent wrap."""
    dtype = np.dtype(dtype)
    if a.dtype == np.dtype(np.int64) and dtype == np.dtype(np.int32) and a.size:
        lo, hi = int(a.min()), int(a.max())
        info = np.iinfo(np.int32)
        if lo < info.min or hi > info.max:
            raise exc.HelionError(
                f"int64 tensor `{name}` holds {lo if lo < info.min else hi}, outside int32: "
                f"TPUs have no 64-bit integers and tpukit narrows int64 tensors to int32"
            )
    return a.astype(dtype) if a.dtype != dtype else a


def to_kernel(obj, info: HostInfo):
    a = narrowed(_arrays.to_numpy(obj), info.dtype, info.name)
    if info.flat:
        a = np.reshape(a, info.shape)
    if info.pad != info.shape:
        a = np.pad(a, [(info.front(d), p - n - info.front(d))
                       for d, (n, p) in enumerate(zip(info.shape, info.pad, strict=True))])
    return np.reshape(a, info.kshape)


def from_kernel(result, info: HostInfo):
    """A kernel output in the tensor's logical shape (padding dropped)."""
    a = np.reshape(np.asarray(result), info.pad)
    a = a[tuple(slice(info.front(d), info.front(d) + n) for d, n in enumerate(info.shape))]
    return np.reshape(a, info.flat) if info.flat else a


# SMEM holds scalar prefetch: 1 MiB on v5e and v6e, a few KiB of which Mosaic uses itself
SMEM_INDEX_LIMIT = (1 << 20) - (4 << 10)


def check_prefetch_fits(plan, arrays, kernel_name):
    """Index tensors go to SMEM whole on a TPU; one that cannot fit is an error at lowering
    (libtpu would fail with RESOURCE_EXHAUSTED). The CPU devices have no such limit."""
    for key, a in zip(plan.prefetch, arrays, strict=False):
        if a.nbytes > SMEM_INDEX_LIMIT:
            raise exc.HelionError(
                f"kernel `{kernel_name}`: index tensor `{plan.infos[key].name}` has {a.size} "
                f"elements; as TPU scalar prefetch (SMEM, 1 MiB) it can hold at most "
                f"{SMEM_INDEX_LIMIT // 4}: split the call"
            )


def check_indices(plan, hosts):
    """Gather and scatter indices must be valid (torch raises for them; a TPU would read or
    write the wrong memory)."""
    for key, extent, line in plan.gathers:
        idx = _arrays.to_numpy(hosts[key])
        if idx.size and (idx.min() < 0 or idx.max() >= extent):
            bad = idx[(idx < 0) | (idx >= extent)].reshape(-1)[0]
            raise exc.HelionError(
                f"index {int(bad)} is out of range for a dimension of size {extent}{line}"
            )
