"""tpukit.helion: every Helion program in examples/helion/ run on `cpu` and `interpret`, f32 and
bf16, on shapes the blocks divide and shapes they do not, checked against torch eager by the
example's own `check` (Helion's tolerances or tighter; see examples/helion/_check.py).

Semantics (partial tiles, atomics, reductions, gathers, the tile API) are tested in
test_helion_semantics.py, errors in test_helion_errors.py.
"""

from __future__ import annotations

import importlib
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import DEVICES, helion  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "helion"
F32, BF16 = torch.float32, torch.bfloat16


def example(name):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


# example -> (check arguments the default blocks divide, arguments they do not)
SHAPES = {
    "add": [(256, 512), (100, 300)],
    "exp": [(4096,), (3000,)],
    "softmax": [(64, 256), (100, 300)],
    "layer_norm": [(64, 384), (100, 300)],
    "rms_norm": [(64, 512), (100, 300)],
    "sum": [(64, 512), (100, 300)],
    "matmul": [(128, 256, 128), (200, 300, 150)],
    "matmul_split_k": [(64, 512, 128), (100, 300, 150)],
    "bmm": [(2, 64, 128, 128), (3, 40, 200, 136)],
    "embedding": [(8, 32, 16, 128), (7, 13, 50, 300)],
}

CASES = [
    pytest.param(name, args, dtype, device, id=f"{name}-{'x'.join(map(str, args))}-"
                 f"{str(dtype)[6:]}-{device}")
    for name, shapes in SHAPES.items()
    for args in shapes
    for dtype in (F32, BF16)
    for device in DEVICES
]


def test_every_example_is_tested():
    files = {p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_")}
    assert files == set(SHAPES)


@pytest.mark.parametrize(("name", "args", "dtype", "device"), CASES)
def test_example_matches_torch_eager(name, args, dtype, device):
    with helion.device(device):
        example(name).check(*args, dtype)


def test_examples_checks_can_fail():
    """An example's check catches a kernel computing the wrong thing."""

    @helion.kernel
    def almost_add(x, y):
        x, y = torch.broadcast_tensors(x, y)
        out = torch.empty_like(x)
        for tile in hl.tile(out.size()):
            out[tile] = x[tile] + y[tile] * 1.01
        return out

    add = example("add")
    saved = add.add
    add.add = almost_add
    try:
        with pytest.raises(AssertionError, match="add"):
            add.check(64, 128)
    finally:
        add.add = saved


def test_embedding_with_int64_indices_and_a_row_tile_of_one():
    emb = example("embedding")
    kernel = helion.kernel(emb.embedding.fn, config=helion.Config(block_sizes=[1, 128]))
    x = torch.randint(0, 40, (5, 9), dtype=torch.int64)
    weight = torch.randn(40, 256, dtype=BF16)
    torch.testing.assert_close(kernel(x, weight), torch.nn.functional.embedding(x, weight),
                               rtol=0, atol=0)


def test_lowering_gives_one_module_per_device_loop_and_tpukit_ir():
    softmax = example("softmax").softmax
    x = torch.randn(40, 200)
    (text,) = softmax.stablehlo(x)
    assert "tpu_custom_call" in text and "func.func public @main" in text
    assert "tensor<40x200xf32>" in text
    assert softmax.lower(x) == text
    (ir,) = softmax.ir(x)
    assert [o.role for o in ir.operands] == ["input", "output"]
    assert "tpu_custom_call" in ir.lower()  # tpukit's own Mosaic lowering of the same kernel


def test_config_block_sizes_in_order_of_appearance_and_defaults():
    matmul = example("matmul")
    x, y = torch.randn(256, 384), torch.randn(384, 256)
    assert matmul.matmul.block_sizes(x, y) == [64, 128, 128]
    # defaults: 32 rows (second-to-last dimension), 128 columns (last), 128 for the k loop
    assert matmul.matmul_dot.block_sizes(x, y) == [32, 128, 128]
    # 1024 for the last dimension of a 1-D tensor
    assert example("exp").exp.block_sizes(torch.randn(5000)) == [1024]


def test_device_context_and_per_call_device():
    exp = example("exp").exp
    x = torch.randn(3000)
    with helion.device("interpret"):
        torch.testing.assert_close(exp(x), torch.exp(x))
    torch.testing.assert_close(exp(x, device="interpret"), torch.exp(x))
    with pytest.raises(ValueError, match="unknown device"), helion.device("tpu"):
        pass
