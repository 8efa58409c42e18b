"""Helion device code on int8, int16 and int32 tiles lowers for TPU and compiles with libtpu
for v5e and v6e through both lowerings (JAX's StableHLO of the Pallas kernel, tpukit's Mosaic
lowering of the imported IR): `&`, `|`, `^`, `~`, the shifts and comparisons — int4_gemm's
nibble unpacking. Narrow shifts and comparisons are computed on int32 (Mosaic shifts 32-bit
lanes only and fails to lay out an int8 or int16 comparison's mask on a 1-D block). Results
are tested in python/tests/test_helion_dtypes.py."""

import functools

import pytest
from conftest import assert_compiles, helion_modules
from tpu_compile import TOPOLOGIES

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl
from tpukit import helion


@helion.kernel()
def bits_and_compares(x, y):
    out = torch.empty([6, *x.shape], dtype=x.dtype)
    for t in hl.tile(x.size(0)):
        a, b = x[t], y[t]
        out[0, t] = a & 0xF
        out[1, t] = a | b
        out[2, t] = a ^ b
        out[3, t] = a >> 4
        out[4, t] = (a & 0x7) << 2
        out[5, t] = torch.where((a > 0) | (a == b), ~a, a)
    return out


DTYPES = {"int8": torch.int8, "int16": torch.int16, "int32": torch.int32}


@functools.cache
def _lowered(dtype, path):
    torch.manual_seed(0)
    x, y = (torch.randint(-100, 100, (300,), dtype=DTYPES[dtype]) for _ in range(2))
    return helion_modules(bits_and_compares, (x, y), path)


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("path", ["jax", "tpukit"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_integer_operators_compile_for_tpu(compiler, dtype, path, topology):
    modules = _lowered(dtype, path)
    assert len(modules) == 1
    assert_compiles(compiler, modules, topology)
