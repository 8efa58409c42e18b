"""tpukit.helion: Helion programs (examples/helion/*.py) run on tpukit and checked against
torch eager; lowering, configs, numpy arrays and the errors for unsupported constructs."""

from __future__ import annotations

import importlib
import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402
from tpukit.helion.exc import HelionError, NotInsideKernel, UnsupportedConstruct  # noqa: E402

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "helion"


def example(name):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


BF16 = torch.bfloat16
F32 = torch.float32


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", [(256, 512), (100, 300)])
def test_add_with_broadcasting(shape, dtype):
    example("add").check(*shape, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_exp(dtype):
    example("exp").check(3000, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", [(64, 256), (100, 300)])
def test_softmax_one_and_two_pass(shape, dtype):
    example("softmax").check(*shape, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_layer_norm(dtype):
    example("layer_norm").check(100, 300, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_rms_norm(dtype):
    example("rms_norm").check(100, 300, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_sum_last_dim(dtype):
    example("sum").check(100, 300, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("mkn", [(128, 256, 128), (200, 300, 150)])
def test_matmul_k_loop_and_epilogue(mkn, dtype):
    example("matmul").check(*mkn, dtype)


def test_bmm():
    example("bmm").check(3, 40, 200, 136)


def test_results_are_checked():
    """The example checks can fail: a kernel computing the wrong thing is caught."""

    @helion.kernel
    def almost_add(x, y):
        out = torch.empty_like(x)
        for tile in hl.tile(out.size()):
            out[tile] = x[tile] + y[tile] * 1.01
        return out

    x, y = torch.randn(64, 128), torch.randn(64, 128)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(almost_add(x, y), x + y)


def test_interpret_device_and_lower():
    softmax = example("softmax").softmax
    x = torch.randn(40, 200)
    expected = torch.softmax(x, dim=1)
    torch.testing.assert_close(softmax(x, device="interpret"), expected)
    text = softmax.lower(x)
    assert "tpu_custom_call" in text and "func.func public @main" in text
    assert "tensor<40x200xf32>" in text


def test_config_block_sizes_in_order_of_appearance():
    matmul = example("matmul")
    x, y = torch.randn(256, 384), torch.randn(384, 256)
    assert matmul.matmul.block_sizes(x, y) == [64, 128, 128]
    # defaults: 32 rows, 128 columns (the last dimension), 128 for the k loop
    assert matmul.matmul_dot.block_sizes(x, y) == [32, 128, 128]


def test_configs_uses_the_first_and_illegal_tpu_blocks_are_rounded_up():
    @helion.kernel(configs=[helion.Config(block_sizes=[8, 32]), helion.Config(block_sizes=[1, 1])])
    def scale(x):
        out = torch.empty_like(x)
        for tm, tn in hl.tile([x.size(0), x.size(1)]):
            out[tm, tn] = x[tm, tn] * 2
        return out

    x = torch.randn(64, 300)
    torch.testing.assert_close(scale(x), x * 2)
    # 32 columns is no TPU tiling of a last dimension: the next legal size is 128
    assert scale.block_sizes(x) == [8, 128]


def test_tile_begin_end_inside_outer_tile_and_tile_attributes():
    @helion.kernel(config=helion.Config(block_sizes=[32, 8]))
    def group_sums(x):
        m, n = x.size()
        out = torch.empty([m, n], dtype=torch.float32, device=x.device)
        for tm in hl.tile(m):
            acc = hl.zeros([1, n], dtype=torch.float32)
            for inner in hl.tile(tm.begin, tm.end):
                acc = acc + x[inner, :].sum(0, keepdim=True)
            rows = tm.index[:, None].to(torch.float32)
            out[tm, :] = acc + rows + tm.block_size
        return out

    x = torch.randn(64, 128)
    expected = x.reshape(2, 32, 128).sum(1).repeat_interleave(32, dim=0)
    expected = expected + torch.arange(64.0)[:, None] + 32
    torch.testing.assert_close(group_sums(x), expected, rtol=1e-5, atol=1e-4)


def test_numpy_arrays_in_numpy_host_code():
    @helion.kernel
    def relu_plus(x, y):
        out = np.empty_like(x)
        for tile in hl.tile(x.shape[0]):
            out[tile] = torch.relu(x[tile]) + y[tile]
        return out

    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    y = np.ones(1000, np.float32)
    got = relu_plus(x, y)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, np.maximum(x, 0) + 1, rtol=1e-6)


def test_register_tunable_and_constexpr():
    from tpukit.helion.autotuner import PowerOfTwoFragment

    @helion.kernel(config=helion.Config(block_sizes=[128], factor=4))
    def scaled(x, offset: hl.constexpr):
        factor = hl.register_tunable("factor", PowerOfTwoFragment(1, 8))
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] * factor + offset
        return out

    x = torch.randn(256)
    torch.testing.assert_close(scaled(x, hl.constexpr(1.5)), x * 4 + 1.5)


# --- errors --------------------------------------------------------------------------------


def test_unsupported_torch_function_names_it_and_the_line():
    @helion.kernel
    def sorts(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile, :] = torch.sort(x[tile, :], dim=-1).values
        return out

    with pytest.raises(UnsupportedConstruct, match=r"torch\.sort.*test_helion\.py:\d+.*sort"):
        sorts(torch.randn(8, 128))


def test_data_dependent_control_flow_is_named():
    @helion.kernel
    def branchy(x):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            v = x[tile]
            if v.sum() > 0:
                v = -v
            out[tile] = v
        return out

    with pytest.raises(UnsupportedConstruct, match=r"data-dependent control flow.*if v\.sum"):
        branchy(torch.randn(128))


def test_host_tensor_used_directly_on_device():
    @helion.kernel
    def direct(x, y):
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] + y
        return out

    with pytest.raises(UnsupportedConstruct, match=r"host tensor `y` used directly"):
        direct(torch.randn(128), torch.randn(128))


def test_gather_is_unsupported_with_the_line():
    @helion.kernel
    def embedding(x, weight):
        out = torch.empty([x.size(0), weight.size(1)], dtype=weight.dtype, device=weight.device)
        for tile_b, tile_e in hl.tile([x.size(0), weight.size(1)]):
            out[tile_b, tile_e] = weight[x[tile_b], tile_e]
        return out

    with pytest.raises(UnsupportedConstruct, match=r"tensor of indices \(gather\)"):
        embedding(torch.randint(0, 16, (32,), dtype=torch.int32), torch.randn(16, 128))


def test_kernel_without_device_loop_and_device_api_on_host():
    def no_loop(x):
        return x * 2

    with pytest.raises(HelionError, match="has no `hl.tile`/`hl.grid` loop"):
        helion.kernel(no_loop)

    @helion.kernel
    def zeros_on_host(x):
        z = hl.zeros([4])
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] + z
        return out

    with pytest.raises(NotInsideKernel, match=r"hl\.full"):
        zeros_on_host(torch.randn(8))


def test_helpers():
    assert helion.cdiv(10, 4) == 3 and helion.next_power_of_2(100) == 128
    assert helion.next_power_of_2(1) == 1
    c = helion.Config(block_sizes=[32, 64], num_warps=None)
    assert dict(c) == {"block_sizes": [32, 64]}
    import tpukit

    assert tpukit.helion is helion
