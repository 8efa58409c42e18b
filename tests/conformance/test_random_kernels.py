"""Random valid kernels (`tpukit::random_kernel`: reductions broadcast back, matmuls, iotas,
casts and elementwise DAGs over edge blocks, f32/bf16/i32), lowered by `tpukit
random-kernels`, compile with libtpu for v5e and v6e.

The seeds are fixed, so a failure reproduces with `tpukit random-kernels --seed S`. The count
is `TPUKIT_RANDOM_KERNELS` (default 12: part of `make conformance`); `make fuzz` compiles
more, from another first seed (`TPUKIT_RANDOM_SEED`)."""

import os

import pytest
from conftest import tpukit
from test_conformance import compiles
from tpu_compile import TOPOLOGIES

COUNT = int(os.environ.get("TPUKIT_RANDOM_KERNELS", "12"))
FIRST = int(os.environ.get("TPUKIT_RANDOM_SEED", "1000"))


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    """{seed: (its line from the CLI, its StableHLO file)}."""
    out = tmp_path_factory.mktemp("random")
    lines = tpukit("random-kernels", "--seed", str(FIRST), "--count", str(COUNT),
                   "-o", str(out)).splitlines()
    assert len(lines) == COUNT
    return {int(line.split()[0]): (line, out / f"random-{line.split()[0]}.mlir")
            for line in lines}


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("seed", range(FIRST, FIRST + COUNT))
def test_random_kernel_compiles_for_tpu(compiler, lowered, seed, topology):
    line, path = lowered[seed]
    try:
        compiles(compiler, path, topology)
    except AssertionError as e:
        pytest.fail(f"{line}: {e}")


def test_the_same_seed_gives_the_same_kernel(tmp_path):
    a = tpukit("random-kernels", "--seed", "7", "-o", str(tmp_path / "a"))
    b = tpukit("random-kernels", "--seed", "7", "-o", str(tmp_path / "b"))
    assert a.split()[:-1] == b.split()[:-1]
    assert (tmp_path / "a" / "random-7.mlir").read_text() == \
        (tmp_path / "b" / "random-7.mlir").read_text()
