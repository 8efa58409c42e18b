"""Reliability: what an adversarial user might do gives a clear error or the right answer —
never a crash, an abort, a hang or a silently wrong result. Blocks and results larger than
memory, an empty output list, damaged bundles (cut off, garbled, truncated while loaded),
`fork` after import and after a launch, NaN/Inf through `cumsum`, 0-d tensors, torch's lazy
negative views, JAX dropping unused arguments, and small ATen deviations. Scenarios that could
crash or hang run in a child process with a timeout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import jax  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import tpukit  # noqa: E402
import tpukit.tpublas as tb  # noqa: E402
from tpukit import pallas  # noqa: E402

INF, NAN = float("inf"), float("nan")
PYTHON_DIR = Path(tpukit.__file__).resolve().parent.parent


def run_child(code: str, env: dict | None = None, timeout: float = 300):
    """Runs ``code`` in a fresh Python with this tpukit; fails the test on a crash or a hang."""
    full_env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), **(env or {})}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"child failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done


# --- memory: blocks, results -----------------------------------------------------------------


def copy_body(x_ref, o_ref):
    o_ref[...] = x_ref[...]


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_a_block_larger_than_memory_is_refused(device):
    """A Pallas block past any memory is refused at import (it could not be in a TPU's VMEM);
    tests/reliability.rs covers the launch's own refusal of such a block."""
    x = np.arange(200, dtype=np.float32).reshape(10, 20)
    huge = pallas.custom_kernel(
        lambda x: x, copy_body, grid=(1,),
        in_specs=[pl.BlockSpec((65536, 65536), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((65536, 65536), lambda i: (0, 0)))
    with pytest.raises(tpukit.OutOfMemoryError, match="Ran out of memory in memory space vmem"):
        huge(x, device=device)
    big = pallas.custom_kernel(
        lambda x: x, copy_body, grid=(1,),
        in_specs=[pl.BlockSpec((1024, 1024), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((1024, 1024), lambda i: (0, 0)))
    np.testing.assert_array_equal(big(x, device=device), x)


def test_results_larger_than_memory_are_out_of_memory_errors():
    col, row = torch.ones(2**20, 1), torch.ones(1, 2**20)
    with pytest.raises(tpukit.OutOfMemoryError, match="aten.add.Tensor"):
        tb.add(col, row)
    with pytest.raises(tpukit.OutOfMemoryError):
        tb.mm(col, row)
    # Zero-size inputs whose broadcast has more elements than an array can hold.
    a, b = torch.zeros(2**40, 1, 0), torch.zeros(1, 2**40, 0)
    with pytest.raises(tpukit.OutOfMemoryError, match="more elements than an array can hold"):
        tb.add(a, b)
    assert tb.add(torch.zeros(2**40, 0), torch.zeros(1, 0)).shape == (2**40, 0)
    # The same operators on sizes that fit are exact.
    small_col, small_row = torch.randn(33, 1), torch.randn(1, 300)
    torch.testing.assert_close(tb.add(small_col, small_row), small_col + small_row)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_zero_size_tensors_with_huge_extents(device):
    """Zero-size tensors may have extents whose product is far past memory: operators on
    them give their (empty) results at once — no hang walking the extents, no panic."""
    z = torch.zeros(2**40, 0)
    with tb.device(device):
        assert tb.index_select(z, 1, torch.zeros(0, dtype=torch.int32)).shape == (2**40, 0)
        assert tb.index_select(z, 0, torch.tensor([1, 2], dtype=torch.int32)).shape == (2, 0)
        assert tb.cat([z, z], 0).shape == (2**41, 0)
        assert tb.cumsum(z, 0).shape == (2**40, 0)
        assert tb.mm(torch.zeros(0, 2**40), z).shape == (0, 0)
        with pytest.raises(tpukit.OutOfMemoryError):
            tb.sum(z, [1])  # a 4 TiB result
        x = torch.zeros(3, 0)
        for got, want in zip(tb.native_layer_norm(x, [0], None, None, 1e-5),
                             torch.native_layer_norm(x, [0], None, None, 1e-5), strict=True):
            torch.testing.assert_close(got, want, equal_nan=True)
        for got, want in zip(tb._fused_rms_norm(x, [0], None, 1e-5),
                             torch.ops.aten._fused_rms_norm(x, [0], None, 1e-5), strict=True):
            torch.testing.assert_close(got, want, equal_nan=True)


def test_an_empty_output_list_is_an_error_not_a_panic():
    kernel = tpukit.instantiate("add_vectors", [8], "f32")
    x = np.ones(8, np.float32)
    with pytest.raises(tpukit.TpukitError, match="has 1 outputs, got 0 output arrays"):
        tpukit.launch(kernel, x, x, outputs=[])


# --- bundles -----------------------------------------------------------------------------------


RUN_KERNELS = """
    import numpy as np, tpukit
    import tpukit.tpublas as tb
    x = np.linspace(-1, 1, 5000, dtype=np.float32)
    np.testing.assert_allclose(tb.add(x, x), 2 * x)
    np.testing.assert_allclose(tb.tanh(x), np.tanh(x), rtol=1e-5, atol=1e-6)
    (s,) = tpukit.launch(tpukit.instantiate("softmax", [16, 256], "f32"),
                         np.zeros((16, 256), np.float32))
    np.testing.assert_allclose(s, np.full((16, 256), 1 / 256), rtol=1e-6)
    print("OK")
"""


def shipped_bundle() -> Path:
    path = Path(tpukit.__file__).with_name("host.tpkb")
    if not path.exists():
        pytest.skip("no shipped bundle (tpukit/host.tpkb) in this build")
    return path


def test_cut_off_and_garbled_bundles_are_refused_whole(tmp_path):
    data = shipped_bundle().read_bytes()
    rng = np.random.default_rng(0)
    damaged = {
        "half": data[: len(data) // 2],
        "header": data[:30],
        "almost": data[:-1],
        "garbage": rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(),
    }
    for name, content in damaged.items():
        bad = tmp_path / f"{name}.tpkb"
        bad.write_bytes(content)
        done = run_child(RUN_KERNELS, {"TPUKIT_BUNDLE": str(bad)})
        assert "OK" in done.stdout, name
        assert "refused" in done.stderr, (name, done.stderr)
        assert "Panic" not in done.stderr and "panicked" not in done.stderr, done.stderr
        # After a good bundle, the refused one overrides none of its entries.
        done = run_child(RUN_KERNELS, {"TPUKIT_BUNDLE": f"{shipped_bundle()}:{bad}"})
        assert "OK" in done.stdout and "panicked" not in done.stderr, (name, done.stderr)


def test_a_bundle_truncated_while_loaded_is_compiled_around(tmp_path):
    copy = tmp_path / "host.tpkb"
    shutil.copy(shipped_bundle(), copy)
    code = textwrap.dedent(f"""
        import os, tpukit
        tpukit.warm_up()  # loads the bundle
        with open({str(copy)!r}, "r+b") as f:
            f.truncate(os.path.getsize({str(copy)!r}) // 2)
    """) + textwrap.dedent(RUN_KERNELS)
    done = run_child(code, {"TPUKIT_BUNDLE": str(copy)})
    assert "OK" in done.stdout


# --- pl.Element windows: element offsets, not block indices -----------------------------------


def element_kernel(dtype, offset, padding=(0, 0), rows=8):
    """``o[i] = 2 * x[window i]``: row windows of ``rows`` at element offset ``offset(i)``
    (with Pallas's virtual ``padding``), three grid steps, all 128 columns."""
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    in_spec = pl.BlockSpec((pl.Element(rows, padding=padding), pl.Element(128)),
                           lambda i: (offset(i), 0))
    out_spec = pl.BlockSpec((rows, 128), lambda i: (i, 0))
    out = jax.ShapeDtypeStruct((3 * rows, 128), dtype)
    ours = pallas.custom_kernel(body, out_shape=out, grid=(3,), in_specs=[in_spec],
                                out_specs=out_spec)
    theirs = pl.pallas_call(body, out_shape=out, grid=(3,), in_specs=[in_spec],
                            out_specs=out_spec, interpret=True)
    return ours, theirs


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, jax.numpy.bfloat16])
@pytest.mark.parametrize("padding, offset", [
    ((0, 0), lambda i: i * 5 + 4),   # starts 4, 9, 14: not multiples of the 8-row block
    ((2, 3), lambda i: i * 7 + 3),   # padded coordinates: array rows 1, 8, 15
])
def test_element_windows_start_at_element_offsets(device, dtype, padding, offset):
    x = np.random.default_rng(0).standard_normal((40, 128)).astype(dtype)
    ours, theirs = element_kernel(dtype, offset, padding, rows=8)
    got = np.asarray(ours(x, device=device), np.float32)
    want = np.concatenate([2 * np.asarray(x[s:s + 8], np.float32)
                           for s in (offset(i) - padding[0] for i in range(3))])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.asarray(theirs(x), np.float32))


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_element_windows_overhanging_the_end_read_the_rows_inside(device):
    x = np.random.default_rng(1).standard_normal((30, 128)).astype(np.float32)
    # The last window starts at row 26 of 30: its last 4 rows are padding (undefined).
    ours, _ = element_kernel(np.float32, lambda i: i * 13, padding=(0, 8), rows=8)
    got = np.asarray(ours(x, device=device))
    np.testing.assert_array_equal(got[:16], 2 * np.concatenate([x[0:8], x[13:21]]))
    np.testing.assert_array_equal(got[16:20], 2 * x[26:30])


@pytest.mark.parametrize("dtype", [np.float32, jax.numpy.bfloat16])
def test_elementwise_edge_blocks_keep_nothing_of_earlier_launches(dtype):
    # An elementwise kernel's edge blocks are staged without the fill and its output's
    # without copying it in (what lies past the end reaches only what lies past the end):
    # a launch right after one on NaN and inf inputs of the same shape gives exactly the
    # elementwise result, and an output row past the array's 13 rows never shows up.
    def body(x_ref, y_ref, o_ref):
        o_ref[...] = (x_ref[...].astype(np.float32) * 2 + y_ref[...]).astype(o_ref.dtype)

    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    out = jax.ShapeDtypeStruct((13, 200), dtype)
    kernel = pallas.custom_kernel(body, out_shape=out, grid=(2, 2), in_specs=[spec, spec],
                                  out_specs=spec)
    rng = np.random.default_rng(3)
    bad = np.full((13, 200), np.nan, np.float32)
    bad[::2] = np.inf
    for x, y in [(bad, bad), (rng.standard_normal((13, 200)), rng.standard_normal((13, 200)))]:
        x, y = x.astype(dtype), y.astype(np.float32)
        got = np.asarray(kernel(x, y, device="cpu"), np.float32)
        want = (x.astype(np.float32) * 2 + y).astype(dtype).astype(np.float32)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_an_element_window_starting_in_the_low_padding_is_an_error(device):
    x = np.zeros((40, 128), np.float32)
    # Offset 0 in coordinates padded by 2 rows: the window starts at array row -2.
    ours, _ = element_kernel(np.float32, lambda i: i * 8, padding=(2, 0), rows=8)
    with pytest.raises(tpukit.BoundsError, match="outside the array"):
        ours(x, device=device)


# --- no work at import; fork ----------------------------------------------------------------


def test_import_starts_no_thread_and_launches_start_workers():
    done = run_child("""
        import os
        import numpy as np
        def workers():
            names = [open(f"/proc/self/task/{t}/comm").read().strip()
                     for t in os.listdir("/proc/self/task")]
            return [n for n in names if n.startswith("tpukit-worker")]
        before = len(os.listdir("/proc/self/task"))
        import tpukit
        assert len(os.listdir("/proc/self/task")) == before, "import started threads"
        assert workers() == []
        kernel = tpukit.instantiate("add_vectors", [1 << 20], "f32")
        x = np.ones(1 << 20, np.float32)
        (y,) = tpukit.launch(kernel, x, x)
        np.testing.assert_array_equal(y, 2 * x)
        assert workers(), "the first launch started no worker"
        print("OK")
    """)
    assert "OK" in done.stdout


FORK_CHILD = """
    import os, sys, multiprocessing
    import numpy as np
    import tpukit

    N = 1 << 20  # add_vectors' grid: 256 parallel steps, split across the worker threads
    KERNEL = tpukit.instantiate("add_vectors", [N], "f32")

    def run(seed):
        x = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
        (y,) = tpukit.launch(KERNEL, x, x)
        return bool(np.array_equal(y, x + x))

    def in_forked_child():
        pid = os.fork()
        if pid == 0:
            os._exit(0 if run(1) else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status

    in_forked_child()                     # fork after import, before any launch
    assert run(2)                         # the parent's pool starts
    in_forked_child()                     # fork after a launch: the child makes its own
    assert run(3)                         # the parent's pool still works
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert all(pool.map(run, range(4)))
    print("OK")
"""


def test_fork_after_import_and_after_a_launch_does_not_hang():
    done = run_child(FORK_CHILD, timeout=240)
    assert "OK" in done.stdout


FORK_WHILE_COMPILING = """
    import os, threading, time
    import numpy as np
    from tpukit import _lowering, _native, launch

    X = np.arange(20 * 128, dtype=np.float32).reshape(20, 128)
    current = [1]
    stop = threading.Event()

    T = "tensor<20x128xf32>"
    TEMPLATE = _lowering.generic_module(f\'\'\'func.func public @main(%x: {T}) -> {T} {{
      %c = stablehlo.constant dense<1234.5> : {T}
      %y = stablehlo.multiply %x, %c : {T}
      return %y : {T}
    }}\'\'\')
    assert "1.234500e+03" in TEMPLATE

    def scaled(c):
        # A new constant is a new kernel: its first launch compiles and links. Imported from
        # StableHLO text: no JAX in the loop, so the thread spends its time compiling.
        text = TEMPLATE.replace("1.234500e+03", repr(float(c)))
        return _native.import_stablehlo(text, "scaled")

    def check(c):
        (y,) = launch(scaled(c), X)
        np.testing.assert_array_equal(y, X * np.float32(c))

    def compile_forever():
        c = 1
        while not stop.is_set():
            current[0] = c
            check(c)
            c += 1

    # One launch first, in this thread: the launch path's lazy imports are done before the
    # other thread starts. (A fork while another thread is in the middle of importing a
    # module leaves that module's import lock held in the child: CPython's hazard, not the
    # runtime's, and the child below would wait on it.)
    check(0.5)
    thread = threading.Thread(target=compile_forever, daemon=True)
    thread.start()
    for n in range(12):
        time.sleep(0.02 + 0.013 * n)
        pid = os.fork()
        if pid == 0:
            # The kernel the thread may be compiling right now, and a new one.
            try:
                check(current[0])
                check(1000.5 + n)
                os._exit(0)
            except BaseException as e:
                print("child:", repr(e), flush=True)
                os._exit(1)
        deadline = time.monotonic() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                assert os.waitstatus_to_exitcode(status) == 0, status
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                raise AssertionError(f"fork {n}: the child hung")
            time.sleep(0.01)
    stop.set()
    thread.join()
    print("OK", current[0])
"""


def test_fork_while_another_thread_compiles_does_not_hang():
    """Another thread compiling, linking and caching kernels at the moment of ``fork``: the
    child's own compiles neither wait on a lock nor on a compilation that thread held."""
    done = run_child(FORK_WHILE_COMPILING, timeout=600)
    assert "OK" in done.stdout


# --- silently wrong results --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cumsum_is_exact_around_nan_and_inf(dtype):
    cases = [[1, NAN, 2, 3], [1, 2, INF, 4], [1, -INF, 2, INF, 5], [INF, 1, 2], [-INF, -INF, 3]]
    for case in cases:
        x = torch.tensor(case, dtype=dtype)
        torch.testing.assert_close(tb.cumsum(x, 0), torch.cumsum(x, 0), equal_nan=True)
    # Rows crossing several 128-column blocks, non-finite values sprinkled in, both dims.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(37, 300, generator=g).to(dtype)
    for value in (NAN, INF, -INF):
        x[torch.rand(37, 300, generator=g) < 0.01] = value
    tol = {"rtol": 2e-5, "atol": 2e-4} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-1}
    for dim in (0, 1):
        want = torch.cumsum(x.double(), dim).to(dtype)
        got = tb.cumsum(x, dim)
        assert torch.equal(got.isnan(), want.isnan()), dim
        torch.testing.assert_close(got, want, equal_nan=True, **tol)


def test_zero_dim_tensors_stay_zero_dim():
    a, b = torch.tensor(1.5), torch.tensor(2.0)
    assert tb.add(a, b).shape == torch.Size([])
    assert tb.sum(torch.randn(4, 5)).shape == torch.Size([])
    assert torch.ops.tpublas.add.Tensor(a, b).shape == torch.Size([])
    w = torch.randn(10, 6)
    got = tb.embedding(w, torch.tensor(3))
    assert got.shape == (6,)
    torch.testing.assert_close(got, w[3])


def test_negative_views_keep_their_sign():
    x = torch.randn(300)
    neg = x._neg_view()
    assert neg.is_neg()
    torch.testing.assert_close(tb.add(neg, 1.0), 1.0 - x)
    add = pallas.custom_kernel(lambda a, b: torch.empty_like(a),
                               lambda a_ref, b_ref, o_ref: o_ref.__setitem__(
                                   ..., a_ref[...] + b_ref[...]))
    torch.testing.assert_close(add(neg, x), torch.zeros(300))


def test_a_jax_function_may_ignore_an_argument():
    f = pallas.custom_jax_kernel(lambda a, b: b + 1)
    x, y = np.zeros(8, np.float32), np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(f(x, y), y + 1)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda a, b: b + 1)(x, y)), f(x, y))
    g = pallas.custom_jax_kernel(lambda a, b, c: a * c)
    np.testing.assert_array_equal(g(y, x, y), y * y)
    # 0-d arguments and results stay 0-d.
    h = pallas.custom_jax_kernel(lambda a, b: a * b + 1)
    got = h(np.array(2.0, np.float32), np.array(3.0, np.float32))
    assert got.shape == () and got == 7.0
    assert h(torch.tensor(2.0), torch.tensor(3.0)).shape == torch.Size([])


