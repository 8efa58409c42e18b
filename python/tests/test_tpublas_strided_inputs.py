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
