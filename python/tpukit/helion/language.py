"""``tpukit.helion.language`` (``hl``): Helion's device language, for tpukit.

Write ``import tpukit.helion.language as hl`` in place of ``import helion.language as hl``.
See ``tpukit/helion/__init__.py`` for how programs are translated and what is supported.
"""

from __future__ import annotations

import inspect
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from tpukit.helion import _memory, _ops, _random
from tpukit.helion import _state as _st
from tpukit.helion import exc as _exc
from tpukit.helion._tiles import Tile, TileSpec, make_spec
from tpukit.helion._values import DTensor as _DTensor
from tpukit.helion._values import as_dtensor as _as_dtensor
from tpukit.helion._values import is_float as _is_float
from tpukit.helion._values import jdtype as _jdtype
from tpukit.helion._values import lowest as _lowest
from tpukit.helion._values import mask_axes as _mask_axes
from tpukit.helion._values import merge_dims as _merge_dims
from tpukit.helion._values import reduce_dims as _reduce_dims
from tpukit.helion._values import subscript as _subscript
from tpukit.helion._values import unwrap as _unwrap
from tpukit.helion._where import where as _where

__all__ = [
    "jagged_tile",
    "Tile",
    "arange",
    "associative_scan",
    "atomic_add",
    "atomic_and",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_xchg",
    "atomic_xor",
    "barrier",
    "constexpr",
    "cumprod",
    "cumsum",
    "dot",
    "full",
    "grid",
    "join",
    "load",
    "rand",
    "randint",
    "reduce",
    "register_block_size",
    "register_tunable",
    "specialize",
    "split",
    "static_range",
    "store",
    "subscript",
    "tile",
    "tile_begin",
    "tile_block_size",
    "tile_end",
    "tile_id",
    "tile_index",
    "zeros",
]


# --- loops ---------------------------------------------------------------------------------


def tile(begin_or_end, end_or_none=None, /, block_size=None) -> TileSpec:
    """``for t in hl.tile(n)`` / ``tile(begin, end)`` / ``tile([m, n])`` / ``tile(n,
    block_size=…)``. The outermost loop is the Pallas grid; nested loops run in the kernel.
    A tile without ``block_size`` takes the next entry of ``Config.block_sizes`` (order of
    first appearance), else a default (see the package docs)."""
    return make_spec("tile", begin_or_end, end_or_none, block_size)


def grid(begin_or_end, end_or_none=None, /, step=None) -> TileSpec:
    """``for i in hl.grid(n)``: scalar indices (a tile of block size 1)."""
    if step not in (None, 1):
        raise _exc.UnsupportedConstruct(f"hl.grid with step={step}{_where()}")
    return make_spec("grid", begin_or_end, end_or_none, None)


def jagged_tile(parent) -> TileSpec:
    """``for tile_k in hl.jagged_tile(lengths)`` inside a loop over ``tile_b``: tiles up to
    ``lengths.amax()`` (a data-dependent loop), element ``k`` valid for lane ``i`` when
    ``k < lengths[i]``: loads read 0 there, stores skip it, reductions ignore it."""
    parent = _as_dtensor(parent)
    if parent.ndim < 1:
        raise _exc.UnsupportedConstruct(
            "hl.jagged_tile of a scalar (its argument has one length per parent lane; use "
            f"hl.tile for a scalar bound){_where()}"
        )
    # lanes past the end of a partial parent tile hold unspecified values: not counted
    lengths = _mask_axes(parent, range(parent.ndim), 0, "max").astype(jnp.int32)
    end = _DTensor(jnp.max(lengths))
    spec = make_spec("tile", 0, end, None)
    spec.jagged = parent
    return spec


def static_range(begin_or_end, end_or_none=None, step=1):
    """A compile-time unrolled range (a plain Python ``range``)."""
    if end_or_none is None:
        return range(int(begin_or_end))
    return range(int(begin_or_end), int(end_or_none), int(step))


# --- creation --------------------------------------------------------------------------------


def zeros(shape, dtype=None, device=None) -> _DTensor:
    """A device tensor of zeros; sizes may be tiles (the extent they index)."""
    _st.device_only("zeros")
    return full(shape, 0, dtype)


