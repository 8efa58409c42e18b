"""Kernels with the Mosaic ops tpukit learned to import for issue 13 (a 1-D `jnp.dot` operand,
`jnp.einsum`'s trace scopes, non-splat constants, gathers, bitcasts, unsigned conversions, shifts, comparisons and selects in index maps, no array inputs;
transposes, concatenations and rotations; manual DMA and semaphores; stores into
scalar-prefetch operands; reshaped and bitcast refs read by strided loads, value bitcasts),
imported from real Pallas kernels and JAX's shipped flash attention, lowered back by tpukit
(``Kernel.lower``) and compiled with libtpu for v5e and v6e. Their results are checked on
the CPU devices in python/tests/test_pallas_ops.py, test_pallas_layout_ops.py,
test_pallas_dma.py, test_pallas_smem.py and test_pallas_ref_views.py."""

import functools

import pytest
from conftest import assert_compiles, imports_by_on_cpu
from tpu_compile import TOPOLOGIES

jax = pytest.importorskip("jax")


def _sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def _matvec(dtype):
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, v_ref, u_ref, o_ref, p_ref):
        x = x_ref[...]
        o_ref[...] = jnp.dot(x, v_ref[...], preferred_element_type=jnp.float32)
        p_ref[...] = jnp.einsum("m,mk->k", u_ref[...], x, preferred_element_type=jnp.float32)

    call = pl.pallas_call(kernel, out_shape=(_sds((128,), jnp.float32), _sds((256,), jnp.float32)))
    return call, [_sds((128, 256), dtype), _sds((256,), dtype), _sds((128,), dtype)]


def _shifts(dtype):
    from jax import lax
    from jax.experimental import pallas as pl

    def kernel(x_ref, s_ref, o_ref, p_ref, q_ref):
        x, s = x_ref[...], s_ref[...]
        o_ref[...] = x << s
        p_ref[...] = x >> s
        q_ref[...] = lax.shift_right_logical(x, s)

    spec = _sds((16, 256), dtype)
    block = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    call = pl.pallas_call(kernel, out_shape=(spec, spec, spec), grid=(2, 2),
                          in_specs=[block, block], out_specs=(block, block, block))
    return call, [spec, spec]


def _iota(dtype):
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    def kernel(o_ref):
        rows = lax.broadcasted_iota(jnp.int32, o_ref.shape, 0) + pl.program_id(0) * 8
        o_ref[...] = rows.astype(o_ref.dtype)

    call = pl.pallas_call(kernel, out_shape=_sds((20, 256), dtype), grid=(3,),
                          out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)))
    return call, []


def _layout(dtype):
    # tpu.transpose, tpu.concatenate along either axis, tpu.dynamic_rotate by constants
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, y_ref, t_ref, r_ref, c_ref, l_ref):
        x, y = x_ref[...], y_ref[...]
        t_ref[...] = x.T
        r_ref[...] = jnp.concatenate([x, y], axis=0)
        c_ref[...] = jnp.concatenate([x, y], axis=1)
        l_ref[...] = pltpu.roll(x, 3, 1) + pltpu.roll(y, 5, 0)

    sq = _sds((128, 128), dtype)
    call = pl.pallas_call(kernel, out_shape=(
        sq, _sds((256, 128), dtype), _sds((128, 256), dtype), sq))
    return call, [sq, sq]


def _value_slices(dtype):
    # vector.extract_strided_slice wider than one element: rows and a lane range of a value
    from jax.experimental import pallas as pl

    def kernel(x_ref, a_ref, b_ref):
        x = x_ref[...]
        a_ref[...] = x[:8] + x[8:16] * 2 + x[3]
        b_ref[...] = x[16:24, 128:256] - x[:8, :128]

    call = pl.pallas_call(kernel, out_shape=(_sds((8, 256), dtype), _sds((8, 128), dtype)))
    return call, [_sds((32, 256), dtype)]


def _counted_grid():
    # grid=(n,) with a (1,)-shaped traced n: Mosaic's dynamic iteration bound, an SMEM output
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def body(_, count_ref):
        count_ref[0] = lax.cond(pl.program_id(0) == 0, lambda: 1, lambda: count_ref[0] + 1)

    def call(n):
        return pl.pallas_call(
            body, out_shape=pltpu.SMEM((1,), jnp.int32), grid=(n,),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
            out_specs=pl.BlockSpec(memory_space=pltpu.SMEM))(n)

    return call, [_sds((1,), "int32")]


def _hardware_prng():
    # tpu.prng_set_seed_32 and tpu.prng_random_bits, lowered back as tpukit's generator (the
    # IR's integer ops over a state buffer), with a uniform draw on top
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(seed_ref, bits_ref, u_ref):
        pltpu.prng_seed(seed_ref[0], pl.program_id(0))
        bits_ref[...] = pltpu.prng_random_bits(bits_ref.shape)
        u_ref[...] = pltpu.stateful_uniform(shape=u_ref.shape)

    call = pl.pallas_call(
        kernel, grid=(2,),
        out_shape=(_sds((32, 256), "int32"), _sds((32, 128), "float32")),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=(pl.BlockSpec((16, 256), lambda i: (i, 0)),
                   pl.BlockSpec((16, 128), lambda i: (i, 0))))
    return call, [_sds((1,), "int32")]


def _flash(dtype, causal):
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    blocks = fa.BlockSizes(block_q=128, block_k_major=256, block_k=128, block_b=1)

    def attention(q, k, v):
        # the op without its own jit (its jitted form is inlined too, see _inline.py)
        return fa.flash_attention.__wrapped__(
            q, k, v, ab=None, segment_ids=None, causal=causal, sm_scale=0.125,
            block_sizes=blocks, debug=False)

    return attention, [_sds((1, 2, 512, 128), dtype)] * 3


