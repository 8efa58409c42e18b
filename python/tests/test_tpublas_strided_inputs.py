"""CPU torch tensors that are not C-contiguous (transposes, permutations, slices,
expansions) given to tpuBLAS: read natively and gathered into row-major copies at the
boundary (``python/src/strided.rs``), on plans and full calls, inside ``tpublas.mode()``
and outside. Copies must be bit for bit torch's; products within the dtype's tolerance."""

import pytest
import torch

from tpukit import tpublas

DTYPES = [torch.float32, torch.bfloat16]


def tol(dtype):
    return {"rtol": 1.6e-2, "atol": 2e-2} if dtype == torch.bfloat16 else \
        {"rtol": 2e-5, "atol": 2e-5}


def rand(g, shape, dtype):
    return torch.randn(shape, generator=g).to(dtype)


def views(g, dtype):
    """(name, a strided view) pairs: every layout kind the gather distinguishes."""
    base = rand(g, (6, 70, 3, 40), dtype)
    return [
        ("transpose", rand(g, (300, 129), dtype).T),
        ("heads", rand(g, (2, 64, 4, 32), dtype).transpose(1, 2)),
        ("first axis contiguous", base.permute(3, 1, 0, 2)),
        ("columns sliced", base[:, 5:65, :, 7:33]),
        ("rows stepped", rand(g, (90, 50), dtype)[::3]),
        ("last axis stepped", rand(g, (40, 90), dtype)[:, ::2]),
        ("expanded", rand(g, (1, 33, 1), dtype).expand(5, 33, 17)),
        ("expanded last axis", rand(g, (20, 1), dtype).expand(20, 64)),
        ("one element", rand(g, (4, 4), dtype)[1:2, 2:3]),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
def test_clones_and_adds_of_strided_views_are_torchs(dtype):
    g = torch.Generator().manual_seed(3)
    for name, v in views(g, dtype):
        assert not v.is_contiguous() or v.numel() == 1, name
        for _ in range(2):  # the full call, then the plan it made
            got = tpublas.clone(v)
            assert got.is_contiguous() and torch.equal(got, v), name
            y = rand(g, tuple(v.shape), dtype)
            assert torch.equal(tpublas.add.Tensor(v, y), v + y), name
            assert torch.equal(tpublas.add.Tensor(y, v), y + v), name


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", [(128, 512, 128), (200, 96, 130), (7, 300, 33)])
def test_products_of_transposed_operands(dtype, m, k, n):
    g = torch.Generator().manual_seed(m + k + n)
    a, b = rand(g, (k, m), dtype).T, rand(g, (n, k), dtype).T
    want = (a.float() @ b.float())
    for x, y in [(a, b), (a.contiguous(), b), (a, b.contiguous())]:
        torch.testing.assert_close(tpublas.mm(x, y).float(), want, **tol(dtype))
    with tpublas.mode(fallback="error") as served:
        got = [a @ b for _ in range(2)]
    assert served.served
    for r in got:
        torch.testing.assert_close(r.float(), want, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_mode_serves_strided_views(dtype):
    """Attention's head split (a transposed view made contiguous) and a cat of slices, as a
    model writes them, inside the mode."""
    g = torch.Generator().manual_seed(11)
    x = rand(g, (2, 64, 128), dtype)
    with tpublas.mode(fallback="error"):
        heads = x.view(2, 64, 4, 32).transpose(1, 2).contiguous()
        parts = torch.cat([x[:, :, 96:], x[:, :, 1::4]], dim=-1)
    assert torch.equal(heads, x.view(2, 64, 4, 32).transpose(1, 2).contiguous())
    assert torch.equal(parts, torch.cat([x[:, :, 96:], x[:, :, 1::4]], -1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_transposed_operands_are_read_in_place(dtype):
    """A product's operand that is a transposed view (``w.t()``, ``x.mT``) is read where it
    lies by a kernel of its own: the results are bit for bit those of its contiguous copy,
    on the first call and on the plan's replays, and a plan made for one layout hands a
    call in another to the full path (right either way)."""
    g = torch.Generator().manual_seed(5)
    x, w = rand(g, (77, 300), dtype), rand(g, (130, 300), dtype)
    xt = rand(g, (300, 77), dtype)
    bias = rand(g, (130,), dtype)
    ba, bb = rand(g, (3, 150, 40), dtype), rand(g, (3, 129, 150), dtype)
    calls = [
        (tpublas.mm, (x, w.t())),
        (tpublas.mm, (xt.t(), w.t())),
        (tpublas.mm, (xt.t(), w.t().contiguous())),
        (tpublas.addmm, (bias, x, w.t())),
        (tpublas.bmm, (ba.mT, bb.mT)),
    ]
    for op, args in calls:
        want = op(*[a.contiguous() for a in args])
        for _ in range(3):
            assert torch.equal(op(*args), want)
    # One operator, its layouts alternating: each call right.
    for args in [(x, w.t()), (x, w.t().contiguous()), (xt.t(), w.t()), (x, w.t())]:
        torch.testing.assert_close(tpublas.mm(*args).float(),
                                   x.float() @ w.float().t() if args[0] is x
                                   else xt.float().t() @ w.float().t(), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensors_requiring_a_gradient_are_read_natively(dtype):
    """Inside the mode (below torch's autograd) and in direct calls, a tensor that requires
    a gradient is read as any other: the mode's results carry torch's graph and the
    gradients are torch's; a direct call's result carries none (as before, when such
    tensors were copied through numpy)."""
    g = torch.Generator().manual_seed(9)
    x = rand(g, (64, 128), dtype)
    w = rand(g, (96, 128), dtype).requires_grad_()
    b = rand(g, (96,), dtype).requires_grad_()
    want = torch.nn.functional.linear(x, w, b)
    want.float().square().sum().backward()
    gw, gb = w.grad.clone(), b.grad.clone()
    w.grad = b.grad = None
    with tpublas.mode(fallback="error") as m:
        got = torch.nn.functional.linear(x, w, b)
        got.float().square().sum().backward()
    assert m.served["aten.addmm.default"] >= 1
    torch.testing.assert_close(got.float(), want.float(), **tol(dtype))
    # Gradients of magnitude ~100: bf16 forward results one rounding apart move them ~1%.
    grad_tol = {"rtol": 3e-2, "atol": 0.5} if dtype == torch.bfloat16 else \
        {"rtol": 1e-4, "atol": 1e-3}
    torch.testing.assert_close(w.grad.float(), gw.float(), **grad_tol)
    torch.testing.assert_close(b.grad.float(), gb.float(), **grad_tol)
    direct = tpublas.add(w, w)
    assert not direct.requires_grad and direct.grad_fn is None
    assert torch.equal(direct, (w + w).detach())


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_lists_are_read_natively(monkeypatch, dtype):
    """The tensors of a list argument (``cat``'s) are read as a tensor argument is: natively,
    strided ones gathered there, with no numpy detour; the result is torch's, bit for bit."""
    from tpukit import _arrays

    def no_numpy(x):
        raise AssertionError("a tensor in a list went through numpy")

    g = torch.Generator().manual_seed(5)
    heads = rand(g, (2, 64, 4, 32), dtype).transpose(1, 2)
    rows = rand(g, (2, 4, 10, 32), dtype)
    monkeypatch.setattr(_arrays, "to_numpy", no_numpy)
    got = tpublas.cat([heads, rows, heads[:, :, ::3]], 2)
    assert torch.equal(got, torch.cat([heads, rows, heads[:, :, ::3]], 2))