def full(shape, value, dtype=None, device=None) -> _DTensor:
    """A device tensor filled with ``value`` (f32 unless ``dtype`` says otherwise)."""
    _st.device_only("full")
    sizes, dims = _ops.shape_and_dims((shape,))
    d = _jdtype(dtype) if dtype is not None else np.dtype(np.float32)
    return _DTensor(jnp.full(sizes, _unwrap(value), d), dims)


def arange(*args, dtype=None, device=None) -> _DTensor:
    """``[begin, end)`` with static bounds (int32 unless ``dtype`` says otherwise)."""
    _st.device_only("arange")
    return _ops.arange(*args, dtype=dtype)


def rand(shape, seed, device=None, offsets=None) -> _DTensor:
    """Uniform f32 on ``[0, 1)``, a function of ``seed`` and each element's position in the
    logical shape only (``tpukit.helion._random``: reproducible across block sizes and
    devices; not Helion's Philox stream)."""
    _st.device_only("rand")
    if offsets is not None:
        raise _exc.UnsupportedConstruct(f"`hl.rand` with explicit offsets{_where()}")
    return _random.rand(shape, seed)


def randint(shape, low, high, seed, device=None) -> _DTensor:
    """int32 on ``[low, high)``, drawn like ``rand`` (``tpukit.helion._random``)."""
    _st.device_only("randint")
    return _random.randint(shape, low, high, seed)


# --- views -----------------------------------------------------------------------------------


def split(tensor) -> tuple[_DTensor, _DTensor]:
    """The two halves of a last dimension of size 2 (``hl.join``'s inverse)."""
    _st.device_only("split")
    x = _as_dtensor(tensor)
    if x.ndim == 0 or x.shape[-1] != 2:
        raise _exc.UnsupportedSplitOperation(
            f"hl.split of a value of shape {x.shape} (its last dimension must be 2){_where()}"
        )
    return tuple(_DTensor(x.a[..., i], x.dims[:-1]) for i in (0, 1))


def join(tensor0, tensor1) -> _DTensor:
    """``tensor0`` and ``tensor1`` (broadcast together) along a new last dimension of 2."""
    _st.device_only("join")
    a, b = _as_dtensor(tensor0), _as_dtensor(tensor1)
    shape = jnp.broadcast_shapes(a.shape, b.shape)
    dt = jnp.result_type(a.a, b.a)
    full = (*shape, 2)
    pair = [jnp.broadcast_to(v.a.astype(dt)[..., None], full) for v in (a, b)]
    first = lax.broadcasted_iota(jnp.int32, full, len(shape)) == 0
    return _DTensor(jnp.where(first, *pair), _merge_dims(shape, a, b) + (None,))


# --- tile attributes, as functions -------------------------------------------------------------


def tile_index(tile):
    """``tile.index``."""
    return tile.index


def tile_begin(tile):
    """``tile.begin``."""
    return tile.begin


def tile_end(tile):
    """``tile.end``."""
    return tile.end


def tile_block_size(tile):
    """``tile.block_size``."""
    return tile.block_size


def tile_id(tile):
    """``tile.id``."""
    return tile.id


# --- synchronisation -------------------------------------------------------------------------


def barrier() -> None:
    """A grid-wide barrier between top-level device loops. Each top-level loop is its own
    kernel, run to completion before the next starts, so the barrier already holds: this
    checks it is placed on the host, between loops."""
    if _st.current_trace() is not None:
        raise _exc.BarrierOnlyAllowedAtTopLevel(
            f"hl.barrier() inside a device loop (it separates top-level loops){_where()}"
        )
    _st.current_call()


# --- matmul --------------------------------------------------------------------------------


def dot(mat1, mat2, acc=None, out_dtype=None) -> _DTensor:
    """``mat1 @ mat2`` accumulated in f32 (int8: int32), plus ``acc`` if given. The result has
    ``acc``'s dtype, else ``out_dtype``, else the inputs' promoted dtype (int8: int32)."""
    _st.device_only("dot")
    prod, dims = _ops.product(mat1, mat2)
    if acc is not None:
        c = _as_dtensor(acc)
        r = (c.a.astype(prod.dtype) + prod).astype(c.a.dtype)
        return _DTensor(r, _merge_dims(r.shape, c, _DTensor(prod, dims)))
    a, b = _unwrap(mat1), _unwrap(mat2)
    if out_dtype is not None:
        d = _jdtype(out_dtype)
    elif jnp.issubdtype(a.dtype, jnp.integer):
        d = jnp.int32
    else:
        d = jnp.result_type(a, b)
    return _DTensor(prod.astype(d), dims)


