"""Shared helpers: run one Pallas kernel three ways and compare.

``check`` runs a kernel body through ``tpukit.pallas.custom_kernel`` on ``cpu`` and on
``interpret``, through ``pl.pallas_call(interpret=True)`` (JAX's own Pallas interpreter) and
compares all of them with a plain ``jnp`` reference, with tolerances fit to the dtype.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest
from jax.experimental import pallas as pl

from tpukit import DEVICES, pallas

TOLERANCES = {
    np.dtype(np.float32): dict(rtol=1e-5, atol=1e-5),
    np.dtype(ml_dtypes.bfloat16): dict(rtol=2e-2, atol=2e-2),
    np.dtype(np.float16): dict(rtol=2e-3, atol=2e-3),
}


def assert_close(actual, expected, what="", tolerance=None):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if actual.dtype in TOLERANCES:
        np.testing.assert_allclose(
            actual.astype(np.float32), expected.astype(np.float32), err_msg=what,
            **(tolerance or TOLERANCES[actual.dtype]),
        )
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def check(body, out_shape, args, reference, tolerance=None, **call_kwargs):
    """Runs ``body`` on tpukit cpu and interpret, Pallas interpret and ``reference(*args)``,
    and asserts they agree (within ``tolerance``, default: by dtype). Returns tpukit's cpu
    result."""
    single = not isinstance(out_shape, (tuple, list))
    kernel = pallas.custom_kernel(lambda *a: out_shape, body, **call_kwargs)
    expected = reference(*args)
    expected = [expected] if single else list(expected)
    pallas_interpret = pl.pallas_call(body, out_shape=out_shape, interpret=True, **call_kwargs)(
        *[jax.numpy.asarray(a) for a in args]
    )
    pallas_interpret = [pallas_interpret] if single else list(pallas_interpret)
    results = {}
    for device in DEVICES:
        got = kernel(*args, device=device)
        got = [got] if single else list(got)
        for i, (g, e, p) in enumerate(zip(got, expected, pallas_interpret, strict=True)):
            assert isinstance(g, np.ndarray), f"{device}: numpy in, numpy out"
            assert_close(g, e, f"tpukit {device} vs reference, output {i}", tolerance)
            assert_close(g, p, f"tpukit {device} vs Pallas interpret, output {i}", tolerance)
        results[device] = got
    return results["cpu"][0] if single else results["cpu"]


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def torch_seed():
    """Seeds torch's generator (tests that draw torch inputs: `usefixtures("torch_seed")`)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)


@pytest.fixture(params=DEVICES)
def device(request):
    """Each tpukit device in turn, also as `tpukit.helion`'s default device for the test (a
    test parametrizing `device` itself gets its values instead)."""
    from tpukit import helion

    with helion.device(request.param):
        yield request.param
