"""``tpukit.helion.language`` (``hl``): Helion's device language, for tpukit.

Write ``import tpukit.helion.language as hl`` in place of ``import helion.language as hl``.
See ``tpukit/helion/__init__.py`` for how programs are translated and what is supported.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from tpukit.helion import _runtime as _rt
from tpukit.helion import exc as _exc
from tpukit.helion._runtime import Tile, TileSpec
from tpukit.helion._values import DTensor as _DTensor
from tpukit.helion._values import _shape_arg, jdtype, matmul_f32, unwrap, wrap
from tpukit.helion._values import subscript as _subscript
from tpukit.helion._where import where as _where

__all__ = [
    "Tile",
    "arange",
    "atomic_add",
    "constexpr",
    "cumsum",
    "dot",
    "full",
    "grid",
    "load",
    "reduce",
    "register_block_size",
    "register_tunable",
    "specialize",
    "static_range",
    "store",
    "subscript",
    "tile",
    "zeros",
]


# --- loops ---------------------------------------------------------------------------------


def tile(begin_or_end, end_or_none=None, /, block_size=None) -> TileSpec:
    """``for t in hl.tile(n)`` / ``tile(begin, end)`` / ``tile([m, n])`` / ``tile(n,
    block_size=…)``. The outermost loop is the Pallas grid; nested loops run in the kernel.
    A tile without ``block_size`` takes the next entry of ``Config.block_sizes`` (order of
    first appearance), else a default (see the package docs)."""
    return _rt.make_spec("tile", begin_or_end, end_or_none, block_size)


def grid(begin_or_end, end_or_none=None, /, step=None) -> TileSpec:
    """``for i in hl.grid(n)``: scalar indices (a tile of block size 1)."""
    if step not in (None, 1):
        raise _exc.UnsupportedConstruct(f"hl.grid with step={step}{_where()}")
    return _rt.make_spec("grid", begin_or_end, end_or_none, None)


def static_range(begin_or_end, end_or_none=None, step=1):
    """A compile-time unrolled range (a plain Python ``range``)."""
    if end_or_none is None:
        return range(int(begin_or_end))
    return range(int(begin_or_end), int(end_or_none), int(step))


# --- creation --------------------------------------------------------------------------------


def zeros(shape, dtype=None, device=None) -> _DTensor:
    """A device tensor of zeros; sizes may be tiles (their block size)."""
    return full(shape, 0, dtype)


def full(shape, value, dtype=None, device=None) -> _DTensor:
    _rt.device_only("full")
    d = jdtype(dtype) if dtype is not None else np.dtype(np.float32)
    return _DTensor(jnp.full(_shape_arg((shape,)), unwrap(value), d))


def arange(*args, dtype=None, device=None) -> _DTensor:
    _rt.device_only("arange")
    ints = [int(a) for a in args]
    d = jdtype(dtype) if dtype is not None else np.dtype(np.int32)
    return _DTensor(jnp.arange(*ints, dtype=d))


# --- matmul --------------------------------------------------------------------------------


def dot(mat1, mat2, acc=None, out_dtype=None) -> _DTensor:
    """``mat1 @ mat2`` accumulated in f32 (int8: int32), plus ``acc`` if given. The result has
    ``acc``'s dtype, else ``out_dtype``, else the inputs' promoted dtype (int8: int32)."""
    _rt.device_only("dot")
    a, b = unwrap(mat1), unwrap(mat2)
    prod = matmul_f32(a, b)
    if acc is not None:
        c = unwrap(acc)
        return _DTensor((c.astype(prod.dtype) + prod).astype(c.dtype))
    if out_dtype is not None:
        d = jdtype(out_dtype)
    elif jnp.issubdtype(a.dtype, jnp.integer):
        d = jnp.int32
    else:
        d = jnp.result_type(a, b)
    return _DTensor(prod.astype(d))


# --- memory --------------------------------------------------------------------------------


def _proxy(tensor):
    if isinstance(tensor, _rt.TensorProxy):
        return tensor
    return _rt.proxy_for(tensor)


def load(tensor, index, extra_mask=None, eviction_policy=None) -> _DTensor:
    """``tensor[index]``; with ``extra_mask``, masked-off elements read 0."""
    _rt.device_only("load")
    v = _proxy(tensor)[tuple(index)]
    if extra_mask is not None:
        v = _DTensor(jnp.where(unwrap(extra_mask), v.a, jnp.zeros((), v.a.dtype)))
    return v


def store(tensor, index, value, extra_mask=None) -> None:
    """``tensor[index] = value``; ``extra_mask`` is not supported yet."""
    _rt.device_only("store")
    if extra_mask is not None:
        raise _exc.UnsupportedConstruct(f"hl.store with extra_mask{_where()}")
    _proxy(tensor)[tuple(index)] = value


def atomic_add(target, index, value, sem="relaxed"):
    raise _exc.UnsupportedConstruct(f"hl.atomic_add (not translated yet){_where()}")


# --- reductions and views --------------------------------------------------------------------


def reduce(combine_fn, input_tensor, dim=None, other=0, keep_dims=False):
    raise _exc.UnsupportedConstruct(
        f"hl.reduce with a custom combine function (not translated yet; torch reductions such "
        f"as sum/amax/mean work directly){_where()}"
    )


def cumsum(input_tensor, dim, reverse=False):
    _rt.device_only("cumsum")
    a = unwrap(input_tensor)
    if reverse:
        a = jnp.flip(a, dim)
    r = jnp.cumsum(a, axis=dim)
    return wrap(jnp.flip(r, dim) if reverse else r)


def subscript(tensor, index):
    """``tensor[index]`` for a device tensor (``index``: slices, ``None``, ints)."""
    return _subscript(tensor, tuple(index))


# --- tunables and specialization ---------------------------------------------------------------


def register_block_size(min_or_max, max_or_none=None, /) -> int:
    """A block size shared by several loops: the next ``Config.block_sizes`` entry, else
    ``min(128, max)``."""
    mx = min_or_max if max_or_none is None else max_or_none
    mn = 1 if max_or_none is None else int(min_or_max)
    bid = _rt.allocate_block_id()
    v = _rt.configured_block(bid)
    if v is None:
        v = min(128, _rt.next_power_of_2(int(mx)))
    v = max(int(v), mn)
    _rt.current_call().sizes[bid] = v
    return v


def register_tunable(name, fragment):
    """The config's value for ``name`` (``Config(name=…)``), else the fragment's default."""
    cfg = _rt.current_call().config
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
