"""``helion.exc``: Helion's exception hierarchy, by name, on tpukit.

Every name of Helion's ``helion.exc`` exists here with the same base class, so that programs
catching or naming them (``ignore_warnings=[helion.exc.TensorOperationInWrapper]``,
``except helion.exc.ShapeMismatch``) run unchanged. The root, ``Base``, is both a
``RuntimeError`` (as in Helion) and a ``tpukit.TpukitError``; ``HelionError`` is another name
of ``BaseError``, the base of every error tpukit's Helion front end raises.

Errors tpukit raises in the situations Helion names are those classes (``DeviceLoopElseBlock``,
``NoDeviceLoopsInKernel``, ``DecoratorAfterHelionKernelDecorator``, ``InvalidConfig``,
``AutotuneError``, ``NoConfigFound``, ``NotEnoughConfigs``, ``NotAllowedOnDevice``,
``StatementNotSupported``, ``NotInsideKernel``, ``DeviceAPIOnHost``, …); a construct tpukit does
not translate raises ``UnsupportedConstruct`` (tpukit's own, also a ``BaseError``). The other
classes exist for compatibility: the situations they describe are specific to Helion's Triton
code generation, or tpukit reports them as ``UnsupportedConstruct``. Warnings
(``BaseWarning`` subclasses) are never raised by tpukit; ``ignore_warnings=`` accepts them.

An error built with one string argument has that string as its message; without arguments, the
class's one-line description.
"""

from __future__ import annotations

from tpukit._native import TpukitError, UnsupportedError


