"""Real Pallas kernels, lowered by JAX for TPU, imported and run by tpukit on cpu and
interpret, compared with Pallas interpret mode and a jnp reference (see conftest.check)."""

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import check
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpukit import pallas

BF16 = ml_dtypes.bfloat16


def sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def rows(block):
    """A BlockSpec of ``block`` walking down the rows with grid axis 0."""
    return pl.BlockSpec(block, lambda i: (i, 0))


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_elementwise(dtype, rng):
    def kernel(x_ref, y_ref, o_ref):
        x = x_ref[...].astype(jnp.float32)
        y = y_ref[...].astype(jnp.float32)
        o_ref[...] = (jnp.tanh(x) * 2.0 + jnp.exp(-y * y) - jnp.maximum(x, y)).astype(o_ref.dtype)

    block = (16, 128)
    x = rng.standard_normal((64, 256)).astype(dtype)
    y = rng.standard_normal((64, 256)).astype(dtype)

    def reference(x, y):
        xf, yf = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
        return (jnp.tanh(xf) * 2.0 + jnp.exp(-yf * yf) - jnp.maximum(xf, yf)).astype(dtype)

    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    check(kernel, sds(x.shape, dtype), [x, y], reference,
          grid=(4, 2), in_specs=[spec, spec], out_specs=spec)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
@pytest.mark.parametrize("shape", [(1024, 1024), (1000, 1000)])
def test_narrow_blocks_of_large_arrays(dtype, shape, rng):
    """(8, 128) blocks of large arrays under Pallas's default (`arbitrary`) semantics: the CPU
    backend runs the steps coalesced into row-wide blocks where the blocks divide the rows,
    and split over its threads (the steps write disjoint blocks); every element is numpy's."""
    def kernel(x_ref, y_ref, o_ref):
        x = x_ref[...].astype(jnp.float32)
        y = y_ref[...].astype(jnp.float32)
        o_ref[...] = (jnp.maximum(x, y) * 2.0 - y).astype(o_ref.dtype)

    m, n = shape
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    add = pallas.custom_kernel(lambda x, y: sds(shape, dtype), kernel,
                               grid=(pl.cdiv(m, 8), pl.cdiv(n, 128)),
                               in_specs=[spec, spec], out_specs=spec)
    x, y = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    want = (np.maximum(xf, yf) * np.float32(2.0) - yf).astype(dtype)
    for _ in range(2):  # the full path, then the plan
        got = add(x, y)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_row_softmax(dtype, rng):
    def kernel(x_ref, o_ref):
        x = x_ref[...].astype(jnp.float32)
        e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
        o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)

    x = (rng.standard_normal((32, 256)) * 3).astype(dtype)
    check(kernel, sds(x.shape, dtype), [x],
          lambda x: jax.nn.softmax(jnp.asarray(x, jnp.float32), axis=-1).astype(dtype),
          grid=(2,), in_specs=[rows((16, 256))], out_specs=rows((16, 256)))


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_reused_cheap_values_see_memory_as_it_was(dtype, rng):
    """Values cheap enough to be recomputed at each use (a cast, a mask, a shift) are not
    stored where they are defined: they must still read refs as they were then, not after
    a later store to the same ref."""

    def kernel(x_ref, o_ref, p_ref):
        o_ref[...] = x_ref[...]
        v = o_ref[...].astype(jnp.float32)  # read before the store below; used twice
        keep = jax.lax.broadcasted_iota(jnp.int32, v.shape, 1) < 100
        shifted = jnp.where(keep, v - 1.0, 0.0)  # used twice
        o_ref[...] = (v * 3.0).astype(o_ref.dtype)
        p_ref[...] = (v + shifted * shifted + jnp.where(keep, 1.0, 2.0)).astype(p_ref.dtype)

    x = rng.standard_normal((32, 256)).astype(dtype)

    def reference(x):
        v = jnp.asarray(x, jnp.float32)
        keep = jnp.arange(256)[None, :] < 100
        shifted = jnp.where(keep, v - 1.0, 0.0)
        return (v * 3.0).astype(dtype), (v + shifted * shifted + jnp.where(keep, 1.0, 2.0)).astype(
            dtype
        )

    spec = rows((16, 256))
    check(kernel, (sds(x.shape, dtype), sds(x.shape, dtype)), [x], reference,
          grid=(2,), in_specs=[spec], out_specs=(spec, spec))


