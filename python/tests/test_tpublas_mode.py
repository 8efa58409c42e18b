"""`tpublas.mode()`: an unmodified `nn.Module`'s training step with its ATen ops on tpuBLAS
(loss and gradients against torch eager), views kept as views, the counters,
`fallback="error"` and Debug Eager's NaN/Inf check."""

import pytest

torch = pytest.importorskip("torch")

import tpukit  # noqa: E402
import tpukit.tpublas as tb  # noqa: E402


def model_and_data(dtype=torch.float32):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(70, 130), torch.nn.GELU(), torch.nn.LayerNorm(130),
        torch.nn.Linear(130, 130, bias=False), torch.nn.ReLU(), torch.nn.Linear(130, 10),
    ).to(dtype)
    x = torch.randn(37, 70, dtype=dtype)
    y = torch.randint(0, 10, (37,))
    return model, x, y


def step(model, x, y):
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x).softmax(-1).log(), y)
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


def test_a_training_step_matches_torch_eager():
    model, x, y = model_and_data()
    want_loss, want_grads = step(model, x, y)
    with tb.mode() as m:
        loss, grads = step(model, x, y)
    torch.testing.assert_close(loss, want_loss, rtol=1e-4, atol=1e-6)
    for g, w in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)
    for op in ["mm", "addmm", "gelu", "gelu_backward", "native_layer_norm",
               "native_layer_norm_backward", "relu", "threshold_backward", "_softmax",
               "_softmax_backward_data", "log", "div.Tensor", "sum.dim_IntList"]:
        name = f"aten.{op}" if "." in op else f"aten.{op}.default"
        assert m.served[name] >= 1, f"{name} not served: {m.served}"
    assert not m.fallback, m.fallback
    assert m.views["aten.t.default"] >= 3


def test_bf16_step_is_close_to_torch_eager():
    model, x, y = model_and_data(torch.bfloat16)
    want_loss, want_grads = step(model, x, y)
    with tb.mode():
        loss, grads = step(model, x, y)
    torch.testing.assert_close(loss, want_loss, rtol=2e-2, atol=2e-2)
    for g, w in zip(grads, want_grads, strict=True):
        scale = max(1.0, w.abs().max().item())
        torch.testing.assert_close(g.float(), w.float(), rtol=5e-2, atol=5e-2 * scale)


def test_views_stay_views():
    x = torch.randn(6, 130)
    with tb.mode() as m:
        views = [x.t(), x.view(130, 6), x[:, 3:70], x.unsqueeze(0).expand(2, 6, 130), x[2]]
        y = tb_sum = x.t() * 2.0
    for v in views:
        assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert m.served == {"aten.mul.Tensor": 1} and not m.fallback, (m.served, m.fallback)
    torch.testing.assert_close(y, tb_sum)
    torch.testing.assert_close(y, x.t() * 2.0)


def test_unserved_dtypes_fall_back_to_torch():
    with tb.mode() as m:
        a = torch.arange(5) * torch.arange(5)  # int64 tensor products: not tpuBLAS's
        b = torch.ones(5, dtype=torch.float64).exp()
    assert a.tolist() == [0, 1, 4, 9, 16]
    torch.testing.assert_close(b, torch.full((5,), 2.718281828459045, dtype=torch.float64))
    assert m.fallback["aten.mul.Tensor"] == 1 and m.fallback["aten.exp.default"] == 1
    assert m.fallback["aten.ones.default"] == 1
    assert set(m.served) == {"aten.arange.default"}


def test_fallback_error_names_the_op_and_the_line():
    model, x, y = model_and_data()
    with pytest.raises(tpukit.UnsupportedError,
                       match=r"aten\.cumprod\.default .*test_tpublas_mode\.py:\d+"):
        with tb.mode(fallback="error"):
            model(x).cumprod(1)


def test_debug_eager_names_the_op_that_made_a_nan():
    x = torch.tensor([[1.0, -1.0, 2.0]])
    with pytest.raises(FloatingPointError, match=r"aten\.log\.default .*test_tpublas_mode\.py:\d+"):
        with tb.mode(debug=True):
            torch.log(x)


def test_debug_eager_runs_on_the_interpreter_and_matches():
    model, x, y = model_and_data()
    want_loss, want_grads = step(model, x, y)
    with tb.mode(debug=True) as m:
        loss, grads = step(model, x, y)
    torch.testing.assert_close(loss, want_loss, rtol=1e-4, atol=1e-6)
    for g, w in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)
    assert m.served["aten.mm.default"] >= 1


