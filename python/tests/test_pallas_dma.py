"""Manual DMA in real Pallas TPU kernels: operands left in HBM (``memory_space=pl.ANY``),
``pltpu.make_async_copy(...).start()/.wait()``, ``pltpu.sync_copy``, DMA and regular
semaphores, ``pl.run_scoped``. Each kernel runs on tpukit's ``cpu`` and ``interpret`` against
Pallas interpret mode and a ``jnp`` reference (see conftest.check); the kernels that break
the rules of copies in flight are errors naming the op."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close, check
from dma_kernels import double_buffered_rows, manual_matmul, pipelined_affine, scoped_copies
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import DEVICES, pallas

BF16 = ml_dtypes.bfloat16
DTYPES = [np.float32, BF16]
ANY = pl.BlockSpec(memory_space=pl.ANY)


def sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def f32(x):
    return jnp.asarray(x, jnp.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_double_buffered_copies_across_grid_steps(dtype, rng):
    x = rng.standard_normal((40, 256)).astype(dtype)
    check(double_buffered_rows, sds(x.shape, dtype), [x],
          lambda x: (jnp.tanh(f32(x)) * 2.0 + f32(x)).astype(dtype), grid=(5,),
          in_specs=[ANY], out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
          scratch_shapes=[pltpu.VMEM((2, 8, 256), dtype), pltpu.SemaphoreType.DMA((2,))],
          compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_with_manual_double_buffering(dtype, rng):
    x = rng.standard_normal((256, 384)).astype(dtype)
    y = rng.standard_normal((384, 128)).astype(dtype)
    # sums of 384 products: f32 rounding differs in the order of accumulation
    tolerance = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=2e-2, atol=1e-1)
    check(manual_matmul, sds((256, 128), dtype), [x, y],
          lambda x, y: (f32(x) @ f32(y)).astype(dtype), tolerance=tolerance, grid=(2,),
          in_specs=[ANY, ANY], out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
          scratch_shapes=[pltpu.VMEM((2, 128, 128), dtype), pltpu.VMEM((2, 128, 128), dtype),
                          pltpu.VMEM((128, 128), jnp.float32), pltpu.SemaphoreType.DMA((2, 2))])


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int32])
def test_run_scoped_sync_copy_and_semaphores(dtype, rng):
    x = (rng.standard_normal((16, 128)) * 10).astype(dtype)
    check(scoped_copies, sds(x.shape, dtype), [x], lambda x: x * 3 + 1,
          in_specs=[ANY], out_specs=ANY, scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])


def kernel_of(body, out, **kw):
    return pallas.custom_kernel(lambda *a: out, body, **kw)


def test_reading_a_destination_before_its_wait_is_an_error():
    def body(x_hbm, o_ref, buf, sem):
        c = pltpu.make_async_copy(x_hbm, buf, sem)
        c.start()
        o_ref[...] = buf[...]  # too early
        c.wait()

    k = kernel_of(body, sds((8, 128), jnp.float32), in_specs=[ANY],
                  scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])
    with pytest.raises(tpukit.TpukitError, match=r"op `load`.*reads an element of the "
                       r"destination of a copy in flight .*test_pallas_dma.py"):
        k(np.zeros((8, 128), np.float32), device="interpret")


def test_overlapping_copies_in_flight_are_an_error():
    def body(x_hbm, o_ref, buf, sems):
        a = pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[pl.ds(0, 8)], sems.at[0])
        b = pltpu.make_async_copy(x_hbm.at[pl.ds(8, 8)], buf.at[pl.ds(4, 8)], sems.at[1])
        a.start()
        b.start()
        a.wait()
        b.wait()
        o_ref[...] = buf[...]

    k = kernel_of(body, sds((16, 128), jnp.float32), in_specs=[ANY],
                  scratch_shapes=[pltpu.VMEM((16, 128), jnp.float32),
                                  pltpu.SemaphoreType.DMA((2,))])
    with pytest.raises(tpukit.TpukitError, match=r"op `dma_start`.*writes elements that the "
                       r"copy started at .* also writes"):
        k(np.zeros((16, 128), np.float32), device="interpret")


def test_a_copy_never_waited_on_is_an_error():
    def body(x_hbm, o_ref, buf, sem):
        pltpu.make_async_copy(x_hbm, buf, sem).start()
        o_ref[...] = jnp.zeros_like(o_ref)

    k = kernel_of(body, sds((8, 128), jnp.float32), in_specs=[ANY],
                  scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])
    with pytest.raises(tpukit.TpukitError, match="never waited on"):
        k(np.zeros((8, 128), np.float32), device="interpret")


@pytest.mark.parametrize("device", DEVICES)
def test_waiting_on_a_semaphore_nothing_signalled_is_an_error(device):
    # On a TPU this wait never returns; here it fails, naming the op, on every device.
    def body(x_ref, o_ref, flag):
        pl.semaphore_wait(flag, 1)
        o_ref[...] = x_ref[...]

    k = kernel_of(body, sds((8, 128), jnp.float32),
                  scratch_shapes=[pltpu.SemaphoreType.REGULAR])
    with pytest.raises(tpukit.TpukitError,
                       match=r"op `semaphore_wait`.*test_pallas_dma.py.*never returns"):
        k(np.zeros((8, 128), np.float32), device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_a_dma_wait_without_its_copy_is_an_error(device):
    def body(x_hbm, o_ref, buf, sem):
        pltpu.make_async_copy(x_hbm, buf, sem).wait()
        o_ref[...] = buf[...]

    k = kernel_of(body, sds((8, 128), jnp.float32), in_specs=[ANY],
                  scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])
    with pytest.raises(tpukit.TpukitError, match=r"op `dma_wait`.*never returns"):
        k(np.zeros((8, 128), np.float32), device=device)


def test_the_ir_shows_copies_and_spaces():
    k = kernel_of(double_buffered_rows, sds((16, 128), jnp.float32), grid=(2,), in_specs=[ANY],
                  out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                  scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                                  pltpu.SemaphoreType.DMA((2,))])
    text = str(k.kernel(np.zeros((16, 128), np.float32)))
    assert "f32[16,128] any" in text and "i32[2] dma_semaphore" in text, text
    assert "dma_start %" in text and "dma_wait %" in text, text


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_emit_pipeline(dtype, device, rng):
    # Pallas interpret mode asks the (CPU) default device for TPU facts here: reference only.
    x = rng.standard_normal((48, 128)).astype(dtype)
    k = kernel_of(pipelined_affine, sds(x.shape, dtype), in_specs=[ANY], out_specs=ANY)
    want = np.asarray((f32(x) * 2 + 1).astype(dtype))
    assert_close(k(x, device=device), want, f"tpukit {device} vs reference", None)
