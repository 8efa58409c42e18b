"""Row-major copies of a permuted tensor in ``tpublas.mode()``: ``x.contiguous()`` of a
tensor whose memory is another tensor's, row-major, with its dimensions permuted (attention's
``q.transpose(1, 2).contiguous()``), and ``cat`` of such a tensor alone (besides empty 1-D
tensors, which ``cat`` skips: a key cache's first update), run as tpuBLAS's ``permute`` of
that row-major tensor. Taken as they come, the tensor is first gathered row-major at the
boundary and then copied again by the ``clone`` kernel; ``permute`` reads it where it lies,
once, in the transposing copy's register tiles, and its plan serves the next call.

Taken for tensors of at least 64 Ki elements; below that the call's Python path (the
mode's dispatch, this module's analysis, binding the operator: about 60 µs) outweighs the
gather it saves. Windows overhanging the array (rows of 32 or 64 columns in ``permute``'s
``128 × 128`` windows) are clipped, not staged, since the CPU code generator pairs the row
swap's windows by their kept dimensions (``runtime/src/cpu/codegen/clip/geometry.rs``).
Interleaved in one process, µs per ``.contiguous()`` inside the mode, gather and copy →
``permute`` (torch eager), f32 (2026-11-29, one core): transposed ``(1024, 1024)`` 761 → 530
(753), ``(768, 3072)`` 2764 → 1404 (2773), ``(256, 256)`` 85 → 72 (46); ``[B, H, L, E] →
[B, L, H, E]`` of ``(8, 16, 128, 128)`` 1934 → 450 (627), ``(2, 12, 256, 128)`` 272 → 168
(113). With the clipped row swap (session 26, one core, the gather and copy beside
``permute``): ``(2, 12, 256, 64)`` 278 → 205 (87), ``(4, 12, 200, 64)`` 347 → 222 (111),
``(1, 12, 1024, 64)`` 415 → 289 (143), ``(16, 64, 128)`` by ``(1, 0, 2)`` 180 → 155 (38);
bf16 ``(2, 12, 256, 64)`` 209 → 154 (50). ``tpublas.permute`` called directly on these takes
what torch's copy does (``(2, 12, 256, 64)`` f32 99 µs, torch 96); the rest is the mode's
Python path.

``x.clone()`` keeps ``x``'s strides (ATen's ``preserve_format``): not taken here.
"""

from __future__ import annotations

import torch

_ATEN = torch.ops.aten
# The fewest elements of a copy taken.
_LEAST = 1 << 16


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