def test_layer_norm(rng):
    def kernel(x_ref, g_ref, b_ref, o_ref):
        x = x_ref[...]
        mean = jnp.mean(x, axis=-1, keepdims=True)
        centered = x - mean
        var = jnp.mean(centered * centered, axis=-1, keepdims=True)
        o_ref[...] = centered * jax.lax.rsqrt(var + 1e-5) * g_ref[...] + b_ref[...]

    x = rng.standard_normal((24, 256)).astype(np.float32)
    g = rng.standard_normal((1, 256)).astype(np.float32)
    b = rng.standard_normal((1, 256)).astype(np.float32)

    def reference(x, g, b):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * g + b

    whole_row = pl.BlockSpec((1, 256), lambda i: (0, 0))
    check(kernel, sds(x.shape, np.float32), [x, g, b], reference,
          grid=(3,), in_specs=[rows((8, 256)), whole_row, whole_row], out_specs=rows((8, 256)))


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref, *, k_steps):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == k_steps - 1)
    def _finalize():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_blocked_matmul_with_scratch_accumulator(dtype, rng):
    m, k, n, bm, bk, bn = 256, 384, 256, 128, 128, 128
    x = rng.standard_normal((m, k)).astype(dtype)
    y = rng.standard_normal((k, n)).astype(dtype)
    k_steps = k // bk

    def reference(x, y):
        return jnp.dot(jnp.asarray(x), jnp.asarray(y), preferred_element_type=jnp.float32,
                       precision=jax.lax.Precision.HIGHEST).astype(dtype)

    # f32 sums of 384 products in another order: relative error ~1e-6 of the sum's terms.
    tolerance = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else None
    check(functools.partial(matmul_kernel, k_steps=k_steps), sds((m, n), dtype), [x, y],
          reference, tolerance,
          grid=(m // bm, n // bn, k_steps),
          in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                    pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
          out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
          scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
          compiler_params=pltpu.CompilerParams(
              dimension_semantics=("parallel", "parallel", "arbitrary")))


def test_accumulator_in_an_output_every_parallel_step_revisits(rng):
    """Row blocks i (a `parallel` axis) each sum their column blocks j into a (64, 1024)
    accumulator *output* whose index map ignores i (as splash attention keeps its running max
    and sum), then write their row: the cpu backend must not let threads that split i share
    the accumulator (each gets its own; the caller's ends as the last row block's). Repeated
    so that a race would show."""
    x = rng.standard_normal((512, 8192)).astype(np.float32)

    def kernel(x_ref, o_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _zero():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += x_ref[...]

        @pl.when(j == pl.num_programs(1) - 1)
        def _write():
            o_ref[...] = acc_ref[...]

    def reference(x):
        rows = x.reshape(8, 64, 8, 1024).sum(axis=2).reshape(512, 1024)
        return rows, rows[-64:]  # the accumulator ends as the last row block's sum

    for _ in range(5):
        out = check(kernel, (sds((512, 1024), jnp.float32), sds((64, 1024), jnp.float32)),
                    [x], reference, dict(rtol=1e-5, atol=1e-5), grid=(8, 8),
                    in_specs=[pl.BlockSpec((64, 1024), lambda i, j: (i, j))],
                    out_specs=(pl.BlockSpec((64, 1024), lambda i, j: (i, 0)),
                               pl.BlockSpec((64, 1024), lambda i, j: (0, 0))),
                    compiler_params=pltpu.CompilerParams(
                        dimension_semantics=("parallel", "arbitrary")))
    np.testing.assert_allclose(out[1], reference(x)[1], rtol=1e-5, atol=1e-5)


def test_fori_loop_with_dynamic_slices(rng):
    def kernel(x_ref, o_ref):
        def body(j, acc):
            return acc + x_ref[pl.ds(j * 8, 8), :] * (j + 1).astype(jnp.float32)

        acc = jax.lax.fori_loop(0, 4, body, jnp.zeros((8, 128), jnp.float32))
        o_ref[...] = acc + x_ref[pl.ds(8, 8), :]

    x = rng.standard_normal((64, 128)).astype(np.float32)

    def reference(x):
        chunks = x.reshape(2, 4, 8, 128)
        weights = np.arange(1, 5, dtype=np.float32)[None, :, None, None]
        return ((chunks * weights).sum(1) + chunks[:, 1]).reshape(16, 128)

    check(kernel, sds((16, 128), np.float32), [x], reference,
          grid=(2,), in_specs=[rows((32, 128))], out_specs=rows((8, 128)))


def test_masked_store(rng):
    def kernel(x_ref, o_ref):
        col = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1)
        o_ref[...] = jnp.full((8, 128), -1.0, jnp.float32)
        pltpu.store(o_ref, x_ref[...] * 3.0, mask=col < 100)

    x = rng.standard_normal((16, 128)).astype(np.float32)

    def reference(x):
        return np.where(np.arange(128)[None, :] < 100, x * 3.0, -1.0).astype(np.float32)

    check(kernel, sds(x.shape, np.float32), [x], reference,
          grid=(2,), in_specs=[rows((8, 128))], out_specs=rows((8, 128)))


def test_scalar_prefetch_gather(rng):
    def kernel(idx_ref, x_ref, o_ref):
        i = pl.program_id(0)
        o_ref[...] = x_ref[...] + idx_ref[i].astype(jnp.float32)

    idx = np.array([3, 0, 2, 2], np.int32)
    x = rng.standard_normal((32, 128)).astype(np.float32)

    def reference(idx, x):
        blocks = x.reshape(4, 8, 128)[idx] + idx[:, None, None].astype(np.float32)
        return blocks.reshape(32, 128)

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0)),
    )
    check(kernel, sds((32, 128), np.float32), [idx, x], reference, grid_spec=grid_spec)


def test_where_and_iota_mask(rng):
    def kernel(x_ref, o_ref):
        x = x_ref[...]
        col = jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)
        o_ref[...] = jnp.where((col < 100) & (x > 0), x, 0.0)

    x = rng.standard_normal((8, 128)).astype(np.float32)
    check(kernel, sds(x.shape, np.float32), [x],
          lambda x: np.where((np.arange(128) < 100) & (x > 0), x, 0.0).astype(np.float32))


def test_seed_example_on_numpy():
    """TorchTPU's add_vectors with numpy placeholders: whole 1-D arrays of 3 elements (the
    torch version is in test_torch.py)."""
    import tpukit

    @pallas.custom_kernel(lambda x, y: np.empty_like(x))
    def add_vectors(x_ref, y_ref, o_ref):
        x, y = x_ref[...], y_ref[...]
        o_ref[...] = x + y

    x = np.array([0.1, 0.2, 0.3], np.float32)
    y = np.array([0.4, 0.5, 0.6], np.float32)
    for device in tpukit.DEVICES:
        np.testing.assert_array_equal(add_vectors(x, y, device=device), x + y)
    assert "tpu_custom_call" in add_vectors.lower(x, y)
