"""tpukit.helion batched matmuls over more than 8 batch elements per tile and long chains of
them, `cpu` against `interpret` and torch, f32 and bf16.

Regression: kernels with many unrolled matmuls (Helion's linear-attention examples: 32 batch
elements per tile, a Neumann-series chain of products) read wrong constants or faulted on
`cpu`. Their code and constant pool, linked by RuntimeDyld, ended up more than 2 GiB apart and
the small code model's 32-bit PC-relative references wrapped; objects now use the large code
model (runtime/src/cpu/target.rs)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import DEVICES, helion  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: dict(rtol=1e-4, atol=1e-4), BF16: dict(rtol=2e-2, atol=5e-2)}


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


@pytest.fixture(params=DEVICES)
def device(request):
    with helion.device(request.param):
        yield request.param


@helion.kernel(config=helion.Config(block_sizes=[2]))
def product_chain(a, rounds: hl.constexpr):
    """``T = A; repeat: A = A @ A; T = A @ T + T`` on 2 batch elements per tile: 64 unrolled
    2-D matmuls and their selects in one kernel."""
    out = torch.empty_like(a)
    for tb in hl.tile(a.size(0)):
        m = a[tb, :, :]
        t = m
        for _ in hl.static_range(rounds):
            m = hl.dot(m, m)
            t = hl.dot(m, t, acc=t)
        out[tb, :, :] = t
    return out


def test_a_long_chain_of_batched_matmuls_is_right_on_cpu():
    a = torch.randn(2, 32, 32) * 0.02
    expected = product_chain(a, 16, device="interpret")
    actual = product_chain(a, 16, device="cpu")
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    m, t = a.clone(), a.clone()
    for _ in range(16):
        m = m @ m
        t = m @ t + t
    torch.testing.assert_close(actual, t, rtol=1e-4, atol=1e-5)


@helion.kernel(config=helion.Config(block_sizes=[32, 128]))
def bmm_32(a, b):
    out = torch.empty([a.size(0), a.size(1), b.size(2)], dtype=torch.float32)
    for tb, tn in hl.tile([a.size(0), b.size(2)]):
        out[tb, :, tn] = torch.bmm(a[tb, :, :], b[tb, :, tn], out_dtype=torch.float32)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_batched_matmul_over_32_elements_per_tile(device, dtype):
    a = torch.randn(40, 16, 24).to(dtype)
    b = torch.randn(40, 24, 130).to(dtype)
    expected = torch.bmm(a.float(), b.float())
    torch.testing.assert_close(bmm_32(a, b), expected, **TOL[dtype])
