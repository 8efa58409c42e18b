"""Programs whose kernels write refs made outside them (``jax.new_ref``,
``pl.empty_ref_like``) in SMEM, VMEM or HBM: Pallas passes such a ref to a ``pl.core_map`` as
an input aliased to an output, one buffer on a TPU. Run on the CPU devices in
test_pallas_aliased_refs.py, lowered back and compiled with libtpu in
tests/conformance/test_pallas_ops.py."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _mesh():
    return pltpu.create_tensorcore_mesh("core")


def smem_scan(x):
    """Scalar stores into an SMEM ref made by ``pl.empty_ref_like``, by two kernels: the
    first writes ``3 * x + i``, the second turns it into its running sum, reading what it
    wrote a step before. ``x``: a 1-D int32 or float32 array."""
    n = x.shape[0]
    x_ref = jax.new_ref(x, memory_space=pltpu.SMEM)
    y_ref = pl.empty_ref_like(pltpu.SMEM((n,), x.dtype))

    @pl.core_map(_mesh())
    def _():
        for i in range(n):
            y_ref[i] = x_ref[i] * 3 + i

    @pl.core_map(_mesh())
    def _():
        def step(i, carry):
            y_ref[i] = y_ref[i] + y_ref[i - 1]
            return carry

        jax.lax.fori_loop(1, n, step, 0)

    return y_ref[...]


def vmem_update(x, y):
    """Vector stores into VMEM refs (``jax.new_ref(..., memory_space=pltpu.VMEM)``): one
    kernel writes ``y_ref`` whole from ``x_ref``, the next reads it back, adds ``x`` and
    overwrites its first rows (a partial store). Returns both refs' final contents."""
    x_ref = jax.new_ref(x, memory_space=pltpu.VMEM)
    y_ref = jax.new_ref(y, memory_space=pltpu.VMEM)
    rows = x.shape[0] // 2

    @pl.core_map(_mesh())
    def _():
        y_ref[...] = y_ref[...] * 2 + x_ref[...]

    @pl.core_map(_mesh())
    def _():
        x_ref[...] = x_ref[...] + y_ref[...]
        y_ref[pl.ds(0, rows), :] = jnp.zeros((rows, x.shape[1]), y.dtype) - 1

    return x_ref[...], y_ref[...]


def smem_to_hbm_in_two_kernels(x):
    """An SMEM ref written by scalar stores, copied into an HBM ref by a DMA started in one
    kernel and waited on in the next, with a semaphore made by ``pl.empty_ref_like`` (an
    input aliased to an output of both kernels)."""
    n = x.shape[0]
    x_ref = jax.new_ref(x, memory_space=pltpu.SMEM)
    y_ref = pl.empty_ref_like(pltpu.SMEM((n,), x.dtype))
    out_ref = pl.empty_ref_like(pltpu.HBM((n,), x.dtype))
    sem = pl.empty_ref_like(pltpu.SemaphoreType.DMA(()))

    @pl.core_map(_mesh())
    def _():
        for i in range(n):
            y_ref[i] = x_ref[n - 1 - i] - i

    @pl.core_map(_mesh())
    def _():
        pltpu.make_async_copy(y_ref, out_ref, sem).start()

    @pl.core_map(_mesh())
    def _():
        pltpu.make_async_copy(y_ref, out_ref, sem).wait()

    return out_ref[...]


def copy_between_refs(x, memory_space):
    """A copy (``pltpu.sync_copy``) from one ``jax.new_ref`` into another in ``memory_space``
    (SMEM or HBM), then a store of twice the copy's first element into the target's last
    one (SMEM only)."""
    x_ref = jax.new_ref(x, memory_space=memory_space)
    y_ref = jax.new_ref(jnp.zeros_like(x), memory_space=memory_space)

    @pl.core_map(_mesh())
    def _():
        pltpu.sync_copy(x_ref, y_ref)
        if memory_space is pltpu.SMEM:
            y_ref[x.shape[0] - 1] = y_ref[0] * 2

    return y_ref[...]
