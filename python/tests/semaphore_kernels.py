"""Pallas calls that hand semaphores to each other (shared by test_pallas_semaphore_operands.py
and the conformance suite): a copy started in one call and waited on in another, the DMA
semaphore crossing between them as a call result and operand, and a regular semaphore's
count carried from one call to the next."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ANY = pl.BlockSpec(memory_space=pl.ANY)
SEM = pl.BlockSpec(memory_space=pltpu.SEMAPHORE)


def _start_rows_kernel(rows_ref, x_hbm, x_alias, o_hbm, sems):
    del x_alias
    for k in range(o_hbm.shape[0] // 8):
        pltpu.make_async_copy(x_hbm.at[pl.ds(rows_ref[k] * 8, 8)], o_hbm.at[pl.ds(k * 8, 8)],
                              sems.at[k]).start()


def start_rows(x, rows):
    """Starts copying the 8-row tiles ``rows`` of ``x`` (in HBM) into a new array; returns
    ``x`` (aliased, so XLA keeps it alive while the copies fly), the destination and the
    copies' DMA semaphores."""
    n = rows.shape[0]
    return pl.pallas_call(
        _start_rows_kernel,
        out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype),
                   jax.ShapeDtypeStruct((8 * n, x.shape[1]), x.dtype),
                   pltpu.SemaphoreType.DMA((n,))),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, in_specs=[ANY], out_specs=(ANY, ANY, SEM)),
        input_output_aliases={1: 0},
    )(rows, x)


def _wait_rows_kernel(x_hbm, o_hbm, sems, o_alias):
    del o_alias
    for k in range(o_hbm.shape[0] // 8):
        pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], o_hbm.at[pl.ds(k * 8, 8)],
                              sems.at[k]).wait()


def wait_rows(x, started):
    """Waits for the copies of ``start_rows``; returns their destination."""
    out, sems = started
    return pl.pallas_call(
        _wait_rows_kernel,
        out_shape=jax.ShapeDtypeStruct(out.shape, out.dtype),
        in_specs=[ANY, ANY, SEM], out_specs=ANY,
        input_output_aliases={1: 0},
    )(x, out, sems)


def gather_rows(x, rows):
    """``x``'s 8-row tiles ``rows``, copied by DMAs that cross two calls, with XLA's ops
    (``2 * x``) running between the start and the wait."""
    x, *started = start_rows(x, rows)
    other = x * 2
    return wait_rows(x, started), other


def _signal_kernel(n_ref, sem):
    pl.semaphore_signal(sem, n_ref[0])
    pl.semaphore_signal(sem, 1)


def signalled(n):
    """A regular semaphore signalled ``n[0] + 1`` times (by amount) in one call."""
    return pl.pallas_call(
        _signal_kernel, out_shape=pltpu.SemaphoreType.REGULAR(()),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)], out_specs=SEM,
    )(n)


def _drain_kernel(sem, o_ref):
    before = pl.semaphore_read(sem)
    pl.semaphore_wait(sem, before)
    o_ref[0] = before
    o_ref[1] = pl.semaphore_read(sem)


def drained(sem):
    """[the count ``sem`` held, the count after waiting it down to zero], in another call."""
    return pl.pallas_call(
        _drain_kernel, out_shape=jax.ShapeDtypeStruct((2,), jnp.int32),
        in_specs=[SEM], out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
    )(sem)


def _maybe_start_kernel(flag_ref, x_hbm, o_hbm, sem):
    @pl.when(flag_ref[0] != 0)
    def _():
        pltpu.make_async_copy(x_hbm, o_hbm, sem).start()


