"""Entering ``tpublas.mode()`` through ``_mode_stack`` leaves torch's mode state exactly as
``TorchDispatchMode``'s own ``__enter__``/``__exit__`` do, nested with other modes, re-entered
and through exceptions; a torch whose methods differ from the mirrored ones gets its own."""

import collections

import pytest

torch = pytest.importorskip("torch")

from torch.utils import _python_dispatch as pd  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import tpukit.tpublas as tb  # noqa: E402
from tpukit.tpublas import _mode, _mode_stack  # noqa: E402


class Recording(TorchDispatchMode):
    """A plain mode entered by torch's own methods, recording the operators it sees."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def state():
    """torch's mode state: the Python flags, the C++ flag, and the dispatch stack."""
    n = torch._C._len_torch_dispatch_stack()
    return (pd._is_in_torch_dispatch_mode, pd._is_in_non_infra_torch_dispatch_mode,
            pd._is_in_any_mode_without_ignore_compile_internals,
            pd.is_in_any_mode_without_ignore_compile_internals(),
            tuple(id(torch._C._get_dispatch_stack_at(i)) for i in range(n)))


def torch_entered(mode):
    """The state torch's own ``__enter__`` leaves for ``mode``, undone again."""
    TorchDispatchMode.__enter__(mode)
    try:
        return state()
    finally:
        TorchDispatchMode.__exit__(mode, None, None, None)


def test_this_torch_is_the_one_mirrored():
    # The pinned torch: if this fails, torch's methods changed and `_EXPECTED` is to be read
    # again from the new ones (the mode then uses torch's own, correct but slower).
    assert _mode_stack.MIRRORED
    assert type(tb.mode()).__enter__ is _mode_stack.enter


def test_enter_and_exit_match_torchs_own_alone_and_nested():
    mode, outer = tb.mode(), Recording()
    before = state()
    expected = torch_entered(mode)
    with mode:
        assert state() == expected
        assert torch._C._get_dispatch_stack_at(torch._C._len_torch_dispatch_stack() - 1) is mode
    assert state() == before
    with outer:
        inside_outer = state()
        expected = torch_entered(mode)
        assert state() == inside_outer
        with mode:
            assert state() == expected
            with mode:  # re-entered: one more level, one more saved entry
                assert state()[-1][-2:] == (id(mode), id(mode))
            assert state() == expected
            inner = Recording()
            with inner:  # a mode above ours sees the call first and hands it down
                y = torch.ones(8, 128) + torch.ones(8, 128)
            assert "aten.add.Tensor" in inner.seen
            assert torch.equal(y, torch.full((8, 128), 2.0))
        assert state() == inside_outer
    assert state() == before
    assert mode._saved_flags == []
    assert mode.old_dispatch_mode_flags == collections.deque()  # torch's own never ran


def test_an_exception_inside_leaves_the_state_as_before():
    mode = tb.mode()
    before = state()
    with pytest.raises(ZeroDivisionError):
        with mode:
            raise ZeroDivisionError("inside the mode")
    assert state() == before
    with mode:  # and the mode is usable again
        x = torch.randn(8, 128)
        torch.testing.assert_close(x + x, 2 * x, rtol=0, atol=0, check_device=False)
    assert mode.served["aten.add.Tensor"] >= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_operators_are_served_when_entered_per_call(dtype):
    mode = tb.mode()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(37, 300, generator=g).to(dtype)
    y = torch.randn(37, 300, generator=g).to(dtype)
    for _ in range(3):
        with mode:
            got = torch.softmax(x * y, dim=-1)
    want = torch.softmax((x.float() * y.float()).to(dtype).float(), dim=-1).to(dtype)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    assert mode.served["aten.mul.Tensor"] == 3
    assert mode.served["aten._softmax.default"] == 3


def test_a_different_torch_gets_torchs_own_methods(monkeypatch):
    changed = dict(_mode_stack._EXPECTED)
    changed["__enter__"] = changed["__enter__"] + ("something_new",)
    monkeypatch.setattr(_mode_stack, "_EXPECTED", changed)
    assert not _mode_stack._mirrored()
    monkeypatch.setattr(_mode_stack, "MIRRORED", False)
    assert not _mode_stack.usable(_mode.Mode)


def test_modes_with_keys_or_infra_classes_are_not_mirrored():
    assert _mode_stack.usable(_mode.Mode)

    class Infra(_mode.Mode):
        @classmethod
        def is_infra_mode(cls):
            return True

    class Ignoring(_mode.Mode):
        @classmethod
        def ignore_compile_internals(cls):
            return True

    class Keyed(_mode.Mode):
        _dispatch_key = torch._C.DispatchKey.PreDispatch

    assert not any(_mode_stack.usable(c) for c in (Infra, Ignoring, Keyed))
