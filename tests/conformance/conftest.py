"""Shared fixtures: the `tpukit` CLI (built by `make conformance`) and one TPU compiler."""

import contextlib
import os
import pathlib
import subprocess

import pytest
from tpu_compile import Compiler

# Compile-only: no process owns a TPU here, so several may load libtpu at once (others on this
# machine run it too; without this a second process fails on /tmp/libtpu_lockfile). And name
# the accelerator, so that importing jax (Pallas twins) does not make libtpu probe the host.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-4")

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = pathlib.Path(os.environ.get("TPUKIT_CLI", ROOT / "target" / "debug" / "tpukit"))


def tpukit(*args):
    """Runs the CLI; a failure shows its stderr (the lowering's error)."""
    done = subprocess.run(
        [str(CLI), *args], check=False, capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.fail(f"tpukit {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


@pytest.fixture(scope="session")
def compiler():
    return Compiler()


@contextlib.contextmanager
def imports_by_on_cpu():
    """Inside it `tpukit.pallas.on_cpu()` is in effect; on exit the list it yields holds the
    StableHLO of every kernel imported meanwhile, as tpukit lowers it back for a TPU."""
    from tpukit import _cpu_lowering, pallas

    before = len(_cpu_lowering.imported())
    texts: list[str] = []
    with pallas.on_cpu():
        yield texts
    texts.extend(k.lower() for k in _cpu_lowering.imported()[before:])


def assert_compiles(compiler, texts, topology):
    """Every module of `texts` compiles with libtpu for `topology`, its first Mosaic kernel
    down to LLO ops."""
    for text in texts:
        result = compiler.compile(text, topology)
        assert result["ok"], result.get("error")
        assert result["llo_ops"][0]["total"] > 0


def helion_modules(kernel, args, path):
    """The StableHLO modules (one per device loop) of Helion `kernel` on `args`: JAX's lowering
    of its Pallas translation (`path="jax"`) or tpukit's lowering of its IR (`"tpukit"`)."""
    if path == "jax":
        return tuple(kernel.stablehlo(*args))
    return tuple(ir.lower() for ir in kernel.ir(*args))
