"""Every kernel of the lowering's FileCheck tests (``mosaic-lowering/tests/lower/*.ir``) and
every ``#[tpu_kernel]`` expansion pinned in ``tests/snapshots/*.ir`` (``tests/macro_ir.rs``),
lowered by ``tpukit lower --ir``, compiles with libtpu for v5e and v6e.

``cargo test -p tpukit-mosaic --test filecheck`` checks what each kernel lowers to; this checks
that libtpu accepts it: one small kernel per lowering rule (every unary, binary, comparison and
reduction op among them), edge blocks, loops and branches, and the outputs whose initial
contents are passed in (read outputs, masked stores, outputs placed by scalar prefetch). A file
holds cases separated by ``// -----``; the cases that expect an error are left out.
"""

import pathlib

import pytest
from conftest import tpukit
from tpu_compile import TOPOLOGIES

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOWER = ROOT / "mosaic-lowering" / "tests" / "lower"
# The macro snapshots with TPU-legal blocks (`macro_matmul` pins an expansion on 16x32 bf16
# blocks, below the TPU's tiling); their symbols take extents the blocks divide.
SNAPSHOTS = [ROOT / "tests" / "snapshots" / f"macro_{name}.ir" for name in ("carried", "while", "dma", "rolls_and_gathers")]


def cases():
    """(id, text) of every case that lowers; the text keeps the file's line numbers."""
    out = []
    for path in sorted(LOWER.glob("*.ir")) + SNAPSHOTS:
        lines = path.read_text().splitlines(keepends=True)
        start = 0
        for i in range(len(lines) + 1):
            if i == len(lines) or lines[i].strip() == "// -----":
                text = "\n" * start + "".join(lines[start:i])
                if "// expected-error:" not in text:
                    out.append((f"{path.stem}:{start + 1}", text))
                start = i + 1
    return out


CASES = cases()

# Kernels libtpu rejects today, by name: lowering bugs, each to be fixed in its rule (strict, so
# a fix is noticed here).
KNOWN = {}


def kernel_name(text):
    return text.split("kernel @", 1)[1].split()[0]


def test_the_lowering_tests_have_cases():
    names = {case.split(":")[0] for case, _ in CASES}
    assert {"unary", "binary", "compare", "reduce", "edge", "initial"} <= names, names


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize(("case", "text"), CASES, ids=[c for c, _ in CASES])
def test_ir_file_compiles_for_tpu(compiler, tmp_path, case, text, topology, request):
    if kernel_name(text) in KNOWN:
        request.applymarker(pytest.mark.xfail(reason=KNOWN[kernel_name(text)], strict=True))
    source = tmp_path / "kernel.ir"
    source.write_text(text)
    module = tmp_path / "kernel.mlir"
    fit = ["--fit", "divisible"] if case.startswith("macro_") else []
    tpukit("lower", "--ir", str(source), *fit, "-o", str(module))
    result = compiler.compile(module.read_text(), topology)
    assert result["ok"], f"{case}: {result.get('error')}"
    assert len(result["llo_ops"]) == 1, "one Mosaic kernel per module"
    assert result["llo_ops"][0]["total"] > 0
