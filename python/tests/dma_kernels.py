"""Pallas TPU kernels with manual DMA, shared by python/tests/test_pallas_dma.py (results on
the CPU devices) and tests/conformance/test_pallas_ops.py (compiled with libtpu): no test
imports here, so both suites can load it."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def double_buffered_rows(x_hbm, o_ref, buf, sems):
    """Step i computes on block i while block i + 1 is copied into the other slot."""
    i, n = pl.program_id(0), pl.num_programs(0)
    rows = buf.shape[1]

    def copy(step, slot):
        src = x_hbm.at[pl.ds(step * rows, rows)]
        return pltpu.make_async_copy(src, buf.at[slot], sems.at[slot])

    @pl.when(i == 0)
    def _():
        copy(0, 0).start()

    slot = i % 2

    @pl.when(i + 1 < n)
    def _():
        copy(i + 1, 1 - slot).start()

    copy(i, slot).wait()
    x = buf[slot].astype(jnp.float32)
    o_ref[...] = (jnp.tanh(x) * 2.0 + x).astype(o_ref.dtype)


def manual_matmul(x_hbm, y_hbm, o_ref, xbuf, ybuf, acc, sems):
    """o[i] = x[i, :] @ y with the k blocks of x and y copied by hand, two slots each, the
    copy of block k + 1 in flight while block k is multiplied."""
    bm, bk = xbuf.shape[1], xbuf.shape[2]
    i = pl.program_id(0)
    nk = x_hbm.shape[1] // bk

    def copies(k, slot):
        return (
            pltpu.make_async_copy(x_hbm.at[pl.ds(i * bm, bm), pl.ds(k * bk, bk)], xbuf.at[slot],
                                  sems.at[0, slot]),
            pltpu.make_async_copy(y_hbm.at[pl.ds(k * bk, bk)], ybuf.at[slot], sems.at[1, slot]),
        )

    for c in copies(0, 0):
        c.start()
    acc[...] = jnp.zeros_like(acc)

    def step(k, carry):
        slot = k % 2

        @pl.when(k + 1 < nk)
        def _():
            for c in copies(k + 1, 1 - slot):
                c.start()

        for c in copies(k, slot):
            c.wait()
        acc[...] += jnp.dot(xbuf[slot], ybuf[slot], preferred_element_type=jnp.float32)
        return carry

    jax.lax.fori_loop(0, nk, step, 0)
    o_ref[...] = acc[...].astype(o_ref.dtype)


def scoped_copies(x_hbm, o_hbm, sems):
    """Scoped scratch and semaphores, ``sync_copy`` in, an async copy out to HBM (two
    pieces), and a regular semaphore signalled, read and waited on."""
    def body(buf, flag):
        for j in range(2):
            pltpu.sync_copy(x_hbm.at[pl.ds(j * 8, 8)], buf)
            buf[...] = buf[...] * 3 + 1
            out = pltpu.make_async_copy(buf, o_hbm.at[pl.ds(j * 8, 8)], sems.at[j])
            out.start()
            out.wait()
        pl.semaphore_signal(flag, 2)
        pl.semaphore_wait(flag, pl.semaphore_read(flag))

    pl.run_scoped(body, pltpu.VMEM((8, 128), x_hbm.dtype), pltpu.SemaphoreType.REGULAR)


def pipelined_affine(x_hbm, o_hbm):
    """``pltpu.emit_pipeline`` over HBM refs: its own double-buffered copies, slot
    arithmetic (unsigned remainders) and scoped buffers and semaphores."""
    def inner(x_ref, o_ref):
        o_ref[...] = (x_ref[...].astype(jnp.float32) * 2 + 1).astype(o_ref.dtype)

    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    pltpu.emit_pipeline(inner, grid=(x_hbm.shape[0] // 8,), in_specs=[spec],
                        out_specs=[spec])(x_hbm, o_hbm)
