"""Every catalog kernel and every tpuBLAS kernel, lowered by `tpukit lower`, compiles with
libtpu for v5e and v6e.

Shapes include ones the blocks do not divide (edge blocks, masked loads); dtypes f32 and bf16.
tpuBLAS kernels are listed by `tpukit kernels` — every distinct kernel any operator may
launch (broadcast forms, scalar forms, mixed-dtype statistics, the transposes that move dims)
— and lowered at sample extents that fit their blocks and that do not, so a new operator or
kernel is covered without editing this file.
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
    "flash_attention": ["8x512x512x128", "3x300x333x64"],
}
DTYPES = ["f32", "bf16"]


def sections():
    """`tpukit list` as {source: [(name, shape kind)]}: {"catalog": [...], "tpublas": [...]}."""
    out, section = {}, None
    for line in tpukit("list").splitlines():
        if line.endswith(":") and " " not in line:
            section = out.setdefault(line.removesuffix(":"), [])
        elif line.strip():
            words = line.split()
            section.append((words[0], words[2]))
    return out


def catalog():
    return [name for name, _ in sections()["catalog"]]


def test_every_catalog_kernel_has_conformance_shapes():
    assert sorted(catalog()) == sorted(SHAPES)


CASES = [
    (name, shape, dtype, topology)
    for name, shapes in SHAPES.items()
    for shape in shapes
    for dtype in DTYPES
    for topology in TOPOLOGIES
]


def blas_kernels(dtype):
    """The ids (`OP#I`) of every distinct tpuBLAS kernel, from `tpukit kernels --dtype D`
    (which lists the catalog's shipped kernels too, under their names: compiled above)."""
    lines = tpukit("kernels", "--dtype", dtype).splitlines()
    return [line.split()[0] for line in lines if "#" in line.split()[0]]


BLAS_CASES = [
    (kernel, fit, dtype, topology)
    for dtype in DTYPES
    for kernel in blas_kernels(dtype)
    for fit in ("divisible", "edge")
    for topology in TOPOLOGIES
]


def compiles(compiler, path, topology):
    result = compiler.compile(path.read_text(), topology)
    assert result["ok"], result.get("error")
    assert len(result["llo_ops"]) == 1, "one Mosaic kernel per module"
    assert result["llo_ops"][0]["total"] > 0


@pytest.mark.parametrize(("name", "shape", "dtype", "topology"), CASES)
def test_compiles_for_tpu(compiler, tmp_path, name, shape, dtype, topology):
    path = tmp_path / f"{name}.mlir"
    tpukit("lower", name, "--shape", shape, "--dtype", dtype, "-o", str(path))
    compiles(compiler, path, topology)


@pytest.mark.parametrize(("kernel", "fit", "dtype", "topology"), BLAS_CASES)
def test_tpublas_kernel_compiles_for_tpu(compiler, tmp_path, kernel, fit, dtype, topology):
    path = tmp_path / "kernel.mlir"
    tpukit("lower", kernel, "--fit", fit, "--dtype", dtype, "-o", str(path))
    compiles(compiler, path, topology)


def test_unknown_kernel_is_a_clear_error():
    import subprocess

    from conftest import CLI

    args = [str(CLI), "lower", "nope", "--shape", "8"]
    done = subprocess.run(args, check=False, capture_output=True, text=True)
    assert done.returncode != 0
    assert "no kernel `nope`" in done.stderr
