"""Refs read through another shape or dtype, as ragged paged attention reads its page buffer:
``ref.reshape`` (``tpu.memref_reshape``), ``ref.bitcast`` (``tpu.memref_bitcast``: f32 ↔ i32
elementwise, bf16 → 32 bits packing row pairs, 32 bits → int16/bf16 splitting rows; every other
pair of 8, 16 and 32 bits is in test_pallas_ref_bitcast_widths.py), strided
reads ``ref[pl.ds(start, n, stride=k)]`` (``tpu.strided_load``) and value bitcasts f32 ↔ i32
(``pltpu.bitcast``, ``lax.bitcast_convert_type``). Each kernel runs on tpukit's ``cpu`` and
``interpret`` against Pallas interpret mode and a numpy reference (conftest.check)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import check
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import pallas

BF16 = ml_dtypes.bfloat16
DTYPES = [np.float32, BF16]


def sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def packed_rows(x):
    """bf16 rows 2r and 2r + 1 of ``x`` as one uint32 row: the even row in the low half."""
    bits = np.asarray(x).view(np.uint16).astype(np.uint32)
    return bits[..., 0::2, :] | (bits[..., 1::2, :] << 16)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshaped_ref_read_by_strided_loads(dtype, rng):
    # [tokens=2x11, heads=4, 128] flattened to rows; stride 4 picks one head of every token
    def kernel(x_ref, o_ref):
        rows = x_ref.reshape(88, 128)
        for h in range(4):
            o_ref[h] = rows[pl.ds(h, 22, stride=4), :] * 2

    x = rng.standard_normal((2, 11, 4, 128)).astype(dtype)
    check(kernel, sds((4, 22, 128), dtype), [x],
          lambda x: np.transpose(np.asarray(x, np.float32) * 2, (2, 0, 1, 3))
          .reshape(4, 22, 128).astype(dtype))


def test_bitcast_ref_packs_bf16_row_pairs(rng):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref.bitcast(jnp.uint32)[...]

    x = rng.standard_normal((18, 256)).astype(BF16)
    check(kernel, sds((9, 256), jnp.uint32), [x], packed_rows)


def split_rows(x, dtype):
    """32-bit rows of ``x`` as two 16-bit rows of ``dtype`` each: the low half first."""
    halves = np.asarray(x).view(np.uint32)
    lo, hi = (halves & 0xFFFF).astype(np.uint16), (halves >> 16).astype(np.uint16)
    return np.stack([lo, hi], axis=-2).reshape(*x.shape[:-2], 2 * x.shape[-2], x.shape[-1]).view(
        dtype)


@pytest.mark.parametrize("dtype", [jnp.int16, jnp.bfloat16])
def test_bitcast_ref_splits_32_bit_rows(dtype, rng):
    # as JAX's test_load_bitcasted_ref: slice then bitcast, and bitcast then slice
    def kernel(x_ref, o_ref, p_ref):
        o_ref[...] = x_ref.at[:8, :128].bitcast(dtype)[...]
        p_ref[...] = x_ref.bitcast(dtype)[4:20, 128:]

    x = rng.integers(-(2**31), 2**31 - 1, (16, 256), dtype=np.int32)
    check(kernel, (sds((16, 128), dtype), sds((16, 128), dtype)), [x],
          lambda x: (split_rows(x[:8, :128], dtype), split_rows(x, dtype)[4:20, 128:]))


def test_bitcast_ref_of_equal_width(rng):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref.bitcast(jnp.int32)[2:10, :]

    x = rng.standard_normal((12, 128)).astype(np.float32)
    check(kernel, sds((8, 128), jnp.int32), [x], lambda x: np.asarray(x).view(np.int32)[2:10])


def test_keys_and_values_read_as_ragged_paged_attention_reads_them(rng):
    # bf16 pages [pages, page_size, combined heads (k0, v0, k1, v1), 128]: reshaped to rows,
    # bitcast to uint32 (a key row and its value row in one word), every other word read;
    # the key is the low half, the value the high half
    def kernel(x_ref, k_ref, v_ref):
        words = x_ref.reshape(60, 128).bitcast(jnp.uint32)
        for head in range(2):
            w = words[pl.ds(head, 15, stride=2), :]
            k_ref[head] = pltpu.bitcast(w << 16, jnp.float32).astype(jnp.bfloat16)
            v_ref[head] = pltpu.bitcast(w & jnp.uint32(0xFFFF0000), jnp.float32).astype(
                jnp.bfloat16)

    x = rng.standard_normal((3, 5, 4, 128)).astype(BF16)

    def reference(x):
        tokens = np.asarray(x).reshape(15, 4, 128)
        return (np.transpose(tokens[:, 0::2], (1, 0, 2)),
                np.transpose(tokens[:, 1::2], (1, 0, 2)))

    check(kernel, (sds((2, 15, 128), BF16), sds((2, 15, 128), BF16)), [x], reference)


def test_value_bitcasts_between_f32_and_i32(rng):
    def kernel(x_ref, i_ref, bits_ref, floats_ref):
        bits_ref[...] = pltpu.bitcast(x_ref[...], jnp.int32) ^ 1
        floats_ref[...] = lax.bitcast_convert_type(i_ref[...], jnp.float32)

    x = rng.standard_normal((8, 128)).astype(np.float32)
    i = rng.standard_normal((8, 128)).astype(np.float32).view(np.int32)
    check(kernel, (sds((8, 128), jnp.int32), sds((8, 128), jnp.float32)), [x, i],
          lambda x, i: (np.asarray(x).view(np.int32) ^ 1, np.asarray(i).view(np.float32)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_loads_of_a_ref(dtype, rng):
    # every 4th row from a dynamic start (a prefetched scalar), every 3rd column of a block
    # whose rows the array does not fill, and every other row of a bf16 ref's uint32 view
    def kernel(start_ref, x_ref, rows_ref, cols_ref):
        rows_ref[...] = x_ref[pl.ds(start_ref[0], 8, stride=4), :] * 2
        cols_ref[...] = x_ref[pl.ds(1, 12, stride=2), pl.ds(2, 40, stride=3)]

    start = np.array([3], np.int32)
    x = rng.standard_normal((37, 128)).astype(dtype)
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(1,),
        in_specs=[pl.BlockSpec((40, 128), lambda i, s: (0, 0))],
        out_specs=[pl.BlockSpec((8, 128), lambda i, s: (0, 0)),
                   pl.BlockSpec((12, 40), lambda i, s: (0, 0))])
    check(kernel, (sds((8, 128), dtype), sds((12, 40), dtype)), [start, x],
          lambda s, x: ((np.asarray(x, np.float32)[3:35:4] * 2).astype(dtype),
                        np.asarray(x)[1:25:2, 2:122:3]),
          grid_spec=grid_spec)


def test_strided_words_of_a_bitcast_ref(rng):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref.bitcast(jnp.uint32)[pl.ds(1, 5, stride=2), :]

    x = rng.standard_normal((20, 128)).astype(BF16)
    check(kernel, sds((5, 128), jnp.uint32), [x], lambda x: packed_rows(x)[1:10:2])


def test_a_stride_inside_a_reshaped_dimension_is_a_clear_error(rng):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref.reshape(64, 128)[pl.ds(1, 8, stride=3), :]

    kernel = pallas.custom_kernel(lambda x: sds((8, 128), x.dtype), kernel)
    x = rng.standard_normal((8, 8, 128)).astype(np.float32)
    with pytest.raises(tpukit.UnsupportedError,
                       match=r"op `tpu.strided_load`: unsupported: a stride of 3 along "
                             r"dimension 0 .* falls inside one dimension .*test_pallas_ref_views"):
        kernel(x)
