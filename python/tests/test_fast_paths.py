"""The fast call paths give the same results as the full ones: inputs read in place (strided,
read-only, misaligned, bf16, 0-d and zero-size inputs), results that never alias the inputs,
eager calls served from a cached plan (numpy and plain torch tensors; tensors that need a
gradient or are traced still go through the torch op), and ``tpublas.mode()``'s per-operator
cache. Correctness only: no timings are asserted."""

import sys
import threading
import time

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
from jax.experimental import pallas as pl

from tpukit import pallas, tpublas

BF16 = ml_dtypes.bfloat16


def _add_mul(x_ref, y_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    o_ref[...] = (x * 2.0 + y_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def kernel():
    """A fresh kernel (its own plan cache) over (8, 128) blocks of a (24, 256) array."""
    block = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    return pallas.custom_kernel(
        lambda x, y: x, _add_mul,
        grid=(3, 2), in_specs=[block, block], out_specs=block,
    )


def reference(x, y):
    xf, yf = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return (xf * 2.0 + yf).astype(x.dtype)


def close(got, want, dtype):
    tol = 1e-2 if dtype == BF16 else 1e-6
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_repeated_calls_use_new_values(dtype, rng):
    """A signature seen before is served from the kernel's plan: new values, right results,
    fresh outputs."""
    k = kernel()
    for _ in range(3):
        x = rng.standard_normal((24, 256)).astype(dtype)
        y = rng.standard_normal((24, 256)).astype(dtype)
        out = k(x, y)
        close(out, reference(x, y), dtype)
        assert not np.shares_memory(out, x) and not np.shares_memory(out, y)
    assert len(k._plans) == 1


def test_strided_read_only_and_misaligned_inputs(rng):
    """Inputs the kernel cannot read in place are copied (a transposed view, an array at an
    odd address); read-only ones are read in place; every result matches."""
    k = kernel()
    base = rng.standard_normal((256, 24)).astype(np.float32)
    strided = base.T  # (24, 256), not C-contiguous
    ro = rng.standard_normal((24, 256)).astype(np.float32)
    ro.flags.writeable = False
    raw = np.zeros(24 * 256 * 4 + 1, np.uint8)
    misaligned = raw[1:].view(np.float32).reshape(24, 256)
    misaligned[...] = rng.standard_normal((24, 256))
    assert misaligned.ctypes.data % 4 != 0
    for x, y in [(strided, ro), (ro, strided), (misaligned, ro), (ro, misaligned)]:
        close(k(x, y), reference(x, y), np.float32)
    assert not ro.flags.writeable


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_torch_tensors_in_torch_tensors_out(dtype):
    """Plain CPU tensors run directly once planned; results are new torch tensors of the
    inputs' dtype; strided and negated views are read correctly."""
    k = kernel()
    g = torch.Generator().manual_seed(0)
    for _ in range(2):
        x = torch.randn((24, 256), generator=g).to(dtype)
        y = torch.randn((256, 24), generator=g).to(dtype).T  # strided
        out = k(x, y)
        assert isinstance(out, torch.Tensor) and out.dtype == dtype
        want = (x.float() * 2 + y.float()).to(dtype)
        torch.testing.assert_close(out, want)
        assert out.data_ptr() not in (x.data_ptr(), y.data_ptr())
    neg = torch._neg_view(x)
    torch.testing.assert_close(k(neg, x), (-x.float() * 2 + x.float()).to(dtype))


def test_tensors_that_need_gradients_go_through_the_op():
    """A planned signature does not bypass autograd: a tensor requiring grad reaches the
    torch op, whose missing derivative is reported at backward()."""
    k = kernel()
    x, y = torch.randn(24, 256), torch.randn(24, 256)
    k(x, y)  # planned
    xg = x.clone().requires_grad_()
    out = k(xg, y)
    assert out.requires_grad
    with pytest.raises(Exception, match="has no derivative"):
        out.sum().backward()


def test_zero_size_and_0d_through_tpublas():
    for x in [np.zeros((0, 5), np.float32), np.full((), 3.5, np.float32)]:
        out = tpublas.add(x, x)
        assert out.shape == x.shape
        np.testing.assert_array_equal(out, x + x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tpublas_torch_inputs(dtype):
    """tpuBLAS on strided, negated and read-only inputs gives torch's results; results never
    alias the inputs."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn((33, 70), generator=g).to(dtype)
    y = torch.randn((70, 33), generator=g).to(dtype).T
    for a, b in [(x, y), (torch._neg_view(x), x)]:
        out = tpublas.add(a, b)
        torch.testing.assert_close(out, a + b)
        assert out.data_ptr() not in (a.data_ptr(), b.data_ptr())
    ro = np.asarray(x.float().numpy())
    ro.flags.writeable = False
    np.testing.assert_allclose(tpublas.gelu(ro), torch.nn.functional.gelu(x.float()).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_mode_serves_repeated_operators():
    """The mode's per-operator cache serves repeated and mixed calls with torch's results."""
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(16, 40, generator=g), torch.randn(16, 40, generator=g)
    with tpublas.mode() as m:
        for _ in range(3):
            got = (x + y) * 2.0 - x.t().t()
    torch.testing.assert_close(got, (x + y) * 2.0 - x)
    assert m.served["aten.add.Tensor"] == 3


@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("n", [0, 1, 1000, 100003])
def test_kernel_launch_reads_inputs_in_place(n, dtype, rng):
    """A catalog kernel launched on numpy arrays (read in place on cpu, copied for the
    interpreter): both devices agree with numpy, zero-size included, and the result is a new
    array; a read-only input stays untouched."""
    from tpukit import _native
    from tpukit.launch import launch

    name = "bf16" if dtype == BF16 else "f32"
    kernel, _ = _native.instantiate("add_vectors", [max(n, 1)], name)
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    y.flags.writeable = False
    want = (x.astype(np.float32) + y.astype(np.float32)).astype(dtype)
    for device in ["cpu", "interpret"]:
        (out,) = launch(kernel, x, y, device=device)
        close(out, want, dtype)
        assert not np.shares_memory(out, x) and not np.shares_memory(out, y)


def _add(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def whole_add():
    """A fresh kernel adding two whole arrays of any shape (its own plans)."""
    return pallas.custom_kernel(lambda x, y: x, _add)


def test_planned_calls_follow_signature_and_kind_changes(rng):
    """The last signature's native plan serves only calls like it: other shapes, dtypes and
    kinds of array take the full path and get their own results; every result is a new,
    writable array of the arguments' kind and dtype."""
    k = whole_add()
    calls = []
    for shape in [(8, 128), (16, 128), (8, 128)]:
        for dtype in [np.float32, np.float16, BF16]:
            calls.append(rng.standard_normal(shape).astype(dtype))
    for x in calls + calls[::-1]:
        for kind in ["numpy", "torch"]:
            if kind == "numpy":
                a, b = x, x[::-1].copy()
            else:
                a = torch.from_numpy(x.astype(np.float32)).to(
                    torch.bfloat16 if x.dtype == BF16 else torch.from_numpy(x).dtype)
                b = a.flip(0).contiguous()
            for _ in range(2):
                out = k(a, b)
                if kind == "numpy":
                    assert type(out) is np.ndarray and out.dtype == x.dtype
                    assert out.flags.writeable and out.flags.c_contiguous
                    assert not np.shares_memory(out, a) and not np.shares_memory(out, b)
                    close(out, (a.astype(np.float32) + b.astype(np.float32)).astype(x.dtype),
                          x.dtype)
                else:
                    assert type(out) is torch.Tensor and out.dtype == a.dtype
                    assert out.data_ptr() not in (a.data_ptr(), b.data_ptr())
                    torch.testing.assert_close(out, a + b)
                out[...] = 0  # results are the caller's: the next call makes new ones


def test_planned_calls_still_refuse_bad_arguments():
    """After a plan is made, arguments it does not fit get the full path's errors: an
    unsupported dtype, a wrong number of arrays, something that is not an array."""
    k = whole_add()
    x = np.ones((8, 128), np.float32)
    k(x, x)
    k(x, x)  # planned
    fresh = whole_add()
    for args in [(x.astype(np.float64), x), (x, x, x), (x, [1.0])]:
        with pytest.raises(Exception) as planned:
            k(*args)
        with pytest.raises(Exception) as unplanned:
            fresh(*args)
        assert type(planned.value) is type(unplanned.value)
        assert str(planned.value) == str(unplanned.value)
    np.testing.assert_array_equal(k(x, x), x + x)


def test_planned_calls_read_bool_and_odd_layouts_correctly(rng):
    """Arrays a plan does not read in place (non-contiguous, misaligned, bool) after a
    planned call: right results through the full path."""
    k = whole_add()
    x = rng.standard_normal((8, 128)).astype(np.float32)
    k(x, x)
    raw = np.zeros(x.nbytes + 1, np.uint8)
    odd = raw[1:].view(np.float32).reshape(x.shape)
    odd[...] = x
    for a in [np.asfortranarray(x), x.T.copy().T, odd]:
        np.testing.assert_allclose(k(a, x), x + x, rtol=1e-6)
    b = rng.standard_normal((8, 128)) > 0
    bk = pallas.custom_kernel(lambda x, y: x, lambda x_ref, y_ref, o_ref: o_ref.__setitem__(
        ..., x_ref[...] & y_ref[...]))
    for _ in range(2):
        np.testing.assert_array_equal(bk(b, ~b), b & ~b)


def test_launch_plan_runs_only_what_it_was_made_for(rng):
    """`Kernel.plan`: a run on other dtypes, shapes, layouts or numbers of arrays (numpy
    arrays or torch tensors) returns None (the caller then takes the full path); bool inputs
    and a wrong number of wraps are refused when the plan is made."""
    from tpukit import _native

    k = whole_add()
    x = rng.standard_normal((8, 128)).astype(np.float32)
    kernel = k.kernel(x, x)
    plan = kernel.plan([("f32", (8, 128)), ("f32", (8, 128))], [np.asarray])
    (out,) = plan.run((x, x))
    np.testing.assert_array_equal(out, x + x)
    assert not np.shares_memory(out, x)
    t = torch.from_numpy(x)
    for args in [(x, x[:, ::2].copy()), (x, x.astype(np.int32)), (x, x.T), (x,), (x, x, x),
                 (x, x.astype(">f4")), (x, None), (x, t.T), (x, t.int()), (x, t.bfloat16()),
                 (x, torch._neg_view(t)), (x, t[:, :64])]:
        assert plan.run(args) is None
    (out,) = plan.run((x, t))  # a CPU tensor is read in place, as the array it views
    np.testing.assert_array_equal(out, x + x)
    with pytest.raises(_native.TpukitError, match="bool"):
        kernel.plan([("bool", (8, 128)), ("f32", (8, 128))], [np.asarray])
    with pytest.raises(_native.TpukitError, match="one wrap per output"):
        kernel.plan([("f32", (8, 128)), ("f32", (8, 128))], [])


def test_tpukit_debug_is_read_at_every_planned_call(monkeypatch):
    """`TPUKIT_DEBUG` toggled between calls applies to the next one, planned or not."""
    from test_pallas_ops import _next_block_kernel

    import tpukit

    k = _next_block_kernel()
    nz = np.array([3, 1, 2, 5], np.int32)
    x = np.zeros((32, 128), np.float32)
    monkeypatch.delenv("TPUKIT_DEBUG", raising=False)
    k(nz, x, x)
    k(nz, x, x)  # planned
    monkeypatch.setenv("TPUKIT_DEBUG", "1")
    with pytest.raises(tpukit.TpukitError, match="index 4 of dim 0 is outside"):
        k(nz, x, x)
    monkeypatch.setenv("TPUKIT_DEBUG", "0")
    k(nz, x, x)


def test_mode_direct_operators_match_the_full_path():
    """Calls the mode serves directly (f32/bf16 CPU tensors, positional) and those beside
    them it does not (keywords, numbers, 0-d float64 tensors, integer tensors, in-place ops)
    give torch's results and are counted as before."""
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(8, 33, generator=g), torch.randn(8, 33, generator=g)
    xb, yb = x.bfloat16(), y.bfloat16()
    i = torch.arange(8 * 33).reshape(8, 33)
    calls = [
        lambda: x + y, lambda: xb * yb, lambda: torch.add(x, y, alpha=2), lambda: x + 2.5,
        lambda: x * torch.tensor(2.0, dtype=torch.float64), lambda: i + i,
        lambda: x.t() @ y, lambda: torch.nn.functional.gelu(x), lambda: x.clone().add_(y),
        lambda: torch.softmax(x, -1), lambda: x.sum(), lambda: torch.where(x > 0, x, y),
    ]
    want = [c() for c in calls]
    with tpublas.mode() as m:
        got = [c() for c in calls]
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1.6e-2, atol=1e-5)
        assert a.dtype == b.dtype
    assert m.served["aten.add.Tensor"] == 3  # x + y, alpha=2, x + 2.5
    assert m.served["aten.add_.Tensor"] == 1
    assert m.fallback["aten.add.Tensor"] == 1  # i + i: int64


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda x: tpublas.add(x, torch.ones(3, 4)), "ShapeError", "broadcast"),
        (lambda x: tpublas.neg(x.double()), "DTypeError", "float64"),
        (lambda x: tpublas.mm(x, x), "ShapeError", "cannot be multiplied"),
        (lambda x: tpublas._softmax(x, 5, False), "ShapeError", "dim 5 is out of range"),
        (lambda x: tpublas.add.Tensor(x, x, alpha="2"), TypeError, "must be a number"),
        (lambda x: tpublas._softmax(x, 1.5, False), TypeError, "must be an int"),
        (lambda x: tpublas.neg(x, x), TypeError, "takes 1 positional"),
        (lambda x: torch.ops.tpublas.add.Tensor(x, torch.ones(3, 4)), "ShapeError", "broadcast"),
    ],
)
def test_tpublas_errors_on_plain_tensors(call, error, match):
    """Calls of plain CPU tensors and inline numbers (tpuBLAS's short path) still raise the
    error of their kind, naming what is wrong."""
    import tpukit

    error = getattr(tpukit, error) if isinstance(error, str) else error
    with pytest.raises(error, match=match):
        call(torch.ones(5, 6))


