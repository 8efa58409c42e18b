"""Device values: what the torch code inside a device loop computes with.

Inside ``hl.tile`` loops a Helion program calls torch operators on tiles of tensors. Here those
values are ``DTensor``s, each wrapping a JAX array that is being traced into a Pallas kernel
body. ``DTensor`` implements the torch operators, methods and ``__torch_function__`` for the
torch functions ``_ops`` implements; a ``TorchFunctionMode`` (``DeviceMode``) is active while a
device loop is traced, so torch factory functions (``torch.zeros``, …) and host tensors captured
in closures are handled too. Anything else is an ``UnsupportedConstruct`` naming the torch
function and the kernel source line.

Partial tiles. A ``DTensor`` knows, per dimension, the *partial* tile that indexes it (``dims``:
a ``Tile`` whose last tile may extend past the loop's end, else None). Helion defines that
"reduction operations know to ignore the invalid elements" of such a tile, so every reduction,
scan and matmul contraction over such a dimension first replaces the elements past the end by
the operation's identity (``mask_axes``); elementwise operations keep the tiles of their
operands, views move them with their dimension. A reshape that merges or splits a partially
tiled dimension makes it ``MIXED``: reducing over it is refused rather than computed wrongly.
"""

from __future__ import annotations

import math
import sys
from collections import namedtuple

import jax.numpy as jnp
import ml_dtypes
import numpy as np

from tpukit.helion import _affine, exc
from tpukit.helion._precision import opmath_scalar
from tpukit.helion._where import where

# --- dtypes ------------------------------------------------------------------------------


def _torch():
    return sys.modules.get("torch")


def jdtype(dtype):
    """A numpy/JAX dtype for a torch, numpy or JAX dtype (or Python type)."""
    if dtype is None:
        return None
    torch = _torch()
    if torch is not None and isinstance(dtype, torch.dtype):
        table = {
            torch.float32: np.float32,
            torch.bfloat16: ml_dtypes.bfloat16,
            torch.float16: np.float16,
            torch.int32: np.int32,
            torch.int64: np.int32,  # TPUs have no 64-bit integers: int64 computes in int32
            torch.int16: np.int16,
            torch.int8: np.int8,
            torch.uint8: np.int32,  # nor does the runtime have uint8 values: int32, wrapped
            # to the stored tensor's dtype on the host
            torch.bool: np.bool_,
            torch.float64: np.float32,  # likewise f64 computes in f32
        }
        if dtype not in table:
            raise exc.UnsupportedConstruct(f"dtype {dtype} in device code{where()}")
        return np.dtype(table[dtype])
    if dtype is float:
        return np.dtype(np.float32)
    if dtype is int:
        return np.dtype(np.int32)
    if dtype is bool:
        return np.dtype(np.bool_)
    return np.dtype(dtype)


def tdtype(dtype):
    """The torch dtype of a numpy dtype when torch is loaded, else the numpy dtype."""
    torch = _torch()
    d = np.dtype(dtype)
    if torch is None:
        return d
    table = {
        np.dtype(np.float32): torch.float32,
        np.dtype(ml_dtypes.bfloat16): torch.bfloat16,
        np.dtype(np.float16): torch.float16,
        np.dtype(np.int32): torch.int32,
        np.dtype(np.int16): torch.int16,
        np.dtype(np.int8): torch.int8,
        np.dtype(np.uint8): torch.uint8,
        np.dtype(np.bool_): torch.bool,
    }
    return table.get(d, d)


def is_float(d) -> bool:
    return jnp.issubdtype(d, jnp.floating)


def lowest(dtype):
    """The smallest value of ``dtype`` (-inf for floats): the identity of a maximum."""
    d = np.dtype(dtype)
    if is_float(d):
        return -np.inf
    if d == np.bool_:
        return False
    return np.iinfo(d).min


def highest(dtype):
    """The largest value of ``dtype`` (+inf for floats): the identity of a minimum."""
    d = np.dtype(dtype)
    if is_float(d):
        return np.inf
    if d == np.bool_:
        return True
    return np.iinfo(d).max


# --- partial-tile dimensions -----------------------------------------------------------------


class _Mixed:
    """A dimension that a reshape made out of a partial tile and other elements."""

    def __repr__(self):
        return "MIXED"


MIXED = _Mixed()


