"""Pallas TPU kernels storing into reshaped and bitcast refs with a mask or at a traced start
(issue 13), shared by python/tests/test_pallas_view_store_starts.py (results on the CPU
devices) and tests/conformance/test_pallas_ops.py (compiled with libtpu): no test imports
here."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def masked_through_reshape(x_ref, y_ref, o_ref):
    """o = x, then y stored through a reshape of o where y > 0 (o is (n, r, c), x and y are
    (n * r, c))."""
    n, r, c = o_ref.shape
    o_ref[...] = x_ref[...].reshape(n, r, c)
    y = y_ref[...]
    pltpu.store(o_ref.reshape(n * r, c), y, mask=y > 0)


def masked_through_bitcast(x_ref, b_ref, o_ref):
    """o = x, then the bits b stored through an int32 view of o where they are even."""
    o_ref[...] = x_ref[...]
    bits = b_ref[...]
    pltpu.store(o_ref.bitcast(jnp.int32), bits, mask=(bits & 1) == 0)


def masked_through_packing_bitcast(x_ref, b_ref, o_ref):
    """o = x (16-bit, 2R rows), then the bits b (int32, R rows) stored through the int32 view
    of o (bf16 rows 2i and 2i + 1 packed into row i) where they are even."""
    o_ref[...] = x_ref[...]
    bits = b_ref[...]
    pltpu.store(o_ref.bitcast(jnp.int32), bits, mask=(bits & 1) == 0)


def rows_at_traced_starts(x_ref, o_ref):
    """Blocks of rows stored at traced starts into a reshape of o (o is (n, r, c), x is
    (n * r, c)): block i of x, times i + 1, lands in o[i]."""
    n, r, c = o_ref.shape
    flat = o_ref.reshape(n * r, c)

    def step(i, carry):
        rows = pl.ds(i * r, r)
        flat[rows, :] = (x_ref[rows, :].astype(jnp.float32) * (i + 1).astype(jnp.float32)
                         ).astype(flat.dtype)
        return carry

    jax.lax.fori_loop(0, n, step, 0)

