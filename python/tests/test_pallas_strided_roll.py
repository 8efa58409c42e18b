"""Strided rotations (`pltpu.roll(x, shift, axis, stride=k, stride_axis=e)`, Mosaic's
`tpu.dynamic_rotate` with a stride: slice `j` along `e` rolled by `shift + j * k`), by
constant and traced shifts, on both devices against numpy (issue 13)."""

import jax
import ml_dtypes
import numpy as np
import pytest
from conftest import check
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpukit import DEVICES, pallas

DTYPES = [np.float32, ml_dtypes.bfloat16, np.int32]


def strided_roll(x, shift, axis, stride, stride_axis):
    """numpy's: slice `j` along `stride_axis` rolled by `shift + j * stride` along `axis`."""
    pieces = np.split(x, x.shape[stride_axis], axis=stride_axis)
    return np.concatenate([np.roll(p, shift + j * stride, axis=axis)
                           for j, p in enumerate(pieces)], axis=stride_axis)


def sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shift", "stride"), [(0, 1), (3, 5), (130, 17)])
def test_lanes_rolled_by_a_stride_per_row(dtype, shift, stride, rng):
    def kernel(x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], shift, 1, stride=stride, stride_axis=0)

    x = (rng.standard_normal((8, 256)) * 100).astype(dtype)
    check(kernel, sds(x.shape, dtype), [x], lambda x: strided_roll(x, shift, 1, stride, 0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_rolled_by_a_stride_per_lane_and_a_traced_shift(dtype, rng):
    def kernel(s_ref, x_ref, o_ref):
        shift = s_ref[0] + pl.program_id(0)
        o_ref[...] = pltpu.roll(x_ref[...], shift, 0, stride=3, stride_axis=1)

    x = (rng.standard_normal((32, 128)) * 100).astype(dtype)
    s = np.array([37], np.int32)
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(2,),
        in_specs=[pl.BlockSpec((16, 128), lambda i, s: (i, 0))],
        out_specs=pl.BlockSpec((16, 128), lambda i, s: (i, 0)))

    want = np.concatenate([strided_roll(x[16 * i:16 * i + 16], int(s[0]) + i, 0, 3, 1)
                           for i in range(2)])
    # numpy only: Pallas's interpret mode takes seconds over 128 slices
    k = pallas.custom_kernel(lambda s, x: sds(x.shape, x.dtype), kernel, grid_spec=grid_spec)
    for device in DEVICES:
        np.testing.assert_array_equal(k(s, x, device=device), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lanes_rolled_by_a_stride_per_row_and_traced_shifts(dtype, rng):
    # a negative traced shift and a stride beyond the extent roll modulo it; the TPU lowering
    # is Mosaic's strided tpu.dynamic_rotate (tests/conformance/test_pallas_ops.py)
    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], s_ref[0] - pl.program_id(0) * 9, 1, stride=300,
                                stride_axis=0)

    x = (rng.standard_normal((16, 256)) * 100).astype(dtype)
    s = np.array([-5], np.int32)
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(2,),
        in_specs=[pl.BlockSpec((8, 256), lambda i, s: (i, 0))],
        out_specs=pl.BlockSpec((8, 256), lambda i, s: (i, 0)))
    check(kernel, sds(x.shape, dtype), [s, x],
          lambda s, x: np.concatenate([strided_roll(np.asarray(x[8 * i:8 * i + 8]),
                                                    int(s[0]) - 9 * i, 1, 300, 0)
                                       for i in range(2)]),
          grid_spec=grid_spec)