def _bitcast_copies(name):
    # the kernels of python/tests/test_pallas_bitcast_copies.py: copies through bitcast refs
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import bitcast_copy_kernels as t
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    any_ = pl.BlockSpec(memory_space=pl.ANY)
    sem = pltpu.SemaphoreType.DMA
    if name == "split":
        call = pl.pallas_call(
            functools.partial(t.split_rows_of_hbm, slice_first=False),
            out_shape=_sds((8, 2, 128), jnp.int16), in_specs=[any_], out_specs=any_,
            scratch_shapes=[sem])
        return call, [_sds((16, 1, 256), jnp.int32)]
    if name == "roll-f32":
        call = pl.pallas_call(
            t.roll_halves, out_shape=_sds((16, 256), jnp.float32), in_specs=[any_],
            out_specs=any_, scratch_shapes=[pltpu.VMEM((32, 256), jnp.int16), sem])
        return call, [_sds((16, 256), jnp.float32)]
    call = pl.pallas_call(
        t.negate_pairs, out_shape=_sds((32, 128), jnp.bfloat16), in_specs=[any_],
        out_specs=any_, scratch_shapes=[pltpu.VMEM((16, 128), jnp.int32), sem])
    return call, [_sds((32, 128), jnp.bfloat16)]


def _smem_scratch(name, dtype):
    # the kernels of python/tests/test_pallas_smem_scratch.py: SMEM scratch and scoped SMEM
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import jax.numpy as jnp
    import smem_scratch_kernels as t
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    if name == "running":
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        call = pl.pallas_call(
            t.running_row_sums, out_shape=_sds((40, 128), dtype), grid=(5,), in_specs=[spec],
            out_specs=spec, scratch_shapes=[pltpu.SMEM((1,), jnp.float32)],
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))
        return call, [_sds((40, 128), dtype)]
    call = pl.pallas_call(t.scoped_counts, out_shape=_sds((13, 256), dtype))
    return call, [_sds((13, 256), dtype)]


def _view_store_starts(name, dtype):
    # the kernels of python/tests/test_pallas_view_store_starts.py
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import jax.numpy as jnp
    import view_store_kernels as t
    from jax.experimental import pallas as pl

    if name == "masked-reshape":
        call = pl.pallas_call(t.masked_through_reshape, out_shape=_sds((2, 16, 128), dtype))
        return call, [_sds((32, 128), dtype)] * 2
    if name == "masked-bitcast":
        call = pl.pallas_call(t.masked_through_bitcast, out_shape=_sds((16, 128), dtype))
        return call, [_sds((16, 128), dtype), _sds((16, 128), jnp.int32)]
    if name == "masked-packing-bitcast":
        call = pl.pallas_call(t.masked_through_packing_bitcast, out_shape=_sds((32, 128), dtype))
        return call, [_sds((32, 128), dtype), _sds((16, 128), jnp.int32)]
    shape = (4, 16, 128) if name == "traced-rows" else (48, 1, 256)
    n, r, c = shape
    call = pl.pallas_call(t.rows_at_traced_starts, out_shape=_sds(shape, dtype))
    return call, [_sds((n * r, c), dtype)]


def _dma(name, dtype):
    # the DMA kernels of python/tests/test_pallas_dma.py, by name
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import dma_kernels as t
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    any_ = pl.BlockSpec(memory_space=pl.ANY)
    if name == "rows":
        call = pl.pallas_call(
            t.double_buffered_rows, out_shape=_sds((40, 256), dtype), grid=(5,),
            in_specs=[any_], out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
            scratch_shapes=[pltpu.VMEM((2, 8, 256), dtype), pltpu.SemaphoreType.DMA((2,))],
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))
        return call, [_sds((40, 256), dtype)]
    if name == "matmul":
        call = pl.pallas_call(
            t.manual_matmul, out_shape=_sds((256, 128), dtype), grid=(2,),
            in_specs=[any_, any_], out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
            scratch_shapes=[pltpu.VMEM((2, 128, 128), dtype), pltpu.VMEM((2, 128, 128), dtype),
                            pltpu.VMEM((128, 128), "float32"), pltpu.SemaphoreType.DMA((2, 2))])
        return call, [_sds((256, 384), dtype), _sds((384, 128), dtype)]
    if name == "pipeline":
        call = pl.pallas_call(t.pipelined_affine, out_shape=_sds((48, 128), dtype),
                              in_specs=[any_], out_specs=any_)
        return call, [_sds((48, 128), dtype)]
    call = pl.pallas_call(
        t.scoped_copies, out_shape=_sds((16, 128), dtype), in_specs=[any_], out_specs=any_,
        scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
    return call, [_sds((16, 128), dtype)]


def _counted_copies(dtype):
    # copies signalling a regular semaphore (python/tests/semaphore_kernels.py)
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import semaphore_kernels as sk
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    call = pl.pallas_call(sk.counted_copies, out_shape=_sds((16, 128), dtype),
                          in_specs=[sk.ANY], out_specs=sk.ANY,
                          scratch_shapes=[pltpu.SemaphoreType.REGULAR])
    return call, [_sds((32, 128), dtype)]


def _strided_roll(dtype):
    # python/tests/test_pallas_strided_roll.py's first kernel: lanes rolled by a stride per
    # row (by a constant shift: a traced one loads windows at traced lane offsets, which
    # libtpu refuses, as for a plain roll by a traced shift)
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], 3, 1, stride=5, stride_axis=0)

    return pl.pallas_call(kernel, out_shape=_sds((8, 256), dtype)), [_sds((8, 256), dtype)]


