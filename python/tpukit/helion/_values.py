"""Device values: what the torch code inside a device loop computes with.

Inside ``hl.tile`` loops a Helion program calls torch operators on tiles of tensors. Here those
values are ``DTensor``s, each wrapping a JAX array that is being traced into a Pallas kernel
body. ``DTensor`` implements the torch operators, methods and ``__torch_function__`` for the
torch functions listed in ``_TORCH_FUNCS``; a ``TorchFunctionMode`` (``DeviceMode``) is active
while a device loop is traced, so torch factory functions (``torch.zeros``, …) and host tensors
captured in closures are handled too. Anything else is an ``UnsupportedConstruct`` naming the
torch function and the kernel source line.
"""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from tpukit.helion import exc
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
            torch.uint8: np.uint8,
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


_LOW = (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16))


def _is_float(d) -> bool:
    return jnp.issubdtype(d, jnp.floating)


# --- values ------------------------------------------------------------------------------


class HostTensorMisuse(exc.UnsupportedConstruct):
    pass


def unwrap(x):
    """JAX array (or Python scalar) of a device value; lists/tuples elementwise."""
    if isinstance(x, DTensor):
        return x.a
    from tpukit.helion._runtime import TensorProxy, Tile

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


def wrap(a):
    if isinstance(a, (tuple, list)):
        return type(a)(wrap(v) for v in a)
    if isinstance(a, (jax.Array, np.ndarray)) or hasattr(a, "aval"):
        return DTensor(a)
    return a


def _dim(d, ndim):
    return d + ndim if d < 0 else d


def _dims(dim, ndim):
    if dim is None or dim == () or dim == []:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        return tuple(_dim(d, ndim) for d in dim)
    return (_dim(dim, ndim),)


def _acc(a):
    """Reductions accumulate low-precision floats in f32 (as torch does)."""
    return a.astype(jnp.float32) if a.dtype in _LOW else a


def _reduce(fn, a, dim=None, keepdim=False, dtype=None):
    dims = _dims(dim, a.ndim)
    out_dtype = jdtype(dtype) if dtype is not None else a.dtype
    r = fn(_acc(a), axis=dims, keepdims=keepdim)
    return r.astype(out_dtype)


def _sum(x, dim=None, keepdim=False, *, dtype=None):
    return _reduce(jnp.sum, x, dim, keepdim, dtype)


def _mean(x, dim=None, keepdim=False, *, dtype=None):
    return _reduce(jnp.mean, x, dim, keepdim, dtype)


def _amax(x, dim=(), keepdim=False):
    return jnp.max(x, axis=_dims(dim, x.ndim), keepdims=keepdim)


def _amin(x, dim=(), keepdim=False):
    return jnp.min(x, axis=_dims(dim, x.ndim), keepdims=keepdim)


def _argmax(x, dim=None, keepdim=False):
    if dim is None:
        return jnp.argmax(x.reshape(-1)).astype(jnp.int32)
    return jnp.argmax(x, axis=_dim(dim, x.ndim), keepdims=keepdim).astype(jnp.int32)


def _argmin(x, dim=None, keepdim=False):
    if dim is None:
        return jnp.argmin(x.reshape(-1)).astype(jnp.int32)
    return jnp.argmin(x, axis=_dim(dim, x.ndim), keepdims=keepdim).astype(jnp.int32)


def _max(x, dim=None, keepdim=False):
    if isinstance(dim, (jax.Array, DTensor)) or hasattr(dim, "dtype"):
        return jnp.maximum(x, dim)
    if dim is None:
        return jnp.max(x)
    return (_amax(x, dim, keepdim), _argmax(x, dim, keepdim))


def _min(x, dim=None, keepdim=False):
    if isinstance(dim, (jax.Array, DTensor)) or hasattr(dim, "dtype"):
        return jnp.minimum(x, dim)
    if dim is None:
        return jnp.min(x)
    return (_amin(x, dim, keepdim), _argmin(x, dim, keepdim))


def _var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    c = 1 if correction is None and unbiased in (None, True) else (correction or 0)
    xf = _acc(x)
    dims = _dims(dim, x.ndim)
    mean = jnp.mean(xf, axis=dims, keepdims=True)
    n = math.prod(x.shape[d] for d in dims)
    v = jnp.sum((xf - mean) ** 2, axis=dims, keepdims=keepdim) / max(n - c, 0)
    return v.astype(x.dtype)