def _normal_dims(dims, ndim):
    if dims is None:
        return (None,) * ndim
    dims = tuple(dims)
    if len(dims) != ndim:
        raise exc.HelionError(f"internal: {len(dims)} tile dims for a rank-{ndim} value")
    return dims


def merge_dims(shape, *values) -> tuple:
    """The partial tiles of an elementwise result of ``shape`` from its operands (numpy
    broadcasting: a dimension keeps an operand's tile where that operand spans it)."""
    out = [None] * len(shape)
    for v in values:
        if not isinstance(v, DTensor):
            continue
        off = len(shape) - len(v.dims)
        if off < 0:
            continue
        for i, (t, n) in enumerate(zip(v.dims, v.shape, strict=True)):
            if t is not None and out[off + i] is None and n == shape[off + i]:
                out[off + i] = t
    return tuple(out)


def reduce_dims(dims, axes, keepdim) -> tuple:
    """The dims of a reduction's result: reduced axes dropped (or kept, untiled)."""
    if keepdim:
        return tuple(None if i in axes else t for i, t in enumerate(dims))
    return tuple(t for i, t in enumerate(dims) if i not in axes)


def reshape_dims(in_shape, dims, out_shape) -> tuple:
    """The dims after a reshape: a dimension carried over unchanged keeps its tile; one made by
    merging or splitting dimensions is ``MIXED`` when any of them had a partial tile."""
    out = [None] * len(out_shape)
    if all(t is None for t in dims):
        return tuple(out)
    i = j = 0
    while i < len(in_shape) and j < len(out_shape):
        if in_shape[i] == 1 and out_shape[j] != 1:
            i += 1
            continue
        if out_shape[j] == 1 and in_shape[i] != 1:
            j += 1
            continue
        group_in, group_out = [i], [j]
        pi, pj = in_shape[i], out_shape[j]
        i, j = i + 1, j + 1
        while pi != pj and i <= len(in_shape) and j <= len(out_shape):
            if pi < pj and i < len(in_shape):
                pi *= in_shape[i]
                group_in.append(i)
                i += 1
            elif pj < pi and j < len(out_shape):
                pj *= out_shape[j]
                group_out.append(j)
                j += 1
            else:
                break
        if len(group_in) == 1 and len(group_out) == 1:
            out[group_out[0]] = dims[group_in[0]]
        elif any(dims[k] is not None for k in group_in):
            for k in group_out:
                out[k] = MIXED
    return tuple(out)


def select(cond, a, b):
    """``jnp.where(cond, a, b)`` with a bool ``cond`` broadcast as int32 first: Mosaic cannot
    broadcast a bool vector across sublanes (``(t.index < n)[None, :]`` against a 2-D tile)."""
    shape = jnp.broadcast_shapes(jnp.shape(cond), jnp.shape(a), jnp.shape(b))
    if jnp.shape(cond) != shape and getattr(cond, "dtype", None) == jnp.bool_:
        cond = jnp.broadcast_to(cond.astype(jnp.int32), shape) != 0
    dtype = jnp.result_type(a, b)
    if jnp.issubdtype(dtype, jnp.floating) and jnp.dtype(dtype).itemsize == 2:
        # a mask from 32-bit values cannot select 16-bit ones (v6e): select in f32 (exact)
        f32 = jnp.float32
        return jnp.where(cond, jnp.asarray(a).astype(f32), jnp.asarray(b).astype(f32)).astype(dtype)
    return jnp.where(cond, a, b)


def mask_axes(x, axes, fill, what: str, a=None):
    """``x``'s array (or ``a``, an array of ``x``'s shape computed from it) with the elements
    past the end of partial tiles along ``axes`` replaced by ``fill`` (the identity of the
    reduction ``what`` about to run over them)."""
    if not isinstance(x, DTensor):
        return x if a is None else a
    a = x.a if a is None else a
    mask = None
    for ax in axes:
        t = x.dims[ax]
        if t is None:
            continue
        if t is MIXED:
            raise exc.UnsupportedConstruct(
                f"{what} over a dimension that a reshape made from a partial tile (the loop's "
                f"range is not a multiple of the block size) and other elements; reduce before "
                f"reshaping, or choose a block size that divides the range{where()}"
            )
        v = t.valid_along(a.shape, ax, x.dims)
        mask = v if mask is None else (mask & v)
    if mask is None:
        return a
    return jnp.where(mask, a, jnp.asarray(fill, a.dtype))


