"""The operators a transformer's training step adds to tpuBLAS (losses, backward ops,
factories, copies, in-place variants), each called as ATen's operator inside
`tpublas.mode(fallback="error")` — so the mode's mapping is checked too — against ATen's
own operator in float64 on the same inputs (the expected values) and on the original dtypes
(the expected dtypes and shapes); f32 and bf16, shapes off the blocks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.tpublas as tb  # noqa: E402
from tpukit import BoundsError, UnsupportedError  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: {"rtol": 2e-5, "atol": 2e-5}, BF16: {"rtol": 1.6e-2, "atol": 1.6e-2}}
aten = torch.ops.aten
F = torch.nn.functional


def rand(*shape, dtype=F32, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.rand(shape, generator=g, dtype=torch.float64) * 4 - 2).to(dtype)


def to64(v):
    if isinstance(v, torch.Tensor) and v.is_floating_point():
        return v.double()
    if isinstance(v, (list, tuple)):
        return type(v)(to64(x) for x in v)
    return v


def served(op, *args, **kwargs):
    """``op`` inside ``mode(fallback="error")``: its results and the mode."""
    with tb.mode(fallback="error") as m:
        out = op(*args, **kwargs)
    assert not m.fallback
    return out, m


def check(op, *args, tol=None, **kwargs):
    """``op`` under the mode against ATen (dtype/shape on the inputs, values in float64)."""
    got, m = served(op, *args, **kwargs)
    like = op(*args, **kwargs)
    want = op(*to64(list(args)), **{k: to64(v) for k, v in kwargs.items()})
    got, like, want = ([x] if isinstance(x, torch.Tensor) else list(x)
                       for x in (got, like, want))
    for i, (g, k, w) in enumerate(zip(got, like, want, strict=True)):
        assert g.dtype == k.dtype and g.shape == k.shape, (i, g.dtype, k.dtype, g.shape, k.shape)
        torch.testing.assert_close(g.double(), w.double(), equal_nan=True,
                                   **(tol or TOL.get(g.dtype, {"rtol": 0, "atol": 0})))
    assert m.served[str(op)] == 1, m.served
    return got


# --- losses -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("n,c", [(37, 1100), (5, 3), (130, 1000)])
def test_nll_loss_forward_and_backward(n, c, reduction, dtype):
    x = rand(n, c, dtype=dtype).log_softmax(-1)
    target = torch.randint(0, c, (n,), generator=torch.Generator().manual_seed(n))
    target[::4] = -100
    check(aten.nll_loss_forward.default, x, target, None, reduction, -100)
    grad = rand(n, dtype=dtype) if reduction == 0 else rand(dtype=dtype)
    total = torch.tensor(float((target != -100).sum()), dtype=dtype)
    check(aten.nll_loss_backward.default, grad, x, target, None, reduction, -100, total)


def test_nll_loss_one_row_all_ignored_and_other_ignore_index():
    x = rand(700).log_softmax(-1)
    for reduction in (0, 1, 2):
        check(aten.nll_loss_forward.default, x, torch.tensor(3), None, reduction, -100)
    t = torch.tensor([1, 1, 1])
    out, total = check(aten.nll_loss_forward.default, rand(3, 5), t, None, 1, 1)
    assert out.isnan() and total == 0  # every row ignored: 0/0, as ATen
    check(aten.nll_loss_backward.default, rand(3), rand(3, 5), torch.tensor([0, 4, 2]),
          None, 0, -1, torch.tensor(0.0))


def test_nll_loss_refuses_weights_and_bad_targets():
    x, t = rand(3, 5), torch.tensor([0, 5, 1])
    with pytest.raises(BoundsError, match="Target 5 is out of bounds"):
        tb.nll_loss_forward(x, t, None, 1, -100)
    with pytest.raises(UnsupportedError, match="weight"):
        tb.nll_loss_forward(x, torch.tensor([0, 1, 1]), torch.ones(5), 1, -100)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_cross_entropy_step_is_served_whole(dtype):
    logits = rand(37, 1100, dtype=dtype).requires_grad_()
    target = torch.randint(0, 1100, (37,))
    with tb.mode(fallback="error") as m:
        loss = torch.nn.functional.cross_entropy(logits, target)
        loss.backward()
    got = logits.grad.clone()
    logits.grad = None
    want = torch.nn.functional.cross_entropy(logits.double(), target)
    want.backward()
    torch.testing.assert_close(loss.double(), want.detach(), **TOL[dtype])
    torch.testing.assert_close(got.double(), logits.grad.double(), **TOL[dtype])
    for op in ("nll_loss_forward", "nll_loss_backward", "_log_softmax_backward_data",
               "ones_like"):
        assert m.served[f"aten.{op}.default"] == 1


# --- backward ops ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape,dim", [((37, 1100), 1), ((3, 5, 600), 1), ((5000,), 0)])
def test_log_softmax_backward_data(shape, dim, dtype):
    y = rand(*shape, dtype=dtype).log_softmax(dim)
    check(aten._log_softmax_backward_data.default, rand(*shape, dtype=dtype, seed=1), y, dim,
          dtype)


def test_log_softmax_backward_data_keeps_the_gradient_dtype_as_aten_on_cpu():
    y = rand(37, 1100).log_softmax(-1)  # input_dtype bf16 (a half_to_float log_softmax)
    check(aten._log_softmax_backward_data.default, rand(37, 1100, seed=1), y, 1, BF16)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_tanh_backward(dtype):
    check(aten.tanh_backward.default, rand(3, 5, 600, dtype=dtype),
          rand(3, 5, 600, dtype=dtype, seed=1).tanh())


# --- factories ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, BF16, torch.int64, torch.int32, torch.bool])
def test_fill_factories(dtype):
    x = rand(3, 1300).to(dtype)
    check(aten.zeros.default, [3, 1300], dtype=dtype)
    check(aten.ones.default, [5001], dtype=dtype)
    check(aten.full.default, [2, 3, 700], 7 if dtype != torch.bool else True, dtype=dtype)
    check(aten.zeros_like.default, x)
    check(aten.ones_like.default, x)
    check(aten.full_like.default, x, 3)
    check(aten.new_zeros.default, x, [4, 5])
    check(aten.new_ones.default, x, [0, 5])
    check(aten.scalar_tensor.default, 2, dtype=dtype)


def test_factory_dtypes_follow_aten():
    for args in ([[3], 2.5], [[3], 2], [[3], True]):
        check(aten.full.default, *args)
    check(aten.scalar_tensor.default, -1.5)
    check(aten.zeros.default, [0])


def test_like_factories_keep_strides_of_a_permuted_tensor():
    x = rand(5, 700).t()
    got = check(aten.ones_like.default, x)[0]
    assert got.stride() == torch.ones_like(x).stride()
    got = check(aten.zeros_like.default, x, memory_format=torch.contiguous_format)[0]
    assert got.is_contiguous()


@pytest.mark.parametrize("dtype", [None, F32, BF16, torch.int64])
def test_arange(dtype):
    kw = {} if dtype is None else {"dtype": dtype}
    check(aten.arange.default, 5000, **kw)
    check(aten.arange.start, 3, 700, **kw)
    check(aten.arange.start_step, 700, -5, -3, **kw)
    if dtype != torch.int64:
        check(aten.arange.start_step, 0.5, 9.0, 0.25, **kw)


def test_empty_allocates_without_a_kernel():
    with tb.mode(fallback="error") as m:
        e = torch.empty(3, 5)
        f = torch.empty_like(e)
    assert e.shape == f.shape == (3, 5)
    assert m.allocated == {"aten.empty.memory_format": 1, "aten.empty_like.default": 1}
    assert not m.served


def test_copies_to_dtypes_tpublas_does_not_make_fall_back():
    x = rand(3, 5)
    with tb.mode() as m:
        i = x.to(torch.int64)
        d = torch.zeros(3, 5, dtype=torch.int64).copy_(x)
    assert torch.equal(i, x.to(torch.int64)) and torch.equal(d, i)
    assert m.fallback == {"aten._to_copy.default": 1, "aten.copy_.default": 1}, m.fallback


def test_factories_refuse_what_int32_kernels_cannot_make():
    with tb.mode(fallback="error"), pytest.raises(UnsupportedError, match="int32"):
        torch.full([2], 2**40)
    with tb.mode() as m:
        torch.zeros(3, dtype=torch.float64)
    assert m.fallback == {"aten.zeros.default": 1}


# --- copies ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, BF16])
def test_clone_and_to_copy(dtype):
    x = rand(3, 5, 600, dtype=dtype)
    check(aten.clone.default, x)
    check(aten.clone.default, x.transpose(0, 2), memory_format=torch.contiguous_format)
    other = BF16 if dtype == F32 else F32
    got = check(aten._to_copy.default, x, dtype=other)[0]
    assert torch.equal(got, x.to(other))  # rounding to nearest even, bit for bit


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_copy_writes_into_self_broadcasting_and_converting(dtype):
    dst = torch.zeros(4, 700, dtype=dtype)
    src = rand(700, dtype=F32)
    out, m = served(aten.copy_.default, dst, src)
    assert out is dst and torch.equal(dst, src.to(dtype).expand(4, 700))
    assert m.served["aten.copy_.default"] == 1


# --- an optimizer's pointwise updates ------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, BF16])
def test_addcmul_addcdiv_broadcast_and_promote(dtype):
    x, a, b = rand(37, 1100, dtype=dtype), rand(1100, dtype=dtype, seed=1), rand(37, 1, seed=2)
    check(aten.addcmul.default, x, a, b, value=-0.3)
    check(aten.addcmul.default, x, a, a)
    positive = rand(37, 1100, dtype=dtype, seed=3).abs() + 0.5
    check(aten.addcdiv.default, x, a, positive, value=0.7)
    check(aten.addcdiv.default, x, b, positive)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("weight", [0.1, 0.5, -0.7, 1.0])
def test_lerp_with_a_scalar_weight(weight, dtype):
    x, end = rand(37, 1100, dtype=dtype), rand(1100, dtype=dtype, seed=1)
    got = check(aten.lerp.Scalar, x, end, weight)[0]
    if weight == 1.0:  # ATen's two-sided form: weight 1 gives `end` exactly
        assert torch.equal(got, end.expand(37, 1100))


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_an_adamw_step_matches_eager_and_is_served(dtype):
    """``torch.optim.AdamW`` (and Adam with weight decay) stepping inside the mode: its
    updates (``lerp_``, ``addcmul_``, ``addcdiv_``, ``mul_``, ``add_``, ``sqrt``, ``div``)
    all on tpuBLAS, the parameters and moments after three steps close to eager's."""
    for make in (lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=False),
                 lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.1, foreach=False)):
        states = []
        for use_mode in (False, True):
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(70, 130), torch.nn.GELU(),
                                        torch.nn.Linear(130, 10)).to(dtype)
            opt = make(model.parameters())
            x = torch.randn(37, 70, generator=torch.Generator().manual_seed(1)).to(dtype)
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                model(x).square().mean().backward()
                if use_mode:
                    with tb.mode(fallback="error"):
                        opt.step()
                else:
                    opt.step()
            states.append([p.detach().clone() for p in model.parameters()]
                          + [v.clone() for s in opt.state.values() for v in s.values()
                             if isinstance(v, torch.Tensor) and v.dim()])
        for got, want in zip(states[1], states[0], strict=True):
            torch.testing.assert_close(got.double(), want.double(), **TOL[dtype])


