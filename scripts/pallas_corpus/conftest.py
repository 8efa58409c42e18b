"""Runs JAX's own TPU Pallas tests on this CPU-only machine with every TPU ``pallas_call``
going to tpukit (``tpukit.pallas.install()``): the corpus ``make corpus`` measures issue 13
on. Not part of ``make test``; see ``run.sh``.

JAX's tests skip themselves unless the device is a TPU, so this makes ``jax._src.test_util``
answer as a v6e (``CORPUS_GENERATION``) and provides the two test helpers JAX's wheel does
not ship (``pallas_test_util``, ``hypothesis_test_util``) from the same checkout. Only the
first instance of each parameterized test runs unless ``CORPUS_ALL=1``.
"""

import os
import sys
import types

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
from jax._src import test_util as jtu

GENERATION = int(os.environ.get("CORPUS_GENERATION", "6"))
JAX_SRC = os.environ["CORPUS_JAX_SRC"]

jtu.test_device_matches = lambda devices: "tpu" in devices
jtu.device_under_test = lambda: "tpu"
jtu.is_device_tpu_at_least = lambda version, *_, **__: version <= GENERATION
jtu.is_device_tpu = lambda version=None, variant="": (
    version in (None, GENERATION) and variant in ("", "e"))
jtu.get_tpu_version = lambda: GENERATION


def _module_from_checkout(name: str, path: str) -> None:
    module = types.ModuleType(name)
    with open(os.path.join(JAX_SRC, path)) as f:
        exec(compile(f.read(), path, "exec"), module.__dict__)  # noqa: S102 - JAX's own file
    sys.modules[name] = module
    parent, _, leaf = name.rpartition(".")
    setattr(sys.modules[parent], leaf, module)


import jax._src.pallas  # noqa: F401

_module_from_checkout("jax._src.pallas.pallas_test_util", "jax/_src/pallas/pallas_test_util.py")
_module_from_checkout("jax._src.hypothesis_test_util", "jax/_src/hypothesis_test_util.py")

import tpukit.pallas

tpukit.pallas.install(os.environ.get("CORPUS_DEVICE", "cpu"))


def _origin(item):
    f = getattr(item, "obj", None)
    f = getattr(f, "__func__", f)
    while getattr(f, "__wrapped__", None) is not None:
        f = f.__wrapped__
    code = getattr(f, "__code__", None)
    where = (code.co_filename, code.co_firstlineno) if code else (item.name,)
    return (item.cls.__name__ if item.cls else "", *where)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("CORPUS_ALL"):
        return
    seen, keep = set(), []
    for item in items:
        if (key := _origin(item)) not in seen:
            seen.add(key)
            keep.append(item)
    items[:] = keep
