"""tpukit's serialized Mosaic, read back by jaxlib's own tpu dialect and verified.

The body in `backend_config` is deserialized exactly as JAX reads Mosaic it did not write
(`golden.Deserializer`): MLIR bytecode parsed in a context with `jax._src.lib.tpu`'s dialect
registered, `mosaic-serde{serialize=false}` turning `stable_mosaic.*` ops back into registered
func/arith/math/vector/scf/memref/tpu ops, then the MLIR verifier, which runs the tpu dialect's
own op verifiers (`tpu.matmul`, `tpu.vector_store`, `tpu.iota`, ...).
"""

import re

import golden
import pytest
from conftest import tpukit
from test_conformance import DTYPES, SHAPES
from test_ir_files import CASES as IR_CASES


@pytest.fixture(scope="session")
def deserializer():
    return golden.Deserializer()


def body(name, shape, dtype="f32"):
    return golden.body_of(tpukit("lower", name, "--shape", shape, "--dtype", dtype))[0]


CASES = [
    (name, shape, dtype)
    for name, shapes in SHAPES.items()
    for shape in shapes
    for dtype in DTYPES
]


@pytest.mark.parametrize(("name", "shape", "dtype"), CASES)
def test_jaxlib_deserializes_and_verifies(deserializer, name, shape, dtype):
    version, module = deserializer.module(body(name, shape, dtype))
    assert version == 11
    ops = {op.name for op in golden.walk(module.module.operation)}
    assert not any(op.startswith("stable_mosaic.") for op in ops), ops
    assert {"func.func", "func.return", "vector.load", "tpu.vector_store"} <= ops


# Each corruption is made in the serialized text, where nothing checks it, and must be caught
# when jaxlib deserializes: by upstream verifiers, by the tpu dialect's, or as an unknown op.
CORRUPTIONS = [
    (
        "softmax",
        "64x256",
        "reduction_dims = array<i64: 1>",
        "reduction_dims = array<i64: 0>",
        "'vector.multi_reduction' op destination type",
    ),
    (
        "matmul",
        "256x256x256",
        "#tpu.dot_dimension_numbers<[1], [0], [0], [1]",
        "#tpu.dot_dimension_numbers<[1], [1], [0], [0]",
        "'tpu.matmul' op Illegal: output dim order",
    ),
    (
        "matmul",
        "256x256x256",
        "operandSegmentSizes = array<i32: 1, 1, 2, 0>",
        "operandSegmentSizes = array<i32: 1, 1, 1, 1>",
        "'tpu.vector_store' op operand #3 must be vector",
    ),
    (
        "add_vectors",
        "4096",
        "stable_mosaic.arith.addf",
        "stable_mosaic.tpu.no_such_op",
        "unregistered operation 'tpu.no_such_op'",
    ),
]


@pytest.mark.parametrize(("name", "shape", "old", "new", "error"), CORRUPTIONS)
def test_a_corrupted_body_is_rejected(deserializer, name, shape, old, new, error):
    text = deserializer.serialized_text(body(name, shape))
    assert old in text
    # The untouched text round-trips: the corruption is the only change.
    deserializer.module(deserializer.body_of_serialized_text(text))
    bad = deserializer.body_of_serialized_text(text.replace(old, new, 1))
    from jaxlib.mlir.ir import MLIRError

    with pytest.raises(MLIRError, match=re.escape(error)):
        deserializer.module(bad)


def test_there_are_lowering_cases():
    assert len(IR_CASES) >= 20


@pytest.mark.parametrize(("case", "text"), IR_CASES, ids=[c for c, _ in IR_CASES])
def test_lowering_cases_verify_under_jaxlib(deserializer, tmp_path, case, text):
    """The readable Mosaic of every FileCheck case of `cargo test -p tpukit-mosaic` is valid
    tpu-dialect IR."""
    source = tmp_path / "kernel.ir"
    source.write_text(text)
    deserializer.verify_text(tpukit("lower", "--ir", str(source), "--mosaic"))
