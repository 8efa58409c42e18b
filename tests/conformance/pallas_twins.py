"""The catalog kernels written in JAX Pallas, one `pl.pallas_call` per kernel.

Each twin mirrors its tpukit kernel (`catalog/src/*.rs`): same function name (so the Mosaic
kernel functions share their `sym_name`), grid, BlockSpecs, dimension semantics, scratch and
scalar prefetch. `TWINS[name](shape, dtype)` returns `(call, args)`: the `pallas_call` and the
`jax.ShapeDtypeStruct`s it is lowered with. Shapes are tpukit's CLI shapes (`tpukit list`).

jax is imported lazily: `import pallas_twins` is cheap; the first `twins()` call imports it.
"""

import functools

_TWINS = None


def twins():
    """name -> (shape tuple, dtype name) -> (pallas_call, [ShapeDtypeStruct])."""
    global _TWINS
    if _TWINS is None:
        _TWINS = _build()
    return _TWINS


def _build():
    import jax
    import jax.numpy as jnp
    from jax._src.pallas.mosaic import tpu_info
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    # Rank-1 blocks query the chip, and a CPU host has none: `Unsupported TPU device kind: cpu`.
    # A private API (checked with jax 0.10.2): answer as a v5e would.
    tpu_info.registry["cpu"] = functools.partial(
        pltpu.get_tpu_info_for_chip, pltpu.ChipVersion.TPU_V5E, 1
    )
    dtypes = {"f32": jnp.float32, "bf16": jnp.bfloat16}

    def sds(shape, dtype):
        return jax.ShapeDtypeStruct(shape, dtype)

    def add_vectors_twin(
        shape, dtype_name, semantics="parallel", op="add", swap=False, block=1024
    ):
        """The keyword arguments change the twin (tests check that the comparison sees it)."""
        (n,) = shape
        dtype = dtypes[dtype_name]

        def add_vectors(x, y, o):
            if swap:
                b, a = y[...], x[...]
            else:
                a, b = x[...], y[...]
            o[...] = a + b if op == "add" else a - b

        spec = pl.BlockSpec((block,), lambda i: (i,))
        call = pl.pallas_call(
            add_vectors,
            out_shape=sds((n,), dtype),
            grid=(pl.cdiv(n, block),),
            in_specs=[spec, spec],
            out_specs=spec,
            compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics,)),
        )
        return call, [sds((n,), dtype), sds((n,), dtype)]

    def softmax_twin(shape, dtype_name):
        m, n = shape
        dtype = dtypes[dtype_name]

        def softmax(x, o):
            v = x[...]
            e = jnp.exp(v - v.max(axis=-1, keepdims=True))
            o[...] = e / e.sum(axis=-1, keepdims=True)

        spec = pl.BlockSpec((8, n), lambda i: (i, 0))
        call = pl.pallas_call(
            softmax,
            out_shape=sds((m, n), dtype),
            grid=(pl.cdiv(m, 8),),
            in_specs=[spec],
            out_specs=spec,
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        )
        return call, [sds((m, n), dtype)]

    def layer_norm_twin(shape, dtype_name, eps=1e-5):
        m, n = shape
        dtype = dtypes[dtype_name]

        def layer_norm(x, w, b, o):
            v = x[...].astype(jnp.float32)
            mean = v.sum(axis=-1, keepdims=True) / n
            d = v - mean
            var = (d * d).sum(axis=-1, keepdims=True) / n
            o[...] = (d * jax.lax.rsqrt(var + eps) * w[...] + b[...]).astype(dtype)

        rows = pl.BlockSpec((16, n), lambda i: (i, 0))
        whole = pl.BlockSpec((n,), lambda i: (0,))
        call = pl.pallas_call(
            layer_norm,
            out_shape=sds((m, n), dtype),
            grid=(pl.cdiv(m, 16),),
            in_specs=[rows, whole, whole],
            out_specs=rows,
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        )
        return call, [
            sds((m, n), dtype),
            sds((n,), jnp.float32),
            sds((n,), jnp.float32),
        ]

    def matmul_twin(shape, dtype_name):
        m, k, n = shape
        dtype = dtypes[dtype_name]
        b = 128

        def matmul(a, w, o, acc):
            @pl.when(pl.program_id(2) == 0)
            def _():
                acc[...] = jnp.zeros_like(acc)

            acc[...] += jnp.dot(a[...], w[...], preferred_element_type=jnp.float32)

            @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
            def _():
                o[...] = acc[...].astype(o.dtype)

        call = pl.pallas_call(
            matmul,
            out_shape=sds((m, n), dtype),
            grid=(pl.cdiv(m, b), pl.cdiv(n, b), pl.cdiv(k, b)),
            in_specs=[
                pl.BlockSpec((b, b), lambda i, j, kk: (i, kk)),
                pl.BlockSpec((b, b), lambda i, j, kk: (kk, j)),
            ],
            out_specs=pl.BlockSpec((b, b), lambda i, j, kk: (i, j)),
            scratch_shapes=[pltpu.VMEM((b, b), jnp.float32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary")
            ),
        )
        return call, [sds((m, k), dtype), sds((k, n), dtype)]

    def row_gather_twin(shape, dtype_name):
        rows, d, k = shape
        dtype = dtypes[dtype_name]
        b = 128

        def row_gather(idx, table, o):
            o[...] = table[...]

        # Pallas refuses a (Squeezed, 128) block of a rank-2 array (the last two block dims
        # must be divisible by (8, 128) or whole), and libtpu would too (E2002). So the twin
        # gathers from a (rows, 1, d) view, which is what tpukit's lowering does itself
        # (mosaic-lowering/src/tiling.rs) around the custom call.
        row = (pl.Squeezed(), pl.Squeezed(), b)
        call = pl.pallas_call(
            row_gather,
            out_shape=sds((k, 1, d), dtype),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(k, pl.cdiv(d, b)),
                in_specs=[pl.BlockSpec(row, lambda i, j, idx: (idx[i], 0, j))],
                out_specs=pl.BlockSpec(row, lambda i, j, idx: (i, 0, j)),
            ),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel")
            ),
        )

        def gather(idx, table):
            return call(idx, table.reshape(rows, 1, d)).reshape(k, d)

        return gather, [sds((k,), jnp.int32), sds((rows, d), dtype)]

    def flash_attention_twin(shape, dtype_name):
        bh, l, s, d = shape
        dtype = dtypes[dtype_name]
        b = 128
        scale = float(jnp.float32(1.0) / jnp.sqrt(jnp.float32(d)))
        causal = 1

        def flash_attention(q, k, v, o, mx, sm, acc):
            first_row = pl.program_id(1) * 128
            first_col = pl.program_id(2) * 128

            @pl.when(pl.program_id(2) == 0)
            def _():
                mx[...] = jnp.full_like(mx, -3.0e38)
                sm[...] = jnp.zeros_like(sm)
                acc[...] = jnp.zeros_like(acc)

            @pl.when(first_col <= first_row + 127 + (1 - causal) * 1073741824)
            def _():
                row = jax.lax.broadcasted_iota(jnp.int32, (128, 128), 0) + first_row
                col = jax.lax.broadcasted_iota(jnp.int32, (128, 128), 1) + first_col
                hidden = (col >= s) | ((col - row) * causal > 0)
                scores = jax.lax.dot_general(
                    q[...], k[...], (((1,), (1,)), ((), ())),
                    preferred_element_type=jnp.float32,
                ) * scale
                scores = jnp.where(hidden, -3.0e38, scores)
                old = mx[...]
                new = jnp.maximum(old, jnp.max(scores, axis=-1, keepdims=True))
                p = jnp.exp(scores - new)
                alpha = jnp.exp(old - new)
                sm[...] = sm[...] * alpha + jnp.sum(p, axis=-1, keepdims=True)
                acc[...] = acc[...] * alpha + jnp.dot(
                    p.astype(dtype), v[...], preferred_element_type=jnp.float32
                )
                mx[...] = new

            @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
            def _():
                o[...] = (acc[...] / sm[...]).astype(o.dtype)

        def rows(index):
            return pl.BlockSpec((pl.Squeezed(), b, d), index)

        call = pl.pallas_call(
            flash_attention,
            out_shape=sds((bh, l, d), dtype),
            grid=(bh, pl.cdiv(l, b), pl.cdiv(s, b)),
            in_specs=[
                rows(lambda h, i, j: (h, i, 0)),
                rows(lambda h, i, j: (h, j, 0)),
                rows(lambda h, i, j: (h, j, 0)),
            ],
            out_specs=rows(lambda h, i, j: (h, i, 0)),
            scratch_shapes=[
                pltpu.VMEM((b, 1), jnp.float32),
                pltpu.VMEM((b, 1), jnp.float32),
                pltpu.VMEM((b, d), jnp.float32),
            ],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary")
            ),
        )
        return call, [sds((bh, l, d), dtype), sds((bh, s, d), dtype), sds((bh, s, d), dtype)]

    return {
        "add_vectors": add_vectors_twin,
        "softmax": softmax_twin,
        "layer_norm": layer_norm_twin,
        "matmul": matmul_twin,
        "row_gather": row_gather_twin,
        "flash_attention": flash_attention_twin,
    }
