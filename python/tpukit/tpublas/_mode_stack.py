"""Entering and leaving torch's dispatch-mode stack for ``tpublas.mode()`` at a fraction of
``TorchDispatchMode.__enter__``/``__exit__``'s cost.

torch's own pair is Python: three lazily made deques of saved flags, the flags themselves
(module globals of ``torch.utils._python_dispatch``), two class-method calls whose answers
are fixed for a class, a ``hasattr`` and a ``DispatchKey`` comparison around the push and
the pop. Entered per call (``with mode: y = x + x``) it is ~3 µs, more than a planned
tpuBLAS add inside the mode. ``enter``/``leave`` do the same state changes directly: save the
three flags, set them as a mode that is not an infra mode and does not ignore compile
internals sets them, tell torch's C++ side, push the mode onto (pop it from) torch's
dispatch stack.

That is only right while torch does exactly this, so ``Mode`` takes ``enter``/``leave`` as its
``__enter__``/``__exit__`` (plain functions, no indirection per call) only when the names
torch's ``__enter__``, ``__exit__``, ``_push_mode`` and ``_pop_mode`` use are the ones read
from torch 2.15 below (a changed torch changes them) and the class is ``usable``; otherwise it
keeps torch's own methods (``MIRRORED`` is False)."""

from __future__ import annotations

from torch.utils import _python_dispatch as _pd
from torch.utils._python_dispatch import TorchDispatchMode

# `co_names` of torch 2.15's methods: what they read, write and call.
_EXPECTED = {
    "__enter__": ('_lazy_init_old_dispatch_mode_flags', 'old_dispatch_mode_flags', 'append',
                  '_is_in_torch_dispatch_mode', 'old_non_infra_dispatch_mode_flags',
                  '_is_in_non_infra_torch_dispatch_mode', 'is_infra_mode',
                  'old_without_ignore_compile_internals_dispatch_mode_flags',
                  '_is_in_any_mode_without_ignore_compile_internals',
                  'ignore_compile_internals',
                  'set_is_in_mode_without_ignore_compile_internals', '_push_mode'),
    "__exit__": ('__dict__', 'get', 'old_dispatch_mode_flags', 'pop',
                 '_is_in_torch_dispatch_mode', 'old_non_infra_dispatch_mode_flags',
                 '_is_in_non_infra_torch_dispatch_mode',
                 'old_without_ignore_compile_internals_dispatch_mode_flags',
                 '_is_in_any_mode_without_ignore_compile_internals',
                 'set_is_in_mode_without_ignore_compile_internals', '_pop_mode'),
    "_push_mode": ('hasattr', '_dispatch_key', 'torch', '_C', 'DispatchKey', 'PreDispatch',
                   'AssertionError', '_push_on_torch_dispatch_stack', 'torch._ops',
                   '_set_mode_pre_dispatch', 'get_cached_ops',
                   '_functionality_to_backend_keys', '_uncache_dispatch'),
    "_pop_mode": ('torch', '_C', 'DispatchKey', 'PreDispatch', 'torch._ops',
                  '_pop_mode_from_pre_dispatch', 'isinstance', '_TorchDispatchModeKey',
                  '_pop_torch_dispatch_stack'),
}


def _mirrored() -> bool:
    functions = {"__enter__": TorchDispatchMode.__enter__,
                 "__exit__": TorchDispatchMode.__exit__,
                 "_push_mode": getattr(_pd, "_push_mode", None),
                 "_pop_mode": getattr(_pd, "_pop_mode", None)}
    for name, names in _EXPECTED.items():
        code = getattr(functions[name], "__code__", None)
        if code is None or code.co_names != names:
            return False
    return all(hasattr(_pd, name) for name in (
        "_is_in_torch_dispatch_mode", "_is_in_non_infra_torch_dispatch_mode",
        "_is_in_any_mode_without_ignore_compile_internals",
        "set_is_in_mode_without_ignore_compile_internals",
        "_push_on_torch_dispatch_stack", "_pop_torch_dispatch_stack"))


MIRRORED = _mirrored()


def usable(cls) -> bool:
    """Whether ``enter``/``leave`` do for modes of ``cls`` what torch's methods would: torch
    is the one mirrored, and ``cls`` is a plain mode class (no pre-dispatch or mode key, not
    an infra mode, not ignoring compile internals)."""
    return (MIRRORED and not hasattr(cls, "_dispatch_key") and not hasattr(cls, "_mode_key")
            and not cls.is_infra_mode() and not cls.ignore_compile_internals())


def enter(mode):
    """``TorchDispatchMode.__enter__`` for a mode of a ``usable`` class, which keeps the
    flags it replaces in ``mode._saved_flags`` (a list, one entry per level entered)."""
    mode._saved_flags.append((_pd._is_in_torch_dispatch_mode,
                              _pd._is_in_non_infra_torch_dispatch_mode,
                              _pd._is_in_any_mode_without_ignore_compile_internals))
    _pd._is_in_torch_dispatch_mode = True
    _pd._is_in_non_infra_torch_dispatch_mode = True
    _pd._is_in_any_mode_without_ignore_compile_internals = True
    _pd.set_is_in_mode_without_ignore_compile_internals(True)
    _pd._push_on_torch_dispatch_stack(mode)
    return mode


def leave(mode, exc_type=None, exc_val=None, exc_tb=None):
    """``TorchDispatchMode.__exit__`` for a mode ``enter`` entered; exceptions propagate."""
    (_pd._is_in_torch_dispatch_mode, _pd._is_in_non_infra_torch_dispatch_mode,
     _pd._is_in_any_mode_without_ignore_compile_internals) = mode._saved_flags.pop()
    _pd.set_is_in_mode_without_ignore_compile_internals(
        _pd._is_in_any_mode_without_ignore_compile_internals)
    _pd._pop_torch_dispatch_stack(None)
