"""Ref bitcasts across widths (``x_ref.bitcast(jnp.int8)``, issue 13): kernels reading through,
storing into and copying (DMA) through refs bitcast between 8, 16 and 32 bits, imported by tpukit, lowered back
(``Kernel.lower``: the IR's loads of the rows beneath and its value bitcast, Mosaic's
``tpu.bitcast``) and compiled with libtpu for v5e and v6e. Their results are checked on the
CPU devices in python/tests/test_pallas_ref_bitcast_widths.py."""

import functools

import pytest
from tpu_compile import TOPOLOGIES

jax = pytest.importorskip("jax")

PAIRS = [
    ("int16", "int32"), ("int16", "int8"), ("int8", "float32"), ("int8", "bfloat16"),
    ("int8", "int32"), ("int8", "int16"), ("float32", "int8"), ("bfloat16", "int8"),
    ("int32", "int8"), ("int16", "float32"),
]


def _rows(dtype, rows32):
    import numpy as np

    return rows32 * 32 // (np.dtype(dtype).itemsize * 8)


@functools.cache
def _lowered(src, to, kind):
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    from tpukit import pallas

    def read(x_ref, o_ref):
        o_ref[...] = x_ref.bitcast(to)[...]

    def store(x_ref, o_ref):
        o_ref.bitcast(src)[...] = x_ref[...]

    def traced(x_ref, o_ref):
        m = _rows(to, 8)

        def body(i, carry):
            start = pl.multiple_of(i * m, m)
            o_ref[pl.ds(start, m), :] = x_ref.bitcast(to)[pl.ds(start, m), :]
            return carry

        lax.fori_loop(0, 2, body, 0)

    def copy(x_hbm, o_hbm, sem):
        dma = pltpu.make_async_copy(x_hbm.bitcast(to), o_hbm, sem)
        dma.start()
        dma.wait()

    body = {"read": read, "store": store, "traced": traced, "copy": copy}[kind]
    out = jax.ShapeDtypeStruct((_rows(to, 16), 256), to)
    if kind == "copy":
        hbm = pl.BlockSpec(memory_space=pl.ANY)
        fn = pl.pallas_call(body, out_shape=out, in_specs=[hbm], out_specs=hbm,
                            scratch_shapes=[pltpu.SemaphoreType.DMA])
    else:
        fn = pl.pallas_call(body, out_shape=out)
    x = jnp.zeros((_rows(src, 16), 256), src)
    return pallas.custom_jax_kernel(fn).kernel(x).lower()


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("kind", ["read", "store", "traced", "copy"])
@pytest.mark.parametrize(("src", "to"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_a_ref_bitcast_across_widths_compiles_for_tpu(compiler, src, to, kind, topology):
    result = compiler.compile(_lowered(src, to, kind), topology)
    assert result["ok"], result.get("error")
    assert result["llo_ops"][0]["total"] > 0
