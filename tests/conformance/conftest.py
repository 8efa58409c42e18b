"""Shared fixtures: the `tpukit` CLI (built by `make conformance`) and one TPU compiler."""

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
