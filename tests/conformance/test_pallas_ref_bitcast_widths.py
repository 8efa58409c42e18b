"""Ref bitcasts across widths (``x_ref.bitcast(jnp.int8)``, issue 13): kernels reading through
and storing into refs bitcast between 8, 16 and 32 bits, imported by tpukit, lowered back
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

    body = {"read": read, "store": store, "traced": traced}[kind]
    fn = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((_rows(to, 16), 256), to))
    x = jnp.zeros((_rows(src, 16), 256), src)
    return pallas.custom_jax_kernel(fn).kernel(x).lower()


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("kind", ["read", "store", "traced"])
@pytest.mark.parametrize(("src", "to"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_a_ref_bitcast_across_widths_compiles_for_tpu(compiler, src, to, kind, topology):
    result = compiler.compile(_lowered(src, to, kind), topology)
    assert result["ok"], result.get("error")
    assert result["llo_ops"][0]["total"] > 0
