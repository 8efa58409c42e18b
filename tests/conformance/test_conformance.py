"""Every catalog kernel, lowered by `tpukit lower`, compiles with libtpu for v5e and v6e.

Shapes include ones the blocks do not divide (edge blocks, masked loads); dtypes f32 and bf16.
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


def listed():
    return [line.split()[0] for line in tpukit("list").splitlines() if line.strip()]


def catalog():
    return [name for name in listed() if not name.startswith("tpublas.")]


def tpublas():
    return [name for name in listed() if name.startswith("tpublas.")]


def test_every_catalog_kernel_has_conformance_shapes():
    assert sorted(catalog()) == sorted(SHAPES)


CASES = [
    (name, shape, dtype, topology)
    for name, shapes in SHAPES.items()
    for shape in shapes
    for dtype in DTYPES
    for topology in TOPOLOGIES
]


@pytest.mark.parametrize(("name", "shape", "dtype", "topology"), CASES)
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


TPUBLAS_CASES = [
    (name, dtype, topology)
    for name in tpublas()
    for dtype in DTYPES
    for topology in TOPOLOGIES
]


def test_tpublas_is_listed():
    assert len(tpublas()) >= 30


@pytest.mark.parametrize(("name", "dtype", "topology"), TPUBLAS_CASES)
def test_tpublas_compiles_for_tpu(compiler, tmp_path, name, dtype, topology):
    """Every tpuBLAS kernel, at its listed (non-divisible) problem size."""
    path = tmp_path / f"{name}.mlir"
    tpukit("lower", name, "--dtype", dtype, "-o", str(path))
    row = compiler.compile(path.read_text(), topology)
    assert row["ok"], f"{name} {dtype} on {topology}: {row.get('error', row)}"