def _traced_roll(dtype, strided=False):
    # python/tests/test_pallas_layout_ops.py, test_pallas_strided_roll.py: rolls by traced
    # shifts (a prefetched scalar and the grid step), along the lanes and the rows, strided
    # too: `tpu.dynamic_rotate` as Pallas emits it
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(s_ref, x_ref, o_ref, p_ref):
        x = x_ref[...]
        if strided:
            o_ref[...] = pltpu.roll(x, s_ref[0] + pl.program_id(0), 1, stride=300, stride_axis=0)
            p_ref[...] = pltpu.roll(x, s_ref[1], 1, stride=5, stride_axis=0)
        else:
            o_ref[...] = pltpu.roll(x, s_ref[0] + pl.program_id(0) * 7, 1)
            p_ref[...] = pltpu.roll(x, s_ref[1], 0)

    block = pl.BlockSpec((16, 384), lambda i, s: (i, 0))
    grid_spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(3,),
                                             in_specs=[block], out_specs=[block, block])
    x = _sds((48, 384), dtype)
    return (pl.pallas_call(kernel, out_shape=(x, x), grid_spec=grid_spec),
            [_sds((2,), "int32"), x])


def _view_stores(dtype):
    # python/tests/test_pallas_ref_view_stores.py: whole stores through a reshaped ref and
    # through a bitcast one
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, b_ref, o_ref, p_ref):
        o_ref.reshape(16, 128)[...] = x_ref[...] * 2
        p_ref.bitcast(jnp.int32)[...] = b_ref[...] ^ 0x7FFFFFFF

    call = pl.pallas_call(kernel, out_shape=(_sds((2, 8, 128), dtype),
                                             _sds((8, 128), "float32")))
    return call, [_sds((16, 128), dtype), _sds((8, 128), "int32")]


def _view_part_stores(name, dtype):
    # python/tests/test_pallas_ref_view_parts.py: stores into leading rows of a reshaped ref,
    # into 32-bit refs bitcast to 16 bits and back, and through a chain of views
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def rows(x_ref, o_ref):
        view = o_ref.reshape(32, 128)
        view[:8] = x_ref[:8] * 2
        view[pl.ds(8, 16)] = x_ref[8:24] + 1
        view[24:, :] = -x_ref[24:]

    def split(x_ref, o_ref):
        o_ref[...] = jnp.zeros(o_ref.shape, jnp.int32)
        o_ref.at[:8, :128].bitcast(jnp.bfloat16)[...] = x_ref[...]
        o_ref.bitcast(jnp.bfloat16)[4:12, 128:] = x_ref[2:10]

    def packed(w_ref, o_ref):
        o_ref.bitcast(jnp.uint32)[2:6] = w_ref[...]

    def chain(x_ref, o_ref, p_ref):
        def view(ref):
            return (ref.bitcast(jnp.int16).reshape(4, 16, 256).bitcast(jnp.bfloat16).at[2:]
                    .reshape(32, 256).at[:, 128:].bitcast(jnp.int32))

        o_ref[...] = view(x_ref)[...] + 1
        view(p_ref)[4:12] = x_ref[:8, :128]

    if name == "rows":
        return pl.pallas_call(rows, out_shape=_sds((4, 8, 128), dtype)), [_sds((32, 128), dtype)]
    if name == "split":
        return (pl.pallas_call(split, out_shape=_sds((16, 256), "int32")),
                [_sds((16, 128), dtype)])
    if name == "packed":
        return pl.pallas_call(packed, out_shape=_sds((16, 256), dtype)), [_sds((4, 256), "uint32")]
    call = pl.pallas_call(chain, out_shape=(_sds((16, 128), dtype), _sds((32, 256), dtype)))
    return call, [_sds((32, 256), dtype)]


def _reshaped_copies(dtype):
    # python/tests/test_pallas_ref_view_stores.py: copies through reshaped refs (and
    # leading rows of one)
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_hbm, o_hbm, buf, sem):
        flat = buf.reshape(16, 256)
        pltpu.async_copy(x_hbm.reshape(24, 256).at[pl.ds(8, 16)], flat, sem).wait()
        buf[...] = buf[...] * 2
        pltpu.async_copy(flat, o_hbm.reshape(16, 256), sem).wait()

    any_ = pl.BlockSpec(memory_space=pl.ANY)
    call = pl.pallas_call(kernel, out_shape=_sds((2, 8, 256), dtype), in_specs=[any_],
                          out_specs=any_,
                          scratch_shapes=[pltpu.VMEM((2, 8, 256), dtype),
                                          pltpu.SemaphoreType.DMA])
    return call, [_sds((3, 8, 256), dtype)]


def _smem(dtype):
    # python/tests/smem_kernels.py: state kept in a scalar-prefetch operand the kernel writes
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import smem_kernels as t
    from jax.experimental import pallas as pl

    x = _sds((24, 512), dtype)
    call = pl.pallas_call(t.running_offsets, out_shape=(x, _sds(x.shape, "int32")),
                          **t.running_offsets_call_kwargs(8, 128, (3, 4), "parallel"))
    return call, [_sds((12,), "int32"), _sds((3,), "int32"), x]