# --- ATen deviations ---------------------------------------------------------------------------


def test_a_dim_given_twice_is_refused_as_in_aten():
    x = torch.randn(3, 4)
    for dims in ([0, 0], [1, -1]):
        with pytest.raises(RuntimeError, match="appears multiple times"):
            torch.sum(x, dims)
        with pytest.raises(tpukit.TpukitError, match="appears multiple times"):
            tb.sum(x, dims)
    torch.testing.assert_close(tb.sum(x, [0, 1]), torch.sum(x, [0, 1]))


def test_pow_by_a_half_is_sqrt_as_in_aten():
    x = torch.tensor([-INF, -4.0, -0.0, 0.0, 2.0, INF, NAN])
    for e in (0.5, -0.5, 2.0, 1.5, -1.0):
        torch.testing.assert_close(tb.pow(x, e), torch.pow(x, e), equal_nan=True)
        got, want = tb.pow(x, e), torch.pow(x, e)
        real = ~want.isnan()
        assert torch.equal(torch.signbit(got[real]), torch.signbit(want[real])), e
    y = torch.tensor([0.5, 0.5, -0.5, 0.5, 2.0, 0.5, 1.0])
    torch.testing.assert_close(tb.pow(x, y), torch.pow(x, y), equal_nan=True)


def test_an_int64_tensor_is_named_int64():
    with pytest.raises(tpukit.DTypeError, match="int64"):
        tb.add(torch.arange(4), torch.ones(4))
    # int64 indices still work where an operator takes indices.
    w = torch.randn(10, 6)
    torch.testing.assert_close(tb.embedding(w, torch.tensor([1, 9])), w[[1, 9]])


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_tanh_keeps_the_sign_of_zero(device):
    x = torch.tensor([-0.0, 0.0, -1e-30, 1e-30, NAN])
    with tb.device(device):
        got = tb.tanh(x)
    torch.testing.assert_close(got, torch.tanh(x), equal_nan=True)
    assert torch.equal(torch.signbit(got[:4]), torch.signbit(torch.tanh(x[:4])))
