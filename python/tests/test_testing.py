"""`tpukit.testing.do_bench`: its warm-up, its repetitions and what it returns, on a fake clock
(no timing in tests: each call of the benchmarked function advances the clock by a known
amount)."""

import statistics

import numpy as np
import pytest

from tpukit import testing


class Clock:
    """``time.perf_counter`` for ``do_bench``: each call of ``fn`` takes the next duration (s)."""

    def __init__(self, durations):
        self.now = 0.0
        self.durations = list(durations)
        self.calls = []

    def perf_counter(self):
        return self.now

    def fn(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        self.now += self.durations[len(self.calls) - 1]
        return args


@pytest.fixture
def clock(monkeypatch):
    def install(durations):
        c = Clock(durations)
        monkeypatch.setattr(testing.time, "perf_counter", c.perf_counter)
        return c

    return install


def test_first_call_and_warm_up_are_not_timed(clock):
    # 1 s first call (a compile), 10 ms warm-up calls for 25 ms, then the timed calls
    timed = [0.004, 0.001, 0.003, 0.002, 0.005]
    c = clock([1.0, 0.010, 0.010, 0.010] + timed)
    all_ms = testing.do_bench(c.fn, 7, warmup=25, rep=0, min_rep=5, return_mode="all", k=1)
    assert len(c.calls) == 4 + 5
    assert all(call == ((7,), {"k": 1}) for call in c.calls)  # args and kwargs passed through
    np.testing.assert_allclose(all_ms, [t * 1e3 for t in timed])


def test_return_modes_and_quantiles(clock):
    timed = list(np.random.default_rng(0).uniform(0.001, 0.01, 11))
    expected = [t * 1e3 for t in timed]

    def bench(**kw):
        c = clock([0.0, 0.0] + timed)
        return testing.do_bench(c.fn, warmup=0, rep=0, min_rep=11, **kw)

    assert bench() == pytest.approx(statistics.median(expected))
    assert bench(return_mode="mean") == pytest.approx(statistics.fmean(expected))
    assert bench(return_mode="min") == pytest.approx(min(expected))
    assert bench(return_mode="max") == pytest.approx(max(expected))
    q = bench(quantiles=(0.2, 0.5, 0.8))
    np.testing.assert_allclose(q, np.quantile(expected, [0.2, 0.5, 0.8]))
    assert q[0] <= q[1] <= q[2]


def test_repetitions_fill_the_budget_within_bounds(clock):
    c = clock([0.0, 0.0] + [0.010] * 100)
    assert len(testing.do_bench(c.fn, warmup=0, rep=50, return_mode="all")) == 5
    c = clock([0.0, 0.0] + [0.010] * 100)
    assert len(testing.do_bench(c.fn, warmup=0, rep=1000, max_rep=20, return_mode="all")) == 20


def test_jax_results_are_waited_for(clock):
    waited = []

    class Result:
        def block_until_ready(self):
            waited.append(True)
            return self

    testing.do_bench(lambda: Result(), warmup=0, rep=0, min_rep=3)
    assert len(waited) == 1 + 1 + 3


def test_a_real_kernel_is_benchmarked():
    import tpukit

    kernel = tpukit.instantiate("softmax", (20, 128), "f32")
    x = np.random.default_rng(0).standard_normal((20, 128)).astype(np.float32)
    low, mid, high = testing.do_bench(
        tpukit.launch, kernel, x, warmup=1, rep=5, quantiles=(0.1, 0.5, 0.9)
    )
    assert 0 < low <= mid <= high


def test_bad_arguments():
    with pytest.raises(ValueError, match="return_mode"):
        testing.do_bench(lambda: None, return_mode="average")
    with pytest.raises(ValueError, match="quantiles"):
        testing.do_bench(lambda: None, quantiles=(50,))
    with pytest.raises(ValueError, match="min_rep"):
        testing.do_bench(lambda: None, min_rep=0)
