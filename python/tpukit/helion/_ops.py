"""The torch operations device code may use, on ``DTensor``s.

Two kinds: ``ELEMENTWISE`` maps a torch name to a function of JAX arrays whose result has the
broadcast shape of its operands (the result keeps the operands' partial tiles, see
``_values``); ``STRUCTURAL`` maps a name to a function of ``DTensor``s that decides its result's
tiles itself: reductions and scans (which mask partial tiles with their identity first),
matmuls (which mask the contraction dimension with 0), views and factories. A torch function,
``Tensor`` method, ``torch.nn.functional`` or ``torch.special`` function of one of these names
maps to it.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tpukit.helion import exc
from tpukit.helion._precision import opmath_scalar, rounded_once
from tpukit.helion._values import (
    MIXED,
    DTensor,
    Result,
    as_dtensor,
    highest,
    is_float,
    jdtype,
    lowest,
    mask_axes,
    merge_dims,
    reduce_dims,
    reshape_dims,
    select,
    unwrap,
    valid_count,
)
from tpukit.helion._where import where

_LOW = (np.dtype(jnp.bfloat16), np.dtype(np.float16))


def _dim(d, ndim):
    return d + ndim if d < 0 else d


def _axes(dim, ndim) -> tuple:
    if dim is None or dim == () or dim == []:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        return tuple(_dim(d, ndim) for d in dim)
    return (_dim(dim, ndim),)


def _acc(a):
    """Reductions accumulate low-precision floats in f32 (as torch does)."""
    return a.astype(jnp.float32) if a.dtype in _LOW else a


def _sum_dtype(d):
    """torch's sum/cumsum result dtype: floats keep theirs; ints and bools give int64 (int32
    here)."""
    return d if is_float(d) else np.dtype(np.int32)


# --- reductions --------------------------------------------------------------------------


def _reduction(x, dim, keepdim, fill, fn, what, out_dtype=None):
    x = as_dtensor(x)
    axes = _axes(dim, x.ndim)
    a = mask_axes(x, axes, fill, what, _acc(x.a))
    r = fn(a, axis=axes, keepdims=keepdim)
    r = r.astype(out_dtype if out_dtype is not None else x.a.dtype)
    return DTensor(r, reduce_dims(x.dims, axes, keepdim))


def sum_(x, dim=None, keepdim=False, *, dtype=None):
    d = jdtype(dtype) if dtype is not None else _sum_dtype(as_dtensor(x).a.dtype)
    return _reduction(x, dim, keepdim, 0, jnp.sum, "sum", d)


def mean(x, dim=None, keepdim=False, *, dtype=None):
    x = as_dtensor(x)
    axes = _axes(dim, x.ndim)
    a = mask_axes(x, axes, 0, "mean", _acc(x.a).astype(jnp.float32))
    total = jnp.sum(a, axis=axes, keepdims=keepdim)
    n = valid_count(x, axes)
    d = jdtype(dtype) if dtype is not None else x.a.dtype
    return DTensor((total / n).astype(d), reduce_dims(x.dims, axes, keepdim))


def amax(x, dim=(), keepdim=False):
    x = as_dtensor(x)
    return _reduction(x, dim, keepdim, lowest(x.a.dtype), jnp.max, "amax")


def amin(x, dim=(), keepdim=False):
    x = as_dtensor(x)
    return _reduction(x, dim, keepdim, highest(x.a.dtype), jnp.min, "amin")


def _arg(x, dim, keepdim, largest):
    """The first index of the maximum (minimum) along ``dim`` (torch's argmax, NaN counting as
    the largest), from two reductions Mosaic has: the extreme value, then the smallest index
    where it occurs."""
    x = as_dtensor(x)
    fill = lowest(x.a.dtype) if largest else highest(x.a.dtype)
    if dim is None:
        a = jnp.reshape(mask_axes(x, range(x.ndim), fill, "argmax", _acc(x.a)), (-1,))
        axis, dims = 0, ()
    else:
        axis = _dim(dim, x.ndim)
        a = mask_axes(x, (axis,), fill, "argmax", _acc(x.a))
        dims = reduce_dims(x.dims, (axis,), keepdim)
    best = (jnp.max if largest else jnp.min)(a, axis=axis, keepdims=True)
    hit = a == best
    if is_float(a.dtype):
        # a NaN makes `best` NaN, equal to nothing: the first NaN is then the answer
        hit = hit | isnan(a)
    pos = lax.broadcasted_iota(jnp.int32, a.shape, axis)
    first = jnp.min(jnp.where(hit, pos, a.shape[axis]), axis=axis, keepdims=keepdim)
    if dim is None and keepdim:
        first = jnp.reshape(first, (1,) * x.ndim)
        dims = (None,) * x.ndim
    return DTensor(first, dims)


def argmax(x, dim=None, keepdim=False):
    return _arg(x, dim, keepdim, largest=True)


def argmin(x, dim=None, keepdim=False):
    return _arg(x, dim, keepdim, largest=False)


def max_(x, dim=None, keepdim=False):
    if isinstance(dim, DTensor) or hasattr(dim, "dtype"):
        return elementwise("maximum", jnp.maximum)(x, dim)
    if dim is None:
        return amax(x)
    return Result(amax(x, dim, keepdim), argmax(x, dim, keepdim))


def min_(x, dim=None, keepdim=False):
    if isinstance(dim, DTensor) or hasattr(dim, "dtype"):
        return elementwise("minimum", jnp.minimum)(x, dim)
    if dim is None:
        return amin(x)
    return Result(amin(x, dim, keepdim), argmin(x, dim, keepdim))


def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _moments(x, dim, unbiased, keepdim, correction)[0]


def var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _moments(x, dim, unbiased, keepdim, correction)


def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    v = _moments(x, dim, unbiased, keepdim, correction, jnp.float32)[0]
    return DTensor(jnp.sqrt(v.a).astype(as_dtensor(x).a.dtype), v.dims)


def _moments(x, dim, unbiased, keepdim, correction, dtype=None):
    """(variance, mean) over the valid elements, computed in f32, in ``dtype`` (default:
    ``x``'s)."""
    x = as_dtensor(x)
    c = 1 if correction is None and unbiased in (None, True) else (correction or 0)
    axes = _axes(dim, x.ndim)
    xf = _acc(x.a).astype(jnp.float32)
    n = valid_count(x, axes)
    m = jnp.sum(mask_axes(DTensor(xf, x.dims), axes, 0, "var"), axis=axes, keepdims=True) / n
    dev = mask_axes(DTensor(xf - m, x.dims), axes, 0, "var")
    v = jnp.sum(dev * dev, axis=axes, keepdims=keepdim) / jnp.maximum(n - c, 0)
    if not keepdim:
        m = jnp.squeeze(m, axis=axes)
    dims = reduce_dims(x.dims, axes, keepdim)
    d = x.a.dtype if dtype is None else dtype
    return DTensor(v.astype(d), dims), DTensor(m.astype(d), dims)


def _softmax_parts(x, dim, dtype):
    x = as_dtensor(x)
    d = x.a.dtype if dtype is None else jdtype(dtype)
    axis = _dim(dim, x.ndim)
    xf = mask_axes(x, (axis,), -np.inf, "softmax", _acc(x.a.astype(d)))
    shifted = xf - jnp.max(xf, axis=axis, keepdims=True)
    return x, d, axis, shifted


def softmax(x, dim=None, dtype=None, *, _stacklevel=3):
    x, d, axis, s = _softmax_parts(x, dim, dtype)
    e = jnp.exp(s)
    return DTensor((e / jnp.sum(e, axis=axis, keepdims=True)).astype(d), x.dims)


def log_softmax(x, dim=None, dtype=None, *, _stacklevel=3):
    x, d, axis, s = _softmax_parts(x, dim, dtype)
    r = s - jnp.log(jnp.sum(jnp.exp(s), axis=axis, keepdims=True))
    return DTensor(r.astype(d), x.dims)


def logsumexp(x, dim, keepdim=False):
    x = as_dtensor(x)
    axes = _axes(dim, x.ndim)
    xf = mask_axes(x, axes, -np.inf, "logsumexp", _acc(x.a))
    m = jnp.max(xf, axis=axes, keepdims=True)
    r = jnp.log(jnp.sum(jnp.exp(xf - m), axis=axes, keepdims=True)) + m
    if not keepdim:
        r = jnp.squeeze(r, axis=axes)
    return DTensor(r.astype(x.a.dtype), reduce_dims(x.dims, axes, keepdim))


MAX_SCAN_BATCH = 64
"""Most 2-D scans a cumsum over a value of 3 or more dimensions unrolls into (as for batched
matmuls: each is one triangular product)."""


def cumsum(x, dim, *, dtype=None, reverse=False):
    """Inclusive prefix sums along ``dim`` of a float value.

    Pallas has no TPU lowering for ``cumsum``; this is a product with a triangular matrix of
    ones at full f32 precision (one MXU pass per 128 columns on a TPU). Elements past the end
    of a partial tile count as 0. The product runs on the finite elements only (0 · inf and
    0 · NaN would poison the sums before a non-finite element); NaN, +inf and -inf elements
    are counted by products of 0/1 indicators (exact in f32 up to 2^24 elements) and give a
    prefix NaN (any NaN, or both infinities, so far), +inf or -inf, as torch's scan does.
    A value of 3 or more dimensions, scanned along one of its last two, is one 2-D scan per
    element of its leading dimensions (at most ``MAX_SCAN_BATCH``)."""
    x = as_dtensor(x)
    if not is_float(x.a.dtype):
        raise exc.UnsupportedConstruct(
            f"cumsum of {x.a.dtype} values (float values only on TPU){where()}"
        )
    axis = _dim(dim, x.ndim)
    a = mask_axes(x, (axis,), 0, "cumsum", x.a.astype(jnp.float32))
    if x.ndim == 1:
        r = _scan2(a[None, :], 1, reverse)[0]
    elif x.ndim == 2:
        r = _scan2(a, axis, reverse)
    else:
        lead = a.shape[:-2]
        n = math.prod(lead)
        if axis < x.ndim - 2 or n > MAX_SCAN_BATCH:
            raise exc.UnsupportedConstruct(
                f"cumsum of a {x.ndim}-D value of shape {tuple(a.shape)} along dimension "
                f"{axis} (along one of the last two, at most {MAX_SCAN_BATCH} leading "
                f"elements){where()}"
            )
        a3 = jnp.reshape(a, (n, *a.shape[-2:]))
        ax = axis - (x.ndim - 2)
        r = jnp.stack([_scan2(a3[i], ax, reverse) for i in range(n)])
        r = jnp.reshape(r, a.shape)
    d = jdtype(dtype) if dtype is not None else x.a.dtype
    return DTensor(r.astype(d), x.dims)


def _scan2(a2, ax, reverse):
    """The inclusive prefix sums of the 2-D f32 ``a2`` along ``ax``, non-finite elements
    counted apart (see ``cumsum``)."""
    inf = jnp.float32(jnp.inf)
    one, zero = jnp.float32(1), jnp.float32(0)
    # NaN is the one value not equal to itself (Mosaic has no unordered compare).
    is_nan = jnp.logical_not(a2 == a2)
    finite = jnp.where(jnp.abs(a2) < inf, a2, zero)
    r = _prefix_sum(finite, ax, reverse)
    nans, pos, neg = (
        _prefix_sum(jnp.where(m, one, zero), ax, reverse)
        for m in (is_nan, a2 == inf, a2 == -inf)
    )
    nan = jnp.float32(jnp.nan)
    r = jnp.where(pos > 0, inf, r)
    r = jnp.where(neg > 0, -inf, r)
    return jnp.where((nans > 0) | ((pos > 0) & (neg > 0)), nan, r)


def _prefix_sum(a2, axis, reverse):
    """Inclusive prefix sums of the 2-D f32 ``a2`` along ``axis`` (0 or 1): a product with a
    triangular matrix of ones at full f32 precision."""
    n = a2.shape[axis]
    rows = lax.broadcasted_iota(jnp.int32, (n, n), 0)
    cols = lax.broadcasted_iota(jnp.int32, (n, n), 1)
    hp = lax.Precision.HIGHEST
    if axis == 1:
        # out[:, c] = sum_r a[:, r] * (r <= c)
        tri = ((rows >= cols) if reverse else (rows <= cols)).astype(jnp.float32)
        return jnp.dot(a2, tri, precision=hp, preferred_element_type=jnp.float32)
    # out[c, :] = sum_r (r <= c) * a[r, :]
    tri = ((cols >= rows) if reverse else (cols <= rows)).astype(jnp.float32)
    return jnp.dot(tri, a2, precision=hp, preferred_element_type=jnp.float32)


# --- matmul --------------------------------------------------------------------------------


def _operand(x, axis):
    """``(value, axis)`` to contract for axis ``axis`` of ``x``: the source of a lazy transpose
    that keeps a batch dimension first (so no transpose is computed), else ``x`` itself."""
    if x.perm_of is not None and x._a is None:
        src, perm = x.perm_of
        if x.ndim == 2 or perm[0] == 0:
            return src, perm[axis]
    return x, axis


def product(a, b):
    """``(a @ b in f32 (ints: int32), its partial tiles)`` of 2-D or batched 3-D values: the
    contraction dimension masked with 0 first. A transposed operand (``k.T``,
    ``k.transpose(1, 2)``) is contracted along its source's dimension."""
    a, b = as_dtensor(a), as_dtensor(b)
    if a.ndim != b.ndim or a.ndim not in (2, 3):
        raise exc.UnsupportedConstruct(
            f"matmul of {a.ndim}-D by {b.ndim}-D values (2-D or batched 3-D only){where()}"
        )
    nd = a.ndim
    sa, ka = _operand(a, nd - 1)
    sb, kb = _operand(b, nd - 2)
    pa = mask_axes(sa, (ka,), 0, "matmul")
    pb = mask_axes(sb, (kb,), 0, "matmul")
    acc = jnp.int32 if jnp.issubdtype(pa.dtype, jnp.integer) else jnp.float32

    def dot2(x, y, kx, ky):
        return lax.dot_general(x, y, (((kx,), (ky,)), ((), ())), preferred_element_type=acc)

    if nd == 2:
        out = dot2(pa, pb, ka, kb)
    else:
        out = _batched(pa, pb, lambda i, j: dot2(pa[i], pb[j], ka - 1, kb - 1))
    dims = (a.dims[-2], b.dims[-1])
    if a.ndim == 3:
        dims = (a.dims[0] if a.dims[0] is not None else b.dims[0],) + dims
    return out, dims


MAX_BATCH = 64
"""Batched matmuls are unrolled (tpukit's runtime runs 2-D matmuls): at most this many per
tile, which bounds the kernel's size (Helion's linear-attention examples use 32)."""


def _batched(pa, pb, dot2):
    """A batched matmul of 3-D ``pa``/``pb`` (batch first, one of them may be 1) as one 2-D
    matmul per batch element, placed with selects (no concatenation op needed)."""
    n = max(pa.shape[0], pb.shape[0])
    if n > MAX_BATCH:
        raise exc.UnsupportedConstruct(
            f"a batched matmul over {n} batch elements in one tile (at most {MAX_BATCH}: use a "
            f"block size of at most {MAX_BATCH} on the batch dimension){where()}"
        )
    parts = [dot2(i if pa.shape[0] > 1 else 0, i if pb.shape[0] > 1 else 0) for i in range(n)]
    if n == 1:
        return parts[0][None]
    shape = (n, *parts[0].shape)
    which = lax.broadcasted_iota(jnp.int32, shape, 0)
    out = jnp.broadcast_to(parts[0][None], shape)
    for i in range(1, n):
        out = jnp.where(which == i, jnp.broadcast_to(parts[i][None], shape), out)
    return out


def matmul(a, b, out_dtype=None):
    """``torch.matmul``/``mm``/``bmm``, with ``out_dtype`` (``torch.bmm(a, b, torch.float32)``:
    the f32 product of bf16 operands, not rounded back to bf16)."""
    out, dims = product(a, b)
    dtype = jdtype(out_dtype) if out_dtype is not None else jnp.result_type(unwrap(a), unwrap(b))
    return DTensor(out.astype(dtype), dims)


def addmm(inp, m1, m2, out_dtype=None, *, beta=1, alpha=1):
    """``torch.addmm``/``baddbmm``: ``beta * inp + alpha * (m1 @ m2)`` summed in f32, in
    ``out_dtype`` when given, else f32 for an f32 ``inp`` (an f32 accumulator stays f32), else
    the operands' result type."""
    prod, dims = product(m1, m2)
    if alpha != 1:
        prod = prod * alpha
    base = unwrap(inp)
    base_f = jnp.asarray(base).astype(prod.dtype)
    if beta != 1:
        base_f = base_f * beta
    base_dtype = jnp.asarray(base).dtype
    if out_dtype is not None:
        dtype = jdtype(out_dtype)
    elif base_dtype == np.dtype(np.float32):
        dtype = base_dtype
    else:
        dtype = jnp.result_type(base, unwrap(m1), unwrap(m2))
    r = (base_f + prod).astype(dtype)
    return DTensor(r, merge_dims(r.shape, DTensor(prod, dims), inp))


# --- views ---------------------------------------------------------------------------------


def _size(s):
    from tpukit.helion._tiles import Tile

    if isinstance(s, Tile):
        return s.size
    return int(s)


def shape_and_dims(shape):
    """Sizes (tiles count as the extent they index) and the partial tiles of a shape
    argument (``[tile_m, 64]``, ``tile_m, 64``, a ``torch.Size``)."""
    from tpukit.helion._tiles import Tile

    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    sizes = tuple(_size(s) for s in shape)
    dims = tuple(s if isinstance(s, Tile) and s.partial else None for s in shape)
    return sizes, dims


def reshape(x, *shape):
    x = as_dtensor(x)
    sizes, _ = shape_and_dims(shape)
    out = jnp.reshape(x.a, sizes)
    return DTensor(out, reshape_dims(x.shape, x.dims, out.shape))


def flatten(x, start_dim=0, end_dim=-1):
    x = as_dtensor(x)
    s, e = _dim(start_dim, x.ndim), _dim(end_dim, x.ndim)
    shape = x.shape[:s] + (math.prod(x.shape[s : e + 1]),) + x.shape[e + 1 :]
    return reshape(x, shape)


def squeeze(x, dim=None):
    x = as_dtensor(x)
    if dim is None:
        return reshape(x, tuple(n for n in x.shape if n != 1))
    axes = tuple(d for d in _axes(dim, x.ndim) if x.shape[d] == 1)
    return reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in axes))


