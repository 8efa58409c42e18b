"""`custom_kernel` and tpuBLAS ops inside `torch.compile(fullgraph=True)` (the eager backend
and inductor) and `torch.export`: traced as custom ops, results checked against torch eager
on shapes the blocks do not divide, f32 and bf16."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

torch = pytest.importorskip("torch")

import tpukit.tpublas  # noqa: E402, F401 - registers torch.ops.tpublas
from tpukit import pallas  # noqa: E402

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
BLOCK = (16, 128)


def _tanh_mul_body(x_ref, y_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    o_ref[...] = (jnp.tanh(x) * y_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def blocked(body, n_in, n_out, rows, cols):
    """``body`` over a (16, 128)-block grid of a (rows, cols) problem (edges masked)."""
    spec = pl.BlockSpec(BLOCK, lambda i, j: (i, j))
    grid = (pl.cdiv(rows, BLOCK[0]), pl.cdiv(cols, BLOCK[1]))

    def propagate(*args):
        outs = tuple(torch.empty_like(args[0]) for _ in range(n_out))
        return outs[0] if n_out == 1 else outs

    return pallas.custom_kernel(
        propagate, body, grid=grid, in_specs=[spec] * n_in,
        out_specs=spec if n_out == 1 else [spec] * n_out,
    )


@functools.cache
def tanh_mul(rows, cols):
    return blocked(_tanh_mul_body, 2, 1, rows, cols)


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_custom_kernel_in_a_fullgraph_compile(backend, dtype):
    kernel = tanh_mul(37, 300)

    def f(x, y):
        return torch.relu(kernel(x, y)) + x

    x, y = rand(37, 300, dtype=dtype), rand(37, 300, dtype=dtype, seed=1)
    want = torch.relu((torch.tanh(x.float()) * y.float()).to(dtype)) + x
    compiled = torch.compile(f, backend=backend, fullgraph=True)
    got = compiled(x, y)
    assert got.dtype == dtype and got.shape == x.shape
    torch.testing.assert_close(got, want, **TOL[dtype])
    torch.testing.assert_close(compiled(y, x), f(y, x), **TOL[dtype])  # same graph, new data


def test_custom_kernel_with_several_outputs_compiles():
    def body(x_ref, y_ref, s_ref, d_ref):
        s_ref[...] = x_ref[...] + y_ref[...]
        d_ref[...] = x_ref[...] - y_ref[...]

    kernel = blocked(body, 2, 2, 20, 130)
    x, y = rand(20, 130), rand(20, 130, seed=1)
    s, d = torch.compile(lambda a, b: kernel(a, b), backend="eager", fullgraph=True)(x, y)
    torch.testing.assert_close(s, x + y)
    torch.testing.assert_close(d, x - y)


def test_custom_kernel_exports():
    kernel = tanh_mul(37, 300)

    class Model(torch.nn.Module):
        def forward(self, x, y):
            return kernel(x, y).sum(dim=1)

    x, y = rand(37, 300), rand(37, 300, seed=1)
    exported = torch.export.export(Model(), (x, y))
    assert f"torch.ops.tpukit.{kernel._torch_op.name}.default" in exported.graph_module.code
    x2, y2 = rand(37, 300, seed=2), rand(37, 300, seed=3)
    torch.testing.assert_close(exported.module()(x2, y2), (torch.tanh(x2) * y2).sum(dim=1),
                               rtol=1e-5, atol=1e-4)


def test_custom_kernel_opcheck():
    kernel = tanh_mul(37, 300)
    kernel(rand(37, 300), rand(37, 300))  # defines the op
    torch.library.opcheck(kernel._torch_op.op, ([rand(37, 300), rand(37, 300, seed=1)], "cpu"),
                          test_utils=("test_schema", "test_faketensor"))


def test_numpy_calls_do_not_go_through_torch():
    spec = pl.BlockSpec(BLOCK, lambda i, j: (i, j))
    kernel = pallas.custom_kernel(lambda x, y: x, _tanh_mul_body, grid=(3, 3),
                                  in_specs=[spec, spec], out_specs=spec)
    x, y = rand(37, 300).numpy(), rand(37, 300, seed=1).numpy()
    out = kernel(x, y)
    assert type(out).__name__ == "ndarray"
    want = torch.tanh(torch.from_numpy(x)) * torch.from_numpy(y)
    torch.testing.assert_close(torch.from_numpy(out), want)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_tpublas_ops_in_a_fullgraph_compile(backend):
    def f(x, w, b):
        h = torch.ops.tpublas.addmm(b, x, w)
        return torch.ops.tpublas._softmax(torch.ops.tpublas.gelu(h), 1, False)

    x, w, b = rand(30, 70), rand(70, 200, seed=1), rand(200, seed=2)
    want = torch.softmax(torch.nn.functional.gelu(torch.addmm(b, x, w)), 1)
    got = torch.compile(f, backend=backend, fullgraph=True)(x, w, b)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask", [[True, False, False], [True, True, True]])
@pytest.mark.parametrize("with_weight", [False, True])
def test_layer_norm_backward_fake_kernel_matches_tpublas(mask, with_weight):
    """tpuBLAS returns all three gradients whatever the mask (ATen leaves some undefined)."""
    x = rand(8, 300)
    w = rand(300, seed=1) if with_weight else None
    _, mean, rstd = torch.ops.tpublas.native_layer_norm(x, [300], w, w, 1e-5)
    args = (rand(8, 300, seed=2), x, [300], mean, rstd, w, w, mask)
    torch.library.opcheck(torch.ops.tpublas.native_layer_norm_backward.default, args,
                          test_utils=("test_schema", "test_faketensor"))


def test_a_numpy_propagate_takes_torch_tensors_as_before():
    spec = pl.BlockSpec(BLOCK, lambda i, j: (i, j))
    kernel = pallas.custom_kernel(lambda x, y: np.empty_like(x), _tanh_mul_body, grid=(3, 3),
                                  in_specs=[spec, spec], out_specs=spec)
    x, y = rand(37, 300), rand(37, 300, seed=1)
    torch.testing.assert_close(kernel(x, y), torch.tanh(x) * y)


def test_new_shapes_recompile_with_both_kinds_of_kernel():
    """The first call is traced inside torch.compile; later shapes make dynamo recompile
    with dynamic shapes, which the ops' fake kernels follow (a JAX one specializes)."""

    @pallas.custom_kernel(lambda x, y: torch.empty_like(x))
    def add(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    @pallas.custom_jax_kernel
    def gelu_mm(x, w):
        return jax.nn.gelu(x @ w)

    f = torch.compile(lambda x, w: gelu_mm(add(x, x), w) * 2, fullgraph=True, backend="eager")
    for rows in (8, 19, 30):
        x, w = rand(rows, 128, seed=rows), rand(128, 40, seed=1)
        want = 2 * torch.nn.functional.gelu((x + x) @ w, approximate="tanh")
        torch.testing.assert_close(f(x, w), want, rtol=1e-5, atol=1e-5)
