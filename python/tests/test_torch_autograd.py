"""Gradients through tpukit's torch ops: `custom_kernel` with a `backward=` (against torch
autograd of a plain twin, eager and compiled) and every differentiable tpuBLAS op (against
torch autograd of ATen's op in float64 on the same inputs, f32 and bf16, broadcasting and
shapes off the blocks). tpuBLAS kernels take f32 and bf16 only, so `gradcheck` in float64
cannot run them: the float64 reference is torch's own derivative instead. An op or kernel
without a derivative raises on `backward()`, naming it; no gradient is ever silently None."""

import functools
import warnings

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import tpukit  # noqa: E402
import tpukit.tpublas as tb  # noqa: E402
from tpukit import pallas  # noqa: E402
from tpukit.tpublas import _derivatives  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16
T = torch.ops.tpublas


def rand(*shape, dtype=F32, lo=-2.0, hi=2.0, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def pos(*shape, dtype=F32, seed=0):
    return rand(*shape, dtype=dtype, lo=0.5, hi=2.0, seed=seed)


# --- custom_kernel ---------------------------------------------------------------------------

BLOCK = (16, 128)


def _blocked(body, n_in, n_out, shape):
    spec = pl.BlockSpec(BLOCK, lambda i, j: (i, j))
    grid = (pl.cdiv(shape[0], BLOCK[0]), pl.cdiv(shape[1], BLOCK[1]))

    def propagate(x, *_):
        outs = tuple(torch.empty_like(x) for _ in range(n_out))
        return outs[0] if n_out == 1 else outs

    return functools.partial(pallas.custom_kernel, propagate, body, grid=grid,
                             in_specs=[spec] * n_in,
                             out_specs=spec if n_out == 1 else [spec] * n_out)


def _tanh_mul(x_ref, y_ref, o_ref):
    x, y = x_ref[...].astype(jnp.float32), y_ref[...].astype(jnp.float32)
    o_ref[...] = (jnp.tanh(x) * y).astype(o_ref.dtype)


def _tanh_mul_grads(g_ref, x_ref, y_ref, gx_ref, gy_ref):
    g, x = g_ref[...].astype(jnp.float32), x_ref[...].astype(jnp.float32)
    t = jnp.tanh(x)
    gx_ref[...] = (g * y_ref[...].astype(jnp.float32) * (1 - t * t)).astype(gx_ref.dtype)
    gy_ref[...] = (g * t).astype(gy_ref.dtype)


SHAPE = (37, 300)


@functools.cache
def kernels():
    """``tanh(x)·y`` with a backward kernel of its own, and the same without a backward."""
    grads = _blocked(_tanh_mul_grads, 3, 2, SHAPE)()

    def backward(ctx, g):
        x, y = ctx.inputs
        return grads(g, x, y)

    return _blocked(_tanh_mul, 2, 1, SHAPE)(backward=backward), _blocked(_tanh_mul, 2, 1, SHAPE)()


def twin(x, y):
    return torch.tanh(x.float()) * y.float()


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_custom_kernel_backward_matches_torch_autograd(dtype, compiled):
    kernel, _ = kernels()
    x = rand(*SHAPE, dtype=dtype).requires_grad_()
    y = rand(*SHAPE, dtype=dtype, seed=1).requires_grad_()
    up = rand(*SHAPE, dtype=dtype, seed=2)
    f = torch.compile(kernel, fullgraph=True) if compiled else kernel
    out = f(x, y)
    assert out.requires_grad
    gx, gy = torch.autograd.grad(out, (x, y), up)
    x64, y64 = (t.detach().double().requires_grad_() for t in (x, y))
    wx, wy = torch.autograd.grad(torch.tanh(x64) * y64, (x64, y64), up.double())
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == F32 else {"rtol": 1e-2, "atol": 1e-2}
    for got, want in ((gx, wx), (gy, wy)):
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), want, **tol)