def _var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    v = _var(x, dim, unbiased, keepdim, correction=correction)
    return (v, _mean(x, dim, keepdim))


def _std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return jnp.sqrt(_var(x, dim, unbiased, keepdim, correction=correction))


def _softmax(x, dim=None, dtype=None, *, _stacklevel=3):
    d = x.dtype if dtype is None else jdtype(dtype)
    xf = _acc(x.astype(d))
    m = jnp.max(xf, axis=dim, keepdims=True)
    e = jnp.exp(xf - m)
    return (e / jnp.sum(e, axis=dim, keepdims=True)).astype(d)


def _log_softmax(x, dim=None, dtype=None, *, _stacklevel=3):
    d = x.dtype if dtype is None else jdtype(dtype)
    xf = _acc(x.astype(d))
    m = jnp.max(xf, axis=dim, keepdims=True)
    s = xf - m
    return (s - jnp.log(jnp.sum(jnp.exp(s), axis=dim, keepdims=True))).astype(d)


def _logsumexp(x, dim, keepdim=False):
    xf = _acc(x)
    m = jnp.max(xf, axis=_dims(dim, x.ndim), keepdims=True)
    r = jnp.log(jnp.sum(jnp.exp(xf - m), axis=_dims(dim, x.ndim), keepdims=True)) + m
    if not keepdim:
        r = jnp.squeeze(r, axis=_dims(dim, x.ndim))
    return r.astype(x.dtype)


def _promote(*arrays):
    return jnp.result_type(*arrays)


def matmul_f32(a, b):
    """``a @ b`` (2-D, or 3-D batched) accumulated in f32 (ints: in int32)."""
    acc = jnp.int32 if jnp.issubdtype(a.dtype, jnp.integer) else jnp.float32
    if a.ndim == 2 and b.ndim == 2:
        return jnp.dot(a, b, preferred_element_type=acc)
    if a.ndim == 3 and b.ndim == 3:
        if a.shape[0] == 1 and b.shape[0] == 1:
            return jnp.dot(a[0], b[0], preferred_element_type=acc)[None]
        return lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))), preferred_element_type=acc)
    raise exc.UnsupportedConstruct(
        f"matmul of {a.ndim}-D by {b.ndim}-D values (2-D or batched 3-D only){where()}"
    )


def _matmul(a, b):
    return matmul_f32(a, b).astype(_promote(a, b))


def _addmm(inp, m1, m2, *, beta=1, alpha=1):
    prod = matmul_f32(m1, m2)
    if alpha != 1:
        prod = prod * alpha
    base = inp.astype(prod.dtype)
    if beta != 1:
        base = base * beta
    out_dtype = inp.dtype if inp.dtype == np.dtype(np.float32) else _promote(inp, m1, m2)
    return (base + prod).astype(out_dtype)


def _clamp(x, min=None, max=None):  # noqa: A002 - torch's names
    if min is not None:
        x = jnp.maximum(x, min)
    if max is not None:
        x = jnp.minimum(x, max)
    return x


def _to(x, *args, **kwargs):
    dtype = kwargs.get("dtype")
    for a in args:
        if isinstance(a, DTensor) or isinstance(a, jax.Array):
            dtype = a.dtype
        elif not isinstance(a, (str,)) and not _is_device(a):
            dtype = a
    if dtype is None:
        return x
    return x.astype(jdtype(dtype))


def _is_device(a) -> bool:
    torch = _torch()
    return torch is not None and isinstance(a, torch.device)


