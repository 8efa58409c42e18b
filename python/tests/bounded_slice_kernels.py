"""``pltpu.emit_pipeline`` over blocks of a traced number of rows (``pl.BoundedSlice``): the
pipeline copies each block into a slot of its buffer sliced to the block's rows, a view of
traced size that it squeezes (``tpu.memref_squeeze`` of a ``memref<1x?x…>``). Run on the CPU
devices in test_pallas_bounded_slices.py, compiled with libtpu in
tests/conformance/test_pallas_ops.py."""

import functools

import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _scaled(x_ref, o_ref):
    o_ref[...] = (x_ref[...].astype(jnp.float32) * 2 + 1).astype(o_ref.dtype)


def scaled_row_ranges(x, ranges, max_rows):
    """``x * 2 + 1`` over the rows of ``x`` (rows, sublanes, lanes) that the int32 ``ranges``
    (one ``[start, stop)`` per grid step, at most ``max_rows`` rows each, read from SMEM)
    cover; the other rows of the result are left as ``pl.empty_like`` makes them."""

    def main(refs):
        x_ref, o_ref, ranges_ref = refs

        @pl.core_map(pltpu.create_tensorcore_mesh("core"))
        def _():
            @functools.partial(pl.run_scoped,
                               ranges_smem=pltpu.SMEM(ranges.shape, ranges.dtype))
            def _(ranges_smem):
                pltpu.sync_copy(ranges_ref, ranges_smem)

                def rows(i):
                    start = ranges_smem[i, 0]
                    return (pl.ds(start, ranges_smem[i, 1] - start), 0, 0)

                spec = pl.BlockSpec((pl.BoundedSlice(max_rows), *x.shape[1:]), rows)
                pltpu.emit_pipeline(_scaled, grid=(ranges.shape[0],), in_specs=(spec,),
                                    out_specs=spec)(x_ref, o_ref)

    _, y, _ = pl.run_state(main)((x, pl.empty_like(x), ranges))
    return y


def scaled_rows_at(x, start, rows):
    """``x[start:start + rows] * 2 + 1``: one block of ``rows`` rows at a static start, read
    as a bounded slice into a block of the whole result."""
    out_shape = (rows, *x.shape[1:])

    def main(refs):
        x_ref, o_ref = refs

        @pl.core_map(pltpu.create_tensorcore_mesh("core"))
        def _():
            pltpu.emit_pipeline(
                _scaled, grid=(1,),
                in_specs=(pl.BlockSpec((pl.BoundedSlice(rows), *x.shape[1:]),
                                       lambda i: (pl.ds(start, rows), 0, 0)),),
                out_specs=pl.BlockSpec(out_shape, lambda i: (0, 0, 0)),
            )(x_ref, o_ref)

    _, y = pl.run_state(main)((x, jnp.zeros(out_shape, x.dtype)))
    return y