def unsqueeze(x, dim):
    x = as_dtensor(x)
    d = _dim(dim, x.ndim + 1)
    return DTensor(jnp.expand_dims(x.a, d), x.dims[:d] + (None,) + x.dims[d:])


def permute(x, *dims):
    x = as_dtensor(x)
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    return x.permuted(_dim(d, x.ndim) for d in dims)


def transpose(x, d0, d1):
    x = as_dtensor(x)
    perm = list(range(x.ndim))
    a, b = _dim(d0, x.ndim), _dim(d1, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return permute(x, perm)


def t(x):
    x = as_dtensor(x)
    return transpose(x, 0, 1) if x.ndim == 2 else x


def expand(x, *shape):
    x = as_dtensor(x)
    sizes, _ = shape_and_dims(shape)
    lead = len(sizes) - x.ndim
    sizes = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    out = jnp.broadcast_to(x.a, sizes)
    return DTensor(out, merge_dims(out.shape, x))


def expand_as(x, other):
    return expand(x, as_dtensor(other).shape)


def cat(tensors, dim=0):
    vals = [as_dtensor(v) for v in tensors]
    axis = _dim(dim, vals[0].ndim)
    out = jnp.concatenate([v.a for v in vals], axis=axis)
    dims = list(merge_dims(out.shape, *vals))
    dims[axis] = MIXED if any(v.dims[axis] is not None for v in vals) else None
    return DTensor(out, dims)


def stack(tensors, dim=0):
    vals = [as_dtensor(v) for v in tensors]
    axis = _dim(dim, vals[0].ndim + 1)
    out = jnp.stack([v.a for v in vals], axis=axis)
    inner = merge_dims(vals[0].shape, *vals)
    return DTensor(out, inner[:axis] + (None,) + inner[axis:])


# --- factories -------------------------------------------------------------------------------


def _factory(value):
    def make(*shape, dtype=None, device=None, layout=None, requires_grad=False, **_):
        d = jdtype(dtype) if dtype is not None else np.dtype(np.float32)
        sizes, dims = shape_and_dims(shape)
        return DTensor(jnp.full(sizes, value, d), dims)

    return make


def full(shape, fill_value, *, dtype=None, **_):
    fill_value = unwrap(fill_value)
    if dtype is not None:
        d = jdtype(dtype)
    elif isinstance(fill_value, bool):
        d = np.dtype(np.bool_)
    elif isinstance(fill_value, float):
        d = np.dtype(np.float32)
    else:
        d = np.dtype(np.int32) if isinstance(fill_value, int) else jnp.asarray(fill_value).dtype
    sizes, dims = shape_and_dims((shape,))
    return DTensor(jnp.full(sizes, fill_value, d), dims)


def arange(*args, dtype=None, **_):
    from tpukit.helion._ranges import StaticRange

    ints = [int(a) for a in args]
    d = jdtype(dtype) if dtype is not None else np.dtype(np.int32)
    start, stop, step = (0, ints[0], 1) if len(ints) == 1 else (*ints, 1)[:3]
    if step == 1 and jnp.issubdtype(d, jnp.integer):
        return StaticRange(start, stop, d)  # indexes as a static slice
    return DTensor(jnp.arange(*ints, dtype=d))


def _like(value):
    def make(x, fill=None, *, dtype=None, **_):
        x = as_dtensor(x)
        v = value if value is not None else unwrap(fill)
        return DTensor(jnp.full(x.shape, v, jdtype(dtype) if dtype is not None else x.a.dtype),
                       x.dims)

    return make


def _new(value):
    def make(x, *size, dtype=None, **_):
        """``x.new_zeros(size)`` (``new_ones``, ``new_empty``): a fresh device value of
        ``size`` (tiles allowed) and of ``x``'s dtype unless ``dtype=``; ``x`` may be a host
        tensor, which is not read."""
        sizes, dims = shape_and_dims(size)
        return DTensor(jnp.full(sizes, value, jdtype(dtype if dtype is not None else x.dtype)),
                       dims)

    return make


def new_full(x, size, fill_value, *, dtype=None, **_):
    """``x.new_full(size, fill_value)``: ``size`` filled, of ``x``'s dtype unless ``dtype=``."""
    sizes, dims = shape_and_dims((size,))
    d = jdtype(dtype if dtype is not None else x.dtype)
    return DTensor(jnp.full(sizes, unwrap(fill_value), d), dims)


NEW = {"new_zeros": _new(0), "new_ones": _new(1), "new_empty": _new(0), "new_full": new_full}
"""The ``Tensor.new_*`` factories: also callable on a host tensor in device code."""


# --- elementwise -----------------------------------------------------------------------------


def elementwise(name, impl):
    """A torch op applied elementwise: ``impl`` on the JAX arrays; the result keeps its
    operands' partial tiles."""

    def run(*args, **kwargs):
        out = impl(*unwrap(list(args)), **{k: unwrap(v) for k, v in kwargs.items()})
        values = (*args, *kwargs.values())
        if isinstance(out, tuple):
            return tuple(DTensor(o, merge_dims(o.shape, *values)) for o in out)
        out = jnp.asarray(out)
        return DTensor(out, merge_dims(out.shape, *values))

    run.__name__ = name
    return run


def _where_op(cond, a=None, b=None):
    if a is None:
        raise exc.UnsupportedConstruct("torch.where(cond) with one argument" + where())
    return select(cond, a, b)


# Chebyshev fit of erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z/2), z >= 0 (Numerical
# Recipes' erfcc): relative error below 1.2e-7 everywhere, from ops Mosaic lowers (exp,
# division, polynomial); JAX's own erfc has no Pallas TPU lowering.
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
           -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def _erfc(x):
    """``torch.erfc`` (accurate in the tails, unlike ``1 - erf``), computed in f32."""
    xf = x.astype(jnp.float32)
    z = jnp.abs(xf)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = jnp.zeros_like(t)
    for c in reversed(_ERFC_P):
        poly = poly * t + c
    r = t * jnp.exp(-z * z + poly)
    r = jnp.where(xf >= 0, r, 2.0 - r)
    return r.astype(x.dtype) if jnp.issubdtype(x.dtype, jnp.floating) else r


def _gelu(x, approximate="none"):
    """``F.gelu``: exact ``x/2 * erfc(-x/sqrt(2))`` (torch's default), or the tanh form."""
    if approximate == "tanh":
        return jax.nn.gelu(x, approximate=True)
    xf = x.astype(jnp.float32)
    return (0.5 * xf * _erfc(-xf * (1 / math.sqrt(2)))).astype(x.dtype)


def _clamp(x, min=None, max=None):  # noqa: A002 - torch's names
    if min is not None:
        x = jnp.maximum(x, min)
    if max is not None:
        x = jnp.minimum(x, max)
    return x


def _to(x, *args, **kwargs):
    dtype = kwargs.get("dtype")
    for a in args:
        if isinstance(a, jax.Array) or hasattr(a, "aval"):
            dtype = a.dtype
        elif not isinstance(a, str) and not _is_device(a):
            dtype = a
    if dtype is None:
        return x
    return x.astype(jdtype(dtype))


def _is_device(a) -> bool:
    import sys

    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.device)