def test_bad_fallback_policy_is_refused():
    with pytest.raises(ValueError, match="fallback"):
        tb.mode(fallback="cpu")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_numbers_in_tensor_positions_are_served_as_aten_does(dtype):
    """``x * 2.1`` reaches ``mul.Tensor`` with a Python float: served, with ATen's dtype and
    value (the number is not rounded to bf16; tpuBLAS's bf16 `x - 0.3` may differ from
    ATen's by one ulp, as `tb.sub.Scalar` does)."""
    x = torch.randn(37, 300).to(dtype)
    with tb.mode() as m:
        got = [x * 2.1, x + 1, x - 0.3, x / 7, torch.maximum(x, torch.tensor(0.0))]
    want = [x * 2.1, x + 1, x - 0.3, x / 7, torch.maximum(x, torch.tensor(0.0))]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        tol = 0 if dtype == torch.float32 else 2**-7
        torch.testing.assert_close(g, w, rtol=tol, atol=tol)
    assert not m.fallback, m.fallback


def test_a_mode_is_freed_when_dropped_and_serves_planned_calls_natively():
    """The mode's native `__torch_dispatch__` (an instance attribute) holds the mode weakly:
    no reference cycle keeps a dropped mode alive; planned calls are counted as served."""
    import gc
    import weakref

    x = torch.randn(8, 130)
    y = torch.randn(8, 130)
    m = tb.mode()
    assert m.__torch_dispatch__.__self__ is m
    with m:
        outs = [x + y for _ in range(3)]
    assert m.served["aten.add.Tensor"] == 3
    for out in outs:
        torch.testing.assert_close(out, x + y)
    assert len({o.data_ptr() for o in outs}) == 3  # new memory each call
    ref = weakref.ref(m)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del m
        assert ref() is None
    finally:
        if enabled:
            gc.enable()


def python_dispatches(monkeypatch):
    """A mode whose Python ``__torch_dispatch__`` counts the calls its native dispatch hands
    it (``python/src/dispatch.rs``), and the counter."""
    from tpukit.tpublas import _mode

    seen = []
    python = _mode.Mode.__torch_dispatch__

    def counted(self, func, types, args=(), kwargs=None):
        seen.append(str(func))
        return python(self, func, types, args, kwargs)

    monkeypatch.setattr(_mode.Mode, "__torch_dispatch__", counted)
    return tb.mode(fallback="error"), seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_repeated_calls_with_numbers_lists_and_keywords_are_served_natively(monkeypatch, dtype):
    """Once a call has made its plan, the same call again — numbers, lists, flags and
    keywords equal, tensors of the same shapes and dtypes — runs natively; a changed number
    goes through Python again (and makes its own plan), so results stay torch's."""
    m, seen = python_dispatches(monkeypatch)
    x = torch.randn(3, 37, 200).to(dtype)
    w, b = torch.randn(200).to(dtype), torch.randn(200).to(dtype)
    positive = x.abs() + 0.5
    logs = torch.log_softmax(x.float(), -1).to(dtype)
    calls = {
        "pow": lambda e: torch.pow(positive, e),
        "sum": lambda e: x.sum([1, 2]) * e,
        "sum keepdim": lambda e: torch.ops.aten.sum.dim_IntList(x, [2], keepdim=True) * e,
        # keyword-only arguments reach the mode as keywords
        "clone with memory_format": lambda e: x.clone(memory_format=torch.contiguous_format) * e,
        "to with dtype": lambda e: x.to(torch.float32 if dtype == torch.bfloat16
                                        else torch.bfloat16) * e,
        "sum with dtype": lambda e: torch.sum(x, -1, dtype=dtype) * e,
        "sum to f32": lambda e: torch.sum(x, -1, dtype=torch.float32) * e,
        # a dtype the call gives (no default) is compared by the plans
        "log softmax backward": lambda e: torch.ops.aten._log_softmax_backward_data(
            x, logs, 2, dtype) * e,
        "x * number": lambda e: x * e,
        # bf16 weights are converted on the device, in the plan's launches
        "layer norm": lambda e: torch.nn.functional.layer_norm(x, (200,), w, b, eps=e),
    }
    for name, call in calls.items():
        for e in (3.0, 3.0, 0.5, 0.5, 3.0):
            seen.clear()
            with m:
                got = call(e)
            want = call(e)
            tol = 1e-5 if dtype == torch.float32 else 2e-2
            torch.testing.assert_close(got, want, rtol=tol, atol=tol,
                                       msg=lambda m, name=name: f"{name}: {m}")
        assert not seen, (name, seen)  # the last call: planned before, served natively
    assert not m.fallback, m.fallback


