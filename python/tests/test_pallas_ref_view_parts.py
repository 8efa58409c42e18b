"""Stores into part of a reshaped or bitcast ref, and refs seen through several views in a
row (bitcast, reshape, slice, bitcast back), on both devices against numpy (issue 13).
Pallas's interpret mode cannot store through such refs (its discharge raises
NotImplementedError), so numpy is the reference: a bitcast between 32 and 16 bits pairs
16-bit rows 2r and 2r + 1 along the second-minor dimension, the even row in the low half, as
Mosaic does."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close
from jax import lax
from jax.experimental import pallas as pl

import tpukit
from tpukit import DEVICES, pallas

BF16 = ml_dtypes.bfloat16
EXACT = dict(rtol=0, atol=0)


def sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def check(body, out_shape, args, reference, tolerance=None, **call_kwargs):
    kernel = pallas.custom_kernel(lambda *a: out_shape, body, **call_kwargs)
    want = reference(*args)
    single = not isinstance(want, tuple)
    for device in DEVICES:
        got = kernel(*args, device=device)
        pairs = [(got, want)] if single else zip(got, want, strict=True)
        for i, (g, w) in enumerate(pairs):
            assert_close(g, w, f"tpukit {device}, output {i}", tolerance)


def pack(x16):
    """16-bit rows 2r and 2r + 1 of ``x16`` as one uint32 row, the even row in the low half."""
    bits = np.asarray(x16).view(np.uint16).astype(np.uint32)
    return bits[..., 0::2, :] | (bits[..., 1::2, :] << 16)


def unpack(x32, dtype):
    """32-bit rows of ``x32`` as two 16-bit rows of ``dtype`` each, the low half first."""
    w = np.asarray(x32).view(np.uint32)
    pairs = np.stack([w & 0xFFFF, w >> 16], axis=-2).astype(np.uint16)
    return pairs.reshape(*w.shape[:-2], 2 * w.shape[-2], w.shape[-1]).view(dtype)


def random_bits(rng, shape):
    return rng.integers(-(2**31), 2**31 - 1, shape, dtype=np.int64).astype(np.int32)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_stores_into_leading_rows_of_a_reshaped_ref(dtype, rng):
    # (4, 8, 128) seen as (32, 128): rows 0..8, 8..24 and 24..32 are whole window rows
    def kernel(x_ref, o_ref):
        rows = o_ref.reshape(32, 128)
        rows[:8] = x_ref[:8] * 2
        rows[pl.ds(8, 16)] = x_ref[8:24] + 1
        rows[24:, :] = -x_ref[24:]

    x = rng.standard_normal((32, 128)).astype(dtype)

    def reference(x):
        f = np.asarray(x, np.float32)
        return np.concatenate([f[:8] * 2, f[8:24] + 1, -f[24:]]).astype(dtype).reshape(4, 8, 128)

    check(kernel, sds((4, 8, 128), dtype), [x], reference)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_stores_into_a_reshaped_ref_of_a_grid_block(dtype, rng):
    # the (1, 24, 128) block seen as (3, 8, 128), stored one (8, 128) slab at a time; the
    # array's 40 rows leave the last block short
    def kernel(x_ref, o_ref):
        slabs = o_ref.reshape(3, 8, 128)
        for j in range(3):
            slabs[j] = x_ref[0, pl.ds(8 * j, 8), :] * (j + 1)

    x = rng.standard_normal((2, 24, 128)).astype(dtype)
    scale = np.repeat(np.arange(1, 4, dtype=np.float32), 8)[None, :, None]
    check(kernel, sds((2, 24, 128), dtype), [x],
          lambda x: (np.asarray(x, np.float32) * scale).astype(dtype),
          grid=(2,), in_specs=[pl.BlockSpec((1, 24, 128), lambda i: (i, 0, 0))],
          out_specs=pl.BlockSpec((1, 24, 128), lambda i: (i, 0, 0)))


def test_stores_into_a_bitcast_ref_at_traced_starts(rng):
    def kernel(x_ref, o_ref):
        words = o_ref.bitcast(jnp.int32)

        def body(i, carry):
            words[pl.ds(i * 8, 8), :] = x_ref[pl.ds(i * 8, 8), :] ^ i
            return carry

        lax.fori_loop(0, 4, body, 0)

    x = random_bits(rng, (32, 128))
    i = np.repeat(np.arange(4, dtype=np.int32), 8)[:, None]
    check(kernel, sds((32, 128), np.float32), [x], lambda x: (x ^ i).view(np.float32), EXACT)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.int16])
def test_stores_into_a_32_bit_ref_bitcast_to_16_bits(dtype, rng):
    # as JAX's test_store_bitcasted_ref (slice then bitcast, bitcast then slice), and a part
    # of whole row pairs
    def kernel(x_ref, o_ref, p_ref):
        o_ref[...] = jnp.zeros(o_ref.shape, jnp.int32)
        o_ref.at[:8, :128].bitcast(dtype)[...] = x_ref[...]
        o_ref.bitcast(dtype)[4:12, 128:] = x_ref[2:10]
        p_ref.bitcast(dtype)[...] = x_ref[...]

    np_dtype = np.dtype(BF16) if dtype == jnp.bfloat16 else np.int16
    if np_dtype == np.int16:
        x = rng.integers(-(2**15), 2**15 - 1, (16, 128)).astype(np.int16)
    else:
        x = rng.standard_normal((16, 128)).astype(BF16)

    def reference(x):
        o = np.zeros((16, 256), np.uint32)
        o[:8, :128] = pack(x)
        o[2:6, 128:] = pack(x[2:10])
        return o.view(np.int32), pack(x).view(np.int32)

    check(kernel, (sds((16, 256), jnp.int32), sds((8, 128), jnp.int32)), [x], reference, EXACT)


def test_stores_into_a_bf16_ref_bitcast_to_32_bits(rng):
    # a bf16 ref seen as uint32 words, each two bf16 rows: whole, a static part, and a part
    # at a traced start
    def kernel(w_ref, o_ref, p_ref):
        o_ref.bitcast(jnp.uint32)[...] = w_ref[...]
        words = p_ref.bitcast(jnp.uint32)
        words[0:2] = w_ref[6:8]

        def body(i, carry):
            words[pl.ds(2 + 2 * i, 2), :] = w_ref[pl.ds(2 * i, 2), :]
            return carry

        lax.fori_loop(0, 3, body, 0)

    w = pack(rng.standard_normal((16, 256)).astype(BF16))

    def reference(w):
        return unpack(w, BF16), unpack(np.concatenate([w[6:8], w[:6]]), BF16)

    check(kernel, (sds((16, 256), BF16), sds((16, 256), BF16)), [w], reference, EXACT)


def test_a_chain_of_ref_views_reads_and_stores(rng):
    # i32 (32, 256) -> int16 (64, 256) -> (4, 16, 256) -> bf16 -> [2:] -> (32, 256)
    # -> [:, 128:] -> i32 (16, 128): rows 16.. and columns 128.. of the input
    def view(ref):
        return (ref.bitcast(jnp.int16).reshape(4, 16, 256).bitcast(jnp.bfloat16).at[2:]
                .reshape(32, 256).at[:, 128:].bitcast(jnp.int32))

    def kernel(x_ref, o_ref, p_ref):
        o_ref[...] = view(x_ref)[...] + 1
        p_ref[...] = jnp.zeros(p_ref.shape, jnp.int32)
        view(p_ref)[4:12] = x_ref[:8, :128]

    x = random_bits(rng, (32, 256))

    def reference(x):
        p = np.zeros((32, 256), np.int32)
        p[20:28, 128:] = x[:8, :128]
        return x[16:, 128:] + 1, p

    check(kernel, (sds((16, 128), jnp.int32), sds((32, 256), jnp.int32)), [x], reference,
          EXACT)


def refused(kernel, out_shape, x, match):
    k = pallas.custom_kernel(kernel, out_shape=out_shape)
    with pytest.raises(tpukit.UnsupportedError, match=match + r".*ref_view_parts"):
        k(x)


def test_a_store_of_half_a_row_pair_is_refused_by_name():
    def kernel(x_ref, o_ref):
        o_ref.bitcast(jnp.bfloat16)[1:3] = x_ref[...]

    refused(kernel, sds((8, 128), jnp.int32), np.zeros((2, 128), BF16),
            r"`tpu.vector_store`: .*an access of 2 rows from 1 of a 32-bit ref bitcast to bf16 "
            r"\(whole groups of 2 rows")


def test_a_store_at_a_traced_start_into_a_reshaped_ref(rng):
    # (more in test_pallas_view_store_starts.py)
    def kernel(x_ref, o_ref):
        lax.fori_loop(0, 2, lambda i, c: o_ref.reshape(16, 128).__setitem__(
            (pl.ds(i * 8, 8), slice(None)), x_ref[...] * (i + 1).astype(jnp.float32)) or c, 0)

    x = rng.standard_normal((8, 128)).astype(np.float32)
    check(kernel, sds((2, 8, 128), jnp.float32), [x], lambda x: np.stack([x, 2 * x]))


def test_a_traced_start_into_a_reshaped_ref_off_its_rows_is_refused_by_name():
    def kernel(x_ref, o_ref):
        lax.fori_loop(0, 2, lambda i, c: o_ref.reshape(16, 128).__setitem__(
            (pl.ds(i * 8, 8), pl.ds(0, 64)), x_ref[...]) or c, 0)

    refused(kernel, sds((2, 8, 128), jnp.float32), np.zeros((8, 64), np.float32),
            r"a dynamic start in a store into a reshaped ref")


def test_a_store_across_window_rows_of_a_reshaped_ref_is_refused_by_name():
    def kernel(x_ref, o_ref):
        o_ref.reshape(4, 4, 128)[1:3] = x_ref[...]

    refused(kernel, sds((2, 8, 128), jnp.float32), np.zeros((2, 4, 128), np.float32),
            r"`tpu.vector_store`: .*dimension 0 of the access crosses dimensions of the window "
            r"\[2, 8, 128\] partly")
