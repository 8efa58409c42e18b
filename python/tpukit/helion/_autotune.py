"""Autotuning a Helion kernel on the active tpukit device.

As in Helion, a kernel given several configs (``configs=[…]``) is tuned on its first call for
each shape signature (argument shapes, dtypes and scalar values, plus ``key(*args)`` when the
kernel has one); ``kernel.autotune(args)`` tunes explicitly. Each candidate runs on copies of
the arguments on the device the call would use (``cpu``: LLVM-compiled code, ``interpret``: the
interpreter), once to compile and warm up and then ``REPEAT`` times; the fastest wall-clock
time wins. A candidate that raises, or whose outputs differ from the first working candidate's
(Helion's accuracy check), is dropped; when none works, ``exc.NoConfigFound`` says why. The
choice is cached on the kernel per signature; the wall-clock times are of the host run, so on
``interpret`` they rank configs by the interpreter's cost, not a TPU's.

Without ``configs``, ``autotune`` searches around the default config: the default block
sizes, then each one doubled and halved (a one-step pattern search; tunables keep their
values). Helion's search algorithms, effort levels and on-disk caches have no counterpart.
"""

from __future__ import annotations

import time

import numpy as np

from tpukit import _arrays
from tpukit.helion import exc
from tpukit.helion._config import Config

REPEAT = 3
"""Timed runs per candidate (after one untimed run that compiles)."""

RTOL = ATOL = 2e-2
"""How close a candidate's float outputs must be to the reference candidate's."""


def signature_key(kernel, args, kwargs) -> tuple:
    """The specialization key a tuned config is cached under."""
    from tpukit.helion._runtime import _key_of

    key = tuple(_key_of(a) for a in args) + tuple(
        (k, _key_of(v)) for k, v in sorted(kwargs.items())
    )
    if kernel.key is not None:
        key += (_key_of(kernel.key(*args, **kwargs)),)
    return key


def neighbours(kernel, args, kwargs, base: Config) -> list[Config]:
    """``base`` with its block sizes filled in, then each block size doubled and halved."""
    sizes = kernel.block_sizes(*args, config=base, **kwargs)
    rest = {k: v for k, v in base.items() if k != "block_sizes"}
    out = [Config(block_sizes=list(sizes), **rest)]
    for i, s in enumerate(sizes):
        for v in (s * 2, s // 2):
            if v >= 1:
                out.append(Config(block_sizes=[*sizes[:i], v, *sizes[i + 1 :]], **rest))
    return out


def _copy(a):
    if hasattr(a, "clone") and callable(a.clone):
        return a.clone()
    if isinstance(a, np.ndarray):
        return a.copy()
    return a


def _flat(result) -> list[np.ndarray]:
    if result is None:
        return []
    if isinstance(result, (tuple, list)):
        return [x for r in result for x in _flat(r)]
    try:
        return [np.asarray(_arrays.to_numpy(result), dtype=np.float64)]
    except (TypeError, ValueError):
        return [np.asarray(result, dtype=np.float64)] if np.isscalar(result) else []


def _agrees(ref, out) -> bool:
    return len(ref) == len(out) and all(
        r.shape == o.shape and np.allclose(o, r, rtol=RTOL, atol=ATOL, equal_nan=True)
        for r, o in zip(ref, out, strict=True)
    )


def measure(run, config, args, kwargs) -> tuple[float, list]:
    """The best wall-clock time of ``run`` with ``config`` and its (flattened) outputs."""
    del config  # ``run`` closes over it; named for tests that fake the clock
    result = run(tuple(_copy(a) for a in args), kwargs)
    best = float("inf")
    for _ in range(REPEAT):
        fresh = tuple(_copy(a) for a in args)
        t0 = time.perf_counter()
        run(fresh, kwargs)
        best = min(best, time.perf_counter() - t0)
    return best, _flat(result)


def tune(kernel, args, kwargs, configs, device=None) -> Config:
    """The fastest working config of ``configs`` for these arguments (see the module doc)."""
    if not configs:
        raise exc.NotEnoughConfigs("autotuning needs at least one config")

    def run(a, kw):
        return kernel._run("run", a, kw, device, config=config)[1]

    ref = ref_config = None
    best: tuple[float, Config] | None = None
    failures = []
    for config in configs:
        try:
            t, out = measure(run, config, args, kwargs)
        except Exception as e:  # noqa: BLE001 - a config that fails is skipped, as in Helion
            failures.append(f"{config}: {type(e).__name__}: {e}")
            continue
        if ref is None:
            ref, ref_config = out, config
        elif not _agrees(ref, out):
            failures.append(f"{config}: outputs differ from {ref_config}'s")
            continue
        if best is None or t < best[0]:
            best = (t, config)
    if best is None:
        raise exc.NoConfigFound(
            f"kernel `{kernel.name}`: no config ran ({len(configs)} tried): " + "; ".join(failures)
        )
    return best[1]