def test_mode_direct_calls_raise_tpublas_errors():
    """An operator the mode serves directly raises tpuBLAS's error, as the full path does."""
    import tpukit

    with pytest.raises(tpukit.ShapeError, match="broadcast"), tpublas.mode():
        torch.ones(5, 6) + torch.ones(3, 4)


@pytest.mark.parametrize("threshold", [0, None, 2**62], ids=["always", "default", "never"])
@pytest.mark.parametrize("shape", [(8, 513), (64, 512), (300, 1100)])
def test_split_threshold_changes_no_result(threshold, shape):
    """Small launches run on one thread unless their work reaches the split threshold
    (`tpukit::runtime::cpu::MIN_SPLIT_BYTES`); split or not, results are torch's."""
    from tpukit import _native

    gen = torch.Generator().manual_seed(sum(shape))
    x, y = (torch.randn(*shape, generator=gen) for _ in range(2))
    old = _native.set_min_split_bytes(0)
    _native.set_min_split_bytes(old if threshold is None else threshold)
    try:
        for _ in range(2):  # the full path, then the plan
            torch.testing.assert_close(tpublas.add.Tensor(x, y), x + y)
            torch.testing.assert_close(tpublas._softmax(x, -1, False), torch.softmax(x, -1))
            torch.testing.assert_close(tpublas.sum.dim_IntList(x, [1]), x.sum(1),
                                       rtol=1e-5, atol=1e-4)
    finally:
        _native.set_min_split_bytes(old)


