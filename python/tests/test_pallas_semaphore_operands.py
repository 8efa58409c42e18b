"""Semaphores crossing Pallas calls (issue 13): a DMA semaphore returned by one
``pl.pallas_call`` (``out_shape=pltpu.SemaphoreType.DMA(...)``) and waited on in another
(``pl.BlockSpec(memory_space=pltpu.SEMAPHORE)``), and a regular semaphore's count carried
across calls, in jitted programs under ``on_cpu()``, on both devices, against numpy."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import semaphore_kernels as sk

import tpukit
from tpukit import DEVICES, pallas


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_copy_started_in_one_call_is_waited_on_in_another(dtype, device, debug, rng):
    x = rng.standard_normal((40, 256)).astype(dtype)
    rows = np.array([3, 0, 4], np.int32)
    with pallas.on_cpu(device, debug=debug):
        got, doubled = jax.jit(sk.gather_rows)(jnp.asarray(x), jnp.asarray(rows))
    want = np.concatenate([x[8 * r:8 * r + 8] for r in rows])
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(doubled), (x.astype(np.float32) * 2).astype(dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_copies_handed_between_calls_in_a_loop(device, rng):
    x = rng.standard_normal((32, 128)).astype(np.float32)

    def program(x):
        def body(i, acc):
            got, _ = sk.gather_rows(x, jnp.stack([i % 4, (i + 1) % 4]))
            return acc + got

        return jax.lax.fori_loop(0, 5, body, jnp.zeros((16, 128), x.dtype))

    with pallas.on_cpu(device):
        got = jax.jit(program)(jnp.asarray(x))
    tiles = x.reshape(4, 8, 128)
    want = sum(np.concatenate([tiles[i % 4], tiles[(i + 1) % 4]]) for i in range(5))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [0, 1, 37])
def test_a_regular_semaphore_count_crosses_calls(device, n):
    with pallas.on_cpu(device):
        got = jax.jit(lambda n: sk.drained(sk.signalled(n)))(jnp.array([n], jnp.int32))
    np.testing.assert_array_equal(np.asarray(got), [n + 1, 0])


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("device", DEVICES)
def test_waiting_in_another_call_for_a_copy_never_started_is_an_error(device, debug, rng):
    x = rng.standard_normal((8, 128)).astype(np.float32)
    f = jax.jit(sk.maybe_copied)
    with pallas.on_cpu(device, debug=debug):
        np.testing.assert_array_equal(np.asarray(f(jnp.asarray(x), jnp.array([1], jnp.int32))), x)
        with pytest.raises(Exception, match=r"op `dma_wait`.*semaphore .*holds 0.*never returns"):
            jax.block_until_ready(f(jnp.asarray(x), jnp.array([0], jnp.int32)))


def test_the_ir_shows_semaphore_operands():
    from tpukit import _cpu_lowering

    before = len(_cpu_lowering.imported())
    with pallas.on_cpu():
        jax.jit(sk.gather_rows).lower(jnp.zeros((40, 128)), jnp.zeros((2,), jnp.int32))
    start, wait = (str(k) for k in _cpu_lowering.imported()[before:])
    assert "output %out2: i32[2] dma_semaphore" in start, start
    assert "input %in2: i32[2] dma_semaphore" in wait, wait


def test_a_semaphore_output_of_a_custom_kernel_is_its_count():
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def body(n_ref, sem):
        pl.semaphore_signal(sem, n_ref[0] * 3)

    k = pallas.custom_kernel(body, out_shape=pltpu.SemaphoreType.REGULAR(()),
                             in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                             out_specs=sk.SEM)
    for device in DEVICES:
        got = k(np.array([5], np.int32), device=device)
        assert got.dtype == np.int32 and got.shape == ()
        assert int(got) == 15



@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_copies_signalling_a_regular_semaphore_are_counted(dtype, rng):
    from conftest import check
    from jax.experimental.pallas import tpu as pltpu

    x = rng.standard_normal((32, 128)).astype(dtype)
    check(sk.counted_copies, jax.ShapeDtypeStruct((16, 128), dtype), [x],
          lambda x: (x[:16].astype(np.float32) * 2 + x[16:].astype(np.float32)).astype(dtype),
          in_specs=[sk.ANY], out_specs=sk.ANY, scratch_shapes=[pltpu.SemaphoreType.REGULAR])


def test_reading_before_the_regular_semaphore_wait_is_an_error():
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def body(x_hbm, o_ref, buf, sem):
        pltpu.async_copy(x_hbm, buf, sem)
        o_ref[...] = buf[...]  # too early
        pl.semaphore_wait(sem)

    k = pallas.custom_kernel(body, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                             in_specs=[sk.ANY],
                             scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                             pltpu.SemaphoreType.REGULAR])
    with pytest.raises(tpukit.TpukitError, match=r"op `load`.*reads an element of the "
                       r"destination of a copy in flight"):
        k(np.zeros((8, 128), np.float32), device="interpret")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_copies_into_refs_of_run_state(dtype, device, rng):
    x = rng.standard_normal((16, 128)).astype(dtype)
    y = rng.standard_normal((48, 128)).astype(dtype)
    rows = np.array([4, 1], np.int32)
    with pallas.on_cpu(device, debug=True):
        got = jax.jit(sk.scatter_rows_in_place)(jnp.asarray(x), jnp.asarray(y), jnp.asarray(rows))
    want = y.copy()
    want[32:40], want[8:16] = x[:8], x[8:]
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_copy_into_an_input_aliased_to_an_output(dtype, device, rng):
    x = rng.standard_normal((8, 128)).astype(dtype)
    y = rng.standard_normal((24, 128)).astype(dtype)
    with pallas.on_cpu(device):
        got = jax.jit(sk.add_into_aliased_input)(jnp.asarray(x), jnp.asarray(y))
    want = y.copy()
    want[8:16] = (x.astype(np.float32) + 1).astype(dtype)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_a_copy_into_an_input_not_aliased_is_refused_by_name(rng):
    from jax.experimental.pallas import tpu as pltpu

    def body(x_hbm, y_hbm, o_hbm, sem):
        pltpu.make_async_copy(x_hbm, y_hbm, sem).start()
        pltpu.make_async_copy(x_hbm, y_hbm, sem).wait()

    k = pallas.custom_kernel(body, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                             in_specs=[sk.ANY, sk.ANY], out_specs=sk.ANY,
                             scratch_shapes=[pltpu.SemaphoreType.DMA])
    x = np.zeros((8, 128), np.float32)
    with pytest.raises(tpukit.TpukitError, match=r"op `dma_start`: `in1` is an input: it is "
                       r"read-only \(at .*test_pallas_semaphore_operands.py"):
        k(x, x)


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_copy_of_a_traced_number_of_rows(dtype, device, debug, rng):
    x = rng.standard_normal((16, 8, 128)).astype(dtype)
    y = rng.standard_normal((12, 8, 128)).astype(dtype)
    f = jax.jit(sk.rows_of_traced_count)
    for src, dst, n in [(3, 1, 5), (0, 0, 12), (15, 11, 1), (4, 4, 0)]:
        with pallas.on_cpu(device, debug=debug):
            got = f(jnp.array([src, dst, n], jnp.int32), jnp.asarray(x), jnp.asarray(y))
        want = y.copy()
        want[dst:dst + n] = x[src:src + n]
        np.testing.assert_array_equal(np.asarray(got), want)
