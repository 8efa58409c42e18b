"""Torch tensors through both decorators: the TorchTPU seed examples as written, results of
the caller's kind and dtype, zero-copy hand-over, errors. Skipped only where torch is not
installed (``scripts/setup.sh`` installs it; ``TPUKIT_TORCH=0`` opts out)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tpukit  # noqa: E402
from tpukit import _arrays, pallas  # noqa: E402


@pallas.custom_kernel(lambda x, y: torch.empty_like(x))
def add_vectors(x_ref, y_ref, o_ref):
    x, y = x_ref[...], y_ref[...]
    o_ref[...] = x + y


@pallas.custom_jax_kernel
def add_vectors_jax(x, y):
    return jax.numpy.add(x, y)


@pytest.mark.parametrize("kernel", [add_vectors, add_vectors_jax], ids=["pallas", "jax"])
def test_the_seed_user_experience(kernel):
    # As on the slide, with the CPU standing in for the TPU device.
    tpu_d = torch.device("cpu")
    x = torch.tensor([0.1, 0.2, 0.3], device=tpu_d)
    y = torch.tensor([0.4, 0.5, 0.6], device=tpu_d)
    expected = torch.add(x, y).to("cpu")
    actual = kernel(x, y).to("cpu")
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("kernel", [add_vectors, add_vectors_jax], ids=["pallas", "jax"])
@pytest.mark.parametrize("device", ["cpu", "interpret"])
def test_seed_kernels_on_both_devices(kernel, device):
    x = torch.tensor([0.1, 0.2, 0.3])
    y = torch.tensor([0.4, 0.5, 0.6])
    actual = kernel(x, y, device=device)
    assert isinstance(actual, torch.Tensor)
    assert actual.dtype == torch.float32 and actual.shape == (3,)
    torch.testing.assert_close(actual, torch.add(x, y))


@pytest.mark.parametrize("kernel", [add_vectors, add_vectors_jax], ids=["pallas", "jax"])
def test_bf16_tensors_round_trip(kernel):
    x = torch.randn(8, 128).to(torch.bfloat16)
    out = kernel(x, x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, x + x)


def test_jax_function_on_torch_tensors():
    @pallas.custom_jax_kernel
    def attention_scores(q, k, bias):
        s = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
        return jax.nn.softmax(s + bias, axis=-1), jnp.max(s, axis=1)

    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 16, 32, generator=g), torch.randn(2, 24, 32, generator=g)
    bias = torch.randn(24, generator=g)
    probs, smax = attention_scores(q, k, bias)
    s = torch.einsum("bqd,bkd->bqk", q, k) / 32**0.5
    torch.testing.assert_close(probs, torch.softmax(s + bias, dim=-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(smax, s.amax(dim=1), rtol=1e-5, atol=1e-5)


def test_inputs_are_read_without_copies():
    # A contiguous CPU tensor reaches numpy through DLPack: the same memory.
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    view = _arrays.to_numpy(x)
    assert view.__array_interface__["data"][0] == x.data_ptr()
    b = x.to(torch.bfloat16)
    assert _arrays.to_numpy(b).__array_interface__["data"][0] == b.data_ptr()


def test_outputs_are_handed_over_without_copies():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = _arrays.to_kind(a, "torch")
    a[0, 0] = 42.0
    assert t[0, 0].item() == 42.0  # the tensor shares the runtime's buffer


def test_non_contiguous_and_grad_tensors():
    x = torch.randn(16, 8).t()  # a transposed view
    w = torch.randn(8, 16, requires_grad=True)
    out = add_vectors_jax(x, w)
    torch.testing.assert_close(out, (x + w).detach())


def test_unsupported_torch_dtype_is_named():
    x = torch.ones(4, dtype=torch.float64)
    with pytest.raises(tpukit.TpukitError, match="float64"):
        add_vectors_jax(x, x)