def _div(a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return jnp.true_divide(a, b)
    if rounding_mode == "floor":
        return jnp.floor_divide(a, b)
    return jnp.trunc(jnp.true_divide(a, b)).astype(jnp.result_type(a, b))


def _add(a, b, *, alpha=1):
    return a + (b * alpha if alpha != 1 else b)


def _sub(a, b, *, alpha=1):
    return a - (b * alpha if alpha != 1 else b)


def not_equal(a, b):
    """torch's ``!=``: true when either side is NaN. (Pallas lowers ``jnp.not_equal`` on floats
    to an *ordered* comparison, false for NaN, on TPU.)"""
    return jnp.logical_not(jnp.equal(a, b))


def isnan(x):
    """``x != x`` the torch way (see ``not_equal``): true exactly for NaN."""
    return jnp.logical_not(jnp.equal(x, x))


def _functional(f):
    """``F.relu``/``F.silu`` with their ``inplace`` argument: device values are immutable, so
    only ``inplace=False`` (the default) has its meaning here."""

    def run(x, inplace=False):
        if inplace:
            raise exc.UnsupportedConstruct(
                "inplace=True on a device value (values are immutable: use the result)"
                + where()
            )
        return f(x)

    return run


def _cast(dtype):
    return lambda x: x.astype(dtype)


ELEMENTWISE = {
    # unary
    "exp": jnp.exp, "exp2": jnp.exp2, "log": jnp.log, "log2": jnp.log2, "log1p": jnp.log1p,
    "expm1": jnp.expm1, "sqrt": jnp.sqrt, "rsqrt": lax.rsqrt, "sin": jnp.sin, "cos": jnp.cos,
    "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid, "relu": _functional(jax.nn.relu),
    "silu": _functional(jax.nn.silu), "abs": jnp.abs,
    "neg": jnp.negative, "negative": jnp.negative, "reciprocal": jnp.reciprocal,
    "floor": jnp.floor, "ceil": jnp.ceil, "round": jnp.round, "trunc": jnp.trunc,
    "erf": jax.scipy.special.erf, "erfc": _erfc, "square": jnp.square, "gelu": _gelu,
    "logical_not": jnp.logical_not, "sign": jnp.sign, "isnan": isnan,
    "bitwise_not": jnp.bitwise_not,
    # binary and ternary
    "add": _add, "sub": _sub, "subtract": _sub, "mul": jnp.multiply, "multiply": jnp.multiply,
    "div": _div, "divide": _div, "true_divide": jnp.true_divide,
    "floor_divide": jnp.floor_divide, "maximum": jnp.maximum, "minimum": jnp.minimum,
    "pow": jnp.power, "remainder": jnp.remainder, "fmod": jnp.fmod, "eq": jnp.equal,
    "ne": not_equal, "lt": jnp.less, "le": jnp.less_equal, "gt": jnp.greater,
    "ge": jnp.greater_equal, "logical_and": jnp.logical_and, "logical_or": jnp.logical_or,
    "bitwise_and": jnp.bitwise_and, "bitwise_or": jnp.bitwise_or,
    "bitwise_xor": jnp.bitwise_xor, "where": _where_op, "clamp": _clamp, "clip": _clamp,
    "masked_fill": lambda x, mask, value: jnp.where(mask, jnp.asarray(value, x.dtype), x),
    "lerp": lambda a, b, w: a + w * (b - a),
    # dtypes and copies
    "to": _to, "type_as": lambda x, o: x.astype(o.dtype),
    "float": _cast(jnp.float32), "bfloat16": _cast(jnp.bfloat16), "half": _cast(jnp.float16),
    "int": _cast(jnp.int32), "long": _cast(jnp.int32), "bool": _cast(jnp.bool_),
    "contiguous": lambda x, **_: x, "clone": lambda x, **_: x, "detach": lambda x: x,
}

STRUCTURAL = {
    # reductions and scans
    "sum": sum_, "mean": mean, "amax": amax, "amin": amin, "max": max_, "min": min_,
    "argmax": argmax, "argmin": argmin, "var": var, "var_mean": var_mean, "std": std,
    "softmax": softmax, "log_softmax": log_softmax, "logsumexp": logsumexp,
    "cumsum": cumsum,
    # matmul
    "matmul": matmul, "mm": matmul, "bmm": matmul, "addmm": addmm, "baddbmm": addmm,
    # views
    "reshape": reshape, "view": reshape, "permute": permute, "transpose": transpose, "t": t,
    "expand": expand, "broadcast_to": expand, "expand_as": expand_as, "squeeze": squeeze,
    "unsqueeze": unsqueeze, "flatten": flatten, "cat": cat, "concat": cat, "stack": stack,
    # factories (reached through DeviceMode) and *_like
    "zeros": _factory(0), "ones": _factory(1), "empty": _factory(0), "full": full,
    "arange": arange, "zeros_like": _like(0), "ones_like": _like(1), "empty_like": _like(0),
    "full_like": _like(None),
    **NEW,
}

ROUNDED_ONCE = frozenset({
    "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh",
    "sigmoid", "silu", "reciprocal", "erf", "erfc", "gelu", "lerp",
})
"""Functions JAX spells as several primitives, or whose primitive may be lowered in several
steps: on bf16/f16 values computed in f32 and rounded once (``_precision``), as torch does.
The arithmetic operators already round once per operation; ``pow`` and ``remainder`` round as
torch's do (a Python float operand rounded to bf16 first)."""

OPMATH_SCALAR = frozenset({"mul", "multiply", "div", "divide", "true_divide"})
"""Products and quotients whose Python-number operand keeps its f32 value with a bf16 tensor, as
torch's do (its sums and differences round the number to bf16 first, as JAX does)."""


def _precise(name, f):
    if name in ROUNDED_ONCE:
        return rounded_once(f)
    return opmath_scalar(f) if name in OPMATH_SCALAR else f


_IMPLS = {n: elementwise(n, _precise(n, f)) for n, f in ELEMENTWISE.items()} | STRUCTURAL


def names():
    return _IMPLS.keys()


def lookup(name):
    """The device implementation of torch op ``name`` (a function of DTensors), or None."""
    return _IMPLS.get(name)
