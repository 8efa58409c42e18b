"""Integer dtypes in tpukit.helion, against torch eager on `cpu` and `interpret`: int16
computes as int16 (wrapping as torch's does); uint8, which the runtime has no arrays of,
travels and computes as int32 (exact; stores wrap to the tensor's dtype on the host, as
torch's casts do), int64 is narrowed to int32 when its
values fit and is a clear error otherwise; with f32 and bf16 partners and shapes that do not
divide the blocks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

F32, BF16 = torch.float32, torch.bfloat16


@helion.kernel(config=helion.Config(block_sizes=[16, 128, 128]))
def scaled_matmul(x, w):
    """An int16 weight matrix cast in the kernel (Helion's bf16 x int16 gemm)."""
    m, k = x.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=x.dtype)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = acc + x[tm, tk].to(torch.float32) @ w[tk, tn].to(torch.float32)
        out[tm, tn] = acc.to(out.dtype)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_int16_operand(device, dtype):
    x = torch.randn(37, 300, dtype=dtype)
    w = torch.randint(-300, 300, (300, 200), dtype=torch.int16)
    tol = dict(rtol=1e-4, atol=1e-2) if dtype == F32 else dict(rtol=2e-2, atol=2.0)
    torch.testing.assert_close(scaled_matmul(x, w).float(), x.float() @ w.float(), **tol)


@helion.kernel
def int_casts(a, b, c):
    """int16, uint8 and int64 in and out; casts wrap like torch's."""
    oa, ob, oc = torch.empty_like(a), torch.empty_like(b), torch.empty_like(c)
    for t in hl.tile(a.size(0)):
        oa[t] = (a[t] * 40).to(torch.int16)
        ob[t] = (b[t].to(torch.int32) + 100).to(torch.uint8)
        oc[t] = c[t] * 3 + a[t].to(torch.int64)
    return oa, ob, oc


def test_int16_uint8_int64_values_and_wrapping(device):
    a = torch.randint(-1000, 1000, (300,), dtype=torch.int16)
    b = torch.randint(0, 256, (300,), dtype=torch.uint8)
    c = torch.randint(-(2**20), 2**20, (300,), dtype=torch.int64)
    oa, ob, oc = int_casts(a, b, c)
    assert (oa.dtype, ob.dtype, oc.dtype) == (torch.int16, torch.uint8, torch.int64)
    torch.testing.assert_close(oa, (a.int() * 40).to(torch.int16))  # wraps past int16
    torch.testing.assert_close(ob, (b.int() + 100).to(torch.uint8))  # wraps past 255
    torch.testing.assert_close(oc, c * 3 + a.long())


@helion.kernel
def gather_rows(table, idx):
    """`torch.long` indices (as Helion's examples use) gathering rows."""
    out = torch.empty([idx.size(0), table.size(1)], dtype=table.dtype)
    for t in hl.tile(idx.size(0)):
        out[t, :] = table[idx[t], :]
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_int64_indices_are_narrowed(device, dtype):
    table = torch.randn(50, 128, dtype=dtype)
    idx = torch.randint(0, 50, (37,), dtype=torch.long)
    torch.testing.assert_close(gather_rows(table, idx), table[idx])


def test_int64_values_outside_int32_are_an_error(device):
    c = torch.tensor([1, 2**40, 3], dtype=torch.int64)
    a = torch.zeros(3, dtype=torch.int16)
    b = torch.zeros(3, dtype=torch.uint8)
    with pytest.raises(helion.exc.HelionError, match=r"int64 tensor `c` holds 1099511627776"):
        int_casts(a, b, c)


@helion.kernel
def int16_floor_div(a, b):
    """int16 products wrap before the division, as in torch eager (int16 computes as int16)."""
    out = torch.empty_like(a)
    for t in hl.tile(a.size(0)):
        out[t] = (a[t] * b[t]) // 7 + a[t] % 5
    return out


def test_int16_computes_in_int16(device):
    a = torch.randint(-32768, 32767, (300,), dtype=torch.int16)
    b = torch.randint(-300, 300, (300,), dtype=torch.int16)
    got = int16_floor_div(a, b)
    assert got.dtype == torch.int16
    torch.testing.assert_close(got, (a * b) // 7 + a % 5)


@helion.kernel()
def bit_ops(x, y, keep):
    """int4_gemm's nibble unpacking and its kin: `&`, `|`, `^` bitwise on integers and
    logical on bools, `>>` arithmetic, `<<`, `~` — as torch's operators."""
    out = torch.empty([6, *x.shape], dtype=x.dtype)
    for t in hl.tile(x.size(0)):
        a, b = x[t], y[t]
        out[0, t] = a & 0xF
        out[1, t] = a | b
        out[2, t] = 3 ^ a ^ b
        out[3, t] = a >> 4
        out[4, t] = (a & 0x7) << 2
        both = (keep[t] & (a > 0)) | ~(b > 0) ^ (a == b)
        out[5, t] = torch.where(both, ~a, a)
    return out


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32])
def test_bitwise_operators_on_integers_and_bools(device, dtype):
    x = torch.randint(-128, 128, (300,), dtype=dtype)
    y = torch.randint(-128, 128, (300,), dtype=dtype)
    keep = torch.rand(300) < 0.5
    both = (keep & (x > 0)) | ~(y > 0) ^ (x == y)
    want = torch.stack([x & 0xF, x | y, 3 ^ x ^ y, x >> 4, (x & 0x7) << 2,
                        torch.where(both, ~x, x)])
    assert torch.equal(bit_ops(x, y, keep), want)