# --- memory --------------------------------------------------------------------------------


def _index(index):
    return tuple(index) if isinstance(index, (list, tuple)) else (index,)


def load(tensor, index, extra_mask=None, eviction_policy=None) -> _DTensor:
    """``tensor[index]``; with ``extra_mask``, masked-off elements read 0."""
    _st.device_only("load")
    return _memory.load(tensor, _index(index), extra_mask)


def store(tensor, index, value, extra_mask=None) -> None:
    """``tensor[index] = value``; with ``extra_mask``, masked-off elements keep their value."""
    _st.device_only("store")
    _memory.store(tensor, _index(index), value, extra_mask)


def atomic_add(target, index, value, sem="relaxed") -> _DTensor:
    """``target[index] += value``, returning the values ``target[index]`` held before.

    Correct when several grid steps add into the same elements: the plan runs the grid axes
    along which ``target``'s block is revisited in order (``arbitrary``), keeping the block
    in VMEM between consecutive visits, or the whole tensor when the visits are not
    consecutive (see ``_plan``). An index tensor (``target[idx[tile], :]``) scatters row by
    row, so repeated indices accumulate. ``sem`` is accepted and checked; a TPU core runs
    the grid steps in order, so every order is sequential."""
    _st.device_only("atomic_add")
    return _memory.atomic_add(target, _index(index), value, sem)


def _atomic(op):
    def fn(target, index, value, sem="relaxed") -> _DTensor:
        _st.device_only(f"atomic_{op}")
        return _memory.atomic(target, _index(index), value, sem, op)

    fn.__name__ = f"atomic_{op}"
    fn.__doc__ = (f"``target[index] = {op}(target[index], value)``, returning the previous "
                  "values; exact under collisions, like ``atomic_add``.")
    return fn


atomic_max, atomic_min = _atomic("max"), _atomic("min")
atomic_and, atomic_or, atomic_xor = _atomic("and"), _atomic("or"), _atomic("xor")
atomic_xchg = _atomic("xchg")


# --- reductions and views --------------------------------------------------------------------


def reduce(combine_fn, input_tensor, dim=None, other=0, keep_dims=False):
    """Reduces ``input_tensor`` (or a tuple of same-shaped tensors) along ``dim`` (all
    dimensions when None) with the associative, commutative ``combine_fn``.

    ``combine_fn(a, b)`` combines elementwise; for a tuple input it takes two tuples (or the
    elements unpacked: ``combine_fn(a0, a1, b0, b1)``) and returns a tuple. Elements past the
    end of a partial tile count as ``other`` (one value, or one per tensor). There is no
    general reduction in Mosaic: the elements along ``dim`` are combined one after the other
    in a ``fori_loop`` (each picked out exactly by a masked maximum), which costs ``n`` steps
    over the reduced value for a dimension of ``n`` elements."""
    _st.device_only("reduce")
    multi = isinstance(input_tensor, (tuple, list))
    xs = [_as_dtensor(x) for x in (input_tensor if multi else [input_tensor])]
    others = list(other) if isinstance(other, (tuple, list)) else [other] * len(xs)
    if len(others) != len(xs):
        raise _exc.HelionError(
            f"hl.reduce: {len(others)} `other` values for {len(xs)} tensors{_where()}"
        )
    if any(x.shape != xs[0].shape for x in xs):
        raise _exc.UnsupportedConstruct(
            f"hl.reduce of tensors with different shapes {[x.shape for x in xs]}{_where()}"
        )
    combine = _combiner(combine_fn, len(xs), multi)
    ndim = xs[0].ndim
    axes = tuple(range(ndim)) if dim is None else (dim + ndim if dim < 0 else dim,)
    arrays = [_mask_axes(x, axes, o, "hl.reduce") for x, o in zip(xs, others, strict=True)]
    for ax in sorted(axes, reverse=True):
        arrays = _reduce_axis(combine, arrays, ax)
    dims = _reduce_dims(xs[0].dims, axes, True)
    if not keep_dims:
        arrays = [jnp.squeeze(a, axis=axes) for a in arrays]
        dims = _reduce_dims(xs[0].dims, axes, False)
    outs = [_DTensor(a.astype(x.a.dtype), dims) for a, x in zip(arrays, xs, strict=True)]
    return tuple(outs) if multi else outs[0]


