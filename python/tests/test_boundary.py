"""The Rust↔Python boundary: errors cross as one exception class per kind, a Rust panic as
`tpukit.InternalError` from every entry point of the native module, operands as `Operand`
objects with named fields, device names and TPU topologies as the native module defines them."""

import inspect

import numpy as np
import pytest
import torch

import tpukit
import tpukit.tpu
from tpukit import _arrays, _native, tpublas

KINDS = [
    tpukit.UnsupportedError,
    tpukit.ShapeError,
    tpukit.DTypeError,
    tpukit.BoundsError,
    tpukit.OutOfMemoryError,
    tpukit.InternalError,
]


def test_every_error_class_is_a_tpukit_error_and_an_exception():
    assert issubclass(tpukit.TpukitError, Exception)
    for cls in KINDS:
        assert issubclass(cls, tpukit.TpukitError), cls
        assert cls.__module__ == "tpukit", cls
    assert len(set(KINDS)) == len(KINDS)


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_launch_errors_are_raised_by_kind(device):
    kernel = tpukit.instantiate("softmax", [16, 256], "f32")
    shape = r"kernel `softmax`: input `x` has shape \[16, 128\]"
    with pytest.raises(tpukit.ShapeError, match=shape):
        tpukit.launch(kernel, np.zeros((16, 128), np.float32), device=device)
    with pytest.raises(tpukit.DTypeError, match="input `x` must be f32, got a i32 array"):
        tpukit.launch(kernel, np.zeros((16, 256), np.int32), device=device)
    with pytest.raises(tpukit.TpukitError, match="takes 1 input arrays") as e:
        tpukit.launch(kernel, *[np.zeros((16, 256), np.float32)] * 2, device=device)
    assert type(e.value) is tpukit.TpukitError


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_an_index_map_outside_the_array_is_a_bounds_error(device, rng):
    """row_gather's table window is placed by the prefetched indices: index 1000 of a
    1000-row table puts it past the end, on either device."""
    kernel = tpukit.instantiate("row_gather", [1000, 256, 4], "f32")
    table = rng.standard_normal((1000, 256)).astype(np.float32)
    idx = np.array([0, 999, 1000, 3], np.int32)
    with pytest.raises(tpukit.BoundsError, match="index map of input `table`.*outside the array"):
        tpukit.launch(kernel, idx, table, device=device)
    (good,) = tpukit.launch(kernel, idx[[0, 1, 3]] % 1000, table, device=device)
    np.testing.assert_array_equal(good, table[[0, 999, 3]])


def test_an_unknown_dtype_name_is_a_dtype_error():
    with pytest.raises(tpukit.DTypeError, match="unsupported dtype `f64`"):
        _native.instantiate("softmax", [8, 128], "f64")
    with pytest.raises(tpukit.DTypeError, match="float64"):
        _arrays.dtype_name(np.float64)


def test_an_unsupported_import_is_an_unsupported_error():
    with pytest.raises(tpukit.UnsupportedError, match="element type `f64`"):
        _native.import_mosaic("", ["tensor<8xf64>"], [], "k")


# --- panics ---------------------------------------------------------------------------------


@pytest.fixture
def kernel():
    return tpukit.instantiate("add_vectors", [8], "f32")


def wire(n=8):
    return _arrays.to_wire(np.zeros(n, np.float32))


