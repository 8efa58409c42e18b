"""tpuBLAS row reductions and row operators on rows of every length around the CPU backend's
vector and accumulator widths (a reduction loop keeps several vector accumulators and
leaves a scalar remainder): sums, maxima, softmax and layer norm against torch in float64,
f32 and bf16, with NaN, ±inf and large/small magnitudes in the rows."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.tpublas as tb  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16
# f32: a reduction of up to ~2000 terms in f32 (any order) against float64; bf16: one
# rounding of an f32 result (half a bf16 ulp is 2^-9), as in test_tpublas.
TOL = {F32: {"rtol": 2e-5, "atol": 2e-5}, BF16: {"rtol": 1.6e-2, "atol": 1.6e-2}}
# Around 16 lanes × 4 accumulators × 2 (the interleaving threshold) and the 512-column block;
# rows of each window width (`rows::width`: the widest of 1024, 768, 512, 256 and 128 that
# divides the row, a 128-column window for 100 columns, 512 for 1000 and 2049), some in
# several windows (384: three of 128; 1280: five of 256; 2304: three of 768; 3072: three of
# 1024).
LENGTHS = [1, 15, 16, 17, 100, 127, 128, 129, 256, 384, 511, 512, 513, 768, 1000, 1024, 1280,
           2049, 2304, 3072]


def rows(n, dtype, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed + n)
    return ((torch.rand((37, n), generator=g, dtype=torch.float64) * 4 - 2) * scale).to(dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("n", LENGTHS)
def test_sum_and_amax_along_rows(n, dtype):
    x = rows(n, dtype)
    got = tb.sum.dim_IntList(x, [1])
    torch.testing.assert_close(got, x.double().sum(1).to(dtype), **TOL[dtype])
    assert torch.equal(tb.amax(x, [1]), x.amax(1))  # a maximum is exact


@pytest.mark.parametrize("n", [17, 129, 1024, 2049])
def test_max_and_sum_propagate_nan_and_inf_from_any_column(n):
    x = rows(n, F32)
    cols = [0, n // 2, n - 1]
    for r, c in enumerate(cols):
        x[r, c] = float("nan")
        x[len(cols) + r, c] = float("inf")
        x[2 * len(cols) + r, c] = -float("inf")
    want_max, want_sum = x.amax(1), x.sum(1)
    got_max, got_sum = tb.amax(x, [1]), tb.sum.dim_IntList(x, [1])
    torch.testing.assert_close(got_max, want_max, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(got_sum, want_sum, equal_nan=True, **TOL[F32])


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0])
def test_softmax_along_rows(n, dtype, scale):
    x = rows(n, dtype, scale=scale)
    want = torch.softmax(x.double(), -1).to(dtype)
    torch.testing.assert_close(tb._softmax(x, -1, False), want, **TOL[dtype])
    want_log = torch.log_softmax(x.double(), -1).to(dtype)
    torch.testing.assert_close(tb._log_softmax(x, -1, False), want_log, **TOL[dtype])


def test_softmax_rows_with_nan_and_infinities_are_torchs():
    x = rows(1024, F32)
    x[0, 700] = float("nan")
    x[1, :] = -float("inf")
    x[2, 3] = float("inf")
    x[3, 1000] = 1e30
    want = torch.softmax(x, -1)
    got = tb._softmax(x, -1, False)
    torch.testing.assert_close(got, want, equal_nan=True, **TOL[F32])
    safe = tb._safe_softmax(x, -1)
    torch.testing.assert_close(safe[1], torch.zeros(1024))


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("n", [1, 17, 128, 129, 256, 513, 768, 1024, 1280, 2049, 3072])
def test_layer_norm_along_rows(n, dtype):
    x = rows(n, dtype, scale=10.0) + 100  # a large mean: no E[x²] − E[x]² cancellation
    g = torch.Generator().manual_seed(n)
    w = torch.rand(n, generator=g, dtype=torch.float64).to(dtype)
    b = torch.rand(n, generator=g, dtype=torch.float64).to(dtype)
    out, mean, rstd = tb.native_layer_norm(x, [n], w, b, 1e-5)
    want = torch.native_layer_norm(x.double(), [n], w.double(), b.double(), 1e-5)
    torch.testing.assert_close(out, want[0].to(dtype), **TOL[dtype])
    torch.testing.assert_close(mean, want[1].to(dtype), **TOL[dtype])
    if n > 1:  # one column: rstd = 1/√eps, not a tolerance question
        torch.testing.assert_close(rstd, want[2].to(dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("m", [263, 1000])
def test_row_operators_on_many_rows_16_does_not_divide(m, dtype):
    """256 rows or more run in 16-row windows whatever their count (`rows::height`): the
    last window overhangs (263) or is half full (1000, a multiple of 8)."""
    g = torch.Generator().manual_seed(m)
    x = (torch.rand((m, 1000), generator=g, dtype=torch.float64) * 8 - 4).to(dtype)
    torch.testing.assert_close(tb._softmax(x, -1, False),
                               torch.softmax(x.double(), -1).to(dtype), **TOL[dtype])
    # Sums of 1000 terms in [-4, 4]: an absolute tolerance, as a sum may be near 0.
    sum_tol = {F32: 1e-3, BF16: 0.5}[dtype]
    torch.testing.assert_close(tb.sum.dim_IntList(x, [1]).double(), x.double().sum(1),
                               rtol=TOL[dtype]["rtol"], atol=sum_tol)
    assert torch.equal(tb.amax(x, [1]), x.amax(1))


@pytest.mark.parametrize("device", ["cpu", "interpret"])
@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("m", [1, 3, 8, 9, 16, 17, 24, 32])
def test_row_operators_on_few_rows(m, dtype, device):
    """Row counts 16 divides run in 16-row windows (`rows::height`), other counts below 256
    in 8-row ones: counts around both heights and a multiple of 8 that 16 does not divide,
    with rows that do and do not fill their window (1000 columns overhang a 512-column
    one; 128, 768 and 1024 fill one of their width)."""
    for n in (128, 768, 1000, 1024):
        g = torch.Generator().manual_seed(m * n)
        x = (torch.rand((m, n), generator=g, dtype=torch.float64) * 8 - 4).to(dtype)
        y = torch.softmax(x.double(), -1)
        grad = torch.rand((m, n), generator=g, dtype=torch.float64).to(dtype)
        with tb.device(device):
            got = {
                "softmax": tb._softmax(x, -1, False),
                "log_softmax": tb._log_softmax(x, -1, False),
                "backward": tb._softmax_backward_data(grad, y.to(dtype), -1, dtype),
                "sum": tb.sum.dim_IntList(x, [1]),
                "mean": tb.mean.dim(x, [1]),
                "amax": tb.amax(x, [1]),
                "sum_all": tb.sum(x),
            }
        yq = y.to(dtype).double()
        gy = grad.double() * yq
        want = {
            "softmax": y,
            "log_softmax": torch.log_softmax(x.double(), -1),
            "backward": gy - yq * gy.sum(-1, keepdim=True),
            "sum": x.double().sum(1),
            "mean": x.double().mean(1),
            "amax": x.double().amax(1),
            "sum_all": x.double().sum(),
        }
        for name, w in want.items():
            tol = {"rtol": 2e-5, "atol": 2e-5 * (1 + w.abs().max().item())}
            if dtype == BF16:
                tol = {"rtol": 1.6e-2, "atol": 1.6e-2 * (1 + w.abs().max().item() / 64)}
            assert got[name].dtype == dtype, name
            torch.testing.assert_close(got[name].double(), w.to(dtype).double(), **tol,
                                       msg=lambda s, name=name: f"{name}: {s}")