def _combiner(combine_fn, n, multi):
    """``combine(left, right)`` on lists of ``n`` DTensors, whichever form ``combine_fn``
    takes (tensors, two tuples, or the elements unpacked)."""
    try:
        params = inspect.signature(combine_fn).parameters.values()
        positional = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                         p.POSITIONAL_OR_KEYWORD))
    except (TypeError, ValueError):
        positional = 2
    unpacked = multi and positional == 2 * n and n > 1

    def combine(left, right):
        if not multi:
            out = combine_fn(left[0], right[0])
        elif unpacked:
            out = combine_fn(*left, *right)
        else:
            out = combine_fn(tuple(left), tuple(right))
        out = list(out) if multi else [out]
        if len(out) != n:
            raise _exc.HelionError(
                f"hl.reduce: the combine function returned {len(out)} values for {n} tensors"
                f"{_where()}"
            )
        return out

    return combine


def _reduce_axis(combine, arrays, axis):
    """Combines the elements of ``arrays`` along ``axis`` in order (keeping it, extent 1)."""
    n = arrays[0].shape[axis]

    def element(i):
        return [_DTensor(_pick(a, axis, i)) for a in arrays]

    acc = [x.a for x in element(0)]
    if n == 1:
        return acc

    def step(i, carry):
        out = combine([_DTensor(c) for c in carry], element(i))
        return tuple(jnp.asarray(_unwrap(o)).astype(c.dtype) for o, c in
                     zip(out, carry, strict=True))

    return list(lax.fori_loop(1, n, step, tuple(acc)))


def _pick(a, axis, i):
    """Element ``i`` (dynamic) of ``a`` along ``axis`` (kept, extent 1): a maximum in which
    every other element is the lowest value (exact, NaN included)."""
    wide = a.astype(jnp.int32) if a.dtype == jnp.bool_ else a
    at = lax.broadcasted_iota(jnp.int32, a.shape, axis) == i
    masked = jnp.where(at, wide, jnp.asarray(_lowest(wide.dtype), wide.dtype))
    r = jnp.max(masked, axis=axis, keepdims=True)
    return r.astype(a.dtype)


def cumsum(input_tensor, dim, reverse=False):
    """Inclusive prefix sums along ``dim`` (``reverse``: suffix sums): of a float tensor a
    triangular matmul (``_ops.cumsum``, and its one caveat with infinities), of an integer
    one an exact ``associative_scan``."""
    _st.device_only("cumsum")
    if _is_float(_as_dtensor(input_tensor).a.dtype):
        return _ops.cumsum(input_tensor, dim, reverse=reverse)
    return associative_scan(lambda a, b: a + b, input_tensor, dim, reverse=reverse)


def cumprod(input_tensor, dim, reverse=False):
    """Inclusive prefix products along ``dim`` (an ``associative_scan``)."""
    _st.device_only("cumprod")
    return associative_scan(lambda a, b: a * b, input_tensor, dim, reverse=reverse)