def valid_count(x, axes):
    """How many valid elements ``axes`` of ``x`` hold together (an int, or a traced int32)."""
    n = 1
    for ax in axes:
        t = x.dims[ax] if isinstance(x, DTensor) else None
        n = n * (t.valid_count() if t is not None and t is not MIXED else x.shape[ax])
    return n


# --- values ------------------------------------------------------------------------------


class HostTensorMisuse(exc.UnsupportedConstruct):
    pass


def unwrap(x):
    """JAX array (or Python scalar) of a device value; lists/tuples elementwise."""
    if isinstance(x, DTensor):
        return x.a
    from tpukit.helion._memory import TensorProxy
    from tpukit.helion._tiles import Tile

    if isinstance(x, Tile):
        raise exc.UnsupportedConstruct(
            "a tile used as a value (use `tile.index`, or index a tensor with it)" + where()
        )
    if isinstance(x, TensorProxy):
        x._misuse()
    if _is_host_tensor(x):
        raise HostTensorMisuse(
            "a host tensor used directly in device code (index it with tiles, e.g. `x[tile]`)"
            + where()
        )
    if isinstance(x, (list, tuple)):
        return type(x)(unwrap(v) for v in x)
    return x


def _is_host_tensor(x) -> bool:
    torch = _torch()
    return isinstance(x, np.ndarray) or (torch is not None and isinstance(x, torch.Tensor))


def as_dtensor(x) -> DTensor:
    """``x`` as a ``DTensor`` (Python and numpy scalars become 0-d arrays)."""
    if isinstance(x, DTensor):
        return x
    return DTensor(jnp.asarray(unwrap(x)))


def _binop(op, swap=False, name=None):
    def method(self, other):
        o = other if isinstance(other, (int, float, bool)) else unwrap(other)
        r = op(o, self.a) if swap else op(self.a, o)
        form = None
        if name is not None:
            x, y = (other, self) if swap else (self, other)
            form = _affine.binary(name, x, y, r.shape)
        return DTensor(r, merge_dims(r.shape, self, other), affine=form)

    return method


def _in_int32(fn):
    """``fn`` (a shift or a comparison) of integers narrower than 32 bits computed on them
    widened to int32, a shift's result narrowed back: the same values (torch shifts int8 and
    int16 as C does, in int), where Mosaic shifts only 32-bit lanes and lays out no mask of
    narrower ones it can use (an int8 `x > 0` on a 1-D block fails to compile)."""

    def op(a, b):
        dtype = jnp.result_type(a, b)
        if not jnp.issubdtype(dtype, jnp.integer) or jnp.iinfo(dtype).bits >= 32:
            return fn(a, b)
        wide = [x if isinstance(x, int) else jnp.asarray(x).astype(jnp.int32) for x in (a, b)]
        r = fn(*wide)
        return r if r.dtype == jnp.bool_ else r.astype(dtype)

    return op


Result = namedtuple("Result", ["values", "indices"])
"""What ``torch.max(x, dim)`` and friends return (``.values``, ``.indices``, unpackable)."""


