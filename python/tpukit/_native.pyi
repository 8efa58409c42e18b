"""Types of ``tpukit._native``, the Rust half of the package (``python/src/*.rs``).

Arrays cross in *wire form*: ``(dtype name, shape, data)``, row-major; going in, ``data`` is
any object exporting a C-contiguous buffer (a numpy array of any dtype) or a plain CPU torch
tensor, coming out a :class:`Buffer`. ``tests/test_package.py`` checks that this stub names
exactly what the module exports.
"""

import sys
from collections.abc import Callable, Sequence
from typing import Any, Literal, final

from typing_extensions import Buffer as _BytesLike

__version__: str
__all__ = [
    "__version__",
    "Kernel",
    "Operand",
    "Buffer",
    "LaunchPlan",
    "BlasPlan",
    "PlannedKernel",
    "ModeDispatch",
    "OperatorCall",
    "catalog",
    "instantiate",
    "import_mosaic",
    "import_stablehlo",
    "stablehlo_ops",
    "tpublas_ops",
    "tpublas_run",
    "tpublas_run_planned",
    "tpublas_warm_up",
    "op_table",
    "plan_key",
    "ffi_register",
    "ffi_handler",
    "devices",
    "torch_interop",
    "tpu_topologies",
    "register_bundle",
    "register_first_bundle",
    "loaded_bundles",
    "warm_up",
    "cache_stats",
    "set_min_split_bytes",
    "_arm_test_panic",
    "TpukitError",
    "UnsupportedError",
    "ShapeError",
    "DTypeError",
    "BoundsError",
    "InternalError",
    "OutOfMemoryError",
]

_Role = Literal["prefetch", "input", "output", "scratch"]
_Wire = tuple[str, list[int], _BytesLike]
_WireOut = tuple[str, list[int], Buffer]

class TpukitError(Exception):
    """A kernel could not be built, imported, lowered or run; the base of every tpukit error."""

class UnsupportedError(TpukitError): ...
class ShapeError(TpukitError): ...
class DTypeError(TpukitError): ...
class BoundsError(TpukitError): ...
class InternalError(TpukitError): ...
class OutOfMemoryError(TpukitError): ...

@final
class Operand:
    """One operand of a kernel. Immutable; equal when every field is."""

    @property
    def name(self) -> str: ...
    @property
    def role(self) -> _Role: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> tuple[int | str, ...]:
        """Ints, and the names of extents bound at launch."""

@final
class Kernel:
    """A verified kernel. Immutable: every method reads it."""

    @property
    def name(self) -> str: ...
    @property
    def operands(self) -> list[Operand]:
        """In kernel order: prefetch, inputs, outputs, scratch."""
    @property
    def hash(self) -> str:
        """The structural hash (hex), which keys every cache."""
    def launch(
        self, device: str, inputs: list[_Wire], outputs: list[_Wire] | None = None
    ) -> list[_WireOut]:
        """Runs on ``device`` (``"cpu"``, ``"interpret"``); ``outputs``: initial contents."""
    def lower(self, bindings: dict[str, int] = ...) -> str:
        """A StableHLO module with a Mosaic ``tpu_custom_call``, every symbol bound."""
    def count(self, role: _Role) -> int: ...
    def plan(
        self,
        inputs: list[tuple[str, tuple[int, ...]]],
        wraps: list[Callable[[Buffer], Any] | None],
    ) -> LaunchPlan:
        """A launch on the CPU backend for inputs of these ``(dtype name, shape)``, each output
        passed to its callable in ``wraps`` (None: made a torch tensor over it, by DLPack);
        bool inputs are refused."""

@final
class LaunchPlan:
    """One kernel's CPU launch for fixed input dtypes and shapes (``tpukit._fast``)."""

    def run(self, arrays: Sequence[Any]) -> list[Any] | None:
        """The wrapped new outputs, or None where an array is not the plan's (element
        format, shape, C-contiguity, alignment)."""

@final
class BlasPlan:
    """One tpuBLAS call's kernel launch for fixed arguments: tensors of fixed dtypes and
    shapes, other arguments equal (``python/src/blas_plan.rs``)."""

    @property
    def floats(self) -> bool:
        """Whether every tensor it takes is f32 or bf16."""

    def run(self, values: list[Any]) -> Any | None:
        """The results (torch tensors; a tuple for several) on the call's schema-ordered
        ``values``, or None where they are not what the plan was made for."""

    def takes(self, values: list[Any]) -> bool:
        """Whether ``run`` would run on ``values`` (checked without launching)."""

class OperatorCall:
    """The native base of ``tpublas.Operator`` and ``tpublas.Packet``: ``__call__`` runs a
    call of positional arguments the plan ``_fast`` (or the plan of its signature in
    ``_plans``) takes on the "cpu" device natively, any other as
    ``self._run(self._bind(args, kwargs))`` (``python/src/operator_call.rs``)."""

    _fast: BlasPlan | None
    _plans: dict[tuple[Any, ...], BlasPlan] | None
    def _set_arity(self, least: int, most: int, fills: tuple[Any, ...], local: Any) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

