"""``tpukit.helion``: run Helion programs on tpukit.

Change ``import helion`` / ``import helion.language as hl`` to ``from tpukit import helion`` /
``import tpukit.helion.language as hl``; the kernel then runs on tpukit's CPU backend
(``device="cpu"``, compiled through LLVM, the default) or its interpreter
(``device="interpret"``): per call (``kernel(x, device="interpret")``), per kernel
(``@helion.kernel(device=…)``) or for a block of code (``with helion.device("interpret"):``).
For a TPU, ``kernel.stablehlo(*args)`` gives the StableHLO module of each device loop (a Mosaic
``tpu_custom_call``, what JAX lowered; ``kernel.lower`` joins them) and ``kernel.ir(*args)``
the kernel IR tpukit runs (``.lower()`` of one is tpukit's own Mosaic lowering of it). Both
compile with libtpu for v5e and v6e (tests/conformance/test_helion.py).

How a program is translated:

- The kernel's source is parsed (as Helion does): each device loop, and each ``if`` in device
  code, is rewritten into functions (``_rewrite``). Host code (shapes, allocations, ``return``)
  runs as ordinary Python/PyTorch.
- Each top-level ``hl.tile``/``hl.grid`` loop becomes one Pallas kernel (``pl.pallas_call``)
  whose grid has one axis per tiled dimension (``_runtime``, ``_plan``). Nested ``hl.tile``
  loops become ``lax.fori_loop`` over whole tiles plus one statically-sized tail tile,
  carrying the variables the body reassigns; ``hl.grid`` loops are tiles of one element; a
  device ``if`` on a device scalar becomes ``lax.cond``.
- Block sizes come from ``config=Config(block_sizes=[…])`` in order of first appearance
  (``hl.tile`` dimensions without an explicit ``block_size`` and ``hl.register_block_size``
  calls, outer loops first). Without one, a grid dimension gets 1024 if it tiles the last
  dimension of a 1-D tensor, 128 the last dimension of a tensor, 32 the second-to-last, 1 a
  leading one; a nested loop gets 128; ``register_block_size(n)`` gives ``min(128,
  next_power_of_2(n))``; all clipped to the dimension. Every block size is then rounded up to a
  legal TPU tiling of the dimensions it indexes (a multiple of 128 on a last dimension, of 8
  on the one before, or the whole dimension), nested loops' too: Mosaic must prove their
  dynamic slice starts aligned. ``configs=[…]`` uses the first (there is no autotuner);
  ``hl.register_tunable`` reads ``Config(name=…)``, else the fragment's default.
- Layouts (``_plan``): a tensor dimension always indexed by the same grid tile is blocked by it
  (``BlockSpec``); any other is whole and sliced in the kernel. Tensors both read and written
  (``hl.atomic_add``, stores with ``extra_mask``, read-after-write) start their output block
  from their input block; when grid steps revisit the same block, their axes run in order
  (``arbitrary``) and the block stays in VMEM between consecutive visits, or the whole tensor
  does when the visits are not consecutive: atomics are exact. Index tensors of gathers and
  scatters (``w[idx[tile], :]``) go to scalar prefetch (SMEM, at most about 256K int32
  indices on v5e/v6e); rows are moved one at a time.
- Partial tiles (``_values``): the last tile of a range its block size does not divide reads
  past the end; those elements are never written back and never counted — every value knows
  which of its dimensions come from a partial tile, and reductions, scans, matmul
  contractions and ``hl.reduce`` replace those elements by their identity first (Helion's
  "reduction operations know to ignore the invalid elements").
- Torch code inside device loops runs on ``DTensor`` values wrapping the JAX arrays being
  traced (``_ops``): operators, the ``torch.*``/``Tensor.*``/``F.*`` functions of
  ``_ops.ELEMENTWISE`` and ``_ops.STRUCTURAL`` (reductions, softmax, var/mean, cumsum,
  mm/addmm/bmm/baddbmm/matmul/``@``, views, casts, ``torch.where``, factories), and
  ``[:, None]`` broadcasting. Anything else — a torch function, an ``hl`` API tpukit does not
  translate, data-dependent loops, a gather along the last dimension — raises
  ``tpukit.helion.exc.UnsupportedConstruct`` naming it and the kernel source line.
- Shapes and scalar arguments are compile-time constants (``static_shapes`` is accepted but
  every signature is its own specialization); a device loop is traced, lowered and imported
  once per signature and config, then cached on the kernel; compiled code is cached by the
  runtime.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Mapping

from tpukit.helion import exc, language
from tpukit.helion._state import CallState, _local, cdiv, next_power_of_2
from tpukit.helion._where import KERNEL_FILES
from tpukit.launch import check_device

__all__ = [
    "Config",
    "Kernel",
    "Settings",
    "cdiv",
    "device",
    "exc",
    "jit",
    "kernel",
    "language",
    "next_power_of_2",
]


class Config(Mapping):
    """``helion.Config(block_sizes=[…], …)``: keyword arguments only; unknown keys are kept
    (``hl.register_tunable`` values). Only ``block_sizes`` and tunables affect tpukit; other
    keys (``num_warps``, ``pallas_loop_type``, …) are accepted and ignored."""

    def __init__(self, **kwargs):
        self._d = {k: v for k, v in kwargs.items() if v is not None}

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)

    def __repr__(self):
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self._d.items()) + ")"

    @property
    def block_sizes(self):
        return self._d.get("block_sizes", [])

    def to_json(self) -> str:
        import json

        return json.dumps(self._d)

    @classmethod
    def from_json(cls, text: str) -> Config:
        import json

        return cls(**json.loads(text))

    @classmethod
    def from_dict(cls, d) -> Config:
        return cls(**dict(d))


class Settings:
    """``helion.Settings(**kw)``: accepted for compatibility; ``device`` ("cpu" or
    "interpret") is tpukit's own."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class BoundKernel:
    """``kernel.bind(args)``: the kernel for one signature."""

    def __init__(self, kernel, args):
        self.kernel = kernel
        self.args = args
        self.config = kernel.config

    def __call__(self, *args):
        return self.kernel(*args)

    def lower(self) -> str:
        return self.kernel.lower(*self.args)

    def run_ref(self, *args):
        raise exc.HelionError("ref mode is not supported by tpukit.helion")


