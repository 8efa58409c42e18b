"""Every lowering snapshot of mosaic-lowering (``mosaic-lowering/tests/snapshots``) compiles
with libtpu for v5e and v6e.

``cargo test -p tpukit-mosaic --test snapshots`` pins, for each kernel it builds, the Mosaic
module (``NAME.mlir``, to review) and the StableHLO module around it (``NAME.stablehlo.mlir``,
the serialized body in its ``tpu_custom_call``). Compiling the pinned StableHLO here checks
what the lowering emits today for cases no catalog kernel has: a kernel that reads its output
(its initial contents copied in on the first step of each visit of a block), a 1-D edge block
of exactly 128 elements, scalar bool constants.
"""

import pathlib

import pytest
from tpu_compile import TOPOLOGIES

SNAPSHOTS = pathlib.Path(__file__).resolve().parents[2] / "mosaic-lowering" / "tests" / "snapshots"
MODULES = sorted(SNAPSHOTS.glob("*.stablehlo.mlir"))


def test_every_mosaic_snapshot_has_its_stablehlo():
    mosaic = {p.name.removesuffix(".mlir") for p in SNAPSHOTS.glob("*.mlir")}
    stablehlo = {p.name.removesuffix(".stablehlo.mlir") for p in MODULES}
    assert stablehlo, f"no StableHLO snapshots in {SNAPSHOTS}"
    assert mosaic - {f"{n}.stablehlo" for n in stablehlo} == stablehlo


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name.removesuffix(".stablehlo.mlir"))
def test_snapshot_compiles_for_tpu(compiler, path, topology):
    result = compiler.compile(path.read_text(), topology)
    assert result["ok"], result.get("error")
    assert len(result["llo_ops"]) == 1, "one Mosaic kernel per module"
    assert result["llo_ops"][0]["total"] > 0