def test_custom_kernel_backward_through_a_model():
    kernel, _ = kernels()
    x = rand(*SHAPE).requires_grad_()
    w = rand(300, 300, seed=3, lo=-0.1, hi=0.1).requires_grad_()
    y = rand(*SHAPE, seed=4)

    def loss(k, x):
        return (k(x @ w, y) ** 2).mean()

    loss(kernel, x).backward()
    got = (x.grad, w.grad)
    x.grad = w.grad = None
    loss(twin, x).backward()
    for g, want in zip(got, (x.grad, w.grad), strict=True):
        torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-6)


def test_custom_kernel_without_backward_raises_on_backward():
    _, plain = kernels()
    x = rand(*SHAPE).requires_grad_()
    out = plain(x, rand(*SHAPE, seed=1))
    assert out.requires_grad  # never a silent constant
    with pytest.raises(tpukit.UnsupportedError, match="_tanh_mul.*no derivative"):
        out.sum().backward()


def test_custom_kernel_register_autograd_decorator():
    kernel = _blocked(_tanh_mul, 2, 1, SHAPE)()

    @kernel.register_autograd
    def _(ctx, g):
        assert ctx.needs_input_grad == (True, False)
        x, y = ctx.inputs
        return T.mul.Tensor(g, T.mul.Tensor(y, T.add.Scalar(T.neg(T.mul.Tensor(
            ctx.outputs[0] / y, ctx.outputs[0] / y)), 1))), None

    x, y = rand(*SHAPE).requires_grad_(), pos(*SHAPE, seed=1)
    (gx,) = torch.autograd.grad(kernel(x, y).sum(), x)
    torch.testing.assert_close(gx, y * (1 - torch.tanh(x.detach()) ** 2), rtol=1e-4, atol=1e-4)


# --- custom_jax_kernel: JAX's derivative, run through tpukit ----------------------------------


@pallas.custom_jax_kernel
def jax_mlp(x, w, b):
    return jax.nn.gelu(x @ w + b)  # the tanh approximation, JAX's default


@pallas.custom_jax_kernel(static_argnums=(1,))
def jax_stats(x, axis):
    return {"mean": jnp.mean(x, axis=axis), "max": jnp.max(x, axis=axis)}


def torch_mlp(x, w, b):
    return torch.nn.functional.gelu(x @ w + b, approximate="tanh")


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_custom_jax_kernel_gradients_are_jaxs_derivative(compiled):
    args = [rand(37, 70), rand(70, 130, seed=1, lo=-0.3, hi=0.3), rand(130, seed=2)]
    leaves = [a.clone().requires_grad_() for a in args]
    f = torch.compile(jax_mlp, fullgraph=True) if compiled else jax_mlp
    up = rand(37, 130, seed=3)
    got = torch.autograd.grad(f(*leaves), leaves, up)
    ref = [a.double().requires_grad_() for a in args]
    want = torch.autograd.grad(torch_mlp(*ref), ref, up.double())
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.double(), w, rtol=1e-4, atol=1e-4 * w.abs().max().item())


def test_custom_jax_kernel_static_arguments_and_dict_results_trace():
    x = rand(37, 300).requires_grad_()
    f = torch.compile(lambda x: jax_stats(x, 0)["mean"] * 2, fullgraph=True, backend="eager")
    out = f(x)
    torch.testing.assert_close(out, x.detach().mean(0) * 2)
    (g,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(g, torch.full_like(x, 2 / 37))
    stats = jax_stats(x, 1)
    assert sorted(stats) == ["max", "mean"]
    torch.testing.assert_close(stats["max"], x.detach().amax(1))


def test_custom_jax_kernel_around_a_pallas_call_refuses_backward():
    def body(x_ref, o_ref):
        o_ref[...] = jnp.tanh(x_ref[...])

    @pallas.custom_jax_kernel
    def tanh_twice(x):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x) * 2

    x = rand(8, 128).requires_grad_()
    out = tanh_twice(x)
    torch.testing.assert_close(out, 2 * torch.tanh(x.detach()))
    with pytest.raises(tpukit.UnsupportedError, match="tanh_twice.*cannot differentiate"):
        out.sum().backward()


# --- tpuBLAS ---------------------------------------------------------------------------------

