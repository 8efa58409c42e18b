"""``pltpu.emit_pipeline`` over arrays its blocks divide in neither dimension (issue 13):
each last, partial block is copied in whole tiles (its size one of two constants, in two
dimensions at once: one static copy per choice), reaching past the array's end into the
tiles of its TPU layout, where a copy reads 0 and drops its writes. On both devices against
numpy, f32 and bf16 (kernels in padded_pipeline_kernels.py, compiled with libtpu in
tests/conformance/test_pallas_ops.py)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import padded_pipeline_kernels as pk
import pytest
from conftest import assert_close
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import DEVICES, pallas


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize(("m", "k", "n", "blocks"), [
    (20, 200, 136, (16, 128, 128)),     # remainders 4, 72, 8: tiles past every end
    (37, 300, 270, (32, 128, 256)),
    (24, 384, 384, (16, 256, 256)),     # remainders that are whole tiles
])
def test_a_pipelined_matmul_of_shapes_the_blocks_do_not_divide(dtype, m, k, n, blocks, rng):
    x = rng.standard_normal((m, k)).astype(dtype)
    y = rng.standard_normal((k, n)).astype(dtype)
    body, kwargs = pk.padded_matmul(x.shape, y.shape, dtype, blocks)
    kernel = pallas.custom_kernel(body, **kwargs)
    want = (x.astype(np.float32) @ y.astype(np.float32)).astype(dtype)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=2e-2, atol=5e-2)
    for device in DEVICES:
        assert_close(kernel(x, y, device=device), want, f"tpukit {device}", tol)


def test_a_copy_past_the_tiles_of_an_array_is_an_error():
    def body(x_hbm, o_hbm, buf, sem):
        i = pl.program_id(0)
        pltpu.sync_copy(x_hbm.at[pl.ds(i * 16, 16)], buf)  # rows 16..32 of 20: past 24
        pltpu.sync_copy(buf.at[:8], o_hbm)

    any_ = pl.BlockSpec(memory_space=pl.ANY)
    k = pallas.custom_kernel(body, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                             grid=(2,), in_specs=[any_],
                             out_specs=any_,
                             scratch_shapes=[pltpu.VMEM((16, 128), jnp.float32),
                                             pltpu.SemaphoreType.DMA])
    for device in DEVICES:
        with pytest.raises(tpukit.TpukitError, match="outside"):
            k(np.zeros((20, 128), np.float32), device=device)