class DTensor:
    """A device value (a tile of data) in a traced Helion device loop: a JAX array ``a`` and,
    per dimension, the partial tile indexing it (``dims``; see the module docs)."""

    __slots__ = ("_a", "dims", "perm_of", "affine")

    def __init__(self, a, dims=None, perm_of=None, affine=None):
        self._a = a
        # the exact value as an affine form of tiles and loaded offsets, when known (``_affine``)
        self.affine = affine
        # (source, permutation) when this is a transpose of ``source`` not yet computed: a
        # matmul contracts the source directly (Mosaic's matmul takes transposed operands,
        # a separate ``tpu.transpose`` is not always available)
        self.perm_of = perm_of
        ndim = len(perm_of[1]) if perm_of is not None else getattr(a, "ndim", 0)
        self.dims = _normal_dims(dims, ndim)

    @property
    def a(self):
        """The JAX array (a lazy transpose is computed on first use)."""
        if self._a is None:
            src, perm = self.perm_of
            self._a = jnp.transpose(src.a, perm)
        return self._a

    def permuted(self, perm) -> DTensor:
        """This value with its dimensions in the order ``perm``, computed lazily."""
        perm = tuple(perm)
        if perm == tuple(range(self.ndim)):
            return self
        src, base = (self.perm_of if self._a is None else (self, tuple(range(self.ndim))))
        return DTensor(None, tuple(self.dims[p] for p in perm),
                       perm_of=(src, tuple(base[p] for p in perm)))

    # torch protocol: torch.exp(d), F.softmax(d, dim=-1), …
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return torch_function(func, args, kwargs)

    # --- attributes ---
    @property
    def dtype(self):
        return tdtype(self.perm_of[0].a.dtype if self._a is None else self.a.dtype)

    @property
    def shape(self):
        if self._a is None:
            src, perm = self.perm_of
            return tuple(src.shape[p] for p in perm)
        return tuple(self.a.shape)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def T(self):  # noqa: N802 - torch's name
        return self.permuted(reversed(range(self.ndim)))

    @property
    def mT(self):  # noqa: N802
        n = self.ndim
        return self.permuted([*range(n - 2), n - 1, n - 2])

    @property
    def device(self):
        torch = _torch()
        return torch.device("cpu") if torch is not None else "cpu"

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return self.ndim

    def numel(self):
        return math.prod(self.shape)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"DTensor(shape={self.shape}, dtype={self.a.dtype})"

    def __bool__(self):
        raise exc.UnsupportedConstruct(
            "data-dependent control flow (a device value used as a Python bool)" + where()
        )

    def __float__(self):
        raise exc.UnsupportedConstruct("a device value converted to a Python float" + where())

    def __int__(self):
        raise exc.UnsupportedConstruct("a device value converted to a Python int" + where())

    def __index__(self):
        raise exc.UnsupportedConstruct("a device value used as a Python index" + where())

    def __iter__(self):
        raise exc.UnsupportedConstruct("iterating over a device value" + where())

    # --- indexing of device values (hl.subscript): static slices, None, Ellipsis, ints ---
    def __getitem__(self, index):
        return subscript(self, index)

    def __setitem__(self, index, value):
        raise exc.UnsupportedConstruct(
            "assigning into a device value (`v[...] = …`; store to a host tensor instead)"
            + where()
        )

    # --- operators ---
    __add__ = _binop(jnp.add, name="add")
    __radd__ = _binop(jnp.add, swap=True, name="add")
    __sub__ = _binop(jnp.subtract, name="sub")
    __rsub__ = _binop(jnp.subtract, swap=True, name="sub")
    # `*` and `/` of a Python number and a bf16 value use the number's f32 value, as torch's do
    # (``_precision``; torch's `+`/`-` round it to bf16 first, as JAX does)
    __mul__ = _binop(opmath_scalar(jnp.multiply), name="mul")
    __rmul__ = _binop(opmath_scalar(jnp.multiply), swap=True, name="mul")
    __truediv__ = _binop(opmath_scalar(jnp.true_divide))
    __rtruediv__ = _binop(opmath_scalar(jnp.true_divide), swap=True)
    __floordiv__ = _binop(jnp.floor_divide)
    __rfloordiv__ = _binop(jnp.floor_divide, swap=True)
    __mod__ = _binop(jnp.remainder)
    __rmod__ = _binop(jnp.remainder, swap=True)
    __pow__ = _binop(jnp.power)
    __rpow__ = _binop(jnp.power, swap=True)
    # bitwise on integers, logical on bools (as torch's `&`, `|`, `^`; `>>` is arithmetic on
    # signed integers, as torch's)
    __and__ = _binop(jnp.bitwise_and)
    __rand__ = _binop(jnp.bitwise_and, swap=True)
    __or__ = _binop(jnp.bitwise_or)
    __ror__ = _binop(jnp.bitwise_or, swap=True)
    __xor__ = _binop(jnp.bitwise_xor)
    __rxor__ = _binop(jnp.bitwise_xor, swap=True)
    __lshift__ = _binop(_in_int32(jnp.left_shift))
    __rlshift__ = _binop(_in_int32(jnp.left_shift), swap=True)
    __rshift__ = _binop(_in_int32(jnp.right_shift))
    __rrshift__ = _binop(_in_int32(jnp.right_shift), swap=True)
    __lt__ = _binop(_in_int32(jnp.less))
    __le__ = _binop(_in_int32(jnp.less_equal))
    __gt__ = _binop(_in_int32(jnp.greater))
    __ge__ = _binop(_in_int32(jnp.greater_equal))
    __eq__ = _binop(_in_int32(jnp.equal))  # type: ignore[assignment]
    __ne__ = _binop(_in_int32(jnp.not_equal))  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]

    def __matmul__(self, other):
        from tpukit.helion._ops import matmul

        return matmul(self, other)

    def __rmatmul__(self, other):
        from tpukit.helion._ops import matmul

        return matmul(other, self)

    def __neg__(self):
        return DTensor(-self.a, self.dims)

    def __pos__(self):
        return self

    def __abs__(self):
        return DTensor(jnp.abs(self.a), self.dims)

    def __invert__(self):
        a = self.a
        return DTensor(jnp.logical_not(a) if a.dtype == jnp.bool_ else jnp.bitwise_not(a),
                       self.dims)

    def __getattr__(self, name):
        from tpukit.helion._ops import lookup

        impl = lookup(name)
        if impl is None:
            raise exc.UnsupportedConstruct(f"method `Tensor.{name}` in device code{where()}")
        return lambda *args, **kwargs: call(name, (self, *args), kwargs)

    # in-place forms rebind (values are immutable; `acc += x` is `acc = acc + x`)
    def __iadd__(self, o):
        return self + o

    def __isub__(self, o):
        return self - o

    def __imul__(self, o):
        return self * o

    def __itruediv__(self, o):
        return self / o