class Base(TpukitError, RuntimeError):
    """The root of Helion's errors and warnings."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or (_first_line(type(self).__doc__),)))


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


class BaseError(Base):
    """A Helion program that cannot run (misuse of the API, a bad config, …)."""


HelionError = BaseError


class BaseWarning(Base):
    """A Helion warning (tpukit never raises one; ``ignore_warnings=`` accepts them)."""


class UnsupportedConstruct(BaseError, UnsupportedError):
    """A Helion construct (op, torch function, indexing form) tpukit does not translate.

    The message names the construct and, when known, the kernel source line."""


class NotAllowedOnDevice(BaseError):
    """A statement that is not allowed inside an ``hl.tile``/``hl.grid`` loop."""


class _WrapException(BaseError):
    """An exception raised while compiling a kernel, wrapped."""


class TensorOperationInWrapper(BaseWarning):
    """A tensor operation in host code that could have been inside the kernel."""


# name -> (base class name, description), each base defined above it. The descriptions are
# tpukit's; the names and bases are Helion's (NoConfigFound is an AutotuneError here).
_TABLE: dict[str, tuple[str, str]] = {
    "DuplicateStoreIndicesError": ("BaseError", "A store whose indices repeat."),
    "NotInsideKernel": ("BaseError", "A Helion API used outside a kernel."),
    "NamingConflict": ("BaseError", "A variable name Helion reserves."),
    "ClosuresNotSupported": ("BaseError", "A closure inside the kernel."),
    "AutotuneError": ("BaseError", "Autotuning failed."),
    "BackendImplementationMissing": ("BaseError", "The backend lacks an implementation."),
    "BackendUnsupported": ("UnsupportedConstruct", "The backend does not support this."),
    "CacheAssertionError": ("BaseError", "An expected autotuning cache hit missed."),
    "ClosureMutation": ("BaseError", "A closure mutated in a function argument."),
    "GlobalMutation": ("BaseError", "A global mutated in a function argument."),
    "LoopFunctionNotInFor": ("BaseError", "A loop function called outside a `for` header."),
    "NestedDeviceLoopsConflict": ("BaseError", "Nested device loops share a block size."),
    "DeviceLoopElseBlock": ("UnsupportedConstruct", "A `for … else` on a device loop."),
    "LoopDependencyError": ("BaseError", "Device loops depend on each other's writes."),
    "TopLevelStatementBetweenLoops": ("BaseError", "A statement between top-level loops."),
    "BarrierOnlyAllowedAtTopLevel": ("BaseError", "hl.barrier() inside a device loop."),
    "BarrierRequiresPersistent": ("BaseError", "hl.barrier() needs a persistent pid type."),
    "NestedGridLoop": ("BaseError", "An hl.grid loop that is not at the top level."),
    "RankMismatch": ("BaseError", "A tensor indexed with the wrong number of indices."),
    "InvalidIndexingType": ("UnsupportedConstruct", "An index of an unsupported type."),
    "DotBatchDimensionMismatch": ("BaseError", "hl.dot operands with different batches."),
    "IndexOffsetOutOfRangeForInt32": ("BaseError", "An index offset beyond int32."),
    "InputTensorNumelExceedsIndexType": ("BaseError", "A tensor too large for the index type."),
    "DataDependentOutputShapeNotSupported": (
        "UnsupportedConstruct",
        "An op whose output shape depends on data.",
    ),
    "UnsupportedSplitOperation": ("UnsupportedConstruct", "hl.split of an unsupported shape."),
    "RequiresTensorInAssignment": ("BaseError", "A non-tensor stored into a tensor."),
    "HostTensorDirectUsage": ("BaseError", "A host tensor used whole inside a device loop."),
    "ShapeSpecializingCall": ("BaseError", "A call that would specialize on a shape."),
    "ShapeSpecializingAllocation": ("BaseError", "An allocation that needs a static size."),
    "SpecializeOnDevice": ("BaseError", "hl.specialize() inside a device loop."),
    "SpecializeArgType": ("BaseError", "hl.specialize() of something other than a size."),
    "StackTensorcOnHost": ("BaseError", "A StackTensor created on the host."),
    "StackTensorDevPtrOnHost": ("BaseError", "A StackTensor from a host pointer tensor."),
    "StackTensorDevPtrDtype": ("BaseError", "A StackTensor pointer tensor of a bad dtype."),
    "StackTensorExampleOnDevice": ("BaseError", "hl.stacktensor_like with a device example."),
    "FailedToUnpackTupleAssign": ("BaseError", "A tuple assignment that cannot unpack."),
    "RegisterTunableArgTypes": ("BaseError", "hl.register_tunable with bad argument types."),
    "TunableTypeNotSupported": ("BaseError", "A tunable of an unsupported type."),
    "TunableNameConflict": ("BaseError", "A tunable name that is already used."),
    "ConfigSpecFragmentWithSymInt": ("BaseError", "A config fragment with a symbolic bound."),
    "FailedToUnpackTile": ("BaseError", "hl.tile unpacked into the wrong number of tiles."),
    "OverpackedTile": ("BaseError", "hl.tile of a list unpacked into one tile."),
    "InvalidTileRange": ("BaseError", "An hl.tile range whose end precedes its begin."),
    "AssignmentMultipleTargets": ("NotAllowedOnDevice", "`a = b = …` in a device loop."),
    "InvalidAssignment": ("NotAllowedOnDevice", "An assignment target of a bad kind."),
    "NonTensorSubscriptAssign": ("BaseError", "A subscript assignment to a non-tensor."),
    "ShapeMismatch": ("BaseError", "Shapes that do not match."),
    "DeviceAPIOnHost": ("BaseError", "A device-only API used on the host."),
    "StatementNotSupported": ("UnsupportedConstruct", "A statement kind not supported."),
    "CantReadOnDevice": ("BaseError", "A value that cannot be read inside a device loop."),
    "BreakpointInDeviceLoopRequiresInterpret": (
        "BaseError",
        "breakpoint() in a device loop outside interpret mode.",
    ),
    "IncompatibleInterpretModes": ("BaseError", "Two interpret modes at once."),
    "MissingEnableTile": ("BaseError", "A tile-enabled op used without enabling tiles."),
    "CuteBackendUnavailable": ("BackendUnsupported", "The CuTe backend is not available."),
    "UndefinedVariable": ("BaseError", "A variable that is not defined."),
    "InvalidDeviceForLoop": ("BaseError", "A `for` on device over something other than tiles."),
    "StarredArgsNotSupportedOnDevice": ("BaseError", "*args / **kwargs in device code."),
    "IncorrectTileUsage": ("BaseError", "A tile used other than as an index or hl argument."),
    "InvalidJaggedTileUsage": ("BaseError", "hl.jagged_tile used wrongly."),
    "TileOfTile": ("BaseError", "hl.tile of a tile (use tile.begin / tile.end)."),
    "TracedArgNotSupported": ("BaseError", "An argument a traced function cannot take."),
    "NotEnoughConfigs": ("BaseError", "Fewer configs than a finite search needs."),
    "NoConfigFound": ("AutotuneError", "No config ran successfully."),
    "ReductionOnNonTile": ("BaseError", "A reduction over something other than a tile."),
    "InvalidReductionDim": ("BaseError", "A reduction dim that is not an int."),
    "MultipleReductionDims": ("BaseError", "A reduction over several dims at once."),
    "ReductionDimInvalidForShape": ("BaseError", "A reduction dim out of range."),
    "CantCombineTypesInControlFlow": ("BaseError", "Branches giving a variable other types."),
    "ErrorCompilingKernel": ("BaseError", "Compiling the kernel failed."),
    "NoTensorArgs": ("BaseError", "A kernel without tensor arguments."),
    "InvalidConfig": ("BaseError", "A config the kernel cannot use."),
    "InductorLoweringError": ("BaseError", "Lowering an op through Inductor failed."),
    "DecoratorAfterHelionKernelDecorator": (
        "BaseError",
        "A decorator applied below @helion.kernel.",
    ),
    "InternalError": ("_WrapException", "An internal error."),
    "TorchOpTracingError": ("_WrapException", "Tracing a torch op failed."),
    "TritonError": ("BaseError", "Triton failed (Helion's GPU backend; not used by tpukit)."),
    "TritonUnrecoverableRuntimeError": ("BaseError", "Triton failed unrecoverably."),
    "ProcessGroupNameNotFound": ("BaseWarning", "No process group name argument."),
    "TensorOperationsInHostCall": ("TensorOperationInWrapper", "Tensor ops in a host call."),
    "WrongDevice": ("BaseWarning", "An op returned a tensor on another device."),
    "BlockSizeIgnoredInInterpretMode": ("BaseWarning", "A block size interpret mode ignores."),
    "TiledKMatmulAccumulationWarning": ("BaseWarning", "A tiled-K matmul accumulation."),
    "NoAOTHeuristicWarning": ("BaseWarning", "No ahead-of-time heuristic for a kernel."),
    "AutotuningDisallowedInEnvironment": ("BaseError", "Autotuning disabled here: pass config=."),
    "UnsupportedPythonType": ("UnsupportedConstruct", "A Python type kernels cannot use."),
    "TypeInferenceError": ("BaseError", "Type inference failed."),
    "ControlFlowTensorMismatch": ("BaseError", "Branches giving tensors of other shapes."),
    "NotAllowedInHelperFunction": ("BaseError", "An op that needs kernel context."),
    "CannotModifyHostVariableOnDevice": ("BaseError", "A host variable reassigned on device."),
    "AtomicOnDeviceTensor": ("BaseError", "An atomic on a tensor created on device."),
    "CannotReadDeviceVariableOnHost": ("BaseError", "A device variable read on the host."),
    "DeviceTensorSubscriptAssignmentNotAllowed": ("BaseError", "A store into a device tensor."),
    "InvalidSequenceSubscription": ("BaseError", "A sequence indexed with a bad subscript."),
    "InvalidAPIUsage": ("BaseError", "An API used wrongly."),
    "GraphModuleUnsupportedOps": ("UnsupportedConstruct", "A graph module with unsupported ops."),
    "RefEagerModeCodePrintError": ("BaseError", "Printing code in ref-eager mode."),
    "NoDeviceLoopsInKernel": ("BaseError", "A kernel without an hl.tile/hl.grid loop."),
    "NestedKernelCallsNotSupported": ("BaseError", "A kernel called inside another kernel."),
    "EmptyDeviceLoopAfterDCE": ("BaseError", "A device loop that does nothing."),
    "AutodiffKernelNotCalled": ("BaseError", "helion.experimental autodiff of a kernel not run."),
    "AutodiffNotSupported": ("UnsupportedConstruct", "Autodiff of this kernel."),
    "InconsistantConfigsAcrossRanks": ("BaseError", "Ranks chose different configs."),
}


for _name, (_base, _doc) in _TABLE.items():
    globals()[_name] = type(_name, (globals()[_base],), {"__doc__": _doc, "__module__": __name__})
del _name, _base, _doc
