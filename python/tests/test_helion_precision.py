"""Where tpukit.helion rounds low-precision floats, against torch eager on `cpu` and
`interpret`, bf16 and f32, shapes that do not divide the blocks.

The rules (Helion's, which follow torch's per operation): each elementwise torch operation on
bf16 values gives a bf16 value (computed in f32, rounded once: exactly torch eager's result);
reductions, matmuls and ``hl.dot`` accumulate in f32; an f32 accumulator (``hl.zeros(...,
dtype=torch.float32)``) stays f32 through ``acc += …``/``torch.addmm``/``hl.dot(acc=…)``; and an
augmented assignment is the binary operation it spells (``v *= f`` is ``v = v * f``: a bf16
``v`` times an f32 ``f`` is f32, as in Helion, where torch's in-place ``mul_`` would round back
to bf16)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

F32, BF16 = torch.float32, torch.bfloat16


@helion.kernel(config=helion.Config(block_sizes=[16, 128]))
def sigmoid_grad_chain(go, x, d):
    """A bf16 chain of four operations (a sigmoid's backward in Helion's SE-net example)."""
    out = torch.empty_like(go)
    for tm, tn in hl.tile(go.size()):
        out[tm, tn] = go[tm, tn] * x[tm, tn] * d[tm, tn] * (1.0 - d[tm, tn])
    return out


@helion.kernel(config=helion.Config(block_sizes=[16, 128]))
def exp_sigmoid_chain(x, y):
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = torch.sigmoid(torch.exp(x[tm, tn]) - y[tm, tn] / 3.0) * 0.1
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_elementwise_chains_round_like_torch_eager(device, dtype):
    """Each operation rounds to the operands' dtype, as torch eager does: bit-identical."""
    go, x = torch.randn(37, 300, dtype=dtype), torch.randn(37, 300, dtype=dtype)
    d = torch.sigmoid(torch.randn(37, 300, dtype=dtype))
    got = sigmoid_grad_chain(go, x, d)
    assert got.dtype == dtype
    if dtype == BF16:
        assert torch.equal(got, go * x * d * (1.0 - d))
        # not the chain computed in f32 and rounded once
        once = (go.float() * x.float() * d.float() * (1.0 - d.float())).to(dtype)
        assert not torch.equal(got, once)
    else:
        torch.testing.assert_close(got, go * x * d * (1.0 - d), rtol=1e-6, atol=1e-6)
    got = exp_sigmoid_chain(x, go)
    want = torch.sigmoid(torch.exp(x) - go / 3.0) * 0.1
    if dtype == BF16:
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@helion.kernel(config=helion.Config(block_sizes=[16, 128]))
def composite_functions(x, y):
    """torch functions JAX computes in several steps: each rounds once, as torch's do."""
    a, b, c, d = (torch.empty_like(x) for _ in range(4))
    for tm, tn in hl.tile(x.size()):
        xs, ys = x[tm, tn], y[tm, tn]
        a[tm, tn] = torch.sigmoid(xs)
        b[tm, tn] = torch.nn.functional.silu(xs)
        c[tm, tn] = torch.log2(ys.abs() + 0.1)
        d[tm, tn] = torch.nn.functional.gelu(xs, approximate="tanh")
    return a, b, c, d


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_composite_functions_round_once(device, dtype):
    x, y = 3 * torch.randn(37, 300, dtype=dtype), torch.randn(37, 300, dtype=dtype)
    a, b, c, d = composite_functions(x, y)
    wants = (torch.sigmoid(x), torch.nn.functional.silu(x), torch.log2(y.abs() + 0.1))
    for got, want in zip((a, b, c), wants, strict=True):
        assert got.dtype == dtype
        if dtype == BF16:
            assert torch.equal(got, want)
        else:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # the tanh gelu computed in f32 and rounded once (torch's differs in the last f32 bits)
    want = torch.nn.functional.gelu(x.float(), approximate="tanh").to(dtype)
    rtol = 8e-3 if dtype == BF16 else 1e-5
    torch.testing.assert_close(d, want, rtol=rtol, atol=1e-5)