# name -> (arguments, kwargs): differentiable tensors are every floating tensor argument.
CASES = {
    "neg": lambda d: ((rand(37, 300, dtype=d),), {}),
    "abs": lambda d: ((rand(37, 300, dtype=d),), {}),
    "exp": lambda d: ((rand(37, 300, dtype=d),), {}),
    "log": lambda d: ((pos(37, 300, dtype=d),), {}),
    "sqrt": lambda d: ((pos(37, 300, dtype=d),), {}),
    "rsqrt": lambda d: ((pos(37, 300, dtype=d),), {}),
    "tanh": lambda d: ((rand(37, 300, dtype=d),), {}),
    "sigmoid": lambda d: ((rand(37, 300, dtype=d),), {}),
    "relu": lambda d: ((rand(37, 300, dtype=d),), {}),
    "silu": lambda d: ((rand(37, 300, dtype=d),), {}),
    "gelu": lambda d: ((rand(37, 300, dtype=d),), {"approximate": "tanh"}),
    "add.Tensor": lambda d: ((rand(3, 5, 130, dtype=d), rand(130, dtype=d, seed=1)),
                             {"alpha": 0.5}),
    "sub.Tensor": lambda d: ((rand(3, 5, 130, dtype=d), rand(3, 1, 130, dtype=d, seed=1)),
                             {"alpha": 2}),
    "mul.Tensor": lambda d: ((rand(3, 1, 130, dtype=d), rand(1, 4, 1, dtype=d, seed=1)), {}),
    "div.Tensor": lambda d: ((rand(37, 300, dtype=d), pos(37, 1, dtype=d, seed=1)), {}),
    "maximum": lambda d: ((rand(37, 300, dtype=d), rand(300, dtype=d, seed=1)), {}),
    "minimum": lambda d: ((rand(37, 300, dtype=d), rand(37, 300, dtype=d, seed=1)), {}),
    "pow.Tensor_Tensor": lambda d: ((pos(37, 300, dtype=d), rand(300, dtype=d, seed=1)), {}),
    "add.Scalar": lambda d: ((rand(37, 300, dtype=d), 2.5), {}),
    "sub.Scalar": lambda d: ((rand(37, 300, dtype=d), 2.5), {}),
    "mul.Scalar": lambda d: ((rand(37, 300, dtype=d), -1.5), {}),
    "div.Scalar": lambda d: ((rand(37, 300, dtype=d), 3.0), {}),
    "pow.Tensor_Scalar": lambda d: ((pos(37, 300, dtype=d), 2.5), {}),
    "where.self": lambda d: ((rand(37, 300, seed=5) > 0, rand(37, 300, dtype=d),
                              rand(300, dtype=d, seed=1)), {}),
    "clamp": lambda d: ((rand(37, 300, dtype=d), -0.5, 1.0), {}),
    "threshold_backward": lambda d: ((rand(37, 300, dtype=d), rand(37, 300, dtype=d, seed=1),
                                      0.25), {}),
    "sum.dim_IntList": lambda d: ((rand(3, 5, 130, dtype=d), [0, 2], False), {}),
    "mean.dim": lambda d: ((rand(3, 5, 130, dtype=d), [1], True), {}),
    "amax": lambda d: ((rand(3, 5, 130, dtype=d), [2], False), {}),
    "_softmax": lambda d: ((rand(37, 300, dtype=d), 1, False), {}),
    "_log_softmax": lambda d: ((rand(37, 300, dtype=d), 0, False), {}),
    "_softmax_backward_data": lambda d: ((rand(37, 300, dtype=d),
                                          torch.softmax(rand(37, 300, seed=1), 1).to(d), 1, d),
                                         {}),
    "native_layer_norm": lambda d: ((rand(5, 7, 300, dtype=d), [300], rand(300, dtype=d, seed=1),
                                     rand(300, dtype=d, seed=2), 1e-5), {}),
    "_fused_rms_norm": lambda d: ((rand(37, 300, dtype=d), [300], rand(300, dtype=d, seed=1),
                                   1e-6), {}),
    "cumsum": lambda d: ((rand(37, 300, dtype=d), 1), {}),
    "mm": lambda d: ((rand(37, 70, dtype=d), rand(70, 130, dtype=d, seed=1)), {}),
    "bmm": lambda d: ((rand(3, 37, 70, dtype=d), rand(3, 70, 130, dtype=d, seed=1)), {}),
    "addmm": lambda d: ((rand(130, dtype=d), rand(37, 70, dtype=d, seed=1),
                         rand(70, 130, dtype=d, seed=2)), {"beta": 0.5, "alpha": 2}),
    "index_select": lambda d: ((rand(5, 37, 30, dtype=d), 1, torch.tensor([3, 0, 36, 3, 3])),
                               {}),
    "embedding": lambda d: ((rand(100, 30, dtype=d), torch.tensor([[9, 0, 9], [99, 3, 9]])), {}),
    "embedding_dense_backward": lambda d: ((rand(2, 3, 130, dtype=d),
                                            torch.tensor([[9, 0, 9], [99, 3, 9]]), 100, 3,
                                            False), {}),
    "permute": lambda d: ((rand(2, 3, 130, dtype=d), [2, 0, 1]), {}),
    "addcmul": lambda d: ((rand(37, 300, dtype=d), rand(300, dtype=d, seed=1),
                           rand(37, 1, dtype=d, seed=2)), {"value": -0.5}),
    "addcdiv": lambda d: ((rand(37, 300, dtype=d), rand(300, dtype=d, seed=1),
                           pos(37, 1, dtype=d, seed=2)), {"value": 0.5}),
    "lerp.Scalar": lambda d: ((rand(37, 300, dtype=d), rand(300, dtype=d, seed=1), 0.3), {}),
    "transpose.int": lambda d: ((rand(2, 3, 130, dtype=d), 0, -1), {}),
    "cat": lambda d: (([rand(3, 6, dtype=d), rand(3, 130, dtype=d, seed=1)], 1), {}),
    "clone": lambda d: ((rand(3, 5, 130, dtype=d),), {}),
    "_to_copy": lambda d: ((rand(37, 300, dtype=d),), {"dtype": torch.float32}),
    "nll_loss_forward": lambda d: ((rand(37, 300, dtype=d), torch.arange(37) * 7, None, 1, 14),
                                   {}),
    "masked_fill.Scalar": lambda d: ((rand(3, 5, 130, dtype=d), rand(5, 1, seed=2) > 0, -1.5),
                                     {}),
    "constant_pad_nd": lambda d: ((rand(3, 5, 130, dtype=d), [1, 2, 0, 3], -1.0), {}),
    "_safe_softmax": lambda d: ((rand(37, 300, dtype=d), 1), {}),
    "tril": lambda d: ((rand(3, 5, 130, dtype=d), 1), {}),
    "triu": lambda d: ((rand(3, 5, 130, dtype=d), -2), {}),
    "convolution": lambda d: ((rand(2, 3, 9, 8, dtype=d), rand(4, 3, 3, 3, dtype=d, seed=1),
                               rand(4, dtype=d, seed=2), [2, 1], [1, 1], [1, 2], False, [0, 0],
                               1), {}),
    "native_batch_norm": lambda d: ((rand(3, 4, 5, 6, dtype=d), rand(4, dtype=d, seed=1),
                                     rand(4, dtype=d, seed=2), None, None, True, 0.1, 1e-5), {}),
    "max_pool2d_with_indices": lambda d: ((rand(2, 3, 9, 8, dtype=d), [3, 2], [2, 2], [1, 1],
                                           [1, 1], False), {}),
    "avg_pool2d": lambda d: ((rand(2, 3, 9, 8, dtype=d), [3, 2], [2, 2], [1, 1], False, False),
                             {}),
    "_scaled_dot_product_flash_attention_for_cpu": lambda d: (
        (rand(2, 3, 37, 16, dtype=d), rand(2, 3, 45, 16, dtype=d, seed=1),
         rand(2, 3, 45, 16, dtype=d, seed=2), 0.0, True), {"scale": 0.3}),
    "masked_fill.Tensor": lambda d: ((rand(3, 5, 130, dtype=d), rand(5, 1, seed=2) > 0,
                                      torch.tensor(-1.5, dtype=d)), {}),
    "tanh_backward": lambda d: ((rand(37, 300, dtype=d),
                                 torch.tanh(rand(37, 300, seed=1)).to(d)), {}),
    "_log_softmax_backward_data": lambda d: ((rand(37, 300, dtype=d),
                                              torch.log_softmax(rand(37, 300, seed=1), 1).to(d),
                                              1, d), {}),
}

