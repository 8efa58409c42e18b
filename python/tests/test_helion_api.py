"""tpukit.helion's copy of Helion's public surface: ``helion.exc`` (every name, Helion's base
classes, raised where Helion raises them), ``helion.runtime`` (``get_num_sm`` in a persistent
kernel), ``helion.aot_kernel``, ``helion.Config``, and honest autotuning (``configs=[…]`` and
``kernel.autotune``: timed on the active device, broken or inaccurate configs dropped, the
choice cached per shape signature) — results against torch eager on `cpu` and `interpret`."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import TpukitError, helion  # noqa: E402
from tpukit.helion.autotuner import EnumFragment  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: dict(rtol=1e-5, atol=1e-5), BF16: dict(rtol=2e-2, atol=5e-2)}

# Every class of Helion's helion.exc (pytorch/helion, helion/exc.py), with its base.
HELION_EXC = {
    "Base": "RuntimeError", "BaseError": "Base", "BaseWarning": "Base",
    "NotAllowedOnDevice": "BaseError", "AssignmentMultipleTargets": "NotAllowedOnDevice",
    "InvalidAssignment": "NotAllowedOnDevice", "InternalError": "_WrapException",
    "TorchOpTracingError": "_WrapException", "TensorOperationInWrapper": "BaseWarning",
    "TensorOperationsInHostCall": "TensorOperationInWrapper", "WrongDevice": "BaseWarning",
    "ProcessGroupNameNotFound": "BaseWarning", "BlockSizeIgnoredInInterpretMode": "BaseWarning",
    "TiledKMatmulAccumulationWarning": "BaseWarning", "NoAOTHeuristicWarning": "BaseWarning",
}
HELION_ERRORS = """DuplicateStoreIndicesError NotInsideKernel NamingConflict ClosuresNotSupported
AutotuneError BackendImplementationMissing BackendUnsupported CacheAssertionError
ClosureMutation GlobalMutation LoopFunctionNotInFor NestedDeviceLoopsConflict DeviceLoopElseBlock
LoopDependencyError TopLevelStatementBetweenLoops BarrierOnlyAllowedAtTopLevel
BarrierRequiresPersistent NestedGridLoop RankMismatch InvalidIndexingType
DotBatchDimensionMismatch IndexOffsetOutOfRangeForInt32 InputTensorNumelExceedsIndexType
DataDependentOutputShapeNotSupported UnsupportedSplitOperation RequiresTensorInAssignment
HostTensorDirectUsage ShapeSpecializingCall ShapeSpecializingAllocation SpecializeOnDevice
SpecializeArgType StackTensorcOnHost StackTensorDevPtrOnHost StackTensorDevPtrDtype
StackTensorExampleOnDevice FailedToUnpackTupleAssign RegisterTunableArgTypes
TunableTypeNotSupported TunableNameConflict ConfigSpecFragmentWithSymInt FailedToUnpackTile
OverpackedTile InvalidTileRange NonTensorSubscriptAssign ShapeMismatch DeviceAPIOnHost
StatementNotSupported CantReadOnDevice BreakpointInDeviceLoopRequiresInterpret
IncompatibleInterpretModes MissingEnableTile CuteBackendUnavailable UndefinedVariable
InvalidDeviceForLoop StarredArgsNotSupportedOnDevice IncorrectTileUsage InvalidJaggedTileUsage
TileOfTile TracedArgNotSupported NotEnoughConfigs NoConfigFound ReductionOnNonTile
InvalidReductionDim MultipleReductionDims ReductionDimInvalidForShape
CantCombineTypesInControlFlow ErrorCompilingKernel NoTensorArgs InvalidConfig
InductorLoweringError DecoratorAfterHelionKernelDecorator TritonError
TritonUnrecoverableRuntimeError AutotuningDisallowedInEnvironment UnsupportedPythonType
TypeInferenceError ControlFlowTensorMismatch NotAllowedInHelperFunction
CannotModifyHostVariableOnDevice AtomicOnDeviceTensor CannotReadDeviceVariableOnHost
DeviceTensorSubscriptAssignmentNotAllowed InvalidSequenceSubscription InvalidAPIUsage
GraphModuleUnsupportedOps RefEagerModeCodePrintError NoDeviceLoopsInKernel
NestedKernelCallsNotSupported EmptyDeviceLoopAfterDCE AutodiffKernelNotCalled
AutodiffNotSupported InconsistantConfigsAcrossRanks""".split()


def close(actual, expected, dtype):
    torch.testing.assert_close(actual.float(), expected.float(), **TOL[dtype])


# --- helion.exc -------------------------------------------------------------------------------


def test_every_helion_exception_exists_with_its_base():
    import builtins

    for name in HELION_ERRORS:
        cls = getattr(helion.exc, name)
        assert issubclass(cls, helion.exc.BaseError), name
    for name, base in HELION_EXC.items():
        parent = getattr(helion.exc, base, None) or getattr(builtins, base)
        assert issubclass(getattr(helion.exc, name), parent), name
    assert issubclass(helion.exc.Base, TpukitError)
    assert helion.exc.HelionError is helion.exc.BaseError
    assert issubclass(helion.exc.UnsupportedConstruct, helion.exc.BaseError)
    assert issubclass(helion.exc.NoConfigFound, helion.exc.AutotuneError)
    assert "one branch" not in str(helion.exc.ShapeMismatch())  # its own description
    assert str(helion.exc.ShapeMismatch("a vs b")) == "a vs b"


def test_tpukit_raises_helions_classes_where_helion_does():
    def else_block(x):
        for t in hl.tile(x.size(0)):
            x[t] = x[t]
        else:
            pass
        return x

    with pytest.raises(helion.exc.DeviceLoopElseBlock):
        helion.kernel(else_block)

    def no_loop(x):
        return x

    with pytest.raises(helion.exc.NoDeviceLoopsInKernel):
        helion.kernel(no_loop)

    def returns(x):
        for t in hl.tile(x.size(0)):
            return x[t]

    with pytest.raises(helion.exc.StatementNotSupported):
        helion.kernel(returns)
    with pytest.raises(helion.exc.InvalidConfig):
        helion.kernel(else_block, config=helion.Config(), configs=[helion.Config()])


def test_ignore_warnings_takes_helion_warning_classes(device):
    @helion.kernel(ignore_warnings=[helion.exc.TensorOperationInWrapper])
    def add_one(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t] = x[t] + 1
        return out

    x = torch.randn(300)
    close(add_one(x), x + 1, F32)


# --- helion.runtime, helion.aot_kernel, helion.Config ------------------------------------------


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_persistent_kernel_over_get_num_sm_workers(device, dtype):
    @helion.kernel
    def row_sums(x):
        m, n = x.size()
        out = torch.empty([m], dtype=torch.float32)
        workers = helion.runtime.get_num_sm(x.device)
        for _ in hl.grid(workers):
            for tm in hl.tile(m):
                out[tm] = x[tm, :].to(torch.float32).sum(1)
        return out

    assert helion.runtime.get_num_sm(torch.device("cpu")) == 1
    x = torch.randn(37, 200, dtype=dtype)
    close(row_sums(x), x.float().sum(1), dtype)


def test_runtime_and_compat_names():
    from tpukit.helion._compat import use_tileir_tunables
    from tpukit.helion.autotuner.benchmarking import do_bench_generic
    from tpukit.helion.runtime.settings import _get_backend

    assert _get_backend() == "pallas"
    assert use_tileir_tunables() is False
    assert helion.runtime.Config is helion.Config and helion.runtime.Kernel is helion.Kernel
    assert do_bench_generic(lambda: None) >= 0
    with pytest.raises(ValueError, match="one core"):
        helion.runtime.get_num_sm(None, reserved_sms=1)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_aot_kernel_runs_and_tunes_per_shape(device, dtype):
    @helion.aot_kernel(configs=[helion.Config(block_sizes=[128]), helion.Config(block_sizes=[256])])
    def scale(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            out[t] = x[t] * 3
        return out

    for n in (300, 1000):
        x = torch.randn(n, dtype=dtype)
        close(scale(x), x * 3, dtype)
    assert len(scale._tuned) == 2  # one choice per shape signature


def test_config_round_trips(tmp_path):
    c = helion.Config(block_sizes=[32, 64], num_warps=4, mode="a")
    assert c.config == {"block_sizes": [32, 64], "num_warps": 4, "mode": "a"}
    c.save(tmp_path / "c.json")
    assert dict(helion.Config.load(tmp_path / "c.json")) == dict(c)
    assert helion.Config.from_json(c.to_json()) == c


# --- autotuning ---------------------------------------------------------------------------------


def _tunable_kernel(configs, **settings):
    @helion.kernel(configs=configs, **settings)
    def k(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            mode = hl.register_tunable("mode", EnumFragment(("ok", "broken", "wrong", "slow")))
            if mode == "broken":
                out[t] = torch.sort(x[t]).values  # not translated: this config fails
            elif mode == "wrong":
                out[t] = x[t] * 5
            elif mode == "slow":
                acc = x[t] * 0
                for _ in hl.static_range(64):
                    acc = acc + torch.sin(x[t]) * 0 + x[t] / 64
                out[t] = acc
            else:
                out[t] = x[t]
        return out

    return k


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_autotuning_drops_failing_and_inaccurate_configs(device, dtype):
    k = _tunable_kernel([helion.Config(mode="broken"), helion.Config(mode="ok"),
                         helion.Config(mode="wrong")])
    x = torch.randn(1000, dtype=dtype)
    close(k(x), x, dtype)  # not the first config (it fails), nor the inaccurate third
    assert k.config["mode"] == "ok"


def test_autotuning_keeps_the_fastest(device, monkeypatch):
    from tpukit.helion import _autotune

    real = _autotune.measure
    seconds = {"slow": 2.0, "ok": 1.0}  # a fixed clock: the choice must follow the times

    def timed(run, config, args, kwargs):
        return seconds[config["mode"]], real(run, config, args, kwargs)[1]

    monkeypatch.setattr(_autotune, "measure", timed)
    k = _tunable_kernel([helion.Config(mode="slow"), helion.Config(mode="ok")])
    x = torch.randn(64, 300)
    close(k(x), x, F32)
    assert k.config["mode"] == "ok"
    seconds.update(slow=0.5)
    k.reset()
    close(k(x), x, F32)
    assert k.config["mode"] == "slow"


def test_autotuning_with_no_working_config_says_why(device):
    k = _tunable_kernel([helion.Config(mode="broken"), helion.Config(mode="broken")])
    with pytest.raises(helion.exc.NoConfigFound, match="torch.sort"):
        k(torch.randn(300))


def test_autotune_effort_none_uses_the_first_config(device):
    k = _tunable_kernel([helion.Config(mode="wrong"), helion.Config(mode="ok")],
                        autotune_effort="none")
    x = torch.randn(300)
    close(k(x), x * 5, F32)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_autotune_searches_block_sizes_around_the_defaults(device, dtype):
    @helion.kernel
    def add(x, y):
        out = torch.empty_like(x)
        for tm, tn in hl.tile(out.size()):
            out[tm, tn] = x[tm, tn] + y[tm, tn]
        return out

    x, y = torch.randn(40, 300, dtype=dtype), torch.randn(40, 300, dtype=dtype)
    chosen = add.autotune((x, y))
    assert len(chosen.block_sizes) == 2
    assert add.autotune((x, y), force=False) is chosen
    assert add.bind((x, y)).config is chosen
    close(add(x, y), x + y, dtype)


def test_tile_attribute_functions(device):
    @helion.kernel(config=helion.Config(block_sizes=[128]))
    def spans(x):
        out = torch.empty_like(x)
        ids = torch.empty([3], dtype=torch.int32)
        for t in hl.tile(x.size(0)):
            out[t] = x[t] + hl.tile_index(t).to(torch.float32) * 0 + hl.tile_block_size(t) * 0
            ids[hl.tile_id(t)] = hl.tile_end(t) - hl.tile_begin(t)
        return out, ids

    x = torch.randn(300)
    out, ids = spans(x)
    torch.testing.assert_close(out, x)
    torch.testing.assert_close(ids, torch.tensor([128, 128, 44], dtype=torch.int32))


def test_helion_names_without_counterpart_are_named():
    with pytest.raises(helion.exc.UnsupportedConstruct, match="helion.from_cache"):
        helion.from_cache  # noqa: B018
    with pytest.raises(helion.exc.UnsupportedConstruct, match="hl.device_print"):
        hl.device_print  # noqa: B018
