"""Arrays in and out: numpy, torch and JAX arrays to the native wire form and back.

The wire form is ``(dtype name, shape, data)`` with row-major little-endian data: going in,
``data`` is a C-contiguous numpy array of any numpy dtype (the native side reads its buffer
in place or copies it once); coming out, it is a native buffer exporting the result typed
and shaped (bf16 as int16 bits), which ``numpy.asarray`` views without a copy. Results
come back as the caller's kind of array (the kind of the first array argument).
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

from tpukit._native import DTypeError

# numpy dtype -> tpukit dtype name. bf16 is ml_dtypes' bfloat16 (what JAX uses).
_NAMES = {
    np.dtype(np.float32): "f32",
    np.dtype(ml_dtypes.bfloat16): "bf16",
    np.dtype(np.float16): "f16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int16): "i16",
    np.dtype(np.int8): "i8",
    np.dtype(np.bool_): "bool",
}
_DTYPES = {name: dtype for dtype, name in _NAMES.items()}
_BF16 = np.dtype(ml_dtypes.bfloat16)

SUPPORTED = "float32, bfloat16, float16, int32, int16, int8, bool"


def dtype_name(dtype) -> str:
    """The tpukit name of a numpy (or torch, or JAX) dtype."""
    d = numpy_dtype(dtype)
    try:
        return _NAMES[d]
    except KeyError:
        raise DTypeError(f"unsupported dtype {d} (tpukit supports {SUPPORTED})") from None


# Unsigned integers cross the boundary as the signed type of their width: the kernel IR holds
# both alike (two's complement bits; the importer keeps unsigned compares, divisions, shifts
# and conversions unsigned), and the caller's dtype is restored on the results.
_SIGNED = {
    np.dtype(np.uint32): np.dtype(np.int32),
    np.dtype(np.uint16): np.dtype(np.int16),
    np.dtype(np.uint8): np.dtype(np.int8),
}
# The unsigned dtypes by their MLIR element type.
UNSIGNED_MLIR = {
    "ui32": np.dtype(np.uint32),
    "ui16": np.dtype(np.uint16),
    "ui8": np.dtype(np.uint8),
}


def _bitcast(x, dtype):
    if isinstance(x, np.ndarray):
        return x.view(dtype)
    import jax

    return jax.lax.bitcast_convert_type(x, dtype)


def signed(x):
    """A numpy or JAX array (or tracer) of an unsigned dtype tpukit holds as signed, as that
    signed dtype (the same bits); any other array as it is."""
    to = _SIGNED.get(np.dtype(x.dtype)) if not is_torch(x) else None
    return x if to is None else _bitcast(x, to)


def bitcast_to(x, dtype):
    """A kernel result ``x`` as ``dtype`` (None: as it is), the dtype the caller's program
    declares for it: the same bits where ``dtype`` is unsigned and ``x`` its signed
    counterpart; otherwise ``x``."""
    if dtype is None or is_torch(x) or _SIGNED.get(np.dtype(dtype)) != np.dtype(x.dtype):
        return x
    return _bitcast(x, dtype)


def boundary_dtype_name(dtype) -> str:
    """The tpukit name of a dtype that may cross the call boundary: one tpukit holds, or an
    unsigned one held as its signed counterpart (named as numpy names it); any other is a
    DTypeError."""
    d = numpy_dtype(dtype)
    return str(d) if d in _SIGNED else dtype_name(d)


def is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def numpy_dtype_of(name: str) -> np.dtype:
    """The numpy dtype of a tpukit dtype name."""
    return _DTYPES[name]


def numpy_dtype(dtype) -> np.dtype:
    """A numpy dtype for a numpy, JAX or torch dtype."""
    if _is_torch_dtype(dtype):
        import torch

        torch_to_numpy = {
            torch.float32: np.float32,
            torch.bfloat16: ml_dtypes.bfloat16,
            torch.float16: np.float16,
            torch.int32: np.int32,
            torch.int16: np.int16,
            torch.int8: np.int8,
            torch.bool: np.bool_,
            torch.float64: np.float64,
            torch.int64: np.int64,
        }
        if dtype not in torch_to_numpy:
            raise DTypeError(f"unsupported dtype {dtype} (tpukit supports {SUPPORTED})")
        return np.dtype(torch_to_numpy[dtype])
    return np.dtype(dtype)


def _is_torch_dtype(dtype) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(dtype, torch.dtype)


def kind(x) -> str:
    """``"numpy"``, ``"torch"`` or ``"jax"``; anything else is a TypeError."""
    if isinstance(x, np.ndarray):
        return "numpy"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return "torch"
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.Array):
        return "jax"
    raise TypeError(
        f"expected an array (numpy.ndarray, torch.Tensor or jax.Array), got {type(x).__name__}"
    )


def eager_signature(args) -> tuple | None:
    """A hashable key of an eager call's arrays (each one's type, shape and dtype), under which
    a caller may keep what an earlier call with the same key resolved (its compiled kernel),
    skipping every check and lowering step next time; None for a call that must take the full
    path: no arguments, or anything but numpy arrays and plain CPU torch tensors (see
    ``torch_direct``)."""
    if not args:
        return None
    first = type(args[0])
    if first is np.ndarray:
        if not all(type(a) is np.ndarray for a in args):
            return None
    elif not torch_direct(args):
        return None
    return tuple((type(a), a.shape, a.dtype) for a in args)


def torch_direct(args) -> bool:
    """Whether a call on ``args`` with torch tensors may run tpukit directly rather than
    through its torch custom op: every argument a plain CPU ``torch.Tensor`` none of which
    needs a gradient, with nothing observing the call (no ``torch.compile`` trace, no dispatch
    or function mode, no functorch transform) — where the op would only call its CPU kernel."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    c = torch._C
    if (
        torch.compiler.is_compiling()  # first: dynamo folds it, and traces nothing after it
        or c._len_torch_dispatch_stack()
        or c._is_torch_function_mode_enabled()
        or c._functorch.peek_interpreter_stack() is not None
    ):
        return False
    grad = torch.is_grad_enabled()
    for a in args:
        if type(a) is not torch.Tensor or not a.is_cpu or (grad and a.requires_grad):
            return False
    return True