class IndexVector(DTensor):
    """A 1-D vector of indices loaded straight from a host tensor (``idx[tile]``), which can
    index another host tensor (a gather or scatter through scalar prefetch, ``_memory``).

    ``source`` says where it was loaded from. Reading ``a`` (using it as a value rather than as
    an index) records that on the source, so that the plan also passes the index tensor as a
    regular input; a vector only used as an index has no value in the emitted kernel."""

    __slots__ = ("_arr", "source", "_shape", "_dtype")  # plus DTensor's ``affine``

    def __init__(self, a, dims, source, shape, dtype):
        self.source = source
        self._shape = tuple(shape)
        self._dtype = np.dtype(dtype)
        self._arr = a
        self.dims = _normal_dims(dims, len(self._shape))
        self.affine = None  # ``_affine.of`` gives an index vector's form

    @property
    def a(self):
        self.source.info.value_used = True
        if self._arr is None:
            raise exc.HelionError(
                "internal: an index vector used as a value was not loaded" + where()
            )
        return self._arr

    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return tdtype(self._dtype)

    def retyped(self):
        """The same indices (a cast between integer types does not change an index)."""
        return IndexVector(self._arr, self.dims, self.source, self._shape, self._dtype)


def subscript(value, index):
    """``value[index]`` for a device value: slices, ``None``, ``...`` and ints."""
    from tpukit.helion._tiles import Tile

    value = as_dtensor(value)
    items = index if isinstance(index, tuple) else (index,)
    for it in items:
        if isinstance(it, (DTensor, Tile)) or (isinstance(it, slice) and any(
            isinstance(s, (DTensor, Tile)) for s in (it.start, it.stop, it.step)
        )):
            raise exc.UnsupportedConstruct(
                "indexing a device value with a tile or a tensor (hl.subscript with dynamic "
                "indices)" + where()
            )
    a = value.a
    if a.dtype == jnp.bool_:
        # reshaped as int32: Mosaic cannot relayout a bool vector gaining a dimension
        out = a.astype(jnp.int32)[items if isinstance(index, tuple) else index] != 0
    else:
        out = a[items if isinstance(index, tuple) else index]
    form = _affine.of(value)
    form = form.expanded(items) if form is not None else None
    return DTensor(out, _subscript_dims(value, items), affine=form)


def _subscript_dims(value, items) -> tuple:
    dims, d, out = value.dims, 0, []
    explicit = sum(1 for it in items if it is not None and it is not Ellipsis)
    for it in items:
        if it is None:
            out.append(None)
        elif it is Ellipsis:
            n = len(dims) - explicit
            out.extend(dims[d : d + n])
            d += n
        elif isinstance(it, slice):
            whole = it.indices(value.shape[d]) == (0, value.shape[d], 1)
            out.append(dims[d] if whole else (MIXED if dims[d] is not None else None))
            d += 1
        else:  # an int: the dimension goes away
            d += 1
    out.extend(dims[d:])
    return tuple(out)


# --- torch functions -----------------------------------------------------------------------

# torch functions that are harmless on host values inside device code (sizes, dtypes)
_HOST_OK = {"size", "dim", "numel", "stride", "promote_types", "result_type", "__get__",
            "is_floating_point", "element_size", "get_device", "ndimension"}