def plan_key(values: list[Any]) -> tuple[Any, ...] | None:
    """The key of a call's plan among an operator's ``_plans``: each torch tensor's type,
    dtype, shape and strides, lists as tuples, other values as they are; None if some value
    cannot be a key."""

@final
class PlannedKernel:
    """The Autograd kernel of a ``torch.ops.tpublas`` operator: a call the operator's plan
    takes runs natively (no mode, no functorch transform, the "cpu" device); any other goes
    to ``fallback`` as it came (``python/src/dispatch.rs``)."""

    def __new__(
        cls,
        op: Any,
        least: int,
        most: int,
        fills: tuple[Any, ...],
        modes: Callable[[], int],
        functorch: Callable[[], Any],
        local: Any,
        fallback: Callable[..., Any],
    ) -> PlannedKernel: ...
    def __call__(self, keyset: Any, *args: Any, **kwargs: Any) -> Any: ...

@final
class ModeDispatch:
    """A ``tpublas.mode()``'s ``__torch_dispatch__``: a planned operator's call runs
    natively, any other goes to ``fallback(mode(), *call)`` (``python/src/dispatch.rs``)."""

    def __new__(
        cls,
        planned: dict[int, tuple[Any, ...]],
        served: dict[str, int],
        viewed: dict[int, tuple[Any, str]],
        views: dict[str, int],
        local: Any,
        fallback: Callable[..., Any],
        mode: Callable[[], Any],
    ) -> ModeDispatch: ...
    def __call__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                 kwargs: dict[str, Any] | None = None) -> Any: ...
    @property
    def __self__(self) -> Any:
        """The mode (held weakly)."""

@final
class Buffer:
    """A result array's storage: a writable, C-contiguous buffer, typed and shaped for a
    consumer asking for format and shape (``numpy.asarray``; bf16 as int16), else bytes."""

    if sys.version_info >= (3, 12):
        def __buffer__(self, flags: int, /) -> memoryview: ...

    def __len__(self) -> int: ...

def catalog() -> list[tuple[str, str, list[str], list[str]]]:
    """``(name, about, shape names, dtype names)`` of every catalog kernel."""

def instantiate(name: str, shape: list[int], dtype: str) -> tuple[Kernel, dict[str, int]]:
    """The catalog kernel ``name`` for a problem ``shape`` and ``dtype``, and its bindings."""

def import_mosaic(
    body: str,
    operand_types: list[str],
    result_types: list[str],
    name: str,
    aliases: list[tuple[int, int]] = ...,
    vmem_limit_bytes: int | None = None,
) -> Kernel: ...
def import_stablehlo(module: str, name: str) -> Kernel: ...
def stablehlo_ops() -> list[str]: ...
def tpublas_ops() -> list[tuple[str, str, str]]:
    """``(name, schema, about)`` of every tpuBLAS operator."""

def tpublas_run(
    name: str, args: list[tuple[str, object]], device: str = "cpu"
) -> list[_WireOut]:
    """Runs an operator on ``(kind, value)`` arguments in its schema's order."""

def tpublas_run_planned(
    name: str,
    args: list[tuple[str, object]],
    values: list[Any],
) -> tuple[list[_WireOut], BlasPlan | None]:
    """``tpublas_run`` on the CPU, with the call's plan where one can be made (``values``:
    the Python arguments, one per entry of ``args``); the plan returns torch tensors."""

def tpublas_warm_up() -> None: ...
def op_table() -> list[tuple[str, str, str, list[str], list[str], list[str]]]:
    """The kernel IR's op table: (family, name, typing, dtypes, Mosaic names, StableHLO
    names) per op."""

def ffi_register(
    kernel: Kernel, device: str, aliases: dict[int, int] = ..., debug: bool = False
) -> int:
    """Registers ``kernel`` for XLA custom calls; returns its id."""

def ffi_handler() -> object:
    """The XLA FFI handler, as a PyCapsule."""

def devices() -> list[str]: ...
def torch_interop() -> str | None:
    """How torch tensors cross: "exchange" (torch's DLPack C exchange API) or "capsule";
    None before torch is imported."""

def tpu_topologies() -> list[str]: ...
def register_bundle(path: str) -> bool:
    """False (after a message on stderr) if the bundle was refused."""

def register_first_bundle(paths: list[str]) -> str | None:
    """Loads the first bundle of ``paths`` this machine can use; None (after one message on
    stderr) if none fits."""

def loaded_bundles() -> list[tuple[str, str]]:
    """The loaded bundles as ``(path, CPU their code was compiled for)``, in load order."""

def warm_up() -> None: ...
def cache_stats() -> tuple[int, int, int, int]:
    """``(compiled, disk hits, bundle hits, damaged disk entries)`` in this process so far."""

def set_min_split_bytes(bytes: int) -> int:
    """Sets the work (bytes a launch's windows cover) below which CPU launches run on one
    thread; returns the previous value. For measurements: 0 splits every parallel grid."""

def _arm_test_panic() -> None: ...
