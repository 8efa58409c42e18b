"""``tpukit.helion._testing``, for Helion's ``helion._testing``: the names Helion's example
programs import (``DEVICE``, ``HALF_DTYPE``, ``LONG_INT_TYPE``, ``run_example``, ``do_bench``,
``assert_close_with_mismatch_tolerance``), so that an example runs with only its imports
changed. ``run_example`` checks real Helion kernels against torch eager (f32 and bf16, shapes
the blocks do not divide) and must fail, naming the kernel, on a wrong one."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402
from tpukit.helion._testing import (  # noqa: E402
    DEVICE,
    HALF_DTYPE,
    LONG_INT_TYPE,
    assert_close_with_mismatch_tolerance,
    do_bench,
    run_example,
)

pytestmark = pytest.mark.usefixtures("torch_seed")

BLOCKS = helion.Config(block_sizes=[32, 128])


@helion.kernel(config=BLOCKS)
def add_scaled(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] + 2.0 * y[tm, tn]
    return out


@helion.kernel(config=BLOCKS)
def add_scaled_wrong(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] + 2.5 * y[tm, tn]
    return out


@helion.kernel(config=helion.Config(block_sizes=[32]))
def row_sum_max(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, _ = x.size()
    sums = torch.empty([m], dtype=torch.float32)
    maxes = torch.empty([m], dtype=x.dtype)
    for tm in hl.tile(m):
        row = x[tm, :]
        sums[tm] = row.to(torch.float32).sum(1)
        maxes[tm] = row.amax(1)
    return sums, maxes


def add_scaled_eager(x, y):
    return x + 2.0 * y


def row_sum_max_eager(x):
    return x.float().sum(1), x.amax(1)


def test_names_mean_this_backend():
    assert DEVICE == torch.device("cpu")
    assert HALF_DTYPE is torch.bfloat16
    assert LONG_INT_TYPE is torch.int64
    # `import helion` became `from tpukit import helion`: `helion._testing.…` is reachable too.
    assert helion._testing.run_example is run_example


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_run_example_passes_a_correct_kernel_and_prints_the_table(dtype, capsys):
    x = torch.randn(100, 300, device=DEVICE, dtype=dtype)
    y = torch.randn(100, 300, device=DEVICE, dtype=dtype)
    times = run_example(add_scaled, add_scaled_eager, (x, y))
    assert list(times) == ["helion", "torch"]
    assert all(ms > 0 for ms in times.values())
    err = capsys.readouterr().err
    assert "Testing helion correctness..." in err
    assert "Testing torch correctness" not in err  # the reference is not checked against itself
    rows = dict(re.findall(r"^(helion|torch)\s+\d+\.\d+\s+(\S+(?: \(ref\))?)", err, re.M))
    assert rows["torch"] == "1.00x (ref)"
    assert rows["helion"] == f"{times['torch'] / times['helion']:.2f}x"
    assert "Benchmark Results" in err and "Implementation" in err


def test_run_example_on_the_interpreter_and_with_tight_tolerances():
    x, y = torch.randn(70, 260), torch.randn(70, 260)
    with helion.device("interpret"):
        run_example(add_scaled, add_scaled_eager, (x, y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_run_example_fails_a_wrong_kernel_naming_it(dtype):
    x = torch.randn(100, 300, dtype=dtype)
    y = torch.randn(100, 300, dtype=dtype)
    with pytest.raises(AssertionError, match=r"^my_add differs from torch: Tensor-likes"):
        run_example(add_scaled_wrong, add_scaled_eager, (x, y), kernel_name="my_add")


def test_dicts_of_kernels_and_baselines():
    x, y = torch.randn(40, 200), torch.randn(40, 200)
    kernels = {"helion": add_scaled, "helion_interpret": lambda a, b: add_scaled(
        a, b, device="interpret")}
    baselines = {"eager": add_scaled_eager, "eager_fma": lambda a, b: torch.add(a, b, alpha=2.0)}
    times = run_example(kernels, baselines, (x, y))
    assert list(times) == ["helion", "helion_interpret", "eager", "eager_fma"]
    # every kernel is checked, and every baseline after the first (the reference)
    with pytest.raises(AssertionError, match="^bad differs from eager"):
        run_example({"ok": add_scaled, "bad": add_scaled_wrong}, baselines, (x, y))
    with pytest.raises(AssertionError, match="^eager_wrong differs from eager"):
        run_example(add_scaled, {"eager": add_scaled_eager,
                                 "eager_wrong": lambda a, b: a + b}, (x, y))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_tuple_outputs_are_compared_one_by_one(dtype):
    x = torch.randn(90, 130, dtype=dtype)
    run_example(row_sum_max, row_sum_max_eager, (x,), rtol=1e-2, atol=1e-2)
    with pytest.raises(AssertionError, match=r"^helion \(output 1\) differs from torch"):
        run_example(row_sum_max, lambda t: (t.float().sum(1), t.amin(1)), (x,))
    with pytest.raises(AssertionError, match="helion: returned 2 outputs, torch 1"):
        run_example(row_sum_max, lambda t: t.float().sum(1), (x,))


def test_kernels_get_copies_of_the_arguments():
    def in_place(x):
        x.add_(1.0)
        return x.clone()

    x = torch.zeros(8)
    run_example(in_place, lambda t: t + 1.0, (x,), rtol=0, atol=0)
    assert torch.equal(x, torch.zeros(8))  # the kernel's writes went to copies


def test_mismatch_tolerance():
    x = torch.randn(1000)
    few_off = x.clone()
    few_off[:5] += 3.0  # 0.5% of the elements

    def kernel(t):
        return t + (few_off - x)

    run_example(kernel, lambda t: t, (x,), atol=1e-4, rtol=1e-4, max_mismatch_pct=0.01)
    with pytest.raises(AssertionError, match="mismatched difference"):
        run_example(kernel, lambda t: t, (x,), atol=1e-4, rtol=1e-4, max_mismatch_pct=0.01,
                    max_mismatched_abs_diff=1.0)
    with pytest.raises(AssertionError, match=r"^helion differs from torch: 0.5000% of 1000"):
        run_example(kernel, lambda t: t, (x,), atol=1e-4, rtol=1e-4, max_mismatch_pct=0.001)
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        run_example(kernel, lambda t: t, (x,), atol=1e-4, rtol=1e-4)


def test_assert_close_with_mismatch_tolerance():
    e = torch.linspace(1, 2, 200)
    a = e.clone()
    assert_close_with_mismatch_tolerance(a, e)
    a[0] = 10.0  # 0.5% off, by 9 (relative 9)
    assert_close_with_mismatch_tolerance(a, e)
    assert_close_with_mismatch_tolerance(a, e, max_mismatched_abs_diff=9.5, max_abs_diff=9.5,
                                         max_rel_diff=9.5)
    for bound, words in [("max_mismatched_abs_diff", "largest mismatched difference"),
                         ("max_abs_diff", "largest absolute difference"),
                         ("max_rel_diff", "largest relative difference")]:
        with pytest.raises(AssertionError, match=words):
            assert_close_with_mismatch_tolerance(a, e, **{bound: 8.0})
    with pytest.raises(AssertionError, match="mismatch"):
        assert_close_with_mismatch_tolerance(a, e, max_mismatch_pct=0.001)
    a[1] = float("nan")
    with pytest.raises(AssertionError, match="1.0000% of 200"):
        assert_close_with_mismatch_tolerance(a, e, max_mismatch_pct=0.005)
    with pytest.raises(AssertionError):
        assert_close_with_mismatch_tolerance(e[:10], e)


def test_backward_check():
    x = torch.randn(6, 5, requires_grad=True)
    w = torch.randn(5, requires_grad=True)

    def ref(a, b):
        return (a * b).sum(1)

    run_example(ref, lambda a, b: (a * b).sum(1), (x, w), bwd=True)
    assert x.grad is None and w.grad is None

    class WrongGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return (a * b).sum(1)

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g[:, None] * b, (g[:, None] * a).sum(0) * 2

    with pytest.raises(AssertionError, match="wrong_bwd: gradient of argument 1"):
        run_example(WrongGrad.apply, ref, (x, w), kernel_name="wrong_bwd", bwd=True)
    with pytest.raises(ValueError, match="no argument requires grad"):
        run_example(ref, ref, (x.detach(), w.detach()), kernel_name="k", bwd=True)


def test_do_bench():
    times = do_bench(lambda: None, fixed_repetitions=7, return_mode="all")
    assert len(times) == 7 and all(ms >= 0 for ms in times)  # exactly 7 timed calls
    t = torch.ones(3, requires_grad=True)
    seen = []

    def step():
        seen.append(t.grad)
        (t * 2).sum().backward()

    do_bench(step, grad_to_none=[t], fixed_repetitions=3)
    assert len(seen) >= 4 and all(g is None for g in seen)
    low, high = do_bench(lambda: sum(range(1000)), quantiles=[0.2, 0.8], rep=5)
    assert 0 <= low <= high


def test_refusals_and_argument_errors(tmp_path):
    x = torch.randn(4)
    with pytest.raises(helion.exc.UnsupportedConstruct, match="one device"):
        run_example(torch.neg, torch.neg, (x,), process_group_name="world")
    with pytest.raises(helion.exc.UnsupportedConstruct, match="one device"):
        do_bench(lambda: None, process_group_name="world")
    with pytest.raises(ValueError, match=r"\['torch'\] name both a kernel and a baseline"):
        run_example(torch.neg, torch.neg, (x,), kernel_name="torch")
    with pytest.raises(ValueError, match="no kernel"):
        run_example({}, torch.neg, (x,))
    with pytest.raises(TypeError, match="`helion` returned int"):
        run_example(lambda t: 3, torch.neg, (x,))
    trace = tmp_path / "trace.json"
    run_example(torch.neg, lambda t: -t, (x,), trace_path=str(trace))
    assert '"helion"' in trace.read_text()
    with pytest.raises(helion.exc.UnsupportedConstruct, match="code_and_output"):
        from tpukit.helion._testing import code_and_output  # noqa: F401


def test_an_implementation_that_raises_is_named():
    def gpu_only(t):
        raise RuntimeError("0 active drivers")

    with pytest.raises(RuntimeError, match="0 active drivers") as info:
        run_example(torch.neg, {"triton": gpu_only, "torch": torch.neg}, (torch.randn(3),))
    assert "(raised by `triton`, called by run_example)" in info.value.__notes__
