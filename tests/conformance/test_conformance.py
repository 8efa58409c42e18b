"""Every catalog kernel and tpuBLAS operator, lowered by `tpukit lower`, compiles with libtpu
for v5e and v6e.

Shapes include ones the blocks do not divide (edge blocks, masked loads); dtypes f32 and bf16.
tpuBLAS operators are listed by `tpukit list` (its `tpublas:` section) and take their shapes
by the problem-shape kind they declare, so a new operator is covered without editing this file.
"""

import pytest
from conftest import tpukit
from tpu_compile import TOPOLOGIES

# Per kernel: a shape the blocks divide, and one they do not.
SHAPES = {
    "add_vectors": ["4096", "100003"],
    "softmax": ["64x256", "1003x256"],
    "layer_norm": ["64x384", "517x384"],
    "matmul": ["256x512x256", "300x200x260"],
    "row_gather": ["1000x256x64", "1000x300x77"],
}
DTYPES = ["f32", "bf16"]


# Per tpuBLAS problem-shape kind (`tpukit list` prints it after `shape`): a shape the blocks
# divide, and one they do not.
BLAS_SHAPES = {
    "n": ["8192", "100003"],
    "mxn": ["64x1024", "1003x1300"],
    "mxkxn": ["256x512x256", "300x200x260"],
    "bxmxkxn": ["4x128x256x128", "3x100x200x130"],
    "rowsxinnerxk": ["1000x512x64", "1000x300x77"],
    "axbxc": ["2x256x512", "3x300x200"],
    "rowsxinnerxtotal": ["1024x512x4096", "300x300x1000"],
}


def sections():
    """`tpukit list` as {"catalog": [(name, shape kind)], "tpublas": [...]}."""
    out, section = {"catalog": [], "tpublas": []}, "catalog"
    for line in tpukit("list").splitlines():
        if line.strip() == "tpublas:":
            section = "tpublas"
        elif line.strip():
            words = line.split()
            out[section].append((words[0], words[2]))
    return out


def catalog():
    return [name for name, _ in sections()["catalog"]]


def blas_ops():
    return sections()["tpublas"]


def test_every_catalog_kernel_has_conformance_shapes():
    assert sorted(catalog()) == sorted(SHAPES)


CASES = [
    (name, shape, dtype, topology)
    for name, shapes in SHAPES.items()
    for shape in shapes
    for dtype in DTYPES
    for topology in TOPOLOGIES
]


def test_every_tpublas_shape_kind_has_conformance_shapes():
    ops = blas_ops()
    assert ops, "tpukit list has a tpublas section"
    assert {kind for _, kind in ops} <= set(BLAS_SHAPES)


BLAS_CASES = [
    (name, shape, dtype, topology)
    for name, kind in blas_ops()
    for shape in BLAS_SHAPES.get(kind, [])
    for dtype in DTYPES
    for topology in TOPOLOGIES
]


@pytest.mark.parametrize(("name", "shape", "dtype", "topology"), CASES + BLAS_CASES)
def test_compiles_for_tpu(compiler, tmp_path, name, shape, dtype, topology):
    path = tmp_path / f"{name}.mlir"
    tpukit("lower", name, "--shape", shape, "--dtype", dtype, "-o", str(path))
    result = compiler.compile(path.read_text(), topology)
    assert result["ok"], result.get("error")
    assert len(result["llo_ops"]) == 1, "one Mosaic kernel per module"
    assert result["llo_ops"][0]["total"] > 0


def test_unknown_kernel_is_a_clear_error():
    import subprocess

    from conftest import CLI

    args = [str(CLI), "lower", "nope", "--shape", "8"]
    done = subprocess.run(args, check=False, capture_output=True, text=True)
    assert done.returncode != 0
    assert "no kernel `nope`" in done.stderr