@helion.kernel(config=helion.Config(block_sizes=[8]))
def row_std(x):
    out = torch.empty([x.size(0)], dtype=x.dtype)
    for tm in hl.tile(x.size(0)):
        out[tm] = torch.std(x[tm, :], dim=-1)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_std_rounds_once(device, dtype):
    """The square root of the f32 variance, rounded once (not the root of a bf16 variance)."""
    x = torch.randn(37, 300, dtype=dtype) * 3
    got = row_std(x)
    want = x.double().std(-1).to(dtype)
    if dtype == BF16:
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[8]))
def row_sums(x):
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype)
    mean = torch.empty([m], dtype=torch.float32)
    for tm in hl.tile(m):
        row = x[tm, :]
        out[tm] = torch.sum(row, dim=-1)
        mean[tm] = torch.mean(row.to(torch.float32), dim=-1)
    return out, mean


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_reductions_accumulate_in_f32(device, dtype):
    """A bf16 sum is accumulated in f32 and rounded once (torch's result up to the order of
    the f32 additions); summing 3000 ones in bf16 would stop at 256."""
    x = torch.cat([torch.ones(1, 3000), 1.0 + torch.rand(20, 3000)]).to(dtype)
    got, mean = row_sums(x)
    assert got.dtype == dtype
    want = x.double().sum(-1)
    rtol = 4e-3 if dtype == BF16 else 1e-6  # half a bf16 ulp, plus the f32 sum's error
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=0)
    assert got[0].item() == torch.ones(3000, dtype=dtype).sum().item()  # torch: 3008 in bf16
    torch.testing.assert_close(mean.double(), x.double().mean(-1), rtol=1e-6, atol=0)


@helion.kernel(config=helion.Config(block_sizes=[16, 128, 128]))
def three_accumulators(x, w):
    """One product three ways: ``acc +=`` of a bf16 matmul, ``torch.addmm`` and ``hl.dot``."""
    m, k = x.size()
    n = w.size(1)
    a = torch.empty([m, n], dtype=torch.float32)
    b = torch.empty([m, n], dtype=torch.float32)
    c = torch.empty([m, n], dtype=torch.float32)
    for tm, tn in hl.tile([m, n]):
        acc_a = hl.zeros([tm, tn], dtype=torch.float32)
        acc_b = hl.zeros([tm, tn], dtype=torch.float32)
        acc_c = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            xs, ws = x[tm, tk], w[tk, tn]
            acc_a += torch.matmul(xs.to(torch.float32), ws.to(torch.float32))
            acc_b = torch.addmm(acc_b, xs, ws)
            acc_c = hl.dot(xs, ws, acc=acc_c)
        a[tm, tn], b[tm, tn], c[tm, tn] = acc_a, acc_b, acc_c
    return a, b, c


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_f32_accumulators_keep_f32_across_tiles(device, dtype):
    """The f32 sums of exact bf16 products: no per-tile rounding to bf16 (which would be off by
    about 2**-9 of the value)."""
    x, w = torch.randn(37, 700, dtype=dtype), torch.randn(700, 200, dtype=dtype)
    want = x.double() @ w.double()
    for got in three_accumulators(x, w):
        assert got.dtype == F32
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-4)


@helion.kernel(config=helion.Config(block_sizes=[16, 128]))
def scale_in_place(x, s):
    out = torch.empty(x.size(), dtype=torch.float32)
    for tm, tn in hl.tile(x.size()):
        v = x[tm, tn]
        v *= torch.exp2(s[tm, tn].to(torch.float32))
        out[tm, tn] = v
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_augmented_assignment_promotes_like_the_binary_operation(device, dtype):
    """``v *= f32`` on a bf16 ``v`` is ``v = v * f32`` (Helion's rule): the f32 product, not
    rounded back to bf16."""
    x, s = torch.randn(37, 300, dtype=dtype), torch.rand(37, 300, dtype=dtype)
    got = scale_in_place(x, s)
    want = x.float() * torch.exp2(s.float())
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    if dtype == BF16:
        assert not torch.equal(got, want.to(dtype).float())


@helion.kernel(config=helion.Config(block_sizes=[16, 128]))
def with_python_numbers(x):
    a, b, c, d, e = (torch.empty_like(x) for _ in range(5))
    for tm, tn in hl.tile(x.size()):
        v = x[tm, tn]
        a[tm, tn] = v * 0.1
        b[tm, tn] = v / 0.3
        c[tm, tn] = v + 0.1
        d[tm, tn] = 1.1 - v
        e[tm, tn] = torch.mul(v, 0.1) + torch.div(v, 0.3)
    return a, b, c, d, e


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_python_numbers_with_bf16_values_round_like_torch(device, dtype):
    """torch multiplies and divides a bf16 tensor by the f32 value of a Python number (0.1,
    not bf16 0.1: a systematic 1e-3 difference), and adds or subtracts its bf16 value."""
    x = 3 * torch.randn(37, 300, dtype=dtype)
    wants = (x * 0.1, x / 0.3, x + 0.1, 1.1 - x, torch.mul(x, 0.1) + torch.div(x, 0.3))
    for got, want in zip(with_python_numbers(x), wants, strict=True):
        assert got.dtype == dtype
        if dtype == BF16:
            assert torch.equal(got, want)
        else:
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    if dtype == BF16:  # the bf16-rounded 0.1 would give a different product
        assert not torch.equal(with_python_numbers(x)[0], x * float(torch.tensor(0.1, dtype=dtype)))
