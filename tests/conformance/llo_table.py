"""LLO op counts of tpukit's lowering beside the same kernel written in JAX Pallas.

Both are compiled by libtpu for v5e and v6e; the count is the number of `llo.*` ops in Mosaic's
final module (`*-post-finalize-llo.txt`), a static proxy for per-step cost. Prints a Markdown
table for BENCHMARKS.md. Run from the repository root after `cargo build -p tpukit-cli`:

    .venv/bin/python tests/conformance/llo_table.py
"""

import functools
import subprocess
import sys

from conftest import CLI
from tpu_compile import TOPOLOGIES, Compiler


def pallas_kernels(jnp, pl, pltpu, jax):
    """The catalog kernels written with `pl.pallas_call`: name -> (shape, dtype) -> jitted fn."""

    def add(shape, dtype):
        (n,) = shape

        def kernel(x, y, o):
            o[...] = x[...] + y[...]

        spec = pl.BlockSpec((1024,), lambda i: (i,))
        call = pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((n,), dtype),
            grid=(pl.cdiv(n, 1024),),
            in_specs=[spec, spec],
            out_specs=spec,
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        )
        return call, [(n,), (n,)]

    def softmax(shape, dtype):
        m, n = shape

        def kernel(x, o):
            v = x[...]
            e = jnp.exp(v - v.max(axis=-1, keepdims=True))
            o[...] = e / e.sum(axis=-1, keepdims=True)

        spec = pl.BlockSpec((8, n), lambda i: (i, 0))
        call = pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((m, n), dtype),
            grid=(pl.cdiv(m, 8),),
            in_specs=[spec],
            out_specs=spec,
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        )
        return call, [(m, n)]

    def matmul(shape, dtype):
        m, k, n = shape
        b = 128

        def kernel(a, w, o, acc):
            @pl.when(pl.program_id(2) == 0)
            def _():
                acc[...] = jnp.zeros_like(acc)

            acc[...] += jnp.dot(a[...], w[...], preferred_element_type=jnp.float32)

            @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
            def _():
                o[...] = acc[...].astype(o.dtype)

        call = pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((m, n), dtype),
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
        return call, [(m, k), (k, n)]

    return {"add_vectors": add, "softmax": softmax, "matmul": matmul}


CASES = [
    ("add_vectors", (4096,)),
    ("softmax", (64, 256)),
    ("matmul", (256, 512, 256)),
]


def pallas_text(make, shape, dtype, jax, jnp):
    call, arg_shapes = make(shape, dtype)
    args = [jax.ShapeDtypeStruct(s, dtype) for s in arg_shapes]
    return jax.jit(call).trace(*args).lower(lowering_platforms=("tpu",)).as_text()


def main():
    compiler = Compiler()
    import jax
    import jax.numpy as jnp
    from jax._src.pallas.mosaic import tpu_info
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    # Rank-1 blocks query the chip; there is none on a CPU host (a private API, see the notes).
    tpu_info.registry["cpu"] = functools.partial(
        pltpu.get_tpu_info_for_chip, pltpu.ChipVersion.TPU_V5E, 1
    )
    kernels = pallas_kernels(jnp, pl, pltpu, jax)
    print("| kernel | shape | dtype | target | tpukit | Pallas |")
    print("|---|---|---|---|---:|---:|")
    for name, shape in CASES:
        for dtype_name, dtype in (("f32", jnp.float32), ("bf16", jnp.bfloat16)):
            shape_text = "x".join(map(str, shape))
            ours = subprocess.run(
                [str(CLI), "lower", name, "--shape", shape_text, "--dtype", dtype_name],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            theirs = pallas_text(kernels[name], shape, dtype, jax, jnp)
            for topology in TOPOLOGIES:
                counts = []
                for text in (ours, theirs):
                    row = compiler.compile(text, topology)
                    ok = row["ok"] and row["llo_ops"]
                    counts.append(str(row["llo_ops"][0]["total"]) if ok else "fails")
                cells = [name, shape_text, dtype_name, topology, *counts]
                print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