def _reshape(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    return jnp.reshape(x, tuple(_size(s) for s in shape))


def _size(s):
    from tpukit.helion._runtime import Tile

    if isinstance(s, Tile):
        return s.block_size
    return int(s)


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    return tuple(_size(s) for s in shape)


def _permute(x, *dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    return jnp.transpose(x, dims)


def _transpose(x, d0, d1):
    return jnp.swapaxes(x, d0, d1)


def _t(x):
    return x.T


def _expand(x, *shape):
    shape = _shape_arg(shape)
    shape = tuple(x.shape[i - (len(shape) - x.ndim)] if s == -1 else s for i, s in enumerate(shape))
    return jnp.broadcast_to(x, shape)


def _squeeze(x, dim=None):
    if dim is None:
        return jnp.squeeze(x)
    dims = tuple(d for d in _dims(dim, x.ndim) if x.shape[d] == 1)
    return jnp.squeeze(x, axis=dims) if dims else x


def _flatten(x, start_dim=0, end_dim=-1):
    s, e = _dim(start_dim, x.ndim), _dim(end_dim, x.ndim)
    shape = x.shape[:s] + (math.prod(x.shape[s : e + 1]),) + x.shape[e + 1 :]
    return x.reshape(shape)


def _where_op(cond, a=None, b=None):
    if a is None:
        raise exc.UnsupportedConstruct("torch.where(cond) with one argument" + where())
    return jnp.where(cond, a, b)


def _gelu(x, approximate="none"):
    return jax.nn.gelu(x, approximate=approximate == "tanh")


def _full_like(x, value, *, dtype=None, **_):
    return jnp.full(x.shape, value, jdtype(dtype) if dtype is not None else x.dtype)


def _zeros_like(x, *, dtype=None, **_):
    return _full_like(x, 0, dtype=dtype)


def _ones_like(x, *, dtype=None, **_):
    return _full_like(x, 1, dtype=dtype)


def _factory(value):
    def make(*shape, dtype=None, device=None, layout=None, requires_grad=False, **_):
        d = jdtype(dtype) if dtype is not None else np.dtype(np.float32)
        return jnp.full(_shape_arg(shape), value, d)

    return make


def _full(shape, fill_value, *, dtype=None, **_):
    d = jdtype(dtype) if dtype is not None else (
        np.dtype(np.float32) if isinstance(fill_value, float) else np.dtype(np.int32)
    )
    return jnp.full(_shape_arg((shape,)), fill_value, d)


def _arange(*args, dtype=None, **_):
    ints = [int(a) for a in args]
    d = jdtype(dtype) if dtype is not None else np.dtype(np.int32)
    return jnp.arange(*ints, dtype=d)


def _cat(tensors, dim=0):
    return jnp.concatenate(list(tensors), axis=dim)


def _stack(tensors, dim=0):
    return jnp.stack(list(tensors), axis=dim)


def _masked_fill(x, mask, value):
    return jnp.where(mask, jnp.asarray(value, x.dtype), x)


def _div(a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return jnp.true_divide(a, b)
    if rounding_mode == "floor":
        return jnp.floor_divide(a, b)
    return jnp.trunc(jnp.true_divide(a, b)).astype(_promote(a, b))


def _add(a, b, *, alpha=1):
    return a + (b * alpha if alpha != 1 else b)


def _sub(a, b, *, alpha=1):
    return a - (b * alpha if alpha != 1 else b)


def _rsqrt(x):
    return lax.rsqrt(x)


def _cumsum(x, dim, *, dtype=None):
    r = jnp.cumsum(_acc(x), axis=_dim(dim, x.ndim))
    return r.astype(jdtype(dtype) if dtype is not None else x.dtype)


def _split_dtype_method(dtype):
    return lambda x: x.astype(dtype)


# name -> implementation on JAX arrays. The torch functions of the same name (``torch.name``,
# ``torch.Tensor.name``, ``torch.nn.functional.name``, ``torch.special.name``) map to it.
OPS = {
    # unary
    "exp": jnp.exp, "exp2": jnp.exp2, "log": jnp.log, "log2": jnp.log2, "log1p": jnp.log1p,
    "expm1": jnp.expm1, "sqrt": jnp.sqrt, "rsqrt": _rsqrt, "sin": jnp.sin, "cos": jnp.cos,
    "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid, "relu": jax.nn.relu, "abs": jnp.abs,
    "neg": jnp.negative, "negative": jnp.negative, "reciprocal": jnp.reciprocal,
    "floor": jnp.floor, "ceil": jnp.ceil, "round": jnp.round, "trunc": jnp.trunc,
    "erf": jax.scipy.special.erf, "square": jnp.square, "silu": jax.nn.silu, "gelu": _gelu,
    "logical_not": jnp.logical_not, "sign": jnp.sign, "isnan": jnp.isnan,
    "bitwise_not": jnp.bitwise_not,
    # binary and ternary
    "add": _add, "sub": _sub, "subtract": _sub, "mul": jnp.multiply, "multiply": jnp.multiply,
    "div": _div, "divide": _div, "true_divide": jnp.true_divide,
    "floor_divide": jnp.floor_divide, "maximum": jnp.maximum, "minimum": jnp.minimum,
    "pow": jnp.power, "remainder": jnp.remainder, "fmod": jnp.fmod, "eq": jnp.equal,
    "ne": jnp.not_equal, "lt": jnp.less, "le": jnp.less_equal, "gt": jnp.greater,
    "ge": jnp.greater_equal, "logical_and": jnp.logical_and, "logical_or": jnp.logical_or,
    "bitwise_and": jnp.bitwise_and, "bitwise_or": jnp.bitwise_or,
    "bitwise_xor": jnp.bitwise_xor, "where": _where_op, "clamp": _clamp, "clip": _clamp,
    "masked_fill": _masked_fill, "lerp": lambda a, b, w: a + w * (b - a),
    # reductions
    "sum": _sum, "mean": _mean, "amax": _amax, "amin": _amin, "max": _max, "min": _min,
    "argmax": _argmax, "argmin": _argmin, "var": _var, "var_mean": _var_mean, "std": _std,
    "softmax": _softmax, "log_softmax": _log_softmax, "logsumexp": _logsumexp,
    "cumsum": _cumsum,
    # matmul
    "matmul": _matmul, "mm": _matmul, "bmm": _matmul, "addmm": _addmm, "baddbmm": _addmm,
    # shapes and dtypes
    "reshape": _reshape, "view": _reshape, "permute": _permute, "transpose": _transpose,
    "t": _t, "expand": _expand, "broadcast_to": _expand, "squeeze": _squeeze,
    "unsqueeze": lambda x, d: jnp.expand_dims(x, _dim(d, x.ndim + 1)), "flatten": _flatten,
    "contiguous": lambda x, **_: x, "clone": lambda x, **_: x, "detach": lambda x: x,
    "to": _to, "type_as": lambda x, o: x.astype(o.dtype),
    "float": _split_dtype_method(jnp.float32), "bfloat16": _split_dtype_method(jnp.bfloat16),
    "half": _split_dtype_method(jnp.float16), "int": _split_dtype_method(jnp.int32),
    "long": _split_dtype_method(jnp.int32), "bool": _split_dtype_method(jnp.bool_),
    "expand_as": lambda x, o: jnp.broadcast_to(x, o.shape),
    "zeros_like": _zeros_like, "ones_like": _ones_like, "full_like": _full_like,
    "empty_like": _zeros_like, "cat": _cat, "concat": _cat, "stack": _stack,
    # factories (reached through DeviceMode)
    "zeros": _factory(0), "ones": _factory(1), "empty": _factory(0), "full": _full,
    "arange": _arange,
}

# torch functions that are harmless on host values inside device code (sizes, dtypes)
_HOST_OK = {"size", "dim", "numel", "stride", "promote_types", "result_type", "__get__",
            "is_floating_point", "element_size", "get_device", "ndimension"}


def _torch_funcs():
    """torch function object -> (name, implementation); built on first use."""
    global _TORCH_FUNCS
    if _TORCH_FUNCS is None:
        torch = _torch()
        table = {}
        if torch is not None:
            for name, impl in OPS.items():
                for ns in (torch, torch.Tensor, torch.nn.functional, torch.special):
                    f = getattr(ns, name, None)
                    if f is not None and callable(f):
                        table[f] = (name, impl)
            for name in ("__getitem__", "__setitem__"):
                table[getattr(torch.Tensor, name)] = (name, None)
        _TORCH_FUNCS = table
    return _TORCH_FUNCS


_TORCH_FUNCS = None


def _call(name, impl, args, kwargs):
    try:
        out = impl(*unwrap(list(args)), **{k: unwrap(v) for k, v in kwargs.items()})
    except exc.HelionError:
        raise
    except TypeError as e:
        raise exc.UnsupportedConstruct(f"`{name}` with these arguments ({e}){where()}") from None
    return wrap(out)


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
    from tpukit.helion._runtime import TensorProxy, Tile, proxy_for

    kwargs = kwargs or {}
    entry = _torch_funcs().get(func)
    name = getattr(func, "__name__", str(func))
    if entry is not None and entry[0] in ("__getitem__", "__setitem__"):
        host, *rest = args
        p = proxy_for(host)
        return getattr(p, entry[0])(*rest)
    device_args = _contains((args, kwargs), (DTensor, Tile, TensorProxy))
    if entry is not None and (device_args or entry[0] in ("zeros", "ones", "empty", "full",
                                                          "arange")):
        return _call(entry[0], entry[1], args, kwargs)
    if not device_args and (name in _HOST_OK or not _contains((args, kwargs), _host_types())):
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


def _binop(op, swap=False):
    def method(self, other):
        if isinstance(other, DTensor):
            o = other.a
        elif isinstance(other, (int, float, bool)):
            o = other
        elif isinstance(other, (jax.Array, np.generic)):
            o = other
        else:
            o = unwrap(other)
        return DTensor(op(o, self.a) if swap else op(self.a, o))

    return method


class DTensor:
    """A device value (a tile of data) in a traced Helion device loop."""

    __slots__ = ("a",)

    def __init__(self, a):
        self.a = a

    # torch protocol: torch.exp(d), F.softmax(d, dim=-1), …
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return torch_function(func, args, kwargs)

    # --- attributes ---
    @property
    def dtype(self):
        return tdtype(self.a.dtype)

    @property
    def shape(self):
        return tuple(self.a.shape)

    @property
    def ndim(self):
        return self.a.ndim

    @property
    def T(self):  # noqa: N802 - torch's name
        return DTensor(self.a.T)

    @property
    def mT(self):  # noqa: N802
        return DTensor(jnp.swapaxes(self.a, -1, -2))

    @property
    def device(self):
        torch = _torch()
        return torch.device("cpu") if torch is not None else "cpu"

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return self.a.ndim

    def numel(self):
        return math.prod(self.a.shape)

    def __len__(self):
        return self.a.shape[0]

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
    __add__ = _binop(jnp.add)
    __radd__ = _binop(jnp.add, swap=True)
    __sub__ = _binop(jnp.subtract)
    __rsub__ = _binop(jnp.subtract, swap=True)
    __mul__ = _binop(jnp.multiply)
    __rmul__ = _binop(jnp.multiply, swap=True)
    __truediv__ = _binop(jnp.true_divide)
    __rtruediv__ = _binop(jnp.true_divide, swap=True)
    __floordiv__ = _binop(jnp.floor_divide)
    __rfloordiv__ = _binop(jnp.floor_divide, swap=True)
    __mod__ = _binop(jnp.remainder)
    __rmod__ = _binop(jnp.remainder, swap=True)
    __pow__ = _binop(jnp.power)
    __rpow__ = _binop(jnp.power, swap=True)
    __matmul__ = _binop(_matmul)
    __rmatmul__ = _binop(_matmul, swap=True)
    __and__ = _binop(jnp.logical_and)
    __rand__ = _binop(jnp.logical_and, swap=True)
    __or__ = _binop(jnp.logical_or)
    __ror__ = _binop(jnp.logical_or, swap=True)
    __xor__ = _binop(jnp.logical_xor)
    __lt__ = _binop(jnp.less)
    __le__ = _binop(jnp.less_equal)
    __gt__ = _binop(jnp.greater)
    __ge__ = _binop(jnp.greater_equal)
    __eq__ = _binop(jnp.equal)  # type: ignore[assignment]
    __ne__ = _binop(jnp.not_equal)  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]

    def __neg__(self):
        return DTensor(-self.a)

    def __pos__(self):
        return self

    def __abs__(self):
        return DTensor(jnp.abs(self.a))

    def __invert__(self):
        a = self.a
        return DTensor(jnp.logical_not(a) if a.dtype == jnp.bool_ else jnp.bitwise_not(a))

    def __getattr__(self, name):
        impl = OPS.get(name)
        if impl is None:
            raise exc.UnsupportedConstruct(f"method `Tensor.{name}` in device code{where()}")
        return lambda *args, **kwargs: _call(name, impl, (self, *args), kwargs)

    # in-place forms rebind (values are immutable; `acc += x` is `acc = acc + x`)
    def __iadd__(self, o):
        return self + o

    def __isub__(self, o):
        return self - o

    def __imul__(self, o):
        return self * o

    def __itruediv__(self, o):
        return self / o


def subscript(value: DTensor, index):
    """``value[index]`` for a device value: slices, ``None``, ``...`` and ints."""
    from tpukit.helion._runtime import Tile

    items = index if isinstance(index, tuple) else (index,)
    for it in items:
        if isinstance(it, (DTensor, Tile)) or (isinstance(it, slice) and any(
            isinstance(s, (DTensor, Tile)) for s in (it.start, it.stop, it.step)
        )):
            raise exc.UnsupportedConstruct(
                "indexing a device value with a tile or a tensor (hl.subscript with dynamic "
                "indices)" + where()
            )
    return DTensor(value.a[items if isinstance(index, tuple) else index])


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
