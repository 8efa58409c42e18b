"""``pl.debug_print`` of scalars (Mosaic's ``tpu.log``) prints on both devices: one line per
grid step that reaches it, the values in the ``{}`` places, on the process's standard output
(where ``capfd`` sees it), from eager calls, jitted ones and ``on_cpu()``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tpukit
from tpukit import pallas


def body(x_ref, o_ref):
    i = pl.program_id(0)
    pl.debug_print("block {} of {}", i, pl.num_programs(0))

    @pl.when(i == 1)
    def _():
        pl.debug_print("second block")

    o_ref[...] = x_ref[...] * 2


SPEC = pl.BlockSpec((8, 128), lambda i: (i, 0))
# An `arbitrary` axis runs its steps in order (`parallel` ones may print in any order).
GRID = dict(grid=(3,), in_specs=[SPEC], out_specs=SPEC,
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))
kernel = pallas.custom_kernel(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), body, **GRID)
WANT = ["block 0 of 3", "block 1 of 3", "second block", "block 2 of 3"]


def printed(capfd):
    return [line for line in capfd.readouterr().out.splitlines() if line]


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_prints_once_per_step(device, capfd):
    x = np.arange(24 * 128, dtype=np.float32).reshape(24, 128)
    capfd.readouterr()
    np.testing.assert_array_equal(kernel(x, device=device), x * 2)
    assert printed(capfd) == WANT
    jax.block_until_ready(jax.jit(lambda a: kernel(a, device=device))(jnp.asarray(x)))
    assert printed(capfd) == WANT


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_under_on_cpu(device, capfd):
    x = jnp.ones((24, 128), jnp.float32)
    call = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), **GRID)
    capfd.readouterr()
    with pallas.on_cpu(device=device):
        out = jax.block_until_ready(jax.jit(call)(x))
    np.testing.assert_array_equal(out, 2 * np.ones((24, 128), np.float32))
    assert printed(capfd) == WANT