# --- in-place variants ----------------------------------------------------------------------

INPLACE = [
    ("add_", lambda x, y: x.add_(y, alpha=2)),
    ("mul_", lambda x, y: x.mul_(y)),
    ("div_", lambda x, y: x.div_(3.0)),
    ("sub_", lambda x, y: x.sub_(y[0])),
    ("fill_", lambda x, y: x.fill_(1.5)),
    ("zero_", lambda x, y: x.zero_()),
    ("copy_", lambda x, y: x.copy_(y)),
]


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name,f", INPLACE, ids=[n for n, _ in INPLACE])
def test_inplace_ops_write_into_self_as_aten(name, f, dtype):
    base, y = rand(6, 1100, dtype=dtype), rand(1100, dtype=dtype, seed=1)
    want = base.clone()
    f(want[1:4], y)
    got = base.clone()
    view = got[1:4]  # a view: the write goes through to `got`
    version = view._version
    with tb.mode(fallback="error") as m:
        out = f(view, y)
    assert out is view and view._version == version + 1
    torch.testing.assert_close(got.double(), want.double(), **TOL[dtype])
    assert sum(m.served.values()) == 1 and next(iter(m.served)).startswith(f"aten.{name}")


def test_inplace_in_autograd_matches_eager():
    w = rand(3, 700).requires_grad_()

    def f():
        h = w * 2
        h.mul_(w)
        h.add_(1.0)
        return h.sum()

    with tb.mode(fallback="error"):
        f().backward()
    got = w.grad.clone()
    w.grad = None
    f().backward()
    torch.testing.assert_close(got, w.grad, **TOL[F32])