def _ref_views(name, dtype):
    # python/tests/test_pallas_ref_views.py: a page buffer reshaped to rows, read by strided
    # loads (f32), or bitcast to uint32 first (bf16, as ragged paged attention reads it)
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def strided(x_ref, o_ref):
        rows = x_ref.reshape(64, 128)
        for h in range(4):
            o_ref[h] = rows[pl.ds(h, 16, stride=4), :]

    def packed(x_ref, o_ref):
        words = x_ref.reshape(64, 128).bitcast(jnp.uint32)
        for head in range(2):
            w = words[pl.ds(head, 16, stride=2), :]
            o_ref[head] = pltpu.bitcast(w << 16, jnp.float32).astype(jnp.bfloat16)
            o_ref[head + 2] = pltpu.bitcast(w & jnp.uint32(0xFFFF0000), jnp.float32).astype(
                jnp.bfloat16)

    def bits(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref.bitcast(jnp.int32)[...] ^ 1, jnp.float32)

    def rows(start_ref, x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(start_ref[0], 8, stride=4), :]

    def split(x_ref, o_ref):
        # 32-bit rows read as int16 row pairs, as JAX's test_load_bitcasted_ref reads them
        o_ref[...] = x_ref.bitcast(jnp.int16)[16:48, 128:] + 1

    if name == "bits":
        x = _sds((16, 128), dtype)
        return pl.pallas_call(bits, out_shape=x), [x]
    if name == "split":
        return pl.pallas_call(split, out_shape=_sds((32, 128), "int16")), [_sds((32, 256), dtype)]
    if name == "rows":
        # a dynamic start (a prefetched scalar), every 4th row of a block the array does not
        # fill
        grid_spec = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(1,),
            in_specs=[pl.BlockSpec((48, 128), lambda i, s: (0, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, s: (0, 0)))
        call = pl.pallas_call(rows, out_shape=_sds((8, 128), dtype), grid_spec=grid_spec)
        return call, [_sds((1,), "int32"), _sds((45, 128), dtype)]
    body = {"strided": strided, "packed": packed}[name]
    call = pl.pallas_call(body, out_shape=_sds((4, 16, 128), dtype))
    return call, [_sds((2, 8, 4, 128), dtype)]


def _batched(dtype):
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, y_ref, z_ref, o_ref, p_ref):
        x = x_ref[...]
        o_ref[...] = jnp.einsum("bmk,bkn->bmn", x, y_ref[...], preferred_element_type=jnp.float32)
        p_ref[...] = jnp.einsum("bqd,bkd->bqk", x, z_ref[...], preferred_element_type=jnp.float32)

    call = pl.pallas_call(kernel, out_shape=(_sds((2, 16, 256), jnp.float32),
                                             _sds((2, 16, 24), jnp.float32)))
    return call, [_sds((2, 16, 128), dtype), _sds((2, 128, 256), dtype), _sds((2, 24, 128), dtype)]


def _argmax():
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref, p_ref):
        x = x_ref[...]
        o_ref[...] = jnp.argmax(x, axis=1).astype(jnp.int32)
        p_ref[...] = jnp.argmin(x, axis=0).astype(jnp.int32)

    call = pl.pallas_call(kernel, out_shape=(_sds((16,), jnp.int32), _sds((256,), jnp.int32)))
    return call, [_sds((16, 256), jnp.float32)]


def _while(dtype):
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        def step(c):
            i, v = c
            return i + 1, v * 0.5

        i, v = lax.while_loop(lambda c: jnp.max(jnp.abs(c[1])) > 1.0, step,
                              (jnp.int32(0), x_ref[...]))
        o_ref[...] = v + i.astype(v.dtype)

    call = pl.pallas_call(kernel, out_shape=_sds((8, 128), dtype))
    return call, [_sds((8, 128), dtype)]


def _bits():
    # pltpu.bitcast within and across widths, lax.bitcast_convert_type, uint32 <-> float
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, h_ref, u_ref, i_ref, p_ref, q_ref, f_ref, b_ref, c_ref):
        x, h, u = x_ref[...], h_ref[...], u_ref[...]
        i_ref[...] = pltpu.bitcast(x, jnp.int32) ^ lax.bitcast_convert_type(x + 1.0, jnp.int32)
        p_ref[...] = pltpu.bitcast(h, jnp.int32)
        q_ref[...] = pltpu.bitcast(pltpu.bitcast(x, jnp.int32), jnp.bfloat16)
        mantissa = lax.shift_right_logical(u, jnp.uint32(9)) | jnp.uint32(0x3F800000)
        f_ref[...] = lax.bitcast_convert_type(mantissa, jnp.float32) + u.astype(jnp.float32)
        b_ref[...] = u.astype(jnp.bfloat16)
        c_ref[...] = x.astype(jnp.uint32)

    f32, u32 = _sds((16, 128), "float32"), _sds((16, 128), "uint32")
    call = pl.pallas_call(kernel, out_shape=(
        _sds((16, 128), "int32"), _sds((8, 128), "int32"), _sds((32, 128), "bfloat16"),
        f32, _sds((16, 128), "bfloat16"), u32))
    return call, [f32, _sds((16, 128), "bfloat16"), u32]


def _unsigned_extremes():
    # jnp.maximum/minimum of uint32 vectors (arith.maxui/minui); uint16 widened (arith.extui)
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, y_ref, h_ref, hi_ref, lo_ref, w_ref):
        hi_ref[...] = jnp.maximum(x_ref[...], y_ref[...])
        lo_ref[...] = jnp.minimum(x_ref[...], y_ref[...])
        w_ref[...] = h_ref[...].astype(jnp.int32)

    u32, u16 = _sds((16, 128), "uint32"), _sds((16, 128), "uint16")
    out = (u32, u32, _sds((16, 128), "int32"))
    return pl.pallas_call(kernel, out_shape=out), [u32, u32, u16]