def test_calls_of_several_launches_and_masked_backwards_are_served_natively(monkeypatch):
    """A layer norm's backward (two launches, and an ``output_mask``) and a sum over a middle
    dimension (a permute, then the sum) are planned, and served natively the next time: the
    results a mask leaves out come back as None, as ATen returns them."""
    m, seen = python_dispatches(monkeypatch)
    g = torch.Generator().manual_seed(0)
    x, dy = torch.randn(6, 50, 96, generator=g), torch.randn(6, 50, 96, generator=g)
    w, b = torch.randn(96, generator=g), torch.randn(96, generator=g)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [96], w, b, 1e-5)
    backward = torch.ops.aten.native_layer_norm_backward.default
    for mask in ([True, True, True], [True, False, False], [False, True, True]):
        args = (dy, x, [96], mean, rstd, w, b, mask)
        want = backward(*args)
        for _ in range(2):
            seen.clear()
            with m:
                got = backward(*args)
            for a, e in zip(got, want, strict=True):
                assert (a is None) == (e is None), mask
                if e is not None:
                    torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
        assert not seen, (mask, seen)
    for _ in range(2):
        seen.clear()
        with m:
            got = x.sum(1)
        torch.testing.assert_close(got, x.sum(1), rtol=1e-5, atol=1e-5)
    assert not seen, seen


def test_lists_of_tensors_are_served_natively(monkeypatch):
    """``cat`` (a list of tensors) is planned, and served natively the next time: a key
    cache's ``cat([empty, k], -2)`` of a transposed ``k``, and gradients joined along the last
    dim; each call on new values."""
    m, seen = python_dispatches(monkeypatch)
    g = torch.Generator().manual_seed(1)
    empty = torch.empty(0)
    for make in (lambda: ([empty, torch.randn(2, 64, 4, 32, generator=g).transpose(1, 2)], -2),
                 lambda: ([torch.randn(2, 64, 128, generator=g) for _ in range(3)], 2)):
        for i in range(3):
            args, dim = make()
            seen.clear()
            with m:
                got = torch.cat(args, dim)
            torch.testing.assert_close(got, torch.cat(args, dim), rtol=0, atol=0)
            if i:
                assert not seen, seen
    assert m.served["aten.cat.default"] == 6


