"""``hl.rand``/``hl.randint`` (seeded: the same numbers for a seed whatever the block sizes and
device; uniform; distinct seeds differ), ``hl.split``/``hl.join`` and ``hl.barrier`` in
tpukit.helion, against torch eager on `cpu` and `interpret`, f32 and bf16, shapes that do not
divide the blocks."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

F32, BF16 = torch.float32, torch.bfloat16


def _dropout(block_sizes):
    @helion.kernel(config=helion.Config(block_sizes=block_sizes))
    def dropout(x, p: float, seed: int):
        m, n = x.size()
        out = torch.empty_like(x)
        keep = torch.empty([m, n], dtype=torch.int32)
        for tm, tn in hl.tile([m, n]):
            r = hl.rand([tm, tn], seed=seed)
            kept = r > p
            out[tm, tn] = torch.where(kept, x[tm, tn] / (1 - p), 0.0).to(x.dtype)
            keep[tm, tn] = kept.to(torch.int32)
        return out, keep

    return dropout


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_rand_is_a_function_of_seed_and_position(device, dtype):
    x = torch.randn(37, 300, dtype=dtype)
    out, keep = _dropout([8, 128])(x, 0.25, 123)
    out2, keep2 = _dropout([16, 256])(x, 0.25, 123)  # other blocks: the same numbers
    torch.testing.assert_close(keep, keep2)
    _, keep3 = _dropout([8, 128])(x, 0.25, 124)
    assert (keep != keep3).float().mean() > 0.2  # another seed, another mask
    frac = keep.float().mean().item()
    assert 0.72 < frac < 0.78
    expect = torch.where(keep.bool(), x.float() / 0.75, 0.0)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == F32 else dict(rtol=2e-2, atol=5e-2)
    torch.testing.assert_close(out.float(), expect, **tol)


@helion.kernel(config=helion.Config(block_sizes=[128]))
def draws(n_holder, seed: int):
    n = n_holder.size(0)
    u = torch.empty([n], dtype=torch.float32)
    k = torch.empty([n], dtype=torch.int32)
    for t in hl.tile(n):
        u[t] = hl.rand([t], seed=seed)
        k[t] = hl.randint([t], low=-3, high=7, seed=seed)
    return u, k


def test_rand_and_randint_distributions(device):
    u, k = draws(torch.empty(20000), 7)
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean().item() - 0.5) < 0.01 and abs(u.var().item() - 1 / 12) < 0.005
    hist = torch.histc(u, bins=10, min=0, max=1) / u.numel()
    assert (hist - 0.1).abs().max() < 0.01
    assert k.min() == -3 and k.max() == 6
    counts = torch.bincount(k + 3, minlength=10).float() / k.numel()
    assert (counts - 0.1).abs().max() < 0.01
    u2, _ = draws(torch.empty(20000), 7)
    torch.testing.assert_close(u, u2)  # reproducible


@helion.kernel(config=helion.Config(block_sizes=[8, 64]))
def swap_pairs(x):
    """x [m, n, 2] -> pairs swapped and summed: `hl.split` then `hl.join`."""
    m, n, _ = x.size()
    out = torch.empty_like(x)
    total = torch.empty([m, n], dtype=x.dtype)
    for tm, tn in hl.tile([m, n]):
        lo, hi = hl.split(x[tm, tn, :])
        out[tm, tn, :] = hl.join(hi, lo)
        total[tm, tn] = lo + hi
    return out, total


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_split_and_join(device, dtype):
    x = torch.randn(21, 100, 2, dtype=dtype)
    out, total = swap_pairs(x)
    torch.testing.assert_close(out, x.flip(-1))
    torch.testing.assert_close(total.float(), (x[..., 0] + x[..., 1]).float(),
                               **({} if dtype == F32 else dict(rtol=2e-2, atol=2e-2)))


@helion.kernel(config=helion.Config(block_sizes=[128, 128]))
def two_phase(x):
    """A barrier between two top-level loops: the second reads what the first wrote."""
    n = x.size(0)
    tmp = torch.empty_like(x)
    out = torch.empty_like(x)
    for t in hl.tile(n):
        tmp[t] = x[t] * 2
    hl.barrier()
    for t in hl.tile(n):
        out[t] = tmp[t] + 1
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_barrier_between_top_level_loops(device, dtype):
    x = torch.randn(300, dtype=dtype)
    torch.testing.assert_close(two_phase(x), x * 2 + 1)


def test_barrier_inside_a_device_loop_is_an_error():
    @helion.kernel
    def inside(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            hl.barrier()
            out[t] = x[t]
        return out

    with pytest.raises(helion.exc.BarrierOnlyAllowedAtTopLevel):
        inside(torch.randn(128))
