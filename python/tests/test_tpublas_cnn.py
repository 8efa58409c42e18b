"""tpuBLAS's convolutional-network operators (convolution, batch norm, max pooling and their
backwards) against ATen on random inputs, f32 tight and bf16 loose, at extents that divide
no block; their gradients through `torch.ops.tpublas`; and a small CNN's training step under
`tpublas.mode()` (loss, every gradient and the batch-norm running statistics against torch
eager). Also regression tests for three ATen-semantics bugs found in `mode()`."""

import pytest

torch = pytest.importorskip("torch")

import tpukit  # noqa: E402
import tpukit.tpublas as tb  # noqa: E402

aten = torch.ops.aten
DTYPES = [torch.float32, torch.bfloat16]


def close(got, want, dtype, scale=1.0):
    """f32: rtol 1e-4; bf16: a few bf16 ulps of the largest magnitude."""
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * scale)
    else:
        big = max(1.0, want.float().abs().max().item()) * scale
        torch.testing.assert_close(got.float(), want.float(), rtol=3e-2, atol=3e-2 * big)


def randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


# --- convolution -------------------------------------------------------------------------------

CONV_CASES = [
    # (input shape, weight shape, stride, padding, dilation)
    ((2, 3, 17, 13), (5, 3, 3, 3), [1, 1], [1, 1], [1, 1]),
    ((3, 4, 11, 9), (6, 4, 3, 2), [2, 1], [1, 0], [1, 2]),
    ((1, 130, 6, 5), (7, 130, 1, 1), [1, 1], [0, 0], [1, 1]),
    ((2, 2, 9, 10), (3, 2, 4, 4), [3, 2], [2, 1], [1, 1]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_convolution_matches_aten(dtype, case, bias):
    xs, ws, stride, padding, dilation = case
    x, w = randn(*xs, dtype=dtype, seed=1), randn(*ws, dtype=dtype, seed=2)
    b = randn(ws[0], dtype=dtype, seed=3) if bias else None
    args = (x, w, b, stride, padding, dilation, False, [0, 0], 1)
    got = tb.convolution(*args)
    want = aten.convolution(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    close(got, want, dtype, scale=xs[1])


def test_conv1d_matches_aten():
    x, w, b = randn(2, 3, 19), randn(4, 3, 5, seed=1), randn(4, seed=2)
    args = (x, w, b, [2], [1], [1], False, [0], 1)
    close(tb.convolution(*args), aten.convolution(*args), torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("mask", [[True, True, True], [False, True, True], [True, False, False]])
def test_convolution_backward_matches_aten(dtype, case, mask):
    xs, ws, stride, padding, dilation = case
    x, w = randn(*xs, dtype=dtype, seed=1), randn(*ws, dtype=dtype, seed=2)
    out = aten.convolution(x, w, None, stride, padding, dilation, False, [0, 0], 1)
    g = randn(*out.shape, dtype=dtype, seed=4)
    args = (g, x, w, [ws[0]], stride, padding, dilation, False, [0, 0], 1, mask)
    got = tb.convolution_backward(*args)
    want = aten.convolution_backward(*args)
    for m, gt, wt in zip(mask, got, want, strict=True):
        if not m:
            assert gt.numel() == 0 and wt is None
            continue
        assert gt.shape == wt.shape and gt.dtype == wt.dtype
        close(gt, wt, dtype, scale=max(xs[0] * out.shape[2] * out.shape[3], ws[0]) ** 0.5)


def test_convolution_refuses_what_it_does_not_serve():
    x, w = randn(1, 4, 8, 8), randn(4, 2, 3, 3)
    with pytest.raises(tpukit.ShapeError, match="groups=3 must divide"):
        tb.convolution(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 3)
    with pytest.raises(tpukit.UnsupportedError, match="transposed"):
        tb.convolution(x, randn(4, 4, 3, 3), None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1)
    with pytest.raises(tpukit.ShapeError, match="input channels"):
        tb.convolution(x, randn(4, 3, 3, 3), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    with pytest.raises(tpukit.ShapeError, match="does not fit"):
        tb.convolution(x, randn(4, 4, 9, 9), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)


# --- batch norm ------------------------------------------------------------------------------


def bn_inputs(dtype, param_dtype, shape=(3, 5, 7, 6)):
    c = shape[1]
    x = randn(*shape, dtype=dtype, seed=1) * 2 + 0.5
    w, b = randn(c, dtype=param_dtype, seed=2), randn(c, dtype=param_dtype, seed=3)
    rm = randn(c, dtype=param_dtype, seed=4)
    rv = randn(c, seed=5).abs().to(param_dtype) + 0.5
    return x, w, b, rm, rv


PARAMS = [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
          (torch.bfloat16, torch.float32)]


@pytest.mark.parametrize(("dtype", "param_dtype"), PARAMS)
@pytest.mark.parametrize("shape", [(3, 5, 7, 6), (4, 130, 3), (9, 2)])
def test_batch_norm_training_matches_aten_and_updates_running_stats(dtype, param_dtype, shape):
    x, w, b, rm, rv = bn_inputs(dtype, param_dtype, shape)
    got = tb._native_batch_norm_legit_functional(x, w, b, rm, rv, True, 0.3, 1e-5)
    want_rm, want_rv = rm.clone(), rv.clone()
    want = aten.native_batch_norm(x, w, b, want_rm, want_rv, True, 0.3, 1e-5)
    for gt, wt in zip(got, [*want, want_rm, want_rv], strict=True):
        assert gt.shape == wt.shape and gt.dtype == wt.dtype
        close(gt, wt, dtype)


@pytest.mark.parametrize(("dtype", "param_dtype"), PARAMS)
def test_batch_norm_eval_and_without_parameters(dtype, param_dtype):
    x, w, b, rm, rv = bn_inputs(dtype, param_dtype)
    got = tb.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-3)
    want = aten.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-3)
    for gt, wt in zip(got, want, strict=True):
        assert gt.shape == wt.shape and gt.dtype == wt.dtype
    close(got[0], want[0], dtype)
    got = tb.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    want = aten.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
    for gt, wt in zip(got, want, strict=True):
        close(gt, wt, dtype)


def test_native_batch_norm_refuses_to_drop_a_running_stat_update():
    x, w, b, rm, rv = bn_inputs(torch.float32, torch.float32)
    with pytest.raises(tpukit.UnsupportedError, match="_native_batch_norm_legit_functional"):
        tb.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)


@pytest.mark.parametrize(("dtype", "param_dtype"), PARAMS)
@pytest.mark.parametrize("train", [True, False])
def test_batch_norm_backward_matches_aten(dtype, param_dtype, train):
    x, w, b, rm, rv = bn_inputs(dtype, param_dtype)
    _, mean, invstd = aten.native_batch_norm(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    g = randn(*x.shape, dtype=dtype, seed=7)
    args = (g, x, w, rm, rv, mean, invstd, train, 1e-5, [True, True, True])
    got = tb.native_batch_norm_backward(*args)
    want = aten.native_batch_norm_backward(*args)
    for gt, wt in zip(got, want, strict=True):
        assert gt.shape == wt.shape and gt.dtype == wt.dtype
        close(gt, wt, dtype, scale=x.numel() / x.shape[1] if dtype != torch.float32 else 10.0)


# --- max pooling -------------------------------------------------------------------------------

POOL_CASES = [
    # (input shape, kernel, stride, padding, dilation)
    ((2, 3, 16, 16), [2, 2], [2, 2], [0, 0], [1, 1]),
    ((2, 5, 11, 9), [3, 3], [2, 2], [1, 1], [1, 1]),
    ((1, 130, 7, 10), [3, 2], [1, 2], [1, 0], [2, 1]),
    ((3, 9, 13), [2, 3], [], [0, 1], [1, 1]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_matches_aten(dtype, case):
    shape, k, s, p, d = case
    x = randn(*shape, dtype=dtype, seed=1)
    x.view(-1)[::7] = x.view(-1)[3]  # ties: the first maximum wins
    got = tb.max_pool2d_with_indices(x, k, s, p, d)
    want = aten.max_pool2d_with_indices(x, k, s, p, d)
    for gt, wt in zip(got, want, strict=True):
        assert gt.shape == wt.shape and gt.dtype == wt.dtype
        torch.testing.assert_close(gt, wt, rtol=0, atol=0)
    g = randn(*want[0].shape, dtype=dtype, seed=2)
    got = tb.max_pool2d_with_indices_backward(g, x, k, s, p, d, False, want[1])
    expected = aten.max_pool2d_with_indices_backward(g, x, k, s, p, d, False, want[1])
    close(got, expected, dtype)


def test_max_pool_propagates_nan_and_infinities():
    x = randn(1, 2, 6, 6)
    x[0, 0, 1, 1] = float("nan")
    x[0, 1, :2, :2] = -float("inf")
    got = tb.max_pool2d_with_indices(x, [2, 2], [2, 2])
    want = aten.max_pool2d_with_indices(x, [2, 2], [2, 2])
    torch.testing.assert_close(got[0], want[0], equal_nan=True)
    assert torch.equal(got[1], want[1])


def test_max_pool_refuses_ceil_mode_and_large_padding():
    x = randn(1, 1, 5, 5)
    with pytest.raises(tpukit.UnsupportedError, match="ceil_mode"):
        tb.max_pool2d_with_indices(x, [2, 2], [2, 2], [0, 0], [1, 1], True)
    with pytest.raises(tpukit.ShapeError, match="half of kernel_size"):
        tb.max_pool2d_with_indices(x, [2, 2], [2, 2], [2, 2])


AVG_CASES = [
    # (input shape, kernel, stride, padding, count_include_pad, divisor_override)
    ((2, 3, 16, 16), [2, 2], [2, 2], [0, 0], True, None),
    ((2, 5, 11, 9), [3, 3], [2, 2], [1, 1], True, None),
    ((2, 5, 11, 9), [3, 3], [2, 2], [1, 1], False, None),
    ((1, 130, 7, 10), [3, 2], [1, 2], [1, 0], False, 5),
    ((3, 9, 13), [2, 3], [], [0, 1], True, None),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool_and_backward_match_aten(dtype, case):
    shape, k, s, p, include_pad, divisor = case
    x = randn(*shape, dtype=dtype, seed=1)
    args = (k, s, p, False, include_pad, divisor)
    got, want = tb.avg_pool2d(x, *args), aten.avg_pool2d(x, *args)
    assert got.shape == want.shape and got.dtype == want.dtype
    close(got, want, dtype)
    g = randn(*want.shape, dtype=dtype, seed=2)
    args = (k, s or k, p, False, include_pad, divisor)
    close(tb.avg_pool2d_backward(g, x, *args), aten.avg_pool2d_backward(g, x, *args), dtype)


# --- gradients through torch.ops.tpublas ----------------------------------------------------------


def test_gradients_of_the_custom_ops_match_torch():
    x = randn(2, 3, 9, 8).requires_grad_()
    w = randn(4, 3, 3, 3, seed=1).requires_grad_()
    b = randn(4, seed=2).requires_grad_()
    bw, bb = randn(4, seed=3).requires_grad_(), randn(4, seed=4).requires_grad_()
    g = randn(2, 4, 4, 4, seed=5)

    def net(ops):
        y = ops.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        y = ops.native_batch_norm(y, bw, bb, None, None, True, 0.1, 1e-5)[0]
        return ops.max_pool2d_with_indices(y, [2, 2], [2, 2], [0, 0], [1, 1], False)[0]

    params = [x, w, b, bw, bb]
    want = torch.autograd.grad(net(aten), params, g)
    got = torch.autograd.grad(net(torch.ops.tpublas), params, g)
    for gt, wt in zip(got, want, strict=True):
        torch.testing.assert_close(gt, wt, rtol=1e-4, atol=1e-4)


# --- the CNN training step under mode() -----------------------------------------------------------

CNN_OPS = ["aten.convolution.default", "aten.convolution_backward.default",
           "aten.native_batch_norm.default", "aten.native_batch_norm_backward.default",
           "aten.max_pool2d_with_indices.default",
           "aten.max_pool2d_with_indices_backward.default"]


def cnn(dtype=torch.float32):
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, stride=1, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 4 * 4, 10),
    ).to(dtype)


def cnn_step(model, x, y):
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


def running_stats(model):
    return [t.clone() for m in model if isinstance(m, torch.nn.BatchNorm2d)
            for t in (m.running_mean, m.running_var, m.num_batches_tracked)]


def test_cnn_training_step_matches_torch_eager():
    x, y = randn(6, 3, 16, 16, seed=9), torch.randint(0, 10, (6,))
    model = cnn()
    want_loss, want_grads = cnn_step(model, x, y)
    want_stats = running_stats(model)
    model = cnn()
    with tb.mode(fallback="error") as m:
        loss, grads = cnn_step(model, x, y)
    torch.testing.assert_close(loss, want_loss, rtol=1e-4, atol=1e-6)
    for g, w in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    for s, w in zip(running_stats(model), want_stats, strict=True):
        torch.testing.assert_close(s, w, rtol=1e-4, atol=1e-6)
    for op in CNN_OPS:
        assert m.served[op] >= 1, f"{op} not served: {m.served}"
    assert not m.fallback
    # Eval: running statistics, no update.
    model.eval()
    with torch.no_grad():
        want = model(x)
        with tb.mode(fallback="error") as m:
            got = model(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert m.served["aten.native_batch_norm.default"] == 2


def test_cnn_bf16_step_is_as_close_to_f32_as_torch_eager():
    """bf16 rounding through two batch norms makes torch's own bf16 gradients differ from
    f32 by up to ~40% in a few elements: tpuBLAS's bf16 step is held to being no farther
    from the f32 step (same bf16-valued weights and input) than torch's bf16 step is."""
    x, y = randn(4, 3, 16, 16, seed=9, dtype=torch.bfloat16), torch.randint(0, 10, (4,))
    model = cnn(torch.bfloat16)
    want_loss, want_grads = cnn_step(model, x, y)
    ref_loss, ref_grads = cnn_step(cnn(torch.bfloat16).float(), x.float(), y)
    model = cnn(torch.bfloat16)
    with tb.mode(fallback="error"):
        loss, grads = cnn_step(model, x, y)
    assert abs(loss.float() - ref_loss) <= 2 * abs(want_loss.float() - ref_loss) + 1e-2
    for g, w, r in zip(grads, want_grads, ref_grads, strict=True):
        assert g.dtype == torch.bfloat16
        ours = (g.float() - r).norm() / r.norm()
        torch_error = (w.float() - r).norm() / r.norm()
        assert ours <= 2 * torch_error + 1e-2, (ours, torch_error)


# --- regressions: ATen semantics found wrong in mode() ---------------------------------------


def test_sum_of_a_0d_tensor_along_its_dim():
    x = torch.tensor(2.5)
    for dim in ([0], [-1], []):
        for keepdim in (False, True):
            got = tb.sum.dim_IntList(x, dim, keepdim)
            want = aten.sum.dim_IntList(x, dim, keepdim)
            assert got.shape == want.shape
            torch.testing.assert_close(got, want)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_a_0d_f32_tensor_with_bf16_computes_as_aten(op):
    """ATen's CPU kernels round the scalar to bf16 for add and sub, not for mul and div."""
    x = randn(1000, dtype=torch.bfloat16)
    for v in (1.0 / 3.0, 0.1, 2.7):
        s = torch.tensor(v)
        got = getattr(tb, op).Tensor(x, s)
        want = getattr(aten, op).Tensor(x, s)
        assert got.dtype == want.dtype == torch.bfloat16
        assert torch.equal(got, want), (op, v)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_scalar_overloads_on_bf16_are_bit_exact(op):
    x = randn(1000, dtype=torch.bfloat16)
    for v in (1.0 / 3.0, 0.1, 2.7):
        alphas = [{}, {"alpha": 2}] if op in ("add", "sub") else [{}]
        for kw in alphas:
            got = getattr(tb, op).Scalar(x, v, **kw)
            want = getattr(aten, op).Scalar(x, v, **kw)
            assert torch.equal(got, want), (op, v, kw)
    got = tb.pow.Tensor_Scalar(x.abs(), 1.0 / 3.0)
    assert torch.equal(got, aten.pow.Tensor_Scalar(x.abs(), 1.0 / 3.0))


def test_the_custom_ops_trace_under_torch_compile():
    """Fake kernels (convolution_backward's empty `[0]` for masked gradients included) let
    `torch.compile(fullgraph=True)` trace the forward and backward."""
    T = torch.ops.tpublas
    x = randn(2, 3, 9, 8)
    w = randn(4, 3, 3, 3, seed=1).requires_grad_()

    def net(x, w):
        y = T.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        y = T.avg_pool2d(y, [2, 2], [2, 2], [0, 0], False, True, None)
        return T.max_pool2d_with_indices(y, [2, 2], [2, 2], [0, 0], [1, 1], False)[0].sum()

    compiled = torch.compile(net, backend="aot_eager", fullgraph=True)
    (got,) = torch.autograd.grad(compiled(x, w), w)
    (want,) = torch.autograd.grad(net(x, w), w)
    torch.testing.assert_close(got, want)
    ref = w.detach().requires_grad_()
    y = aten.convolution(x, ref, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    y = aten.max_pool2d_with_indices(aten.avg_pool2d(y, [2, 2], [2, 2]), [2, 2], [2, 2])[0]
    (expected,) = torch.autograd.grad(y.sum(), ref)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


def test_cnn_step_under_debug_eager_runs_on_the_interpreter():
    """Debug Eager: every CNN kernel on the bounds-checked interpreter, same gradients."""
    x, y = randn(2, 3, 16, 16, seed=9), torch.randint(0, 10, (2,))
    want_loss, want_grads = cnn_step(cnn(), x, y)
    model = cnn()
    with tb.mode(fallback="error", debug=True) as m:
        loss, grads = cnn_step(model, x, y)
    torch.testing.assert_close(loss, want_loss, rtol=1e-4, atol=1e-6)
    for g, w in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    assert m.served["aten.convolution_backward.default"] == 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("xs", "ws", "groups"), [((2, 4, 9, 8), (6, 2, 3, 3), 2),
                                                  ((2, 3, 7, 7), (3, 1, 3, 3), 3),
                                                  ((1, 6, 11), (4, 3, 3), 2)])
def test_grouped_convolution_and_backward_match_aten(dtype, xs, ws, groups):
    x, w = randn(*xs, dtype=dtype, seed=1), randn(*ws, dtype=dtype, seed=2)
    b = randn(ws[0], dtype=dtype, seed=3)
    rank = len(xs) - 2
    window = ([1] * rank, [1] * rank, [1] * rank, False, [0] * rank, groups)
    got, want = tb.convolution(x, w, b, *window), aten.convolution(x, w, b, *window)
    close(got, want, dtype, scale=xs[1])
    g = randn(*want.shape, dtype=dtype, seed=4)
    for mask in ([True, True, True], [False, True, False]):
        got = tb.convolution_backward(g, x, w, [ws[0]], *window, mask)
        want = aten.convolution_backward(g, x, w, [ws[0]], *window, mask)
        for m, gt, wt in zip(mask, got, want, strict=True):
            if m:
                close(gt, wt, dtype, scale=10.0)
            else:
                assert gt.numel() == 0 and wt is None
