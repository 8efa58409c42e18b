"""In-place ATen operators in ``tpublas.mode()``: ``op_(self, …)`` runs as its out-of-place
counterpart ``op(self, …)`` on tpuBLAS (whatever serves that: a kernel, a factory), and
the result is written into ``self`` on the host, which is returned — the same tensor, as
ATen returns it. Autograd's in-place bookkeeping (the version counter, the graph's
rebase) happens above the mode, as in eager.

Counterparts beyond the name without ``_``: ``copy_(self, src)`` is ``_to_copy(src)`` to
``self``'s dtype, broadcast to its shape; ``fill_``/``zero_`` are ``full_like``;
``bernoulli_(self, p)`` is ``bernoulli.p`` (dropout's mask). The result
must have ``self``'s shape (ATen's rule: an in-place op does not broadcast ``self``); its
dtype is converted to ``self``'s, as ATen's in-place ops round their f32 result once.
"""

from __future__ import annotations

import torch

_ATEN = torch.ops.aten


def _counterpart(func, args, kwargs):
    """``(func, args, kwargs)`` of the out-of-place operator computing what the in-place
    ``func`` writes into ``args[0]``, or None."""
    schema = func._schema
    name = schema.name.removeprefix("aten::")
    if not name.endswith("_") or not schema.arguments or not args:
        return None
    alias = schema.arguments[0].alias_info
    if alias is None or not alias.is_write or not isinstance(args[0], torch.Tensor):
        return None
    self = args[0]
    if name == "copy_":
        src = args[1]
        if src.shape != self.shape:
            src = src.expand(self.shape)
        return _ATEN._to_copy.default, (src,), {"dtype": self.dtype}
    if name == "zero_":
        return _ATEN.full_like.default, (self, 0), {}
    if name == "bernoulli_" and func._overloadname == "float":
        return _ATEN.bernoulli.p, (self, args[1] if len(args) > 1 else 0.5), kwargs
    if name == "fill_":
        value = args[1].item() if isinstance(args[1], torch.Tensor) else args[1]
        return _ATEN.full_like.default, (self, value), {}
    packet = getattr(_ATEN, name[:-1], None)
    overload = getattr(packet, func._overloadname, None) if packet is not None else None
    if overload is None:
        return None
    return overload, args, kwargs


# In-place operators whose counterpart is not the overload of the name without ``_``.
_SPECIAL = ("copy_", "zero_", "fill_", "bernoulli_")


def plain_counterpart(func):
    """The out-of-place overload an in-place ``func`` runs as, with the same arguments
    (``add_.Tensor`` → ``add.Tensor``), or None (not in-place, one of the special
    counterparts above, or no such overload): what the mode's native dispatch serves in
    place, writing the result into ``self`` (``python/src/write_back.rs``)."""
    schema = func._schema
    name = schema.name.removeprefix("aten::")
    if func.namespace != "aten" or not name.endswith("_") or name in _SPECIAL \
            or not schema.arguments:
        return None
    alias = schema.arguments[0].alias_info
    if alias is None or not alias.is_write:
        return None
    packet = getattr(_ATEN, name[:-1], None)
    return getattr(packet, func._overloadname, None) if packet is not None else None


def call(func, args, kwargs, serve):
    """A callable running the in-place ``func`` on tpuBLAS (``serve`` finds the
    counterpart's call), or None if it is not in-place or its counterpart is not served."""
    counterpart = _counterpart(func, args, kwargs)
    if counterpart is None:
        return None
    inner = serve(*counterpart)
    if inner is None:
        return None
    return writer(func, args[0], inner)


def writer(func, self, inner):
    """A callable making the counterpart's call ``inner`` (``(fn, args, kwargs)``) and
    writing its result into ``self``, which it returns."""

    def run():
        fn, fn_args, fn_kwargs = inner
        out = fn(*fn_args, **fn_kwargs)
        if out.shape != self.shape:
            raise RuntimeError(
                f"{func}: output with shape {list(self.shape)} doesn't match the broadcast "
                f"shape {list(out.shape)}")
        with torch.no_grad():
            self.copy_(out)
        return self

    return run
