"""Writes the Mosaic bodies of a few Pallas kernels and the StableHLO of a few pure JAX functions
(stablehlo_*.mlir), as tpukit's Python side hands them over, into importer/tests/import/.

Each Mosaic file starts with two comment lines giving the custom call's operand and result types.
Run from the repository root: ``.venv/bin/python python/tools/import_fixtures.py``.
"""

import functools
import pathlib

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpukit import _lowering

OUT = pathlib.Path("importer/tests/import")


def softmax(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def matmul(x_ref, y_ref, o_ref, acc_ref, *, k_steps):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == k_steps - 1)
    def _finalize():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def gather(idx_ref, x_ref, o_ref):
    def body(j, acc):
        return acc + x_ref[pl.ds(j * 8, 8), :]

    acc = jax.lax.fori_loop(0, 2, body, jnp.zeros((8, 128), jnp.float32))
    o_ref[...] = acc + idx_ref[pl.program_id(0)].astype(jnp.float32)


def fixtures():
    f32, bf16 = jnp.float32, jnp.bfloat16
    sds = jax.ShapeDtypeStruct
    yield "softmax", lambda x: pl.pallas_call(
        softmax, out_shape=sds(x.shape, x.dtype), grid=(2,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))(x), [sds((16, 128), f32)]
    yield "matmul", lambda x, y: pl.pallas_call(
        functools.partial(matmul, k_steps=2), out_shape=sds((256, 256), bf16), grid=(2, 2, 2),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                  pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
        scratch_shapes=[pltpu.VMEM((128, 128), f32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")))(x, y), [
        sds((256, 256), bf16), sds((256, 256), bf16)]
    yield "gather", lambda idx, x: pl.pallas_call(
        gather, out_shape=sds((32, 128), f32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(4,),
            in_specs=[pl.BlockSpec((16, 128), lambda i, idx: (idx[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0))))(idx, x), [
        sds((4,), jnp.int32), sds((64, 128), f32)]
    yield "extract", lambda x: pl.pallas_call(
        extract, out_shape=sds(x.shape, x.dtype))(x), [sds((8, 128), f32)]
    yield "nan_tests", lambda x: pl.pallas_call(
        nan_tests, out_shape=sds(x.shape, x.dtype))(x), [sds((8, 128), f32)]
    yield "swap_rows", lambda x: pl.pallas_call(
        swap_rows, out_shape=sds(x.shape, x.dtype))(x), [sds((2, 8, 128), f32)]
    yield "causal_map", lambda x: pl.pallas_call(
        causal_map, out_shape=sds((32, 128), f32), grid=(4, 4),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (causal_block(i, j), 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, 0)))(x), [sds((32, 128), f32)]
    yield "matvec", lambda x, v, u: pl.pallas_call(
        matvec, out_shape=(sds((16,), f32), sds((16,), f32), sds((128,), f32)))(x, v, u), [
        sds((16, 128), f32), sds((128,), f32), sds((16,), f32)]

    yield "layout", lambda x, y: pl.pallas_call(
        layout, out_shape=(sds((128, 8), f32), sds((16, 128), f32), sds((8, 128), f32)))(x, y), [
        sds((8, 128), f32), sds((8, 128), f32)]


def extract(x_ref, o_ref):
    # a reduction to a scalar (vector.extract) and a row picked out (extract_strided_slice)
    x = x_ref[...]
    o_ref[...] = x - x[3] - jnp.max(x)


def causal_block(i, j):
    # cmpi + select (causal block skipping), extui/extsi of an i1, andi/ori, maxsi/minsi
    below = j <= i
    late = (j > i).astype(jnp.int32) - (j > i + 1).astype(jnp.int32) * 2
    both = jnp.logical_and(below, jnp.logical_or(i > 0, j == 0))
    return jnp.minimum(jnp.maximum(jnp.where(both, j, i) + late * 0, 0), 3)


def causal_map(x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def matvec(x_ref, v_ref, u_ref, o_ref, p_ref, q_ref):
    # 1-D operands of tpu.matmul (no free dimension); einsum adds trace_start/trace_stop
    x, v = x_ref[...], v_ref[...]
    o_ref[...] = jnp.dot(x, v)
    p_ref[...] = jnp.einsum("mk,k->m", x, v) * 2.0
    q_ref[...] = jnp.dot(u_ref[...], x)


def nan_tests(x_ref, o_ref):
    # both lower to `cmpf one` on TPU
    x = x_ref[...]
    o_ref[...] = jnp.where(x != 1.0, 1.0, 0.0) + jnp.where(jnp.isnan(x), 10.0, 0.0)


def layout(x_ref, y_ref, o_ref, p_ref, q_ref):
    # tpu.transpose, tpu.concatenate and tpu.dynamic_rotate (a constant shift)
    x = x_ref[...]
    o_ref[...] = x.T
    p_ref[...] = jnp.concatenate([x, y_ref[...]], axis=0)
    q_ref[...] = pltpu.roll(x, 3, 1)


def mlp(x, w, b):
    return jax.nn.gelu(x @ w + b, approximate=False)


def reductions(x):
    @jax.jit
    def centre(v):
        return v - jnp.mean(v, axis=0, keepdims=True)

    c = centre(x)
    return jnp.max(c, axis=(0, 2)), jnp.concatenate([c[:, :2], c[:, 2:]], axis=1).sum(axis=1)


def sort(x):
    return jnp.sort(x, axis=-1)


def stablehlo_fixtures():
    sds = jax.ShapeDtypeStruct
    bf16, f32 = jnp.bfloat16, jnp.float32
    yield "mlp", mlp, [sds((16, 64), bf16), sds((64, 32), bf16), sds((32,), bf16)]
    yield "reductions", reductions, [sds((4, 6, 128), f32)]
    yield "sort", sort, [sds((8, 128), f32)]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, fn, specs in stablehlo_fixtures():
        text = _lowering.generic_module(_lowering.export_tpu(jax.jit(fn), specs))
        text = text.replace(str(pathlib.Path.cwd()) + "/", "")
        (OUT / f"stablehlo_{name}.mlir").write_text(text)
        print("wrote", OUT / f"stablehlo_{name}.mlir")
    for name, fn, specs in fixtures():
        call = _lowering.mosaic_call(_lowering.export_tpu(jax.jit(fn), specs))
        text = (
            f"// operands: {'; '.join(call.operand_types)}\n"
            f"// results: {'; '.join(call.result_types)}\n"
            + call.body
        )
        # Source locations relative to the repository, so fixtures do not depend on where it is.
        text = text.replace(str(pathlib.Path.cwd()) + "/", "")
        (OUT / f"{name}.mlir").write_text(text)
        print("wrote", OUT / f"{name}.mlir")



def swap_rows(x_ref, o_ref):
    # each store of a row loads the old row and reshapes it, unused (Pallas's swap)
    o_ref[0] = x_ref[1] * 2.0
    o_ref[1] = x_ref[0]


if __name__ == "__main__":
    main()
