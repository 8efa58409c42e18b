"""The package and its bindings: catalog kernels built and launched from Python on numpy."""

import ml_dtypes
import numpy as np
import pytest

import tpukit


def test_catalog_lists_the_shipped_kernels():
    names = {e.name for e in tpukit.catalog()}
    assert {"add_vectors", "softmax", "layer_norm", "matmul", "row_gather"} <= names
    softmax = next(e for e in tpukit.catalog() if e.name == "softmax")
    assert softmax.shape == ("m", "n") and "bf16" in softmax.dtypes


@pytest.mark.parametrize("device", tpukit.DEVICES)
def test_add_vectors_on_numpy(device):
    n = 3000  # not a multiple of the block: the edge block is masked
    kernel = tpukit.instantiate("add_vectors", [n], "f32")
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 0.5, np.float32)
    (out,) = tpukit.launch(kernel, x, y, device=device)
    np.testing.assert_array_equal(out, x + y)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_softmax_rows(dtype, rng):
    x = rng.standard_normal((20, 128)).astype(dtype)
    kernel = tpukit.instantiate("softmax", x.shape, x.dtype)
    (out,) = tpukit.launch(kernel, x)
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(-1, keepdims=True))
    tol = 1e-6 if dtype == np.float32 else 1e-2
    assert out.dtype == x.dtype
    np.testing.assert_allclose(out.astype(np.float32), e / e.sum(-1, keepdims=True), atol=tol)


def test_kernel_prints_and_lowers():
    kernel = tpukit.instantiate("softmax", [16, 128], "f32")
    assert "reduce_max" in str(kernel)
    assert len(kernel.hash) == 64
    hlo = kernel.lower({"m": 16})
    assert "tpu_custom_call" in hlo


def test_launch_errors_are_python_exceptions():
    kernel = tpukit.instantiate("add_vectors", [8], "f32")
    with pytest.raises(tpukit.DTypeError, match="must be f32"):
        tpukit.launch(kernel, np.zeros(8, np.int32), np.zeros(8, np.int32))
    with pytest.raises(tpukit.TpukitError, match="takes 2 input arrays"):
        tpukit.launch(kernel, np.zeros(8, np.float32))
    with pytest.raises(TypeError, match="expected an array"):
        tpukit.launch(kernel, [1.0] * 8, np.zeros(8, np.float32))
    with pytest.raises(tpukit.DTypeError, match="unsupported dtype float64"):
        tpukit.launch(kernel, np.zeros(8), np.zeros(8))
    with pytest.raises(ValueError, match="unknown device"):
        tpukit.launch(kernel, np.zeros(8, np.float32), np.zeros(8, np.float32), device="tpu")
