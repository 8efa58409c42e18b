"""The TorchTPU seed example, as written, on torch tensors (skipped without torch)."""

import pytest

torch = pytest.importorskip("torch")

from tpukit import pallas  # noqa: E402


@pallas.custom_kernel(lambda x, y: torch.empty_like(x))
def add_vectors(x_ref, y_ref, o_ref):
    x, y = x_ref[...], y_ref[...]
    o_ref[...] = x + y


@pytest.mark.parametrize("device", ["cpu", "interpret"])
def test_seed_example(device):
    x = torch.tensor([0.1, 0.2, 0.3])
    y = torch.tensor([0.4, 0.5, 0.6])
    expected = torch.add(x, y)
    actual = add_vectors(x, y, device=device)
    assert isinstance(actual, torch.Tensor)
    torch.testing.assert_close(actual, expected)


def test_bf16_tensors_round_trip():
    x = torch.randn(8, 128).to(torch.bfloat16)
    out = add_vectors(x, x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, x + x)
