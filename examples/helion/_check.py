"""Shared by the Helion examples: compare a kernel's result with torch eager.

Tolerances are Helion's (``atol=1e-1, rtol=1e-2`` in its example tests) or tighter: f32 to
1e-4, bf16 to a few units in its last place (2**-8 relative).
"""

from __future__ import annotations

import torch

TOLERANCES = {
    torch.float32: {"rtol": 1e-4, "atol": 1e-4},
    torch.bfloat16: {"rtol": 1e-2, "atol": 5e-2},
}


def assert_close(actual, expected, what="", **tol):
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    torch.testing.assert_close(
        actual.float(), expected.float(), msg=lambda m: f"{what}: {m}",
        **(tol or TOLERANCES.get(expected.dtype, {})),
    )
