"""Helion's rounding of low-precision floats (python/tpukit/helion/_precision.py) lowers for
TPU and compiles with libtpu for v5e and v6e, in f32 and bf16, through both lowerings (JAX's
StableHLO of the Pallas kernel and tpukit's own Mosaic lowering of the imported IR): torch
functions JAX spells as several primitives computed in f32 and rounded once (sigmoid, silu,
log2, the tanh gelu, lerp, std), and products and quotients by a Python number in f32. Their
results are tested in python/tests/test_helion_precision.py."""

import functools

import pytest
from conftest import assert_compiles, helion_modules
from tpu_compile import TOPOLOGIES

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl
from tpukit import helion


@helion.kernel(config=helion.Config(block_sizes=[16, 128]))
def composites(x, y):
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        a, b = x[tm, tn], y[tm, tn]
        s = torch.sigmoid(a) + torch.nn.functional.silu(b) - torch.log2(b.abs() + 0.1)
        g = torch.nn.functional.gelu(a, approximate="tanh")
        out[tm, tn] = torch.lerp(s, g, 0.3) * 0.1 + a / 0.3
    return out


@helion.kernel(config=helion.Config(block_sizes=[8]))
def row_std(x):
    out = torch.empty([x.size(0)], dtype=x.dtype)
    for tm in hl.tile(x.size(0)):
        out[tm] = torch.std(x[tm, :], dim=-1)
    return out


def _randn(*shape, dtype):
    return torch.randn(*shape).to(dtype)


KERNELS = {
    "composites": (composites, lambda d: (_randn(37, 300, dtype=d), _randn(37, 300, dtype=d))),
    "row_std": (row_std, lambda d: (_randn(37, 300, dtype=d),)),
}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


@functools.cache
def _lowered(name, dtype, path):
    torch.manual_seed(0)
    kernel, build = KERNELS[name]
    args = build(DTYPES[dtype])
    return helion_modules(kernel, args, path)


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("path", ["jax", "tpukit"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", list(KERNELS))
def test_rounding_compiles_for_tpu(compiler, name, dtype, path, topology):
    modules = _lowered(name, dtype, path)
    assert len(modules) == 1
    assert_compiles(compiler, modules, topology)
