"""SMEM scratch (``scratch_shapes=[pltpu.SMEM(...)]``) and ``pl.run_scoped`` SMEM buffers
(issue 13): scalar state read and written one element at a time; on both devices against
numpy (kernels in smem_scratch_kernels.py; tests/conformance/test_pallas_ops.py compiles them
with libtpu, the buffers lowered as SMEM memrefs)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import smem_scratch_kernels as sk
from conftest import assert_close
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpukit import DEVICES, pallas


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_smem_scratch_carries_a_running_sum_across_grid_steps(dtype, rng):
    x = rng.standard_normal((40, 128)).astype(dtype)
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    k = pallas.custom_kernel(
        sk.running_row_sums, out_shape=jax.ShapeDtypeStruct(x.shape, dtype), grid=(5,),
        in_specs=[spec], out_specs=spec, scratch_shapes=[pltpu.SMEM((1,), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))
    firsts = x[::8, 0].astype(np.float32)
    sums = np.cumsum(firsts)
    want = (x.astype(np.float32).reshape(5, 8, 128) + sums[:, None, None]).astype(dtype)
    want = want.reshape(40, 128)
    text = str(k.kernel(x))
    assert "f32[1] smem" in text, text
    for device in DEVICES:
        assert_close(k(x, device=device), want, f"tpukit {device}")


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_scoped_smem_buffer(dtype, rng):
    x = rng.standard_normal((13, 256)).astype(dtype)
    k = pallas.custom_kernel(sk.scoped_counts, out_shape=jax.ShapeDtypeStruct(x.shape, dtype))
    scales = (np.arange(13) % 3 + 1).astype(np.float32)
    want = (x.astype(np.float32) * scales[:, None]).astype(dtype)
    assert "i32[13] smem" in str(k.kernel(x))
    for device in DEVICES:
        assert_close(k(x, device=device), want, f"tpukit {device}")