def maybe_copied(x, flag):
    """Copies ``x`` when ``flag[0]`` is nonzero, waited on in a second call (which never
    returns on a TPU when the copy did not start)."""
    o, sem = pl.pallas_call(
        _maybe_start_kernel,
        out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype), pltpu.SemaphoreType.DMA(())),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), ANY], out_specs=(ANY, SEM),
    )(flag, x)

    def wait(x_hbm, o_hbm, sem, o_alias):
        del o_alias
        pltpu.make_async_copy(x_hbm, o_hbm, sem).wait()

    return pl.pallas_call(
        wait, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[ANY, ANY, SEM], out_specs=ANY, input_output_aliases={1: 0},
    )(x, o, sem)


def counted_copies(x_hbm, o_hbm, sem):
    """Two copies signalling one regular semaphore (which counts copies, TPU v6+), waited
    for together; then the result copied back, waited for alone."""

    def body(a, b):
        half = x_hbm.shape[0] // 2
        pltpu.async_copy(x_hbm.at[pl.ds(0, half)], a, sem)
        pltpu.async_copy(x_hbm.at[pl.ds(half, half)], b, sem)
        pl.semaphore_wait(sem, 2)
        a[...] = a[...] * 2 + b[...]
        pltpu.async_copy(a, o_hbm, sem)
        pl.semaphore_wait(sem)

    half = (x_hbm.shape[0] // 2, x_hbm.shape[1])
    pl.run_scoped(body, pltpu.VMEM(half, x_hbm.dtype), pltpu.VMEM(half, x_hbm.dtype))


def scatter_rows_in_place(x, y, rows):
    """``y`` with its 8-row tiles ``rows`` replaced by ``x``'s first tiles, by copies into
    the refs of a ``pl.run_state`` (closed over by the kernel, which Pallas passes as inputs
    aliased to outputs)."""

    def stateful(refs):
        x_ref, y_ref = refs

        def kernel(rows_ref, sems):
            for k in range(rows.shape[0]):
                pltpu.make_async_copy(x_ref.at[pl.ds(8 * k, 8)],
                                      y_ref.at[pl.ds(rows_ref[k] * 8, 8)], sems.at[k]).start()
            for k in range(rows.shape[0]):
                pltpu.make_async_copy(x_ref.at[pl.ds(8 * k, 8)],
                                      y_ref.at[pl.ds(rows_ref[k] * 8, 8)], sems.at[k]).wait()

        pl.pallas_call(kernel, out_shape=[],
                       in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                       scratch_shapes=[pltpu.SemaphoreType.DMA((rows.shape[0],))])(rows)

    return pl.run_state(stateful)((x, y))[1]


def _add_into_kernel(x_hbm, y_hbm, o_alias, buf, sem):
    del o_alias
    pltpu.sync_copy(x_hbm, buf)
    buf[...] = buf[...] + 1
    pltpu.make_async_copy(buf, y_hbm.at[pl.ds(8, 8)], sem).start()
    pltpu.make_async_copy(buf, y_hbm.at[pl.ds(8, 8)], sem).wait()


def add_into_aliased_input(x, y):
    """``y`` (aliased to the output) with its rows 8..16 replaced by ``x + 1``, copied into
    the input's ref."""
    return pl.pallas_call(
        _add_into_kernel, out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype),
        in_specs=[ANY, ANY], out_specs=ANY, input_output_aliases={1: 0},
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA],
    )(x, y)


def copy_rows_of_traced_count(params_ref, x_hbm, y_hbm, o_hbm, sem):
    """Copies ``params[2]`` rows of ``x`` from row ``params[0]`` into ``o`` (which aliases
    ``y``) at row ``params[1]``: a copy of traced size, ``pl.ds(start, n)``."""
    del y_hbm
    src, dst, n = params_ref[0], params_ref[1], params_ref[2]
    pltpu.async_copy(x_hbm.at[pl.ds(src, n)], o_hbm.at[pl.ds(dst, n)], sem).wait()


def rows_of_traced_count(params, x, y):
    return pl.pallas_call(
        copy_rows_of_traced_count, out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), ANY, ANY], out_specs=ANY,
        scratch_shapes=[pltpu.SemaphoreType.DMA], input_output_aliases={2: 0},
    )(params, x, y)