def _constants(dtype):
    # non-splat constants (tpukit's `dense`), in a plain JAX function imported as one kernel
    import jax.numpy as jnp
    import numpy as np

    def tables(x, i):
        rows = jnp.array([3, -1, 4, 1, -5, 9, 2, -6], jnp.int32)[:, None]
        lanes = jnp.asarray(np.arange(128, dtype=np.float32) * 0.5).astype(x.dtype)[None, :]
        mask = jnp.array([[True], [False]] * 4)  # (a 1-D bool vector does not reshape yet)
        return jnp.where(mask, x * lanes, x + rows.astype(x.dtype)), i * rows

    return tables, [_sds((8, 128), dtype), _sds((8, 128), "int32")]


def _gather(dtype):
    # jnp.take_along_axis along the lanes and the sublanes (tpu.dynamic_gather)
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, l_ref, r_ref, o_ref, p_ref):
        x = x_ref[...]
        o_ref[...] = jnp.take_along_axis(x, l_ref[...], axis=1)
        p_ref[...] = jnp.take_along_axis(x, r_ref[...], axis=0)

    x, i = _sds((8, 128), dtype), _sds((8, 128), "int32")
    return pl.pallas_call(kernel, out_shape=(x, x)), [x, i, i]


def _int16():
    # wrapping arithmetic, shifts, signed compares, floor division and conversions on int16
    # blocks (python/tests/test_pallas_int16.py checks the results)
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    def kernel(x_ref, y_ref, s_ref, a_ref, b_ref, c_ref):
        x, y, s = x_ref[...], y_ref[...], s_ref[...]
        a_ref[...] = x * y + (x << s) ^ (y >> s) ^ lax.shift_right_logical(x, s)
        b_ref[...] = jnp.where(x < y, jnp.maximum(x, s), jnp.minimum(y, s)) + x // y + x % y
        wide = x.astype(jnp.int32)
        c_ref[...] = ((x.astype(jnp.float32) * 0.5).astype(jnp.int16)
                      + x.astype(jnp.int8).astype(jnp.int16)
                      + jnp.sum(wide, axis=1, keepdims=True).astype(jnp.int16))

    spec = _sds((40, 256), "int16")
    block = pl.BlockSpec((16, 128), lambda i, j: (i, j))
    call = pl.pallas_call(kernel, out_shape=(spec, spec, spec), grid=(3, 2),
                          in_specs=[block] * 3, out_specs=(block,) * 3)
    return call, [spec, spec, spec]


KERNELS = {
    "gather-f32": lambda: _gather("float32"),
    "gather-bf16": lambda: _gather("bfloat16"),
    "gather-i32": lambda: _gather("int32"),
    "constants-f32": lambda: _constants("float32"),
    "constants-bf16": lambda: _constants("bfloat16"),
    "bits": _bits,
    "unsigned-extremes": _unsigned_extremes,
    "matvec-f32": lambda: _matvec("float32"),
    "matvec-bf16": lambda: _matvec("bfloat16"),
    "shifts-i32": lambda: _shifts("int32"),
    "shifts-i16": lambda: _shifts("int16"),
    "int16": _int16,
    "iota-f32": lambda: _iota("float32"),
    "layout-f32": lambda: _layout("float32"),
    "layout-bf16": lambda: _layout("bfloat16"),
    "value-slices-f32": lambda: _value_slices("float32"),
    "value-slices-bf16": lambda: _value_slices("bfloat16"),
    "flash-f32": lambda: _flash("float32", False),
    "flash-causal-f32": lambda: _flash("float32", True),
    "flash-causal-bf16": lambda: _flash("bfloat16", True),
    "argmax-f32": _argmax,
    "counted-grid-i32": _counted_grid,
    "hardware-prng": _hardware_prng,
    "while-f32": lambda: _while("float32"),
    "batched-dot-f32": lambda: _batched("float32"),
    "batched-dot-bf16": lambda: _batched("bfloat16"),
    "dma-rows-f32": lambda: _dma("rows", "float32"),
    "dma-rows-bf16": lambda: _dma("rows", "bfloat16"),
    "dma-matmul-f32": lambda: _dma("matmul", "float32"),
    "dma-matmul-bf16": lambda: _dma("matmul", "bfloat16"),
    "dma-scoped-f32": lambda: _dma("scoped", "float32"),
    "dma-pipeline-f32": lambda: _dma("pipeline", "float32"),
    "dma-pipeline-bf16": lambda: _dma("pipeline", "bfloat16"),
    "dma-regular-semaphore-f32": lambda: _counted_copies("float32"),
    "smem-scratch-f32": lambda: _smem_scratch("running", "float32"),
    "smem-scratch-bf16": lambda: _smem_scratch("running", "bfloat16"),
    "smem-scoped-f32": lambda: _smem_scratch("scoped", "float32"),
    "smem-scoped-bf16": lambda: _smem_scratch("scoped", "bfloat16"),
    "masked-reshape-store-f32": lambda: _view_store_starts("masked-reshape", "float32"),
    "masked-reshape-store-i32": lambda: _view_store_starts("masked-reshape", "int32"),
    "masked-bitcast-store-f32": lambda: _view_store_starts("masked-bitcast", "float32"),
    "masked-packing-bitcast-store-bf16": lambda: _view_store_starts(
        "masked-packing-bitcast", "bfloat16"),
    "traced-reshape-store-f32": lambda: _view_store_starts("traced-rows", "float32"),
    "traced-reshape-store-bf16": lambda: _view_store_starts("traced-rows", "bfloat16"),
    "traced-flat-store-f32": lambda: _view_store_starts("traced-flat", "float32"),
    # (bf16 one-row loads at a traced row are not provably aligned for Mosaic: f32 only)
    "bitcast-copies-split-i32": lambda: _bitcast_copies("split"),
    "bitcast-copies-roll-f32": lambda: _bitcast_copies("roll-f32"),
    "bitcast-copies-pairs-bf16": lambda: _bitcast_copies("pairs-bf16"),
    "dma-regular-semaphore-bf16": lambda: _counted_copies("bfloat16"),
    "strided-roll-f32": lambda: _strided_roll("float32"),
    "strided-roll-bf16": lambda: _strided_roll("bfloat16"),
    "traced-roll-f32": lambda: _traced_roll("float32"),
    "traced-roll-bf16": lambda: _traced_roll("bfloat16"),
    "traced-roll-i32": lambda: _traced_roll("int32"),
    "traced-strided-roll-f32": lambda: _traced_roll("float32", strided=True),
    "traced-strided-roll-bf16": lambda: _traced_roll("bfloat16", strided=True),
    "view-stores-f32": lambda: _view_stores("float32"),
    "view-stores-bf16": lambda: _view_stores("bfloat16"),
    "view-part-stores-f32": lambda: _view_part_stores("rows", "float32"),
    "view-part-stores-bf16": lambda: _view_part_stores("rows", "bfloat16"),
    "ref-bitcast-split-stores-bf16": lambda: _view_part_stores("split", "bfloat16"),
    "ref-bitcast-packed-stores-bf16": lambda: _view_part_stores("packed", "bfloat16"),
    "ref-view-chain-i32": lambda: _view_part_stores("chain", "int32"),
    "reshaped-copies-f32": lambda: _reshaped_copies("float32"),
    "reshaped-copies-bf16": lambda: _reshaped_copies("bfloat16"),
    "smem-state-f32": lambda: _smem("float32"),
    "smem-state-bf16": lambda: _smem("bfloat16"),
    "ref-reshape-strided-f32": lambda: _ref_views("strided", "float32"),
    "ref-bitcast-packed-bf16": lambda: _ref_views("packed", "bfloat16"),
    "ref-bitcast-f32": lambda: _ref_views("bits", "float32"),
    "ref-bitcast-split-i32": lambda: _ref_views("split", "int32"),
    "strided-rows-f32": lambda: _ref_views("rows", "float32"),
}