def entry_points(kernel):
    """Every entry point of the native module, called with arguments it accepts (the armed
    panic fires before any of them is used), and the name `InternalError` must give."""
    operand = kernel.operands[0]
    (out,) = kernel.launch("cpu", [wire(), wire()])
    buffer = out[2]
    x = np.zeros(8, np.float32)
    plan = kernel.plan([("f32", (8,)), ("f32", (8,))], [np.asarray])
    t = torch.zeros(8, 128)
    add = tpublas.add.Tensor
    add(t, t)
    blas_plan = add._fast
    assert isinstance(blas_plan, _native.BlasPlan)
    operator_call = _native.OperatorCall()
    planned = _native.PlannedKernel(add, 2, 3, (None, None, 1), lambda: 0, lambda: None,
                                    tpublas._local, lambda *a: None)
    mode = tpublas.mode()
    dispatch = mode.__torch_dispatch__
    assert isinstance(dispatch, _native.ModeDispatch)
    planned_args = [("tensor", _arrays.to_wire(t.numpy())), ("tensor", _arrays.to_wire(t.numpy())),
                    ("float", 1.0)]
    functions = {
        "catalog": (lambda: _native.catalog(), None),
        "instantiate": (lambda: _native.instantiate("softmax", [8, 128], "f32"), "softmax"),
        "import_mosaic": (lambda: _native.import_mosaic("", [], [], "body"), "body"),
        "import_stablehlo": (lambda: _native.import_stablehlo("", "fn"), "fn"),
        "stablehlo_ops": (lambda: _native.stablehlo_ops(), None),
        "tpublas_ops": (lambda: _native.tpublas_ops(), None),
        "tpublas_run": (lambda: _native.tpublas_run("aten.neg", []), "aten.neg"),
        "tpublas_run_planned": (
            lambda: _native.tpublas_run_planned("aten.add.Tensor", planned_args, [t, t, 1.0]),
            "aten.add.Tensor",
        ),
        "set_min_split_bytes": (lambda: _native.set_min_split_bytes(0), None),
        "tpublas_warm_up": (lambda: _native.tpublas_warm_up(), None),
        "devices": (lambda: _native.devices(), None),
        "torch_interop": (lambda: _native.torch_interop(), None),
        "tpu_topologies": (lambda: _native.tpu_topologies(), None),
        "register_bundle": (lambda: _native.register_bundle("/nonexistent.tpkb"), None),
        "register_first_bundle": (lambda: _native.register_first_bundle([]), None),
        "loaded_bundles": (lambda: _native.loaded_bundles(), None),
        "warm_up": (lambda: _native.warm_up(), None),
        "cache_stats": (lambda: _native.cache_stats(), None),
        "ffi_register": (lambda: _native.ffi_register(kernel, "cpu"), "add_vectors"),
        "ffi_handler": (lambda: _native.ffi_handler(), None),
        "op_table": (lambda: _native.op_table(), None),
        "plan_key": (lambda: _native.plan_key([1, "x"]), None),
    }
    methods = {
        "Kernel.name": (lambda: kernel.name, "add_vectors"),
        "Kernel.operands": (lambda: kernel.operands, "add_vectors"),
        "Kernel.hash": (lambda: kernel.hash, "add_vectors"),
        "Kernel.__str__": (lambda: str(kernel), "add_vectors"),
        "Kernel.__repr__": (lambda: repr(kernel), "add_vectors"),
        "Kernel.launch": (lambda: kernel.launch("cpu", [wire(), wire()]), "add_vectors"),
        "Kernel.lower": (lambda: kernel.lower({"n": 8}), "add_vectors"),
        "Kernel.count": (lambda: kernel.count("input"), "add_vectors"),
        "Kernel.plan": (lambda: kernel.plan([("f32", (8,))] * 2, [np.asarray]), "add_vectors"),
        "LaunchPlan.run": (lambda: plan.run((x, x)), "add_vectors"),
        "BlasPlan.run": (lambda: blas_plan.run([t, t, 1]), "aten.add.Tensor"),
        "BlasPlan.floats": (lambda: blas_plan.floats, "aten.add.Tensor"),
        "BlasPlan.takes": (lambda: blas_plan.takes([t, t, 1]), "aten.add.Tensor"),
        "OperatorCall.__new__": (lambda: _native.OperatorCall(), None),
        "OperatorCall._set_arity": (
            lambda: operator_call._set_arity(0, 0, (), tpublas._local), None),
        "OperatorCall.__call__": (lambda: tpublas.add.Tensor(t, t), None),
        "PlannedKernel.__new__": (
            lambda: _native.PlannedKernel(add, 2, 3, (None, None, 1), lambda: 0, lambda: None,
                                          tpublas._local, lambda *a: None),
            None,
        ),
        "PlannedKernel.__call__": (lambda: planned(None, t, t), None),
        "ModeDispatch.__new__": (
            lambda: _native.ModeDispatch({}, {}, {}, {}, tpublas._local, lambda *a: None,
                                         lambda: mode),
            None,
        ),
        "ModeDispatch.__call__": (lambda: dispatch(torch.ops.aten.add.Tensor, (), (t, t)), None),
        "ModeDispatch.__self__": (lambda: dispatch.__self__, None),
        "Operand.shape": (lambda: operand.shape, None),
        "Operand.__repr__": (lambda: repr(operand), None),
        "Buffer.__len__": (lambda: len(buffer), None),
        "Buffer.__getbuffer__": (lambda: memoryview(buffer), None),
    }
    return functions, methods