_FACTORIES = ("zeros", "ones", "empty", "full", "arange")
_INT_CASTS = ("to", "long", "int", "type_as")


def _torch_funcs():
    """torch function object -> name (for the names ``_ops`` implements); built on first use."""
    global _TORCH_FUNCS
    if _TORCH_FUNCS is None:
        from tpukit.helion._ops import names

        torch = _torch()
        table = {}
        if torch is not None:
            for name in names():
                for ns in (torch, torch.Tensor, torch.nn.functional, torch.special):
                    f = getattr(ns, name, None)
                    if f is not None and callable(f):
                        table[f] = name
            for name in ("__getitem__", "__setitem__"):
                table[getattr(torch.Tensor, name)] = name
        _TORCH_FUNCS = table
    return _TORCH_FUNCS


_TORCH_FUNCS = None


def call(name, args, kwargs):
    """Runs the device implementation of torch function/method ``name``."""
    from tpukit.helion._ops import lookup

    if name in _INT_CASTS and args and isinstance(args[0], IndexVector):
        kept = _index_cast(name, args, kwargs)
        if kept is not None:
            return kept
    impl = lookup(name)
    try:
        return impl(*args, **kwargs)
    except exc.HelionError:
        raise
    except TypeError as e:
        raise exc.UnsupportedConstruct(f"`{name}` with these arguments ({e}){where()}") from None


def _index_cast(name, args, kwargs):
    """An integer cast of an index vector stays an index vector (the same indices)."""
    if name in ("long", "int"):
        return args[0].retyped()
    target = kwargs.get("dtype")
    for a in args[1:]:
        if not isinstance(a, str) and not _is_device(a):
            target = a.dtype if isinstance(a, DTensor) else a
    if target is not None and jnp.issubdtype(jdtype(target), jnp.integer):
        return args[0].retyped()
    return None


def _is_device(a) -> bool:
    torch = _torch()
    return torch is not None and isinstance(a, torch.device)


def _contains(x, types) -> bool:
    if isinstance(x, types):
        return True
    if isinstance(x, (list, tuple)):
        return any(_contains(v, types) for v in x)
    if isinstance(x, dict):
        return any(_contains(v, types) for v in x.values())
    return False


def torch_function(func, args, kwargs):
    """The device meaning of a torch function call seen inside a device loop."""
    from tpukit.helion._memory import TensorProxy, proxy_for
    from tpukit.helion._tiles import Tile

    kwargs = kwargs or {}
    name = _torch_funcs().get(func)
    if name in ("__getitem__", "__setitem__"):
        host, *rest = args
        p = proxy_for(host)
        return getattr(p, name)(*rest)
    device_args = _contains((args, kwargs), (DTensor, Tile, TensorProxy))
    if name is not None and (device_args or name in _FACTORIES):
        return call(name, args, kwargs)
    fname = getattr(func, "__name__", str(func))
    if not device_args and (fname in _HOST_OK or not _contains((args, kwargs), _host_types())):
        return func(*args, **kwargs)
    raise exc.UnsupportedConstruct(f"torch function `{_qualname(func)}` in device code{where()}")


def _host_types():
    torch = _torch()
    return (np.ndarray, torch.Tensor) if torch is not None else (np.ndarray,)


def _qualname(func) -> str:
    q = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    mod = getattr(func, "__module__", None) or ""
    head, _, tail = q.partition(".")
    if head in ("_VariableFunctionsClass", "_TensorBase", "TensorBase"):
        return ("torch." if head == "_VariableFunctionsClass" else "Tensor.") + tail
    if mod.startswith("torch") and "." not in q:
        return f"{mod}.{q}"
    return q


class DeviceMode:
    """The ``TorchFunctionMode`` active while a device loop is traced (when torch is loaded)."""

    def __init__(self):
        self._mode = None
        torch = _torch()
        if torch is not None:
            from torch.overrides import TorchFunctionMode

            class _Mode(TorchFunctionMode):
                def __torch_function__(self, func, types, args=(), kwargs=None):
                    return torch_function(func, args, kwargs)

            self._mode = _Mode()

    def __enter__(self):
        if self._mode is not None:
            self._mode.__enter__()
        return self

    def __exit__(self, *exc_info):
        if self._mode is not None:
            self._mode.__exit__(*exc_info)