# Results of several roundings of chained tpuBLAS ops, against float64; absolute errors scale
# with the gradient's largest element (a bf16 sum of many terms cancels to small results).
TOL = {F32: 1e-4, BF16: 2e-2}


def _leaves(args, dtype):
    """The arguments with every floating tensor a fresh leaf requiring grad, and those
    leaves; ``dtype`` None keeps each tensor's dtype."""
    leaves = []

    def leaf(v):
        if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor):
            return type(v)(leaf(t) for t in v)
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            t = v.detach().to(dtype or v.dtype).requires_grad_()
            leaves.append(t)
            return t
        return v

    return [leaf(v) for v in args], leaves


def _aten(name):
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _tpublas(name):
    packet, _, overload = name.partition(".")
    return getattr(getattr(T, packet), overload or "default")


def _float64(v):
    if isinstance(v, torch.dtype) and v.is_floating_point:
        return torch.float64
    return v


class OpRecorder(TorchDispatchMode):
    """Records the operators a region runs (``names``)."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(f"{func.namespace}.{func._opname}")
        return func(*args, **(kwargs or {}))


# What a tpuBLAS backward may run besides tpuBLAS ops: views and factories of constants.
NOT_COMPUTE = {f"aten.{n}" for n in (
    "unsqueeze", "expand", "view", "_unsafe_view", "reshape", "narrow", "slice", "alias",
    "detach", "zeros", "zeros_like", "ones_like", "eye", "arange", "fill_", "select",
    "copy_", "empty", "scalar_tensor", "lift_fresh")}


def _gradients(op, args, kwargs, up_seed=7):
    """The gradients of ``Σ up·op(*args)`` (first result) w.r.t. every floating tensor, and
    the operators the backward ran."""
    args, leaves = _leaves(args, None)
    out = op(*args, **kwargs)
    out = out[0] if isinstance(out, tuple) else out
    up = rand(*out.shape, seed=up_seed).to(out.dtype)
    with OpRecorder() as recorder:
        grads = torch.autograd.grad(out, leaves, up)
    return grads, recorder.names


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_tpublas_gradient_matches_torch(name, dtype):
    args, kwargs = CASES[name](dtype)
    got, ran = _gradients(_tpublas(name), args, kwargs)
    ref_args, _ = _leaves([_float64(a) for a in args], torch.float64)
    want, _ = _gradients(_aten(name), ref_args, kwargs)
    compute = {n for n in ran if not n.startswith("tpublas.")} - NOT_COMPUTE
    assert not compute, f"{name}: the backward ran {compute} outside tpuBLAS"
    assert len(got) == len(want)
    for i, (g, w, a) in enumerate(zip(got, want, _leaves(args, None)[1], strict=True)):
        assert g is not None, f"{name}: gradient {i} is None"
        assert g.dtype == a.dtype and g.shape == a.shape, f"{name}: gradient {i}"
        tol = TOL[dtype]
        atol = tol * max(1.0, w.abs().max().item())
        torch.testing.assert_close(g.double(), w, rtol=tol, atol=atol, msg=f"{name}: gradient {i}")


# Backward ops and ops tpuBLAS does not differentiate: their arguments, the first made a leaf.
REFUSED = {
    # torch has no derivative of bernoulli either ("not implemented").
    "bernoulli.p": lambda: (rand(8, 130), 0.5),
    "nll_loss_backward": lambda: (rand(8), rand(8, 130), torch.arange(8), None, 0, -100,
                                  torch.tensor(0.0)),
    "_scaled_dot_product_flash_attention_for_cpu_backward": lambda: (
        rand(1, 2, 8, 4), *(rand(1, 2, 8, 4, seed=i) for i in (1, 2, 3, 4)),
        rand(1, 2, 8, seed=5), 0.0, True),
}
# No float result to differentiate (bool), or no tensor argument (factories).
NOT_DIFFERENTIABLE = {"eq.Scalar", "ne.Scalar", "lt.Scalar", "le.Scalar", "gt.Scalar",
                      "ge.Scalar", "full", "arange.start_step"}


def test_every_op_has_a_derivative_or_refuses_backward():
    names = {o.name.removeprefix("aten.").removesuffix(".default") for o in tb.ops()}
    assert set(_derivatives.FORMULAS) <= names
    assert set(CASES) == set(_derivatives.FORMULAS), "every formula is tested"
    for name in sorted(names - set(_derivatives.FORMULAS)):
        if name == "gelu_backward":
            args = (rand(8, 130), rand(8, 130, seed=1))
        elif name == "native_layer_norm_backward":
            x = rand(8, 130)
            _, mean, rstd = T.native_layer_norm(x, [130], None, None, 1e-5)
            args = (rand(8, 130, seed=1), x, [130], mean, rstd, None, None, [True, False, False])
        elif name == "_native_batch_norm_legit_functional":
            args = (rand(3, 4, 5), None, None, rand(4, seed=1), pos(4, seed=2), True, 0.1, 1e-5)
        elif name == "convolution_backward":
            args = (rand(1, 2, 4, 4), rand(1, 3, 4, 4, seed=1), rand(2, 3, 1, 1, seed=2), [2],
                    [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True])
        elif name == "native_batch_norm_backward":
            x = rand(3, 4, 5)
            _, mean, invstd = T.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
            args = (rand(3, 4, 5, seed=1), x, None, None, None, mean, invstd, True, 1e-5,
                    [True, False, False])
        elif name == "avg_pool2d_backward":
            args = (rand(1, 2, 2, 2), rand(1, 2, 4, 4, seed=1), [2, 2], [2, 2], [0, 0], False,
                    True, None)
        elif name == "max_pool2d_with_indices_backward":
            x = rand(1, 2, 4, 4)
            _, indices = T.max_pool2d_with_indices(x, [2, 2])
            args = (rand(1, 2, 2, 2, seed=1), x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices)
        elif name in REFUSED:
            args = REFUSED[name]()
        elif name in NOT_DIFFERENTIABLE:
            continue
        else:
            pytest.fail(f"{name}: no derivative and no test that backward() refuses it")
        leaf = args[0].requires_grad_()
        # Raised by backward() (ops with keyword-only tensors too: `_torch._function_kernel`).
        with pytest.raises(tpukit.UnsupportedError, match=f"tpublas.{name} has no derivative"):
            out = _tpublas(name)(leaf, *args[1:])
            out = out[0] if isinstance(out, tuple) else out
            out.sum().backward()


def test_mm_then_torch_sum_backward():
    x, w = rand(37, 70).requires_grad_(), rand(70, 130, seed=1).requires_grad_()
    T.mm(x, w).sum().backward()
    torch.testing.assert_close(x.grad, torch.ones(37, 130) @ w.detach().T)
    torch.testing.assert_close(w.grad, x.detach().T @ torch.ones(37, 130))


def test_ties_share_the_gradient_as_torch_does():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 5.0, 0.0, 5.0]])
    y = torch.tensor([3.0, 3.0, 0.0, 1.0])
    for name, args in [("amax", (x, [1])), ("amax", (x, [0, 1], True)), ("maximum", (x, y)),
                       ("minimum", (x, y))]:
        got, _ = _gradients(_tpublas(name), args, {})
        want, _ = _gradients(_aten(name), args, {})
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, msg=name)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_layer_on_tpublas_trains_like_torch(backend):
    """Linear → layer norm → gelu → softmax → log → mean, every op tpuBLAS, against torch."""
    x = rand(37, 70)
    params = [rand(70, 130, seed=1, lo=-0.3, hi=0.3), rand(130, seed=2), rand(130, seed=3)]

    def tpublas_loss(w, b, gamma):
        h = T.addmm(b, x, w)
        h = T.native_layer_norm(h, [130], gamma, None, 1e-5)[0]
        p = T._softmax(T.gelu(h), 1, False)
        return T.mean.dim(T.log(p), None)

    def torch_loss(w, b, gamma):
        h = torch.nn.functional.layer_norm(x @ w + b, [130], gamma)
        return torch.log(torch.softmax(torch.nn.functional.gelu(h), 1)).mean()

    leaves = [p.clone().requires_grad_() for p in params]
    got = torch.autograd.grad(tpublas_loss(*leaves), leaves)
    want = torch.autograd.grad(torch_loss(*leaves), leaves)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    compiled = torch.compile(tpublas_loss, backend=backend, fullgraph=True)
    got = torch.autograd.grad(compiled(*leaves), leaves)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_double_backward_through_softmax():
    x = rand(8, 130).requires_grad_()
    (g,) = torch.autograd.grad(T._softmax(x, 1, False)[:, 0].sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad((g * g).sum(), x)
    x64 = x.detach().double().requires_grad_()
    (w,) = torch.autograd.grad(torch.softmax(x64, 1)[:, 0].sum(), x64, create_graph=True)
    (ww,) = torch.autograd.grad((w * w).sum(), x64)
    torch.testing.assert_close(gg.double(), ww, rtol=1e-4, atol=1e-5)


# Small arguments of ops whose derivative is smooth around random inputs (no kinks, ties or
# thresholds), for gradcheck's full Jacobians.
SMALL = {
    **{n: (lambda d: ((rand(3, 5, dtype=d),), {})) for n in ["neg", "exp", "tanh", "sigmoid",
                                                          "silu", "gelu"]},
    **{n: (lambda d: ((pos(3, 5, dtype=d),), {})) for n in ["log", "sqrt", "rsqrt"]},
    "add.Tensor": lambda d: ((rand(2, 3, 4, dtype=d), rand(4, seed=1)), {"alpha": 0.5}),
    "sub.Tensor": lambda d: ((rand(2, 3, 4, dtype=d), rand(2, 1, 4, seed=1)), {"alpha": 2}),
    "mul.Tensor": lambda d: ((rand(2, 1, 4, dtype=d), rand(1, 3, 1, seed=1)), {}),
    "div.Tensor": lambda d: ((rand(3, 5, dtype=d), pos(3, 1, seed=1)), {}),
    "pow.Tensor_Tensor": lambda d: ((pos(3, 5, dtype=d), rand(5, seed=1)), {}),
    "mul.Scalar": lambda d: ((rand(3, 5, dtype=d), -1.5), {}),
    "pow.Tensor_Scalar": lambda d: ((pos(3, 5, dtype=d), 2.5), {}),
    "sum.dim_IntList": lambda d: ((rand(2, 3, 4, dtype=d), [0, 2], False), {}),
    "mean.dim": lambda d: ((rand(2, 3, 4, dtype=d), [1], True), {}),
    "_softmax": lambda d: ((rand(3, 5, dtype=d), 1, False), {}),
    "_log_softmax": lambda d: ((rand(3, 5, dtype=d), 0, False), {}),
    "native_layer_norm": lambda d: ((rand(2, 3, 5, dtype=d), [5], rand(5, seed=1),
                                     rand(5, seed=2), 1e-5), {}),
    "_fused_rms_norm": lambda d: ((rand(3, 5, dtype=d), [5], rand(5, seed=1), 1e-6), {}),
    "cumsum": lambda d: ((rand(3, 5, dtype=d), 1), {}),
    "mm": lambda d: ((rand(3, 4, dtype=d), rand(4, 5, seed=1)), {}),
    "bmm": lambda d: ((rand(2, 3, 4, dtype=d), rand(2, 4, 5, seed=1)), {}),
    "addmm": lambda d: ((rand(5, dtype=d), rand(3, 4, seed=1), rand(4, 5, seed=2)),
                        {"beta": 0.5, "alpha": 2}),
    "permute": lambda d: ((rand(2, 3, 4, dtype=d), [2, 0, 1]), {}),
    "index_select": lambda d: ((rand(2, 5, 3, dtype=d), 1, torch.tensor([3, 0, 4, 3])), {}),
    "embedding": lambda d: ((rand(6, 3, dtype=d), torch.tensor([[5, 0, 5], [2, 3, 5]])), {}),
    "addcmul": lambda d: ((rand(3, 5, dtype=d), rand(5, seed=1), rand(3, 1, seed=2)),
                          {"value": 2.0}),
    "addcdiv": lambda d: ((rand(3, 5, dtype=d), rand(5, seed=1), pos(3, 1, seed=2)),
                          {"value": -0.5}),
    "lerp.Scalar": lambda d: ((rand(3, 5, dtype=d), rand(5, seed=1), 0.7), {}),
    "cat": lambda d: (([rand(3, 2, dtype=d), rand(3, 4, seed=1)], 1), {}),
    "_scaled_dot_product_flash_attention_for_cpu": lambda d: (
        (rand(1, 2, 3, 4, dtype=d), rand(1, 2, 5, 4, dtype=d, seed=1),
         rand(1, 2, 5, 4, dtype=d, seed=2), 0.0, False), {}),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_gradcheck_in_float32(name):
    """torch's gradcheck (finite differences of tpuBLAS's own forward against the registered
    derivative, every Jacobian entry) in float32, the widest dtype tpuBLAS takes: a check
    independent of torch's formulas, with tolerances for float32 differences."""
    args, kwargs = SMALL[name](F32)
    args, leaves = _leaves(args, None)
    op = _tpublas(name)

    def first(*xs):
        swap = {id(old): new for old, new in zip(leaves, xs, strict=True)}

        def put(v):
            if isinstance(v, list):
                return [put(t) for t in v]
            return swap.get(id(v), v)

        out = op(*[put(a) for a in args], **kwargs)
        return out[0] if isinstance(out, tuple) else out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "not double precision": known
        assert torch.autograd.gradcheck(first, tuple(leaves), eps=1e-3, atol=2e-3, rtol=2e-3)


