"""``helion.Kernel``: what ``@helion.kernel`` returns, and the decorators that make one."""

from __future__ import annotations

import contextlib
import functools
import inspect

from tpukit.helion import _autotune, exc, language
from tpukit.helion._config import Config, as_config
from tpukit.helion._state import CallState, _local
from tpukit.helion._where import KERNEL_FILES
from tpukit.launch import check_device


class BoundKernel:
    """``kernel.bind(args)``: the kernel for one signature."""

    def __init__(self, kernel, args):
        self.kernel = kernel
        self.args = args

    @property
    def config(self) -> Config:
        return self.kernel.config_for(self.args, {})

    def __call__(self, *args):
        return self.kernel(*args)

    def autotune(self, args=None, force=True, **options) -> Config:
        return self.kernel.autotune(args if args is not None else self.args, force, **options)

    def lower(self) -> str:
        return self.kernel.lower(*self.args)

    def run_ref(self, *args):
        raise exc.HelionError("ref mode is not supported by tpukit.helion")


class Kernel:
    """A Helion kernel run by tpukit (what ``@helion.kernel`` returns).

    One plan (and one Pallas kernel, lowered and imported once) per device loop, signature
    (argument shapes, dtypes and scalar values) and config, cached on the kernel; the compiled
    code is cached by tpukit's runtime like every other frontend's. With several ``configs``,
    the first call of each signature autotunes among them (``_autotune``)."""

    def __init__(self, fn, *, config=None, configs=None, key=None, device="cpu", **settings):
        from tpukit.helion import _rewrite

        if config is not None and configs:
            raise exc.InvalidConfig("Cannot specify both config and configs")
        if config is not None:
            configs = [config]
        self.configs = [as_config(c) for c in configs or []]
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
        self._tuned: dict = {}  # signature key -> Config chosen by autotuning
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

    @property
    def config(self) -> Config:
        """The kernel's config when it has one (or none: the defaults); with several, the
        last one autotuning chose (the first before any)."""
        if self._tuned:
            return list(self._tuned.values())[-1]
        return self.configs[0] if self.configs else Config()

    def config_for(self, args, kwargs, device=None) -> Config:
        """The config a call with these arguments uses: the only one, or the one autotuning
        chose for their signature (tuning now if needed)."""
        several = len(self.configs) > 1 and self.settings.get("autotune_effort") != "none"
        if not several and not self._tuned:
            return self.configs[0] if self.configs else Config()
        key = _autotune.signature_key(self, args, kwargs)
        if key not in self._tuned:
            if not several:
                return self.configs[0] if self.configs else Config()
            self._tuned[key] = _autotune.tune(self, args, kwargs, self.configs, device)
        return self._tuned[key]

    def _run(self, mode, args, kwargs, device=None, config=None):
        args = tuple(a.value if isinstance(a, language.constexpr) else a for a in args)
        kwargs = {
            k: (v.value if isinstance(v, language.constexpr) else v) for k, v in kwargs.items()
        }
        device = check_device(device or getattr(_local, "device", None) or self.device)
        if config is None:
            config = self.config_for(args, kwargs, device)
        st = CallState(self, dict(config), mode, device)
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

    def block_sizes(self, *args, config=None, **kwargs) -> list[int]:
        """The block sizes used for these arguments (with ``config``, else the call's), in
        ``Config.block_sizes`` order, before TPU legalisation."""
        st, _ = self._run("lower", args, kwargs, config=config)
        return [st.sizes[i] for i in sorted(st.sizes)]

    def bind(self, args) -> BoundKernel:
        return BoundKernel(self, tuple(args))

    def reset(self):
        self._plans = {}
        self._tuned = {}

    def autotune(self, args, force=True, **options) -> Config:
        """Tunes the kernel for the signature of ``args`` on its device (``_autotune``): among
        its ``configs`` when it has several, else around its config (or the defaults); the
        choice is used by later calls with that signature and returned. Without ``force``, a
        signature already tuned keeps its choice."""
        args = tuple(args)
        key = _autotune.signature_key(self, args, {})
        if not force and key in self._tuned:
            return self._tuned[key]
        configs = self.configs
        if len(configs) <= 1:
            configs = _autotune.neighbours(self, args, {}, self.config)
        self._tuned[key] = _autotune.tune(self, args, {}, configs, options.get("device"))
        return self._tuned[key]


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

    ``configs=[…]`` with several configs autotunes among them per signature (``_autotune``).
    ``device="cpu"`` (default) or ``"interpret"`` picks tpukit's backend; other Helion settings
    are accepted and ignored (``autotune_effort="none"`` uses the first config untuned).
    """
    if fn is None:
        return functools.partial(kernel, config=config, configs=configs, key=key, **settings)
    return Kernel(fn, config=config, configs=configs, key=key, **settings)


def aot_kernel(
    fn=None, *, config=None, configs=None, batched=None, collect_fn=None, measure_fn=None,
    **settings,
):
    """``@helion.aot_kernel(…)``: Helion's ahead-of-time workflow (collect, measure, then a
    decision tree picking a config per shape) has no counterpart; the closest is a kernel that
    autotunes among ``configs`` per shape signature on first use, which this is.
    ``batched``, ``collect_fn`` and ``measure_fn`` only steer that workflow and are ignored."""
    del batched, collect_fn, measure_fn
    return kernel(fn, config=config, configs=configs, **settings)
