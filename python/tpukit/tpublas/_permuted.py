"""Row-major copies of a permuted tensor in ``tpublas.mode()``: ``x.contiguous()`` of a
tensor whose memory is another tensor's, row-major, with its dimensions permuted (attention's
``q.transpose(1, 2).contiguous()``), and ``cat`` of such a tensor alone (besides empty 1-D
tensors, which ``cat`` skips: a key cache's first update), run as tpuBLAS's ``permute`` of
that row-major tensor. Taken as they come, the tensor is first gathered row-major at the
boundary and then copied again by the ``clone`` kernel; ``permute`` reads it where it lies,
once, in the transposing copy's register tiles, and its plan serves the next call.

Taken only where ``permute``'s windows fill: a tensor of at least 64 Ki elements whose last
axis moves (the transpose's register tiles), or stays with a multiple of 128 elements and
the rows it moves in groups of a multiple of 128 (the row swap's ``128 × 128`` windows; a
window overhanging the array is staged, which costs more than the gather it saves).
Interleaved in one process, µs per ``.contiguous()`` inside the mode, gather and copy →
``permute`` (torch eager), f32 (2026-11-29, one core): transposed ``(1024, 1024)`` 761 → 530
(753), ``(768, 3072)`` 2764 → 1404 (2773), ``(256, 256)`` 85 → 72 (46); ``[B, H, L, E] →
[B, L, H, E]`` of ``(8, 16, 128, 128)`` 1934 → 450 (627), ``(2, 12, 256, 128)`` 272 → 168
(113); but ``(2, 12, 256, 64)`` 179 → 345 and ``(2, 4, 64, 32)`` 49 → 103 (columns
overhanging), ``(16, 64, 128)`` by ``(1, 0, 2)`` 85 → 149 (rows overhanging): not taken.

``x.clone()`` keeps ``x``'s strides (ATen's ``preserve_format``): not taken here.
"""

from __future__ import annotations

import torch

_ATEN = torch.ops.aten
# The fewest elements, and the tile extent (`tpublas/src/copy.rs`'s `T`), of a copy taken.
_LEAST = 1 << 16
_TILE = 128


def call(func, args, kwargs):
    """``(args, kwargs)`` of ``aten.permute`` (tpuBLAS's copying one) that compute the call
    ``func(*args, **kwargs)``, if it is a row-major copy of a permuted row-major tensor (see
    the module); else None."""
    x = _copied(func, args, kwargs)
    if x is None or x.dim() < 2 or x.numel() < _LEAST or x.is_contiguous():
        return None
    order = sorted(range(x.dim()), key=lambda d: -x.stride(d))
    base = x.permute(order)
    if not base.is_contiguous():
        return None
    if order[-1] == x.dim() - 1 and (base.shape[-1] % _TILE or base.shape[-2] % _TILE):
        return None
    dims = [0] * len(order)
    for k, d in enumerate(order):
        dims[d] = k
    return (base, dims), {}


def _copied(func, args, kwargs):
    """The tensor the call copies row-major: ``clone``'s with ``memory_format`` contiguous,
    ``cat``'s only tensor besides empty 1-D ones (all of one dtype); else None."""
    if func is _ATEN.clone.default:
        if len(args) != 1 or kwargs.get("memory_format") is not torch.contiguous_format:
            return None
        return args[0] if isinstance(args[0], torch.Tensor) else None
    if func is _ATEN.cat.default and args and not set(kwargs) - {"dim"}:
        tensors = args[0]
        if not isinstance(tensors, (list, tuple)) or \
                not all(isinstance(t, torch.Tensor) for t in tensors):
            return None
        kept = [t for t in tensors if t.shape != (0,)]
        if len(kept) != 1 or any(t.dtype != kept[0].dtype for t in tensors):
            return None
        return kept[0]
    return None
