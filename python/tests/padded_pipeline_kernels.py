"""A ``pltpu.emit_pipeline`` matmul over arrays its blocks do not divide (issue 13): Pallas
copies each last, partial block in whole tiles, past the array's end into its tiled HBM
layout, sizing it by a choice between two constants in two dimensions at once. Shared by
python/tests/test_pallas_padded_pipeline.py (results on the CPU devices) and
tests/conformance/test_pallas_ops.py (compiled with libtpu): no test imports here."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def padded_matmul_kernel(m, k, n, bm, bk, bn):
    """The kernel body for x (m, k) @ y (k, n) in HBM: an f32 accumulator in scoped VMEM, the
    padding columns of x and rows of y past k masked to 0 (they are not the array's)."""
    def kernel(x_hbm, y_hbm, o_hbm):
        def run(acc):
            def body(x_ref, y_ref, o_ref):
                step = pl.program_id(2)

                @pl.when(step == 0)
                def _():
                    acc[...] = jnp.zeros_like(acc)

                cols = step * bk + jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 1)
                rows = step * bk + jax.lax.broadcasted_iota(jnp.int32, y_ref.shape, 0)
                x = jnp.where(cols < k, x_ref[...], 0)
                y = jnp.where(rows < k, y_ref[...], 0)
                acc[...] += jnp.dot(x, y, preferred_element_type=jnp.float32)

                @pl.when(step == pl.num_programs(2) - 1)
                def _():
                    o_ref[...] = acc[...].astype(o_ref.dtype)

            pltpu.emit_pipeline(
                body, grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), pl.cdiv(k, bk)),
                in_specs=[pl.BlockSpec((bm, bk), lambda i, j, s: (i, s)),
                          pl.BlockSpec((bk, bn), lambda i, j, s: (s, j))],
                out_specs=pl.BlockSpec((bm, bn), lambda i, j, s: (i, j)),
            )(x_hbm, y_hbm, o_hbm)

        pl.run_scoped(run, pltpu.VMEM((bm, bn), jnp.float32))

    return kernel


def padded_matmul(x_shape, y_shape, dtype, blocks):
    """The ``pl.pallas_call`` arguments of `padded_matmul_kernel`: the body and the keyword
    arguments (output shape and HBM specs)."""
    (m, k), (_, n) = x_shape, y_shape
    any_ = pl.BlockSpec(memory_space=pl.ANY)
    return padded_matmul_kernel(m, k, n, *blocks), dict(
        out_shape=jax.ShapeDtypeStruct((m, n), dtype), in_specs=[any_, any_], out_specs=any_)
