"""tpukit's serialized Mosaic bodies deserialize and verify with jaxlib's own tpu dialect.

For every catalog kernel (a divisible and an edge shape, f32 and bf16): take the base64 body
from the `tpu_custom_call`'s `backend_config` that `tpukit lower` writes, parse it in jaxlib's
MLIR context, run jaxlib's `mosaic-serde{serialize=false}` pass (what Mosaic does first on a
TPU: `stable_mosaic.*` ops become registered `tpu`/`vector`/`arith`/… ops, upgraded from the
body's `stable_mosaic.version`), and run the MLIR verifier with the tpu dialect registered.
"""

import base64
import re

import pytest
from conftest import tpukit
from test_conformance import DTYPES, SHAPES

CASES = [
    (name, shape, dtype)
    for name, shapes in SHAPES.items()
    for shape in shapes
    for dtype in DTYPES
]


def body_of(stablehlo: str) -> bytes:
    # MLIR prints the JSON's quotes as \22.
    match = re.search(r"\\22body\\22: \\22([A-Za-z0-9+/=]+)\\22", stablehlo)
    assert match, "no backend_config body in the module"
    return base64.b64decode(match.group(1))


def deserialize_and_verify(body: bytes) -> str:
    """The verified body, printed with registered ops; raises if any step fails."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import tpu
    from jaxlib.mlir import ir
    from jaxlib.mlir.passmanager import PassManager

    ctx = jax_mlir.make_ir_context()
    tpu.register_dialect(ctx)
    with ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = (
            True  # the serialized names, until the pass runs
        )
        module = ir.Module.parse(body)
        PassManager.parse("builtin.module(mosaic-serde{serialize=false})").run(
            module.operation
        )
        ctx.allow_unregistered_dialects = False
        assert module.operation.verify()
        return str(module)


@pytest.mark.parametrize(("name", "shape", "dtype"), CASES)
def test_body_verifies_with_jaxlib(name, shape, dtype):
    text = tpukit("lower", name, "--shape", shape, "--dtype", dtype)
    printed = deserialize_and_verify(body_of(text))
    ops = printed.replace("stable_mosaic.version", "")
    assert "stable_mosaic." not in ops, "ops left in serialized form"
    assert "func.func @" in printed and "tpu.core_type" in printed
    assert "window_params" in printed and "iteration_bounds" in printed


def test_a_damaged_body_is_rejected():
    text = tpukit("lower", "softmax", "--shape", "64x256", "--dtype", "f32")
    body = bytearray(body_of(text))
    body[len(body) // 2] ^= 0xFF
    with pytest.raises(Exception):  # noqa: B017 - jaxlib raises MLIRError or ValueError
        deserialize_and_verify(bytes(body))