def test_attention_with_a_mask_has_torchs_gradients():
    """Attention's keyword-only ``attn_mask`` (a bool padding mask, broadcast over heads):
    gradients of q, k, v against ``F.scaled_dot_product_attention`` in float64."""
    q, k, v = rand(2, 3, 37, 16), rand(2, 3, 45, 16, seed=1), rand(2, 3, 45, 16, seed=2)
    mask = rand(2, 1, 37, 45, seed=3) > -0.5
    up = rand(2, 3, 37, 16, seed=4)
    got_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, _ = T._scaled_dot_product_flash_attention_for_cpu(*got_leaves, attn_mask=mask)
    got = torch.autograd.grad(out, got_leaves, up)
    want_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    want = torch.autograd.grad(
        torch.nn.functional.scaled_dot_product_attention(*want_leaves, attn_mask=mask),
        want_leaves, up.double())
    for name, g, w in zip("qkv", got, want, strict=True):
        torch.testing.assert_close(g.double(), w, rtol=1e-4, atol=1e-4, msg=f"d{name}")


def test_sparse_embedding_gradients_are_refused_by_name():
    weight = rand(6, 3).requires_grad_()
    out = T.embedding.default(weight, torch.tensor([5, 0, 5]), -1, False, True)
    with pytest.raises(tpukit.UnsupportedError, match="embedding: sparse gradients"):
        out.sum().backward()


@pytest.mark.parametrize("padding_idx", [-1, 9])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding_gradients_match_torch(padding_idx, scale_grad_by_freq):
    """The weight's gradient of ``tpublas.embedding`` with repeated indices, a padding row
    and rows scaled by their index's count, against ATen's in float64."""
    w, up = rand(40, 30), rand(2, 6, 30, seed=1)
    idx = torch.tensor([[9, 0, 9, 39, 3, 9], [0, 0, 7, 9, 39, 5]])
    got = w.clone().requires_grad_()
    T.embedding.default(got, idx, padding_idx, scale_grad_by_freq, False).backward(up)
    want = w.double().requires_grad_()
    torch.nn.functional.embedding(idx, want, padding_idx if padding_idx >= 0 else None,
                                  scale_grad_by_freq=scale_grad_by_freq).backward(up.double())
    torch.testing.assert_close(got.grad.double(), want.grad, rtol=1e-5, atol=1e-5)