class Kernel:
    """A Helion kernel run by tpukit (what ``@helion.kernel`` returns).

    One plan (and one Pallas kernel, lowered and imported once) per device loop and signature
    (argument shapes, dtypes and scalar values), cached on the kernel; the compiled code is
    cached by tpukit's runtime like every other frontend's."""

    def __init__(self, fn, *, config=None, configs=None, key=None, device="cpu", **settings):
        from tpukit.helion import _rewrite

        if config is not None and configs:
            raise exc.HelionError("Cannot specify both config and configs")
        if config is not None:
            configs = [config]
        self.configs = [c if isinstance(c, Config) else Config(**dict(c)) for c in configs or []]
        self.config = self.configs[0] if self.configs else Config()
        settings_obj = settings.pop("settings", None)
        if settings_obj is not None:
            settings.update(vars(settings_obj))
            device = settings.pop("device", device)
        self.settings = settings
        self.static_shapes = settings.get("static_shapes", True)
        self.key = key
        self.device = check_device(device)
        self.fn = fn
        self.name = fn.__name__
        sig = inspect.signature(fn)
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
                raise TypeError(
                    "Kernel(...) cannot have *args, **kwargs, or keyword-only arguments"
                )
        self._takes_device = "device" in sig.parameters
        self._rewritten, filename = _rewrite.rewrite(fn)
        KERNEL_FILES.add(filename)
        self._plans: dict = {}
        functools.update_wrapper(self, fn)

    def _run(self, mode, args, kwargs, device=None):
        args = tuple(a.value if isinstance(a, language.constexpr) else a for a in args)
        kwargs = {
            k: (v.value if isinstance(v, language.constexpr) else v) for k, v in kwargs.items()
        }
        device = check_device(device or getattr(_local, "device", None) or self.device)
        st = CallState(self, dict(self.config), mode, device)
        prev = getattr(_local, "call", None)
        _local.call = st
        try:
            result = self._rewritten(*args, **kwargs)
        finally:
            _local.call = prev
        return st, result

    def __call__(self, *args, **kwargs):
        """Runs the kernel. ``device="cpu"``/``"interpret"`` (a keyword tpukit adds, unless the
        kernel has a parameter of that name) overrides the kernel's device for this call."""
        device = None if self._takes_device else kwargs.pop("device", None)
        return self._run("run", args, kwargs, device)[1]

    def lower(self, *args, **kwargs) -> str:
        """The StableHLO of the kernel's device loops for these arguments (the host code runs,
        the device loops are lowered but not run): one module, or one per device loop joined
        by blank lines (``stablehlo`` gives them as a list)."""
        return "\n\n".join(self.stablehlo(*args, **kwargs))

    def stablehlo(self, *args, **kwargs) -> list[str]:
        """One StableHLO module per device loop, as JAX lowered its Pallas kernel for TPU (a
        ``tpu_custom_call`` with the Mosaic body), in the order the loops run."""
        st, _ = self._run("lower", args, kwargs)
        return list(st.lowered)

    def ir(self, *args, **kwargs) -> list:
        """tpukit's kernel IR (``tpukit._native.Kernel``) of each device loop for these
        arguments: what ``device="cpu"``/``"interpret"`` run. ``k.lower()`` of one is tpukit's
        own Mosaic lowering of it (StableHLO with a ``tpu_custom_call``)."""
        st, _ = self._run("lower", args, kwargs)
        return list(st.kernels)

    def block_sizes(self, *args, **kwargs) -> list[int]:
        """The block sizes used for these arguments, in ``Config.block_sizes`` order."""
        st, _ = self._run("lower", args, kwargs)
        return [st.sizes[i] for i in sorted(st.sizes)]

    def bind(self, args) -> BoundKernel:
        return BoundKernel(self, tuple(args))

    def reset(self):
        self._plans = {}

    def autotune(self, args, force=True, **options) -> Config:
        """No autotuning on tpukit: the kernel's (first) config."""
        return self.config


@contextlib.contextmanager
def device(name: str):
    """``with helion.device("interpret"):`` runs the kernels called inside on that tpukit
    device (``"cpu"`` or ``"interpret"``) unless a call names its own (this thread only)."""
    check_device(name)
    prev = getattr(_local, "device", None)
    _local.device = name
    try:
        yield
    finally:
        _local.device = prev


def kernel(fn=None, *, config=None, configs=None, key=None, **settings):
    """``@helion.kernel`` / ``@helion.kernel(config=…, configs=[…], static_shapes=…, …)``.

    ``configs=[…]`` uses the first (there is no autotuner). ``device="cpu"`` (default) or
    ``"interpret"`` picks tpukit's backend; other Helion settings are accepted and ignored.
    """
    if fn is None:
        return functools.partial(kernel, config=config, configs=configs, key=key, **settings)
    return Kernel(fn, config=config, configs=configs, key=key, **settings)


jit = kernel