def _gil_handovers(call, times):
    """How often another thread got the GIL while `call` ran `times` times. With a switch
    interval far longer than the test, the other thread (which hands the GIL back at once,
    `sleep(0)`) runs only when a call releases the GIL itself."""
    ran, stop = [0], threading.Event()

    def other():
        while not stop.is_set():
            ran[0] += 1
            time.sleep(0)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(60.0)
    thread = threading.Thread(target=other, daemon=True)
    try:
        thread.start()
        results, before = [], ran[0]
        for _ in range(times):
            results.append(call())  # kept: freeing a result may release the GIL (torch)
        return ran[0] - before
    finally:
        stop.set()
        sys.setswitchinterval(interval)
        thread.join()


def test_brief_planned_launches_keep_the_gil(rng):
    """A planned launch of a few microseconds runs holding the GIL (releasing it handed it to
    any waiting thread for a whole switch interval per call); a larger one releases it."""
    small, large = whole_add(), whole_add()  # a plan each
    s = rng.standard_normal((8, 128)).astype(np.float32)
    m = rng.standard_normal((1024, 1024)).astype(np.float32)
    for _ in range(3):  # the full path, then the plan, whose first run looks up the code
        np.testing.assert_array_equal(small(s, s), s + s)
        np.testing.assert_array_equal(large(m, m), m + m)
    assert _gil_handovers(lambda: small(s, s), 50) == 0
    assert _gil_handovers(lambda: large(m, m), 5) > 0