def plan_dtype_name(a: np.ndarray) -> str | None:
    """The tpukit name of a numpy array's dtype if tpukit holds it as it is (a native
    little-endian dtype of ``_NAMES``), else None."""
    return _NAMES.get(a.dtype)


def torch_plan_dtype_name(t) -> str | None:
    """The tpukit name of a torch tensor's dtype if tpukit holds it as it is, else None."""
    import torch

    return {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16",
            torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
            torch.bool: "bool"}.get(t.dtype)


def to_numpy(x) -> np.ndarray:
    """A C-contiguous numpy view (no copy: a CPU torch tensor through DLPack) or, where the
    memory is elsewhere or not contiguous, a copy, of an array of any supported kind."""
    if type(x) is np.ndarray:
        return _contiguous(x)
    k = kind(x)
    if k == "torch":
        return _contiguous(_torch_to_numpy(x))
    return _contiguous(np.asarray(x))


_TORCH_NAMES: dict = {}  # torch dtype -> tpukit name, of the dtypes `torch_wire` passes as is


def torch_wire(x):
    """The wire triple of a plain CPU torch tensor (or ``nn.Parameter``: a model's weights),
    the tensor itself as the data (read natively, no numpy view: see
    ``python/src/tensor.rs``; in place when C-contiguous, else gathered into a row-major
    copy there), when it is of a dtype tpukit holds as it is (f32, bf16, f16, i32, i16, i8)
    and needs no resolving (a lazy negation); else None, and the caller takes the general
    path (``to_numpy``, ``to_wire``). What tpuBLAS's calls take on their fast path. A
    tensor that requires a gradient is read as any other: the results are new tensors
    without one either way (as the general path's, which detaches); autograd through
    tpuBLAS is ``torch.ops.tpublas``'s, or ``tpublas.mode()``'s below torch's."""
    torch = sys.modules.get("torch")
    if torch is None or (type(x) is not torch.Tensor and type(x) is not torch.nn.Parameter):
        return None
    if not _TORCH_NAMES:
        _TORCH_NAMES.update({torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16",
                             torch.int32: "i32", torch.int16: "i16", torch.int8: "i8"})
    name = _TORCH_NAMES.get(x.dtype)
    if name is None or not x.is_cpu or x.is_neg():
        return None
    return (name, x.shape, x)  # the native side reads the tensor's memory (or gathers it)