@functools.cache
def _lowered(name):
    from tpukit import pallas

    fn, specs = KERNELS[name]()
    args = [jax.numpy.zeros(s.shape, s.dtype) for s in specs]
    return pallas.custom_jax_kernel(fn).kernel(*args).lower()


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("name", list(KERNELS))
def test_imported_kernel_compiles_for_tpu(compiler, name, topology):
    result = compiler.compile(_lowered(name), topology)
    assert result["ok"], result.get("error")
    assert result["llo_ops"][0]["total"] > 0


def test_a_traced_roll_strided_along_the_lanes_is_refused_by_the_lowering():
    """Mosaic does not rotate with a stride along the minor axis ("stride dimension is the
    minor most", also for Pallas's own kernel): tpukit's lowering says so (the CPU devices
    run it, python/tests/test_pallas_strided_roll.py)."""
    import jax.numpy as jnp
    import tpukit
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    from tpukit import pallas

    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], s_ref[0], 0, stride=3, stride_axis=1)

    x = jnp.zeros((16, 128), jnp.float32)
    call = pl.pallas_call(kernel, out_shape=_sds(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                                    pl.BlockSpec((16, 128), lambda: (0, 0))])
    kernel = pallas.custom_jax_kernel(call).kernel(jnp.zeros((1,), jnp.int32), x)
    with pytest.raises(tpukit.UnsupportedError, match="stride along the minor"):
        kernel.lower()


@pytest.mark.parametrize(("shape", "axis"), [((128, 64), 1), ((63, 256), 0)])
def test_a_traced_roll_of_part_of_a_tile_is_refused_by_the_lowering(shape, axis):
    """Mosaic rotates whole (8, 128) tiles only ("unsupported unaligned shape", also for
    Pallas's own kernel): tpukit's lowering says so (the CPU devices run it)."""
    import jax.numpy as jnp
    import tpukit
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    from tpukit import pallas

    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], s_ref[0], axis)

    x = jnp.zeros(shape, jnp.float32)
    call = pl.pallas_call(kernel, out_shape=_sds(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                                    pl.BlockSpec(shape, lambda: (0, 0))])
    kernel = pallas.custom_jax_kernel(call).kernel(jnp.zeros((1,), jnp.int32), x)
    with pytest.raises(tpukit.UnsupportedError, match="whole tiles only"):
        kernel.lower()


def test_a_bf16_strided_load_is_refused_by_the_lowering():
    """Mosaic strides 32-bit data only ("Strided load with non 32-bit data", also for
    Pallas's own kernel): tpukit's lowering says so instead of handing libtpu the op (the
    CPU devices run it, python/tests/test_pallas_ref_views.py)."""
    import tpukit
    from tpukit import pallas

    fn, specs = _ref_views("rows", "bfloat16")
    kernel = pallas.custom_jax_kernel(fn).kernel(*[jax.numpy.zeros(s.shape, s.dtype)
                                                   for s in specs])
    with pytest.raises(tpukit.UnsupportedError, match="strided load of bf16 data"):
        kernel.lower()



def _custom_call(text, result, operands=None):
    """The custom call of a lowered kernel module, its result named ``%result`` (and its
    operands replaced by ``operands``)."""
    import re

    line = next(t for t in text.splitlines() if '"stablehlo.custom_call"' in t)
    line = re.sub(r"^\s*%0(:\d+)? =", f"    %{result}\\1 =", line)
    if operands is not None:
        line = re.sub(r'"stablehlo.custom_call"\([^)]*\)',
                      f'"stablehlo.custom_call"({operands})', line, count=1)
    return line


