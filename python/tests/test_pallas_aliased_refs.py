"""Kernels writing refs made outside them (``jax.new_ref``, ``pl.empty_ref_like``), which
Pallas passes to a ``pl.core_map`` as inputs aliased to outputs: one buffer on a TPU, so a
store or copy into the input is the output's (python/tests/aliased_ref_kernels.py), on
tpukit's ``cpu`` and ``interpret`` under ``on_cpu()`` against numpy. Their libtpu compiles
are in tests/conformance/test_pallas_ops.py."""

import aliased_ref_kernels as ak
import jax
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import pallas

BF16 = ml_dtypes.bfloat16


def _numbers(rng, n, dtype):
    return rng.integers(-50, 50, n).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_scalar_stores_into_an_smem_ref(device, dtype, rng):
    """Two kernels store scalars into an SMEM ref from ``pl.empty_ref_like``; the second reads
    back what the first stored, and what it stored itself a step before."""
    x = _numbers(rng, 13, dtype)
    with pallas.on_cpu(device=device):
        got = jax.jit(ak.smem_scan)(x)
    want = np.cumsum(x * 3 + np.arange(13, dtype=dtype)).astype(dtype)
    assert_close(np.asarray(got), want, f"{device} {dtype}", dict(rtol=1e-6, atol=0))


@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_vector_stores_into_vmem_refs(device, dtype, rng):
    """Whole and partial vector stores into two VMEM refs (20 x 200: no whole (8, 128) tiles),
    each kernel reading what the one before stored."""
    x = rng.standard_normal((20, 200)).astype(dtype)
    y = rng.standard_normal((20, 200)).astype(dtype)
    with pallas.on_cpu(device=device):
        got_x, got_y = jax.jit(ak.vmem_update)(x, y)
    y1 = (y.astype(np.float32) * 2 + x.astype(np.float32)).astype(dtype)
    x1 = (x.astype(np.float32) + y1.astype(np.float32)).astype(dtype)
    y1[:10] = -1
    assert_close(np.asarray(got_x), x1, f"x_ref, {device}")
    assert_close(np.asarray(got_y), y1, f"y_ref, {device}")


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_a_copy_started_in_one_core_map_and_waited_in_the_next(device, dtype, rng):
    """An SMEM ref written by scalar stores is copied into an HBM ref by a DMA whose start and
    wait are in two kernels, on a semaphore from ``pl.empty_ref_like`` (aliased in both)."""
    x = _numbers(rng, 16, dtype)
    with pallas.on_cpu(device=device):
        got = jax.jit(ak.smem_to_hbm_in_two_kernels)(x)
    np.testing.assert_array_equal(np.asarray(got), x[::-1] - np.arange(16, dtype=dtype))


@pytest.mark.parametrize("space", ["smem", "hbm"])
@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_a_copy_into_a_new_ref(device, space, rng):
    """``pltpu.sync_copy`` from one ``jax.new_ref`` into another (SMEM or HBM); in SMEM, then a
    scalar store into the copy."""
    memory_space = {"smem": pltpu.SMEM, "hbm": pltpu.HBM}[space]
    x = _numbers(rng, 16, np.int32)
    with pallas.on_cpu(device=device):
        got = np.asarray(jax.jit(lambda x: ak.copy_between_refs(x, memory_space))(x))
    want = x.copy()
    if space == "smem":
        want[-1] = x[0] * 2
    np.testing.assert_array_equal(got, want)
