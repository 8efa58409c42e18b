"""How torch tensors cross into tpukit and back (``python/src/exchange.rs``,
``python/src/dlpack.rs``): through torch's DLPack C exchange API where torch has it, else
through DLPack capsules. Both paths, in fresh processes (the choice is made once, when torch is
first read), give torch's results on planned tpuBLAS calls and ``custom_kernel`` calls, refuse
what they cannot read in place, and hand back tensors that own their memory."""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

CHECK = textwrap.dedent("""
    import gc, sys
    import numpy as np
    import torch
    import tpukit
    from tpukit import pallas, tpublas

    def body(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + y_ref[...]

    kernel = pallas.custom_kernel(lambda x, y: x, body)
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        for shape in [(8, 128), (13, 70), (3,), ()]:
            for _ in range(3):  # the first call plans, the others replay
                x = torch.randn(shape, generator=g).to(dtype)
                y = torch.randn(shape, generator=g).to(dtype)
                got = tpublas.add.Tensor(x, y)
                assert type(got) is torch.Tensor and got.dtype == dtype, got
                torch.testing.assert_close(got, x + y)
                assert got.data_ptr() not in (x.data_ptr(), y.data_ptr())
                if dtype == torch.float32 and len(shape) == 2:
                    torch.testing.assert_close(kernel(x, y), x * 2.0 + y)
    x = torch.randn(16, 128, generator=g)
    for a in [x[::2], x.T, torch._neg_view(x[:8]), x[:8].clone().requires_grad_()]:
        b = torch.randn(a.shape, generator=g)
        torch.testing.assert_close(tpublas.add.Tensor(a, b), (a + b).detach())
    # Results own their memory: kept after every other reference is gone.
    kept = [tpublas.add.Tensor(x, x) for _ in range(50)]
    del x
    gc.collect()
    for k in kept[1:]:
        torch.testing.assert_close(k, kept[0], rtol=0, atol=0)
    print(tpukit.torch_interop())
""")


def run(**env):
    import os

    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_exchange_api_path():
    import torch

    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("this torch has no DLPack C exchange API")
    assert run() == "exchange"


def test_the_capsule_path():
    assert run(TPUKIT_TORCH_EXCHANGE="0") == "capsule"