def _chain(producer, consumer):
    """One program running the kernel module ``producer`` and then ``consumer`` on its
    results: semaphores live in semaphore memory, so a TPU program passes them from call to
    call and never takes or returns them (nor can JAX)."""
    import re

    head = next(t for t in producer.splitlines() if "func.func public @main" in t)
    params = re.search(r"@main\((.*?)\) ->", head).group(1)
    a = _custom_call(producer, "a")
    n = re.match(r"\s*%a(?::(\d+))? =", a).group(1)
    operands = ", ".join(f"%a#{i}" for i in range(int(n))) if n else "%a"
    b = _custom_call(consumer, "b", operands)
    result = re.search(r"-> (tensor<[^>]*>)\s*$", b).group(1)
    return ("module @chain attributes {mhlo.num_partitions = 1 : i32, "
            "mhlo.num_replicas = 1 : i32} {\n"
            f"  func.func public @main({params}) -> {result} {{\n{a}\n{b}\n"
            f"    return %b : {result}\n  }}\n}}\n")


@functools.cache
def _semaphore_operands_under_on_cpu():
    """Calls handing semaphores to each other (python/tests/semaphore_kernels.py): DMA
    semaphores as a call's result and another's operand, a regular semaphore's count carried
    across calls, imported by ``on_cpu()`` and lowered back by tpukit."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import jax.numpy as jnp
    import semaphore_kernels as sk
    from tpukit import _cpu_lowering, pallas

    before = len(_cpu_lowering.imported())
    with pallas.on_cpu():
        jax.jit(sk.gather_rows).lower(jnp.zeros((40, 128)), jnp.zeros((2,), jnp.int32))
        jax.jit(lambda n: sk.drained(sk.signalled(n))).lower(jnp.zeros((1,), jnp.int32))
    start, wait, signal, drain = (k.lower() for k in _cpu_lowering.imported()[before:])
    return [_chain(start, wait), _chain(signal, drain)]


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_semaphore_operands_compile_for_tpu(compiler, topology):
    for text in _semaphore_operands_under_on_cpu():
        result = compiler.compile(text, topology)
        assert result["ok"], result.get("error")
        assert result["llo_ops"][0]["total"] > 0


@functools.cache
def _index_map_extents_under_on_cpu():
    """Index maps reading ``pl.num_programs`` (python/tests/test_pallas_index_map_extents.py)
    of a grid sized by a traced value and of a static one, imported by ``on_cpu()``."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import jax.numpy as jnp
    import test_pallas_index_map_extents as t

    with imports_by_on_cpu() as texts:
        jax.jit(t.reversed_blocks).lower(jnp.int32(2), jnp.zeros((48, 128)))
        jax.jit(lambda x: t.reversed_blocks(5, x)).lower(jnp.zeros((40, 128), jnp.bfloat16))
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_index_maps_reading_the_grid_extent_compile_for_tpu(compiler, topology):
    texts = _index_map_extents_under_on_cpu()
    assert len(texts) == 2
    assert_compiles(compiler, texts, topology)


@functools.cache
def _aliased_inputs_under_on_cpu():
    """Copies into inputs aliased to outputs (python/tests/semaphore_kernels.py: refs of
    ``pl.run_state``, ``input_output_aliases``), imported by ``on_cpu()``: the copies write
    the outputs."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import jax.numpy as jnp
    import semaphore_kernels as sk

    with imports_by_on_cpu() as texts:
        jax.jit(sk.scatter_rows_in_place).lower(jnp.zeros((16, 128)), jnp.zeros((48, 128)),
                                                jnp.zeros((2,), jnp.int32))
        jax.jit(sk.add_into_aliased_input).lower(jnp.zeros((8, 128), jnp.bfloat16),
                                                 jnp.zeros((24, 128), jnp.bfloat16))
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_copies_into_aliased_inputs_compile_for_tpu(compiler, topology):
    texts = _aliased_inputs_under_on_cpu()
    assert len(texts) == 2
    assert_compiles(compiler, texts, topology)


@functools.cache
def _traced_size_copies_under_on_cpu():
    """A copy of a traced number of rows (python/tests/semaphore_kernels.py), imported by
    ``on_cpu()`` as a loop of one-row copies and waits."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import jax.numpy as jnp
    import semaphore_kernels as sk

    with imports_by_on_cpu() as texts:
        for dtype in ("float32", "bfloat16"):
            jax.jit(sk.rows_of_traced_count).lower(
                jnp.zeros((3,), jnp.int32), jnp.zeros((16, 8, 128), dtype),
                jnp.zeros((12, 8, 128), dtype))
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_copies_of_a_traced_size_compile_for_tpu(compiler, topology):
    texts = _traced_size_copies_under_on_cpu()
    assert len(texts) == 2
    assert_compiles(compiler, texts, topology)



