"""Torch ops with their extra arguments inside tpukit.helion device loops, against torch eager
on `cpu` and `interpret`, f32 and bf16, shapes that do not divide the blocks: ``torch.bmm`` /
``torch.mm`` with ``out_dtype``, ``torch.baddbmm`` / ``torch.addmm`` with ``out_dtype``,
``beta`` and ``alpha``, and an attention loop written the way Helion's examples write it."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: dict(rtol=1e-4, atol=1e-4), BF16: dict(rtol=2e-2, atol=5e-2)}


def close(actual, expected, dtype):
    torch.testing.assert_close(actual.float(), expected.float(), **TOL[dtype])


@helion.kernel(config=helion.Config(block_sizes=[1, 16, 128]))
def attention(q, k, v):
    """Online-softmax attention over [batch, seq, dim] with `torch.bmm(…, torch.float32)` for
    the scores and `torch.baddbmm` into an f32 accumulator."""
    b, m, d = q.size()
    n = k.size(1)
    d = hl.specialize(d)
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(d)
    for tb, tm in hl.tile([b, m]):
        mi = hl.full([tb, tm], float("-inf"), dtype=torch.float32)
        li = hl.zeros([tb, tm], dtype=torch.float32)
        acc = hl.zeros([tb, tm, d], dtype=torch.float32)
        qs = q[tb, tm, :] * scale
        for tn in hl.tile(n):
            s = torch.bmm(qs, k[tb, tn, :].transpose(1, 2), torch.float32)
            mnew = torch.maximum(mi, s.amax(-1))
            p = torch.exp(s - mnew[:, :, None])
            alpha = torch.exp(mi - mnew)
            li = li * alpha + p.sum(-1)
            acc = acc * alpha[:, :, None]
            acc = torch.baddbmm(acc, p.to(v.dtype), v[tb, tn, :])
            mi = mnew
        out[tb, tm, :] = (acc / li[:, :, None]).to(out.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_attention_with_bmm_out_dtype_and_baddbmm(device, dtype):
    q, k, v = (torch.randn(2, 40, 64, dtype=dtype) for _ in range(3))
    k = torch.randn(2, 200, 64, dtype=dtype)
    v = torch.randn(2, 200, 64, dtype=dtype)
    s = torch.bmm(q.float(), k.float().transpose(1, 2)) / 8.0
    expect = torch.bmm(torch.softmax(s, -1), v.float())
    close(attention(q, k, v), expect, dtype)


@helion.kernel(config=helion.Config(block_sizes=[16, 128, 64]))
def linear_ops(x, w, bias):
    """`torch.mm(…, out_dtype)` and `torch.addmm(…, out_dtype, beta=, alpha=)`."""
    m, kk = x.size()
    n = w.size(1)
    plain = torch.empty([m, n], dtype=torch.float32)
    fused = torch.empty([m, n], dtype=torch.float32)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        acc2 = bias[tn][None, :].to(torch.float32).expand(tm.block_size, tn.block_size)
        for tk in hl.tile(kk):
            acc = acc + torch.mm(x[tm, tk], w[tk, tn], torch.float32)
            acc2 = torch.addmm(acc2, x[tm, tk], w[tk, tn], torch.float32, beta=1.0, alpha=0.5)
        plain[tm, tn] = acc
        fused[tm, tn] = acc2
    return plain, fused


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_mm_and_addmm_with_out_dtype(device, dtype):
    x, w, bias = torch.randn(37, 100, dtype=dtype), torch.randn(100, 200, dtype=dtype), torch.randn(
        200, dtype=dtype)
    plain, fused = linear_ops(x, w, bias)
    assert plain.dtype == fused.dtype == torch.float32
    p = x.float() @ w.float()
    close(plain, p, dtype)
    close(fused, bias.float() + 0.5 * p, dtype)


@helion.kernel(config=helion.Config(block_sizes=[1, 16]))
def bmm_keeps_dtype(a, b):
    """Without `out_dtype`, a bf16 `torch.bmm` is bf16 (rounded), as in torch."""
    bb, m, _ = a.size()
    out = torch.empty([bb, m, b.size(2)], dtype=a.dtype)
    for tb, tm in hl.tile([bb, m]):
        r = torch.bmm(a[tb, tm, :], b[tb, :, :])
        assert r.dtype == a.dtype
        out[tb, tm, :] = r
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_bmm_without_out_dtype(device, dtype):
    a, b = torch.randn(3, 20, 64, dtype=dtype), torch.randn(3, 64, 128, dtype=dtype)
    close(bmm_keeps_dtype(a, b), torch.bmm(a.float(), b.float()), dtype)


@helion.kernel(config=helion.Config(block_sizes=[16, 128, 128]))
def times_w_t(g, w):
    """`g @ w.T` with the transpose on a tile (rhs transposed)."""
    m, k = g.size()
    n = w.size(0)
    out = torch.empty([m, n], dtype=torch.float32)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc += g[tm, tk].to(torch.float32) @ w[tn, tk].to(torch.float32).T
        out[tm, tn] = acc
    return out


@helion.kernel(config=helion.Config(block_sizes=[128, 128, 16]))
def x_t_times(x, g):
    """`x.T @ g` with the transpose on a tile (lhs transposed), summed over rows."""
    m, n1 = x.size()
    n2 = g.size(1)
    out = torch.empty([n1, n2], dtype=torch.float32)
    for t1, t2 in hl.tile([n1, n2]):
        acc = hl.zeros([t1, t2], dtype=torch.float32)
        for tm in hl.tile(m):
            acc += x[tm, t1].to(torch.float32).T @ g[tm, t2].to(torch.float32)
        out[t1, t2] = acc
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_matmul_with_a_transposed_tile(device, dtype):
    g, w = torch.randn(37, 300, dtype=dtype), torch.randn(200, 300, dtype=dtype)
    close(times_w_t(g, w), g.float() @ w.float().T, dtype)
    x, g2 = torch.randn(100, 200, dtype=dtype), torch.randn(100, 130, dtype=dtype)
    close(x_t_times(x, g2), x.float().T @ g2.float(), dtype)


@helion.kernel(config=helion.Config(block_sizes=[16, 128]))
def gelus(x):
    """Exact `F.gelu` (erf form, torch's default), the tanh form, and `torch.erfc`."""
    exact, tanh, erfc = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        v = x[tm, tn]
        exact[tm, tn] = torch.nn.functional.gelu(v)
        tanh[tm, tn] = torch.nn.functional.gelu(v, approximate="tanh")
        erfc[tm, tn] = torch.special.erfc(v) + torch.erfc(v)
    return exact, tanh, erfc


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_exact_gelu_and_erfc(device, dtype):
    x = (torch.randn(37, 300) * 4).to(dtype)
    x[0, :5] = torch.tensor([-12.0, -6.0, 0.0, 6.0, 12.0], dtype=dtype)  # the tails
    exact, tanh, erfc = gelus(x)
    F = torch.nn.functional
    close(exact, F.gelu(x.float()), dtype)
    close(tanh, F.gelu(x.float(), approximate="tanh"), dtype)
    close(erfc, 2 * torch.erfc(x.float()), dtype)
    # the negative tail is tiny but accurate relative to its size (no 1 - erf cancellation;
    # torch's own f32 gelu flushes it to 0, so the reference is f64)
    torch.testing.assert_close(exact[0, 1].double(), F.gelu(x[0, 1].double()), rtol=1e-2,
                               atol=0)


@helion.kernel(config=helion.Config(block_sizes=[4, 16, 64]))
def batched_scores(q, k, v):
    """Batched matmuls over a batch tile of 4 (unrolled): `q @ k^T` then `@ v`."""
    b, m, d = q.size()
    n = k.size(1)
    out = torch.empty([b, m, v.size(2)], dtype=torch.float32)
    for tb, tm in hl.tile([b, m]):
        acc = hl.zeros([tb, tm, v.size(2)], dtype=torch.float32)
        for tn in hl.tile(n):
            s = torch.bmm(q[tb, tm, :], k[tb, tn, :].transpose(1, 2), torch.float32)
            acc = torch.baddbmm(acc, s.to(v.dtype), v[tb, tn, :])
        out[tb, tm, :] = acc
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_batched_matmul_over_a_batch_tile(device, dtype):
    q, k, v = (torch.randn(6, 20, 32, dtype=dtype), torch.randn(6, 100, 32, dtype=dtype),
               torch.randn(6, 100, 128, dtype=dtype))
    s = torch.bmm(q.float(), k.float().transpose(1, 2))
    expect = torch.bmm(s.to(dtype).float(), v.float())
    tol = TOL[dtype] if dtype == F32 else dict(rtol=2e-2, atol=0.5)
    torch.testing.assert_close(batched_scores(q, k, v), expect, **tol)


@helion.kernel
def silu_plus_relu(x):
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        v = x[t]
        out[t] = torch.nn.functional.silu(v, inplace=False) + torch.nn.functional.relu(v, False)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_activations_take_inplace_false(device, dtype):
    """``F.silu(x, inplace=False)`` as Helion's jagged_hstu_attn writes it; ``inplace=True``
    on an immutable device value is refused."""
    x = torch.randn(300).to(dtype)
    expected = torch.nn.functional.silu(x.float()) + torch.relu(x.float())
    close(silu_plus_relu(x), expected.to(dtype), dtype)

    @helion.kernel
    def in_place(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t] = torch.nn.functional.relu(x[t], inplace=True)
        return out

    with pytest.raises(helion.exc.UnsupportedConstruct, match="inplace=True"):
        in_place(x)
