"""`jnp.take_along_axis` inside Pallas kernels (Mosaic's `tpu.dynamic_gather`) along the
lane and the sublane axis, f32, bf16 and int32, with negative indices (which
`take_along_axis` wraps before the gather), checked against the same gather by XLA on random
inputs on both devices."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.experimental import pallas as pl

import tpukit
from tpukit import pallas


def gather_both_axes(x, lanes, rows):
    def body(x_ref, l_ref, r_ref, o_ref, p_ref):
        x = x_ref[...]
        o_ref[...] = jnp.take_along_axis(x, l_ref[...], axis=1)
        p_ref[...] = jnp.take_along_axis(x, r_ref[...], axis=0)

    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return pl.pallas_call(body, out_shape=(out, out))(x, lanes, rows)


def reference(x, lanes, rows):
    return (np.take_along_axis(x, lanes, axis=1), np.take_along_axis(x, rows, axis=0))


@pytest.mark.parametrize("device", tpukit.DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32])
@pytest.mark.parametrize("shape", [(8, 128), (16, 256)])
def test_take_along_axis(device, dtype, shape):
    rng = np.random.default_rng(17)
    m, n = shape
    x = (rng.standard_normal(shape) * 100).astype(dtype)
    lanes = rng.integers(-n, n, shape, dtype=np.int32)
    rows = rng.integers(-m, m, shape, dtype=np.int32)
    kernel = pallas.custom_jax_kernel(gather_both_axes)
    assert "gather" in str(kernel.kernel(x, lanes, rows))
    got = kernel(x, lanes, rows, device=device)
    for g, w in zip(got, reference(x, lanes, rows), strict=True):
        assert np.asarray(g).dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), w)


def test_take_along_axis_on_torch_tensors():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(19)
    x = rng.standard_normal((8, 128)).astype(np.float32)
    lanes = rng.integers(0, 128, (8, 128), dtype=np.int32)
    rows = rng.integers(0, 8, (8, 128), dtype=np.int32)
    got = pallas.custom_jax_kernel(gather_both_axes)(
        *(torch.from_numpy(a) for a in (x, lanes, rows))
    )
    for g, w in zip(got, reference(x, lanes, rows), strict=True):
        np.testing.assert_array_equal(g.numpy(), w)