def associative_scan(combine_fn, input_tensor, dim, reverse=False):
    """Inclusive scan of ``input_tensor`` (or a tuple of same-shaped tensors) along ``dim``
    with the associative ``combine_fn`` (the forms ``hl.reduce`` takes). Mosaic has no scan:
    the elements are combined one after the other in a ``fori_loop`` (each picked out by a
    masked maximum, each result placed with a select), ``n`` steps for ``n`` elements. Elements
    past the end of a partial tile only reach positions past it, which are never stored; a
    reverse scan over such a dimension would start from them, and is refused."""
    _st.device_only("associative_scan")
    multi = isinstance(input_tensor, (tuple, list))
    xs = [_as_dtensor(x) for x in (input_tensor if multi else [input_tensor])]
    if any(x.shape != xs[0].shape for x in xs):
        raise _exc.UnsupportedConstruct(
            f"hl.associative_scan of tensors with different shapes {[x.shape for x in xs]}"
            f"{_where()}"
        )
    ndim = xs[0].ndim
    axis = dim + ndim if dim < 0 else dim
    if reverse and xs[0].dims[axis] is not None:
        raise _exc.UnsupportedConstruct(
            f"a reverse scan over a partial tile's dimension (choose a block size that divides "
            f"the range){_where()}"
        )
    combine = _combiner(combine_fn, len(xs), multi)
    arrays = [x.a for x in xs]
    n = arrays[0].shape[axis]
    order = (lambda k: n - 1 - k) if reverse else (lambda k: k)
    iota = lax.broadcasted_iota(jnp.int32, arrays[0].shape, axis)

    def element(i):
        return [_DTensor(_pick(a, axis, i)) for a in arrays]

    def place(outs, acc, i):
        return tuple(jnp.where(iota == i, jnp.broadcast_to(c, o.shape), o)
                     for o, c in zip(outs, acc, strict=True))

    first = [x.a for x in element(order(0))]
    outs = place(tuple(jnp.zeros_like(a) for a in arrays), first, order(0))

    def step(k, carry):
        acc, outs = carry
        i = order(k)
        new = combine([_DTensor(c) for c in acc], element(i))
        new = tuple(jnp.asarray(_unwrap(o)).astype(c.dtype) for o, c in
                    zip(new, acc, strict=True))
        return new, place(outs, new, i)

    _, outs = lax.fori_loop(1, n, step, (tuple(first), outs)) if n > 1 else (first, outs)
    res = [_DTensor(o, x.dims) for o, x in zip(outs, xs, strict=True)]
    return tuple(res) if multi else res[0]


def subscript(tensor, index):
    """``tensor[index]`` for a device tensor (``index``: slices, ``None``, ints)."""
    return _subscript(tensor, tuple(index))


# --- tunables and specialization ---------------------------------------------------------------


def register_block_size(min_or_max, max_or_none=None, /) -> int:
    """A block size shared by several loops: the next ``Config.block_sizes`` entry, else
    ``min(128, next_power_of_2(max))``."""
    mx = min_or_max if max_or_none is None else max_or_none
    mn = 1 if max_or_none is None else int(min_or_max)
    bid = _st.allocate_block_id()
    v = _st.configured_block(bid)
    if v is None:
        v = min(128, _st.next_power_of_2(int(mx)))
    v = max(int(v), mn)
    _st.current_call().sizes[bid] = v
    return v


def register_tunable(name, fragment):
    """The config's value for ``name`` (``Config(name=…)``), else the fragment's default."""
    cfg = _st.current_call().config
    if name in cfg:
        return cfg[name]
    from tpukit.helion.autotuner import default_of

    return default_of(fragment)


def specialize(value):
    """A compile-time constant (shapes are always static here, so this is the value)."""
    if isinstance(value, (tuple, list)) or type(value).__name__ == "Size":
        return tuple(int(v) for v in value)
    return int(value)


class constexpr(NamedTuple):  # noqa: N801 - Helion's name
    """``hl.constexpr``: an annotation, or ``kernel(..., hl.constexpr(5.0))`` at a call site.
    Every scalar argument is a compile-time constant here."""

    value: object


# Helion APIs tpukit does not translate: using one is an error naming it (not an
# AttributeError that looks like a typo).
_NOT_SUPPORTED = {
    "atomic_cas", "rand4x", "dot_scaled",
    "inline_asm_elementwise", "inline_triton", "triton_kernel", "device_print", "signal",
    "wait", "stacktensor_like", "StackTensor",
    "make_async_remote_copy", "remote_barrier", "pdl_wait", "pdl_launch_dependents",
    "breakpoint", "AsyncCopyDescriptor", "ProcessGroupName", "float4_e2m1fn_x2_to_float32",
    "load_bfloat16_x16_to_float16",
}


def __getattr__(name):
    if name in _NOT_SUPPORTED:
        raise _exc.UnsupportedConstruct(f"`hl.{name}` is not supported by tpukit.helion{_where()}")
    raise AttributeError(f"module 'tpukit.helion.language' has no attribute {name!r}")