def torch_wires(arrays) -> list | None:
    """The wire triples of ``arrays`` if every one is a tensor ``torch_wire`` passes as it
    is (and there is one); else None."""
    wires = []
    for a in arrays:
        w = torch_wire(a)
        if w is None:
            return None
        wires.append(w)
    return wires or None


def _torch_to_numpy(x) -> np.ndarray:
    """A numpy view of a CPU torch tensor's memory (any strides), or of a CPU copy.
    ``Tensor.numpy()`` rather than DLPack: the same view at a fraction of the cost. A lazy
    ``neg``/``conj`` view is resolved first (numpy has no such bits)."""
    import torch

    t = x.detach() if x.requires_grad else x
    if not t.is_cpu:
        t = t.cpu()
    if t.is_neg():
        t = t.resolve_neg()
    if t.is_conj():
        t = t.resolve_conj()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` if it is C-contiguous, else a C-contiguous copy; unlike ``np.ascontiguousarray``,
    a 0-d array stays 0-d (not shape ``(1,)``)."""
    return a if a.flags.c_contiguous else np.array(a, order="C")


def to_wire(x: np.ndarray):
    """``(dtype name, shape, byte view)`` of a numpy array (no copy when it is C-contiguous
    and little-endian)."""
    a = _contiguous(np.asarray(x))
    name = _NAMES.get(a.dtype)  # a native little-endian dtype: the common case, one lookup
    if name is None:
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        name = dtype_name(a.dtype)
    return (name, a.shape, a.reshape(-1).view(np.uint8))


def plain_wires(arrays) -> list | None:
    """The wire triples of ``arrays`` if every one is a C-contiguous numpy array of a dtype
    tpukit holds as it is (no copy, no conversion: the eager fast path); else None."""
    wires = []
    for a in arrays:
        name = _NAMES.get(a.dtype) if type(a) is np.ndarray else None
        if name is None or not a.flags.c_contiguous:
            return None
        wires.append((name, a.shape, a))
    return wires


def from_wire(wire) -> np.ndarray:
    """The numpy array of a wire triple the native side returned: a writable view of the
    native result (its typed buffer, bf16 as int16 bits), which it keeps alive."""
    name, _, data = wire
    a = np.asarray(data)
    return a.view(_BF16) if name == "bf16" else a


def torch_from_wire(wire):
    """The CPU torch tensor of a wire triple: a view of the native result (what
    ``to_kind(from_wire(wire), "torch")`` gives, in fewer steps)."""
    import torch

    name, _, data = wire
    t = torch.from_numpy(np.asarray(data))  # the typed buffer: bf16 as int16 bits
    return t.view(torch.bfloat16) if name == "bf16" else t


def to_kind(a: np.ndarray, k: str, like=None):
    """``a`` as an array of kind ``k`` (on ``like``'s torch device, when given). The result
    shares ``a``'s memory where the kind allows it: ``a`` is a fresh array the runtime
    returned, so torch tensors are made over it without a copy (through DLPack, a bf16 array
    through an int16 view), and so are JAX arrays on the CPU."""
    if k == "numpy":
        return a
    if k == "torch":
        import torch

        # torch.from_numpy: the same zero-copy view as DLPack, at a fraction of the cost.
        if a.dtype == _BF16:
            t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(a)
        device = getattr(like, "device", None)
        return t if device is None or device.type == "cpu" else t.to(device)
    import jax
    import jax.numpy as jnp

    if a.dtype != np.dtype(ml_dtypes.bfloat16) and jax.default_backend() == "cpu":
        try:
            return jnp.from_dlpack(a)
        except Exception:  # noqa: BLE001 - an unaligned buffer, say: copy instead
            pass
    return jnp.asarray(a)
