"""Pallas TPU kernels with SMEM scratch (``scratch_shapes=[pltpu.SMEM(...)]``) and
``pl.run_scoped`` SMEM buffers, shared by python/tests/test_pallas_smem_scratch.py (results on
the CPU devices) and tests/conformance/test_pallas_ops.py (compiled with libtpu, the buffers
in SMEM): no test imports here."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def running_row_sums(x_ref, o_ref, total):
    """Across an ``arbitrary`` grid, an SMEM scratch scalar keeps the running sum of the first
    element of every block; each output block is its block plus the sum so far."""
    @pl.when(pl.program_id(0) == 0)
    def _():
        total[0] = jnp.zeros((), total.dtype)

    x = x_ref[...].astype(jnp.float32)  # a TPU takes one element of 32-bit vectors only
    total[0] = total[0] + x[0, 0]
    o_ref[...] = (x + total[0]).astype(o_ref.dtype)


def scoped_counts(x_ref, o_ref):
    """A ``pl.run_scoped`` SMEM buffer of per-row scales, filled by a loop of scalar stores
    and read back per row."""
    rows = x_ref.shape[0]

    def body(scales):
        def fill(i, carry):
            scales[i] = (i % 3 + 1).astype(scales.dtype)
            return carry

        jax.lax.fori_loop(0, rows, fill, 0)
        for i in range(rows):
            o_ref[pl.ds(i, 1), :] = x_ref[pl.ds(i, 1), :] * scales[i].astype(o_ref.dtype)

    pl.run_scoped(body, pltpu.SMEM((rows,), jnp.int32))
