"""Layout ops inside Pallas TPU kernels: transposes (``x.T``, ``jnp.transpose``,
``jnp.swapaxes`` → ``tpu.transpose``), ``jnp.concatenate`` (``tpu.concatenate``) and
``pltpu.roll`` by a constant or a traced shift (``tpu.dynamic_rotate``). Each kernel runs on
tpukit's ``cpu`` and ``interpret`` against Pallas interpret mode and a ``jnp`` reference
(conftest.check)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import check
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BF16 = ml_dtypes.bfloat16
DTYPES = [np.float32, BF16]


def sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_of_blocks(dtype, rng):
    # (300, 256) in (128, 128) blocks, the last row block partial; block (i, j) lands at (j, i)
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...].T * 2

    x = rng.standard_normal((300, 256)).astype(dtype)
    check(kernel, sds((256, 300), dtype), [x], lambda x: jnp.asarray(x).T * 2, grid=(3, 2),
          in_specs=[pl.BlockSpec((128, 128), lambda i, j: (i, j))],
          out_specs=pl.BlockSpec((128, 128), lambda i, j: (j, i)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rank_3_transposes(dtype, rng):
    # jnp.transpose with a permutation and jnp.swapaxes of the last two dimensions
    def kernel(x_ref, o_ref, p_ref):
        x = x_ref[...]
        o_ref[...] = jnp.transpose(x, (1, 0, 2))
        p_ref[...] = jnp.swapaxes(x, 1, 2) - 1

    x = rng.standard_normal((3, 16, 128)).astype(dtype)
    check(kernel, (sds((16, 3, 128), dtype), sds((3, 128, 16), dtype)), [x],
          lambda x: (jnp.transpose(x, (1, 0, 2)), jnp.swapaxes(jnp.asarray(x), 1, 2) - 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_concatenate_along_lanes_over_partial_row_blocks(dtype, rng):
    # three operands of different widths; 20 rows in blocks of 8 (the last partial)
    def kernel(x_ref, y_ref, o_ref):
        x, y = x_ref[...], y_ref[...]
        o_ref[...] = jnp.concatenate([x, y, x * 3], axis=1)

    x = rng.standard_normal((20, 128)).astype(dtype)
    y = rng.standard_normal((20, 256)).astype(dtype)
    check(kernel, sds((20, 512), dtype), [x, y],
          lambda x, y: jnp.concatenate([x, y, jnp.asarray(x) * 3], axis=1), grid=(3,),
          in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0)),
                    pl.BlockSpec((8, 256), lambda i: (i, 0))],
          out_specs=pl.BlockSpec((8, 512), lambda i: (i, 0)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_concatenate_along_rows_with_nan_and_infinities(dtype, rng):
    # values are moved, never combined: NaN and infinities stay where they are
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.concatenate([x_ref[...], y_ref[...]], axis=0)

    x = rng.standard_normal((24, 128)).astype(dtype)
    y = rng.standard_normal((24, 128)).astype(dtype)
    x[1, 2], x[9, 7], y[3, 4] = np.nan, np.inf, -np.inf

    def reference(x, y):
        blocks = [jnp.asarray(a).reshape(3, 8, 128) for a in (x, y)]
        return jnp.concatenate(blocks, axis=1).reshape(48, 128)

    check(kernel, sds((48, 128), dtype), [x, y], reference, grid=(3,),
          in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))] * 2,
          out_specs=pl.BlockSpec((16, 128), lambda i: (i, 0)))


@pytest.mark.parametrize("dtype", DTYPES + [np.int32])
def test_roll_by_constants(dtype, rng):
    # pltpu.roll is jnp.roll for a non-negative shift; lanes over partial row blocks
    def kernel(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = pltpu.roll(x, 3, 1) + pltpu.roll(x, 250, 1)

    x = (rng.standard_normal((20, 256)) * 10).astype(dtype)
    check(kernel, sds(x.shape, dtype), [x],
          lambda x: jnp.roll(x, 3, 1) + jnp.roll(x, 250, 1), grid=(3,),
          in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0))],
          out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_roll_of_rows(dtype, rng):
    def kernel(x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], 5, 0)

    x = rng.standard_normal((16, 128)).astype(dtype)
    check(kernel, sds(x.shape, dtype), [x], lambda x: jnp.roll(x, 5, 0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_roll_by_a_traced_shift(dtype, rng):
    # the shift depends on the grid step (and on a prefetched scalar): a dynamic window start
    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], s_ref[0] + pl.program_id(0) * 7, 1)

    x = rng.standard_normal((24, 256)).astype(dtype)
    s = np.array([300], np.int32)
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(3,),
        in_specs=[pl.BlockSpec((8, 256), lambda i, s: (i, 0))],
        out_specs=pl.BlockSpec((8, 256), lambda i, s: (i, 0)))

    def reference(s, x):
        return jnp.concatenate(
            [jnp.roll(x[8 * i:8 * i + 8], int(s[0]) + 7 * i, 1) for i in range(3)])

    check(kernel, sds(x.shape, dtype), [s, x], reference, grid_spec=grid_spec)


@pytest.mark.parametrize("dtype", DTYPES + [np.int32])
def test_static_slices_of_values(dtype, rng):
    # `x[:8]`, `x[8:24]` and a lane range of a loaded value (vector.extract_strided_slice
    # wider than one element), beside a single row `x[3]`, over partial row blocks
    def kernel(x_ref, a_ref, b_ref):
        x = x_ref[...]
        a_ref[...] = x[:8] + x[8:16] * 2 + x[3]
        b_ref[...] = x[16:24, 128:256] - x[:8, :128]

    x = (rng.standard_normal((60, 256)) * 10).astype(dtype)

    def reference(x):
        # in `dtype`, rounding after each op as the kernel does
        blocks = jnp.pad(jnp.asarray(x), ((0, 4), (0, 0))).reshape(2, 32, 256)
        a = blocks[:, :8] + blocks[:, 8:16] * 2 + blocks[:, 3:4]
        b = blocks[:, 16:24, 128:] - blocks[:, :8, :128]
        return a.reshape(16, 256), b.reshape(16, 128)

    check(kernel, (sds((16, 256), dtype), sds((16, 128), dtype)), [x], reference, grid=(2,),
          in_specs=[pl.BlockSpec((32, 256), lambda i: (i, 0))],
          out_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0)),
                     pl.BlockSpec((8, 128), lambda i: (i, 0))])


@pytest.mark.parametrize("dtype", DTYPES + [np.int32])
def test_rolls_of_rows_and_lanes_by_traced_shifts(dtype, rng):
    # traced shifts beyond the extent and below zero roll modulo it, as jnp.roll does; the
    # TPU lowering is Mosaic's tpu.dynamic_rotate (tests/conformance/test_pallas_ops.py)
    def kernel(s_ref, x_ref, o_ref, p_ref):
        x = x_ref[...]
        o_ref[...] = pltpu.roll(x, s_ref[0], 0)
        p_ref[...] = pltpu.roll(x, s_ref[1] - pl.program_id(0) * 50, 1)

    x = (rng.standard_normal((32, 384)) * 10).astype(dtype)
    s = np.array([-3, 1000], np.int32)
    block = pl.BlockSpec((16, 384), lambda i, s: (i, 0))
    grid_spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(2,), in_specs=[block],
                                             out_specs=[block, block])

    def reference(s, x):
        blocks = [x[16 * i:16 * i + 16] for i in range(2)]
        return (jnp.concatenate([jnp.roll(b, int(s[0]), 0) for b in blocks]),
                jnp.concatenate([jnp.roll(b, int(s[1]) - 50 * i, 1)
                                 for i, b in enumerate(blocks)]))

    check(kernel, (sds(x.shape, dtype), sds(x.shape, dtype)), [s, x], reference,
          grid_spec=grid_spec)