# --- gathers' backward, masks, randomness, attention, padding, integers ---------------------

@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("padding_idx", [-1, 3])
def test_embedding_dense_backward(padding_idx, dtype):
    idx = torch.randint(0, 300, (5, 70), generator=torch.Generator().manual_seed(2))
    idx[0, :5] = 3
    g = rand(5, 70, 130, dtype=dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == F32 else {"rtol": 2e-2, "atol": 6e-2}
    check(aten.embedding_dense_backward.default, g, idx, 300, padding_idx, False, tol=tol)


def test_embedding_dense_backward_refuses_scale_grad_by_freq():
    with pytest.raises(UnsupportedError, match="scale_grad_by_freq"):
        tb.embedding_dense_backward(rand(3, 4), torch.tensor([0, 1, 0]), 5, -1, True)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons_with_a_number(name, dtype):
    x = rand(3, 1300, dtype=dtype).round()
    x[0, :3] = float("nan")
    for s in (0, 1.0, -1.5):
        check(getattr(aten, name).Scalar, x, s)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_masked_fill(dtype):
    x = rand(2, 3, 70, 70, dtype=dtype)
    mask = torch.tril(torch.ones(70, 70)).view(1, 1, 70, 70) == 0
    check(aten.masked_fill.Scalar, x, mask, float("-inf"))
    check(aten.masked_fill.Tensor, x, mask[0, 0], torch.tensor(2.5))


def test_bernoulli_keeps_p_and_is_repeatable_under_manual_seed():
    x = torch.empty(300, 1000)
    for p in (0.0, 0.1, 0.9, 1.0):
        torch.manual_seed(3)
        with tb.mode(fallback="error"):
            a = x.bernoulli_(p).clone()
        torch.manual_seed(3)
        b = tb.bernoulli.p(x, p)
        assert torch.equal(a, b) and set(a.unique().tolist()) <= {0.0, 1.0}
        assert abs(a.mean().item() - p) <= 4 * (p * (1 - p) / a.numel()) ** 0.5
    c = tb.bernoulli.p(x, 0.5)
    assert not torch.equal(c, tb.bernoulli.p(x, 0.5))  # a new seed each call


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq,s", [(64, 64), (70, 90)])
def test_cpu_flash_attention_forward_and_backward(lq, s, causal, dtype):
    q, k, v = rand(2, 3, lq, 40, dtype=dtype), rand(2, 3, s, 40, dtype=dtype, seed=1), \
        rand(2, 3, s, 40, dtype=dtype, seed=2)
    tol = {"rtol": 2e-5, "atol": 2e-5} if dtype == F32 else {"rtol": 3e-2, "atol": 3e-2}
    fwd = aten._scaled_dot_product_flash_attention_for_cpu.default
    out, lse = check(fwd, q, k, v, 0.0, causal, tol=tol)
    check(fwd, q, k, v, 0.0, causal, scale=0.3, tol=tol)
    g = rand(2, 3, lq, 40, dtype=dtype, seed=3)
    bwd = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
    check(bwd, g, q, k, v, out, lse, 0.0, causal, tol=tol)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("e,lq,s", [(32, 64, 64), (64, 200, 300), (64, 300, 100),
                                    (128, 130, 70), (32, 1, 150), (64, 150, 1)])
def test_fused_cpu_flash_attention(e, lq, s, causal, dtype):
    """Head dims the fused kernels serve (``tpublas/src/flash_attention.rs``): lengths over
    several 64-row blocks that divide neither, longer and shorter key sequences (causal
    steps past a query block skipped), one query or one key. Against ATen in float64: each
    result within four times ATen's own error in the dtype plus eight roundings of the
    largest element (the sums run in another order, in blocks of 64; the backward's
    ``dp − D`` cancels, so a fixed tolerance would be either loose or below what ATen itself
    meets at head dim 128)."""
    q, k, v = rand(2, 3, lq, e, dtype=dtype), rand(2, 3, s, e, dtype=dtype, seed=1), \
        rand(2, 3, s, e, dtype=dtype, seed=2)
    g = rand(2, 3, lq, e, dtype=dtype, seed=3)
    fwd = aten._scaled_dot_product_flash_attention_for_cpu.default
    bwd = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
    ulp = 2.0 ** -23 if dtype == F32 else 2.0 ** -8
    out, lse = fwd(q, k, v, 0.0, causal)
    calls = [(fwd, (q, k, v, 0.0, causal), {}),
             (bwd, (g, q, k, v, out, lse, 0.0, causal), {"scale": 0.2})]
    for op, args, kwargs in calls:
        got, m = served(op, *args, **kwargs)
        assert m.served[str(op)] == 1, m.served
        like = op(*args, **kwargs)
        want = op(*to64(list(args)), **kwargs)
        for i, (a, b, w) in enumerate(zip(got, like, want, strict=True)):
            assert a.dtype == b.dtype and a.shape == b.shape, (i, a.dtype, b.dtype)
            ours = (a.double() - w).abs().max().item()
            atens = (b.double() - w).abs().max().item()
            assert ours <= 4 * atens + 8 * ulp * w.abs().max().item(), (str(op), i, ours, atens)


def test_attention_refuses_dropout():
    q = rand(1, 2, 8, 4)
    with pytest.raises(UnsupportedError, match="dropout_p"):
        tb._scaled_dot_product_flash_attention_for_cpu(q, q, q, 0.1)


@pytest.mark.parametrize("mask_shape", [(70, 90), (2, 1, 70, 90)])
def test_cpu_flash_attention_with_an_additive_mask(mask_shape):
    q, k = rand(2, 3, 70, 40), rand(2, 3, 90, 40, seed=1)
    mask = rand(*mask_shape, seed=4)
    fwd = aten._scaled_dot_product_flash_attention_for_cpu.default
    out, lse = check(fwd, q, k, k, 0.0, False, attn_mask=mask)
    bwd = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
    check(bwd, rand(2, 3, 70, 40, seed=3), q, k, k, out, lse, 0.0, False, attn_mask=mask)


def test_sdpa_with_a_bool_mask_matches_eager():
    q = rand(2, 3, 70, 40).requires_grad_()
    mask = torch.rand(70, 70, generator=torch.Generator().manual_seed(0)) > 0.3
    mask |= torch.eye(70, dtype=torch.bool)  # no row fully masked
    with tb.mode(fallback="error"):
        y = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        y.sum().backward()
    got = q.grad.clone()
    q.grad = None
    want = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    want.sum().backward()
    torch.testing.assert_close(y, want, **TOL[F32])
    torch.testing.assert_close(got, q.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [F32, BF16, torch.int64])
def test_constant_pad_nd(dtype):
    x = rand(3, 5, 700).mul(100).to(dtype)
    check(aten.constant_pad_nd.default, x, [0, 1], -100)
    check(aten.constant_pad_nd.default, x, [2, 3, 0, 0, 1, 1], 7)
    with pytest.raises(UnsupportedError, match="negative"):
        tb.constant_pad_nd(rand(3, 4), [-1, 0])


def test_integer_scalar_arithmetic_and_clone_of_int64():
    x = torch.arange(-600, 700).view(13, 100)
    check(aten.add.Tensor, x, 5)
    check(aten.add.Scalar, x, 3, 2)
    check(aten.sub.Tensor, x, 7)
    check(aten.mul.Tensor, x, -3)
    check(aten.clone.default, x.t(), memory_format=torch.contiguous_format)
    with pytest.raises(BoundsError, match="does not fit in int32"):
        tb.add.Scalar(torch.tensor([2**40]), 1)


def test_sum_of_every_element():
    check(aten.sum.default, rand(37, 1100), tol={"rtol": 1e-5, "atol": 1e-4})


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name", ["tril", "triu"])
def test_triangles(name, dtype):
    x = rand(2, 3, 70, 600, dtype=dtype)
    x[0, 0, 1, 0] = float("nan")
    for diagonal in (0, -3, 5, 700):
        check(getattr(aten, name).default, x, diagonal)


def test_triangle_of_a_bool_mask():
    check(aten.tril.default, torch.ones(70, 600, dtype=torch.bool))
    check(aten.triu.default, torch.rand(2, 70, 600) > 0.5, 3)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_safe_softmax_gives_0_for_rows_masked_throughout(dtype):
    x = rand(37, 1100, dtype=dtype)
    x[3] = float("-inf")
    x[5, ::2] = float("-inf")
    check(aten._safe_softmax.default, x, 1)
    check(aten._safe_softmax.default, x, 0)
    if dtype == BF16:
        check(aten._safe_softmax.default, x, 1, dtype=F32)