IN_PLACE = {
    "add_": lambda x, y: x.add_(y, alpha=2),
    "mul_ number": lambda x, y: x.mul_(0.5),
    "sub_ broadcast": lambda x, y: x.sub_(y[0]),
    "div_": lambda x, y: x.div_(y),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_in_place_calls_are_served_natively_into_self(monkeypatch, name, dtype):
    """An in-place operator whose counterpart is planned (``add_`` of ``add``) is served
    natively from the second call on: the result written into ``self`` — here rows of a
    larger tensor, so at an offset into its memory — which is returned, its version bumped,
    the rows around it untouched."""
    m, seen = python_dispatches(monkeypatch)
    f = IN_PLACE[name]
    g = torch.Generator().manual_seed(2)
    for i in range(3):
        base = torch.randn(6, 300, generator=g).to(dtype)
        y = (torch.rand(3, 300, generator=g) + 0.5).to(dtype)
        want = base.clone()
        f(want[1:4], y)
        view = base[1:4]
        version = view._version
        seen.clear()
        with m:
            out = f(view, y)
        assert out is view and view._version == version + 1
        torch.testing.assert_close(base, want, rtol=0, atol=0)
        if i:
            assert not seen, seen
    assert sum(m.served.values()) == 3 and not m.fallback


def test_in_place_calls_natives_cannot_write_go_through_python(monkeypatch):
    """What the native write-back leaves to the mode's Python code: a strided ``self`` (every
    other column), a result of another dtype (``bf16 += f32`` rounds the f32 sum once) and
    one of another shape (ATen's error: an in-place operator does not broadcast ``self``)."""
    m, seen = python_dispatches(monkeypatch)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(4, 600, generator=g), torch.randn(4, 300, generator=g)
    low = torch.randn(4, 300, generator=g).to(torch.bfloat16)
    for _ in range(2):
        want, got = x.clone(), x.clone()
        want[:, ::2].add_(y)
        seen.clear()
        with m:
            got[:, ::2].add_(y)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert "aten.add_.Tensor" in seen  # (the view's first call too)
        want, got = low.clone(), low.clone()
        want.add_(y)
        with m:
            got.add_(y)
        assert got.dtype == torch.bfloat16 and torch.equal(got, want)
    with m, pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        y[0].add_(y)


def test_empty_factories_are_allocations():
    """A factory result without elements (autograd's ``zeros([0])`` for an empty part of a
    ``cat``) is made without a kernel, of the dtype and shape asked."""
    like = torch.empty(0, 3, dtype=torch.bfloat16)
    with tb.mode(fallback="error") as m:
        got = [torch.zeros([0]), torch.ones(2, 0, dtype=torch.bfloat16), torch.zeros_like(like)]
    assert [(t.shape, t.dtype) for t in got] == [
        ((0,), torch.float32), ((2, 0), torch.bfloat16), ((0, 3), torch.bfloat16)]
    assert m.served["aten.zeros.default"] == 1 and not m.fallback


def test_plans_tell_negative_zero_from_zero(monkeypatch):
    """``-0.0 == 0.0`` in Python, but ``x * -0.0`` is not ``x * 0.0``: a plan's numbers are
    matched bit for bit (tpuBLAS operators directly and inside the mode)."""
    x = torch.rand(8, 130) + 1
    for first, then in ((0.0, -0.0), (-0.0, 0.0)):
        tb.mul(x, first)
        assert torch.equal(torch.signbit(tb.mul(x, then)), torch.signbit(x * then))
        m, _ = python_dispatches(monkeypatch)
        with m:
            x * first
            got = x * then
        assert torch.equal(torch.signbit(got), torch.signbit(x * then))


def test_views_are_made_natively_and_counted(monkeypatch):
    """A view operator's first call goes through the mode's Python code, which registers it;
    later calls are made natively."""
    m, seen = python_dispatches(monkeypatch)
    x = torch.randn(6, 130)
    for _ in range(2):
        seen.clear()
        with m:
            v = [x.t(), x.view(130, 6), x[:, 3:70], x.detach(), x.transpose(0, 1)]
    assert not seen, seen
    assert m.views["aten.t.default"] == 2 and m.views["aten.slice.Tensor"] == 2, m.views
    for got, want in zip(v, [x.t(), x.view(130, 6), x[:, 3:70], x.detach(), x.t()], strict=True):
        assert got.data_ptr() == want.data_ptr() and got.stride() == want.stride()
        assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_copies_of_large_permuted_tensors_run_as_permute(monkeypatch, dtype):
    """``.contiguous()`` of a permuted row-major tensor, and ``cat`` of one alone (besides
    empty 1-D tensors), run as tpuBLAS's ``permute`` of that tensor when it has at least 64
    Ki elements, its windows overhanging or not (``tpublas/_permuted.py``); else as before.
    Either way the result is torch's, a new row-major tensor."""
    from tpukit.tpublas import _permuted

    taken = []
    call = _permuted.call

    def spy(func, args, kwargs):
        out = call(func, args, kwargs)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(_permuted, "call", spy)
    cases = [  # (shape, permutation, taken)
        ((300, 260), (1, 0), True),
        ((2, 3, 128, 256), (0, 2, 1, 3), True),
        ((2, 3, 256, 128), (2, 0, 1, 3), True),
        ((16, 64, 128), (1, 0, 2), True),  # 64 rows moved: windows overhang
        ((2, 12, 200, 40), (0, 2, 1, 3), True),  # rows of 40, 200 of them: overhanging
        ((2, 4, 64, 32), (0, 2, 1, 3), False),  # small
        ((40, 30), (1, 0), False),  # small
    ]
    for shape, perm, want_taken in cases:
        x = torch.randn(*shape).to(dtype).permute(*perm)
        with tb.mode() as m:
            taken.clear()
            got = [x.contiguous(), torch.cat([torch.zeros(0, dtype=dtype), x], -2)]
        assert taken == [want_taken] * 2, (shape, perm, taken)
        assert m.served["aten.clone.default"] == 1 and m.served["aten.cat.default"] == 1
        for g in got:
            assert g.is_contiguous() and g.data_ptr() != x.data_ptr()
            assert torch.equal(g, x.contiguous()), (shape, perm)
    with tb.mode():
        taken.clear()
        kept = x.clone()  # `preserve_format`: keeps the strides, not taken
    assert not any(taken) and torch.equal(kept, x)
