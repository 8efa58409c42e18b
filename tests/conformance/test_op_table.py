"""Every entry of the op table, on every dtype it accepts, lowered by `tpukit lower op.NAME`
and compiled with libtpu for v5e and v6e.

The kernels are the op-table kernels (`tpukit kernels --dtype D` lists them as `op.NAME`; see
`catalog/src/op_kernels.rs`), elementwise over extents their blocks do not divide, so an op
added to the table is compiled here with no edit to this file. `tests/op_table.rs` runs the
same kernels on the interpreter and the CPU backend against a reference.
"""

import subprocess

import pytest
from conftest import CLI, tpukit
from tpu_compile import TOPOLOGIES

# The dtypes a TPU kernel's arrays can hold. f16 cannot be loaded by Mosaic on v5e/v6e:
# lowering refuses it (test below).
DTYPES = ["f32", "bf16", "i32", "i16", "i8", "bool"]

# Known gaps, each a libtpu error on tpukit's lowering (strict: fixing one fails this list).
KNOWN = {
    # Ordering bools (false < true) lowers to and/or/xor of i1 vectors feeding a select;
    # Mosaic fails on the i1 → i8 extension it inserts ("Invalid input layout").
    (op, "bool"): "Mosaic cannot lay out the i1 select an ordered bool comparison feeds"
    for op in ("op.lt", "op.le", "op.gt", "op.ge")
}


def op_kernels(dtype):
    lines = tpukit("kernels", "--dtype", dtype).splitlines()
    return [line.split()[0] for line in lines if line.startswith("op.")]


CASES = [
    pytest.param(
        kernel,
        dtype,
        topology,
        marks=[pytest.mark.xfail(strict=True, reason=KNOWN[kernel, dtype])]
        if (kernel, dtype) in KNOWN
        else [],
    )
    for dtype in DTYPES
    for kernel in op_kernels(dtype)
    for topology in TOPOLOGIES
]


def test_every_family_is_listed():
    names = {k.split(".")[1] for k in op_kernels("f32")}
    for op in ("neg", "erf", "logistic", "add", "rem", "pow", "eq", "ne", "reduce_sum"):
        assert op in names


@pytest.mark.parametrize(("kernel", "dtype", "topology"), CASES)
def test_op_compiles_for_tpu(compiler, tmp_path, kernel, dtype, topology):
    path = tmp_path / "op.mlir"
    tpukit("lower", kernel, "--fit", "edge", "--dtype", dtype, "-o", str(path))
    result = compiler.compile(path.read_text(), topology)
    assert result["ok"], result.get("error")


def test_f16_is_refused_with_what_to_use():
    args = [str(CLI), "lower", "op.exp", "--dtype", "f16"]
    done = subprocess.run(args, check=False, capture_output=True, text=True)
    assert done.returncode != 0
    assert "f16, which TPU kernels cannot load or store" in done.stderr
    assert "use bf16 or f32" in done.stderr