COMPARISONS = {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"}


def defined_entry_points():
    """The native module's functions, and the methods its classes define, but for what pyo3
    generates from declarations (`Operand`'s field getters and comparisons, `OperatorCall`'s
    `_fast` and `_plans` attributes), which runs no tpukit code. The buffer protocol's slot
    (`__getbuffer__`) has no attribute to list."""
    functions = {
        n for n, f in vars(_native).items()
        if callable(f) and not inspect.isclass(f) and not n.startswith("_")
    }
    methods = {
        f"{cls.__name__}.{n}"
        for cls in (_native.Kernel, _native.Operand, _native.Buffer, _native.LaunchPlan,
                    _native.BlasPlan, _native.PlannedKernel, _native.ModeDispatch,
                    _native.OperatorCall)
        for n, f in vars(cls).items()
        if (callable(f) or inspect.isgetsetdescriptor(f)) and n not in COMPARISONS
        and not (cls is _native.Operand and n in ("name", "role", "dtype"))
        and not (cls is _native.OperatorCall and n in ("_fast", "_plans"))
    }
    return functions, methods | {"Buffer.__getbuffer__"}


def test_the_test_covers_every_entry_point(kernel):
    functions, methods = entry_points(kernel)
    assert (set(functions), set(methods)) == defined_entry_points()


def test_a_panic_in_any_entry_point_is_an_internal_error(kernel, monkeypatch):
    monkeypatch.setenv("TPUKIT_TEST_HOOKS", "1")
    functions, methods = entry_points(kernel)
    for what, (call, subject) in {**functions, **methods}.items():
        _native._arm_test_panic()
        with pytest.raises(tpukit.InternalError) as e:
            call()
        message = str(e.value)
        assert "a panic the tests asked for" in message, (what, message)
        assert "a bug in tpukit" in message, (what, message)
        if subject is not None:
            assert f"in `{subject}`" in message, (what, message)
        # Caught by `except Exception`, unlike pyo3's PanicException.
        assert isinstance(e.value, Exception)
    # Nothing is left broken: the kernel still runs.
    x = np.arange(8, dtype=np.float32)
    (out,) = tpukit.launch(kernel, x, x)
    np.testing.assert_array_equal(out, 2 * x)


def test_the_panic_hook_is_refused_without_the_test_setting(monkeypatch):
    monkeypatch.delenv("TPUKIT_TEST_HOOKS", raising=False)
    with pytest.raises(tpukit.TpukitError, match="test hook"):
        _native._arm_test_panic()
    assert _native.devices()  # not armed


# --- operands, devices, topologies ----------------------------------------------------------


def test_operands_have_named_fields():
    k = tpukit.instantiate("layer_norm", [20, 384], "bf16")
    x, w, b, o = k.operands
    assert isinstance(x, tpukit.Operand)
    assert (x.name, x.role, x.dtype, x.shape) == ("x", "input", "bf16", ("m", 384))
    assert (w.name, w.role, w.dtype, w.shape) == ("w", "input", "f32", (384,))
    assert o.role == "output" and o.shape == ("m", 384)
    assert repr(w) == "Operand(name='w', role='input', dtype='f32', shape=(384,))"
    assert w == k.operands[1] and w != b
    with pytest.raises(AttributeError):
        x.name = "y"
    gather = tpukit.instantiate("row_gather", [100, 256, 8], "f32")
    assert [o.role for o in gather.operands] == ["prefetch", "input", "output"]
    assert gather.operands[0].dtype == "i32"


def test_devices_come_from_the_native_module(kernel):
    assert tpukit.DEVICES == tuple(_native.devices())
    assert tpukit.DEVICES[0] == "cpu", "the default device first"
    x = np.arange(8, dtype=np.float32)
    for device in tpukit.DEVICES:
        (out,) = tpukit.launch(kernel, x, x, device=device)
        np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(tpukit.TpukitError, match="unknown device `gpu` .known: cpu, interpret"):
        kernel.launch("gpu", [wire(), wire()])


def test_tpu_topologies_come_from_the_native_module():
    assert tpukit.tpu.TOPOLOGIES == tuple(_native.tpu_topologies())
    assert tpukit.tpu.TOPOLOGIES[0].startswith("v5e:"), "v5e is the default target"
    assert all(":" in t for t in tpukit.tpu.TOPOLOGIES)