@functools.cache
def _stores_into_aliased_refs_under_on_cpu():
    """Stores and copies into refs made outside the kernels (python/tests/aliased_ref_kernels.py:
    ``jax.new_ref`` and ``pl.empty_ref_like`` in SMEM, VMEM and HBM), which Pallas passes to
    each ``pl.core_map`` as inputs aliased to outputs, imported by ``on_cpu()``: the stores
    write the outputs, SMEM operands stay in SMEM."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import aliased_ref_kernels as ak
    import jax.numpy as jnp
    from jax.experimental.pallas import tpu as pltpu

    with imports_by_on_cpu() as texts:
        for dtype in ("int32", "float32"):
            jax.jit(ak.smem_scan).lower(jnp.zeros((13,), dtype))
        jax.jit(lambda x: ak.copy_between_refs(x, pltpu.SMEM)).lower(jnp.zeros((16,), jnp.int32))
        for dtype in ("float32", "bfloat16"):
            jax.jit(ak.vmem_update).lower(jnp.zeros((20, 200), dtype), jnp.zeros((20, 200), dtype))
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_stores_into_aliased_refs_compile_for_tpu(compiler, topology):
    texts = _stores_into_aliased_refs_under_on_cpu()
    assert len(texts) == 9
    assert_compiles(compiler, texts, topology)


@functools.cache
def _copy_across_core_maps_under_on_cpu():
    """``aliased_ref_kernels.smem_to_hbm_in_two_kernels`` as one TPU program, as JAX builds it:
    buffers from ``AllocateBuffer``, then tpukit's three kernels (scalar stores into SMEM, a
    copy started into HBM, its wait), the semaphore passed from call to call (a TPU program
    takes and returns none: see ``_chain``). The semaphore each call takes is aliased to the
    one it returns: one semaphore, as on a TPU."""
    import re
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import aliased_ref_kernels as ak
    import jax.numpy as jnp

    with imports_by_on_cpu() as texts:
        jax.jit(ak.smem_to_hbm_in_two_kernels).lower(jnp.zeros((16,), jnp.int32))
    stores, start, wait = texts
    # Each kernel after the first takes (SMEM ref, HBM ref, its semaphore operand, the
    # semaphore its output aliases) and returns (HBM ref, semaphore).
    for text in (start, wait):
        assert re.search(r"output_operand_alias<output_tuple_indices = \[1\], operand_index = 3",
                         text), text
    return ("module @chain attributes {mhlo.num_partitions = 1 : i32, "
            "mhlo.num_replicas = 1 : i32} {\n"
            "  func.func public @main(%x: tensor<16xi32>) -> tensor<16xi32> {\n"
            "    %y = stablehlo.custom_call @AllocateBuffer() : () -> tensor<16xi32>\n"
            "    %o = stablehlo.custom_call @AllocateBuffer() : () -> tensor<16xi32>\n"
            "    %s = stablehlo.custom_call @AllocateBuffer() : () -> tensor<i32>\n"
            f"{_custom_call(stores, 'a', '%x, %y')}\n"
            f"{_custom_call(start, 'b', '%a, %o, %s, %s')}\n"
            f"{_custom_call(wait, 'c', '%a, %b#0, %b#1, %b#1')}\n"
            "    return %c#0 : tensor<16xi32>\n  }\n}\n")


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_a_copy_across_core_maps_compiles_for_tpu(compiler, topology):
    assert_compiles(compiler, [_copy_across_core_maps_under_on_cpu()], topology)


@functools.cache
def _bounded_slices_under_on_cpu():
    """``pltpu.emit_pipeline`` over ``pl.BoundedSlice`` blocks (python/tests/
    bounded_slice_kernels.py): copies into squeezed buffer slots of a traced number of rows,
    imported by ``on_cpu()`` as loops of one-row copies."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import bounded_slice_kernels as bk
    import jax.numpy as jnp

    with imports_by_on_cpu() as texts:
        for dtype in ("float32", "bfloat16"):
            jax.jit(bk.scaled_row_ranges, static_argnums=2).lower(
                jnp.zeros((21, 8, 128), dtype), jnp.zeros((4, 2), jnp.int32), 8)
            jax.jit(bk.scaled_rows_at, static_argnums=(1, 2)).lower(
                jnp.zeros((16, 8, 256), dtype), 5, 6)
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_bounded_slices_compile_for_tpu(compiler, topology):
    texts = _bounded_slices_under_on_cpu()
    assert len(texts) == 4
    assert_compiles(compiler, texts, topology)


@functools.cache
def _nested_bitcast_pipeline_under_on_cpu():
    """``bitcast_copy_kernels.nested_split_pipeline``: an inner ``emit_pipeline`` over an
    outer block seen as int16, imported by ``on_cpu()`` (copies through the bitcast block at
    traced even starts)."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import bitcast_copy_kernels as bk
    import jax.numpy as jnp

    with imports_by_on_cpu() as texts:
        jax.jit(bk.nested_split_pipeline).lower(jnp.zeros((256, 128), jnp.float32))
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_a_pipeline_over_a_bitcast_block_compiles_for_tpu(compiler, topology):
    texts = _nested_bitcast_pipeline_under_on_cpu()
    assert len(texts) == 1
    assert_compiles(compiler, texts, topology)


@functools.cache
def _padded_pipeline_under_on_cpu():
    """``padded_pipeline_kernels``: ``emit_pipeline`` matmuls over arrays the blocks divide in
    neither dimension, imported by ``on_cpu()``: static copies per edge-block choice, some
    reaching into the tiles past the arrays' ends (whole tiles, as Pallas copies them)."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[2] / "python" / "tests"))
    import jax.numpy as jnp
    import padded_pipeline_kernels as pk
    from jax.experimental import pallas as pl

    with imports_by_on_cpu() as texts:
        for dtype in ("float32", "bfloat16"):
            body, kwargs = pk.padded_matmul((20, 200), (200, 136), dtype, (16, 128, 128))
            jax.jit(pl.pallas_call(body, **kwargs)).lower(
                jnp.zeros((20, 200), dtype), jnp.zeros((200, 136), dtype))
    return texts


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_pipelines_over_padded_edge_blocks_compile_for_tpu(compiler, topology):
    texts = _padded_pipeline_under_on_cpu()
    assert len(texts) == 2
    assert_compiles(compiler, texts, topology)
