"""tpuBLAS plans (``python/src/blas_plan.rs``, ``tpublas/src/plan.rs``): a call of plain CPU
torch tensors replays the launch an earlier call of the same signature resolved to. These
check that planned calls give torch's results on new values, and that every call a plan was
not made for (another shape, dtype, layout, number or list argument; a lazy negation, a
numpy array; a dispatch mode watching; in ``torch.ops.tpublas``'s Autograd kernel, a tensor
needing a gradient) takes the full path with its results and errors, and that an operator
called on several signatures in turn keeps a plan for each. Correctness only: no timings are
asserted."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import tpukit
from tpukit import tpublas

DTYPES = [torch.float32, torch.bfloat16]


def tol(dtype):
    return {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else \
        {"rtol": 1e-5, "atol": 1e-5}


def rand(g, shape, dtype):
    return torch.randn(shape, generator=g).to(dtype)


def _ln_backward(ops, x, y, weight, dtype=None):
    """Layer norm's backward on ``ops`` (``tpublas`` or ``torch.ops.aten``): upstream
    gradient ``y``, weight and bias ``y[0]``, ``y[1]`` or none, the statistics from torch's
    forward; every tensor converted to ``dtype`` if given; the gradients (of the input, and
    of the weight and bias if there is a weight) flattened into one tensor."""
    n = x.shape[-1]
    w, b = (y[0], y[1]) if weight else (None, None)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
    mask = [True, weight, weight]
    args = [y, x, [n], mean, rstd, w, b, mask]
    if dtype is not None:
        args = [a.to(dtype) if isinstance(a, torch.Tensor) else a for a in args]
    grads = ops.native_layer_norm_backward(*args)
    return torch.cat([g.flatten() for g, wanted in zip(grads, mask, strict=True) if wanted])


def _attention(ops, x, y):
    """Causal attention's output on ``ops``: queries ``x``, keys ``y``, values ``x + y``."""
    q, k, v = x[None, None], y[None, None], (x + y)[None, None]
    return ops._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)[0]


# (tpuBLAS call, torch reference), on two tensors of one shape.
CALLS = [
    (lambda x, y: tpublas.add.Tensor(x, y), lambda x, y: x + y),
    (lambda x, y: tpublas.sub.Tensor(x, y, alpha=2), lambda x, y: torch.sub(x, y, alpha=2)),
    (lambda x, y: tpublas.mul(x, y), lambda x, y: x * y),
    (lambda x, y: tpublas.div.Tensor(x, y), lambda x, y: x / y),
    (lambda x, y: tpublas.add.Scalar(x, 2.5), lambda x, y: x + 2.5),
    (lambda x, y: tpublas.gelu(x), lambda x, y: F.gelu(x)),
    (lambda x, y: tpublas._softmax(x, -1, False), lambda x, y: torch.softmax(x, -1)),
    (lambda x, y: tpublas.sum.dim_IntList(x, [1]), lambda x, y: x.sum(1)),
    (lambda x, y: tpublas.where(x > 0, x, y), lambda x, y: torch.where(x > 0, x, y)),
    (lambda x, y: tpublas.clamp(x, -0.5, 0.5), lambda x, y: torch.clamp(x, -0.5, 0.5)),
    (lambda x, y: tpublas.lt(x, 0.25), lambda x, y: x < 0.25),
    (lambda x, y: tpublas.mm(x, y.T.contiguous()), lambda x, y: x @ y.T),
    (lambda x, y: tpublas.clone(x), lambda x, y: x.clone()),
    (lambda x, y: tpublas.clone(y.T), lambda x, y: y.T.contiguous()),  # gathered first
    (lambda x, y: tpublas._to_copy(x, dtype=torch.bfloat16), lambda x, y: x.bfloat16()),
    (lambda x, y: tpublas.permute(x, [1, 0]), lambda x, y: x.T.contiguous()),
    # Without weight and bias the plan keeps their ones and zeros; with them (rows of `y`,
    # new values at every call) it reads them.
    (lambda x, y: tpublas.native_layer_norm(x, [x.shape[-1]], None, None, 1e-5)[0],
     lambda x, y: F.layer_norm(x, x.shape[-1:], eps=1e-5)),
    (lambda x, y: tpublas.native_layer_norm(x, [x.shape[-1]], y[0], y[1], 1e-5)[0],
     lambda x, y: F.layer_norm(x, x.shape[-1:], y[0], y[1], eps=1e-5)),
    # Several launches: a sum over a middle dimension permutes it last first; layer norm's
    # backward sums per-chunk partial gradients of the weight and bias in a second kernel
    # (the reference in f32: torch's bf16 kernel rounds its sums to bf16 as it goes).
    (lambda x, y: tpublas.sum.dim_IntList(torch.stack([x, y], 1), [1]),
     lambda x, y: torch.stack([x, y], 1).sum(1)),
    (lambda x, y: _ln_backward(tpublas, x, y, True),
     lambda x, y: _ln_backward(torch.ops.aten, x, y, True, torch.float32).to(x.dtype)),
    (lambda x, y: _ln_backward(tpublas, x, y, False),
     lambda x, y: _ln_backward(torch.ops.aten, x, y, False, torch.float32).to(x.dtype)),
    # Attention: the fused kernel for a head dim of 128, the composed launches for 70.
    (lambda x, y: _attention(tpublas, x, y), lambda x, y: _attention(torch.ops.aten, x, y)),
    # A list of tensors: rows scattered into one result by a launch per part; along the
    # last dim (moved to the front and back) from a tuple with a part given twice.
    (lambda x, y: tpublas.cat([x, y], 0), lambda x, y: torch.cat([x, y], 0)),
    (lambda x, y: tpublas.cat((x, y, x), -1), lambda x, y: torch.cat((x, y, x), -1)),
    # Fills of a requested size scattered around the tensor.
    (lambda x, y: tpublas.constant_pad_nd(x, [1, 2, 0, 3], 0.5),
     lambda x, y: F.pad(x, [1, 2, 0, 3], value=0.5)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CALLS)))
def test_planned_calls_give_torchs_results_on_new_values(case, dtype):
    """The same call on new random values, four times (the first makes the plan), and on
    the same tensor twice (`x * x`): torch's results each time."""
    call, want = CALLS[case]
    g = torch.Generator().manual_seed(case)
    for shape in [(8, 128), (13, 70)]:  # a block's shape, and one no block divides
        for _ in range(4):
            x, y = rand(g, shape, dtype), rand(g, shape, dtype)
            got, ref = call(x, y), want(x, y)
            assert got.dtype == ref.dtype and got.shape == ref.shape
            torch.testing.assert_close(got, ref, **tol(dtype))
            assert got.data_ptr() not in (x.data_ptr(), y.data_ptr())
        torch.testing.assert_close(call(x, x), want(x, x), **tol(dtype))


def test_a_plan_is_made_and_used():
    """A call of plain tensors leaves a plan on its operator; the next call runs it (a plan
    taking the call returns its results)."""
    op = tpublas.add.Tensor
    x = torch.randn(8, 128)
    op(x, x)
    assert op._fast is not None
    torch.testing.assert_close(op._fast.run([x, x, 1]), x + x)
    assert op._fast.run([x, x, 2]) is None  # another alpha
    assert op._fast.run([x, x[:, :64].contiguous(), 1]) is None  # another shape


def test_calls_of_several_launches_are_planned():
    """A call whose operator launches several kernels leaves a plan of them all, which the
    next call with new values replays (``Plan::steps``)."""
    g = torch.Generator().manual_seed(3)
    x, y = rand(g, (64, 96), torch.float32), rand(g, (64, 96), torch.float32)
    op = tpublas.native_layer_norm_backward.default
    op._fast = None
    _ln_backward(tpublas, x, y, True)
    assert op._fast is not None
    x, y = rand(g, (64, 96), torch.float32), rand(g, (64, 96), torch.float32)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [96], y[0], y[1], 1e-5)
    args = [y, x, [96], mean, rstd, y[0], y[1], [True] * 3]
    got = op._fast.run(args)
    assert got is not None
    want = torch.ops.aten.native_layer_norm_backward(*args)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # Attention over a head dim the fused kernels do not take: the composed launches.
    op = tpublas._scaled_dot_product_flash_attention_for_cpu.default
    op._fast = None
    _attention(tpublas, x[:, :70], y[:, :70])
    assert op._fast is not None


def test_copies_and_permutations_are_planned():
    """`clone` (of a strided view too: its elements are gathered before the plan reads
    them), `_to_copy` and `permute` make plans, which serve the next call."""
    x = torch.randn(8, 128)
    for op, args in [(tpublas.clone.default, (x,)), (tpublas.clone.default, (x.T,)),
                     (tpublas._to_copy.default, (x,)), (tpublas.permute.default, (x, [1, 0]))]:
        op(*args)
        assert op._fast is not None, op
        y = torch.randn(8, 128)
        args = (y, *args[1:]) if args[0] is x else (y.T,)
        got = op._fast.run(list(op._bind(args, {})))
        torch.testing.assert_close(got, op(*args))
        assert got.data_ptr() != y.data_ptr()


def test_lists_of_tensors_are_planned():
    """A call with a list of tensors (``cat``) leaves a plan that takes the next list of
    tensors of the same dtypes and shapes, and no other list; a part without elements (an
    empty cache's) and a bf16 part converted to f32 are planned too; a plan is kept per
    signature, keyed by each listed tensor's description."""
    g = torch.Generator().manual_seed(5)
    op = tpublas.cat.default
    op._fast, op._plans = None, {}
    a, b = rand(g, (2, 4, 64, 32), torch.float32), rand(g, (2, 4, 7, 32), torch.float32)
    op([a, b], 2)
    plan = op._fast
    assert plan is not None
    c, d = rand(g, (2, 4, 64, 32), torch.float32), rand(g, (2, 4, 7, 32), torch.float32)
    torch.testing.assert_close(plan.run([(c, d), 2]), torch.cat([c, d], 2), rtol=0, atol=0)
    for values in ([[c, c], 2], [[c, d, d], 2], [[c, d.bfloat16()], 2], [[c, d], 1],
                   [[c, d.transpose(2, 3)], 2], [c, 2]):
        assert plan.run(values) is None
    empty = torch.empty(0)
    for parts in ([empty, c.transpose(1, 2)], [c[0], d[0].bfloat16()]):
        want = torch.cat(parts, 1)
        for _ in range(2):
            torch.testing.assert_close(op(parts, 1), want, rtol=0, atol=0)
            assert op._fast is not None and op._fast is not plan
    assert len(op._plans) == 3
    op([a, b], 2)
    assert op._fast is plan  # found again by its key


def test_factories_are_planned_for_torch_results():
    """A factory asked for torch tensors (``run_as("torch")``: ``tpublas.mode()``'s) replays
    the fill its plan made, per size, value and dtype; asked for numpy arrays it still
    returns them (its plans are not the operator's ``_fast``)."""
    full, arange = tpublas.full.default, tpublas.arange.start_step
    full._made.clear()
    for shape, value, dtype in [([8, 128], 1.5, torch.float32), ([3, 5000], -2.0, torch.bfloat16),
                                ([7], 3, torch.int32), ([], 0.25, torch.float32)]:
        for _ in range(3):
            got = full.run_as("torch", shape, value, dtype=dtype)
            assert torch.equal(got, torch.full(shape, value, dtype=dtype))
    assert len(full._made) == 4 and full._fast is None
    got = full.run_as("torch", [8, 128], -1.5, dtype=torch.float32)  # another value
    assert torch.equal(got, torch.full((8, 128), -1.5))
    assert isinstance(full([8, 128], 1.5), np.ndarray)
    for _ in range(2):
        got = arange.run_as("torch", 3, 700, 2, dtype=torch.int32)
        assert torch.equal(got, torch.arange(3, 700, 2, dtype=torch.int32))
    assert len(arange._made) >= 1
    # Nothing to fill: no launch to plan, the full path every time.
    assert full.run_as("torch", [0, 4], 1.0, dtype=torch.float32).shape == (0, 4)


def test_calls_the_plan_was_not_made_for_take_the_full_path():
    """After a plan for (8, 128) f32 tensors: another shape, dtype, broadcast, layout
    (transposed, sliced), lazy negation, numpy array, tensor needing a gradient, alpha, or
    keyword — each gives torch's result (and its kind)."""
    g = torch.Generator().manual_seed(7)
    x, y = rand(g, (8, 128), torch.float32), rand(g, (8, 128), torch.float32)
    add = tpublas.add.Tensor
    add(x, y)
    torch.testing.assert_close(add(x, y), x + y)
    z = rand(g, (128, 8), torch.float32)
    w = rand(g, (16, 128), torch.float32)
    cases = [
        (x[:, :64], y[:, :64]),  # another shape (and a strided view)
        (x.bfloat16(), y.bfloat16()),  # another dtype
        (x, y[0]),  # a broadcast
        (z.T, y),  # transposed: not C-contiguous
        (w[::2], y),  # every other row
        (torch._neg_view(x), y),  # a lazy negation
        (x.requires_grad_(False).clone().requires_grad_(True), y),  # needs a gradient
    ]
    for a, b in cases:
        got = add(a, b)
        torch.testing.assert_close(got, (a + b).detach(), **tol(a.dtype))
        assert isinstance(got, torch.Tensor) and not got.requires_grad
    got = add(x.numpy(), y.numpy())
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, (x + y).numpy(), rtol=1e-6)
    torch.testing.assert_close(add(x, y, alpha=3), x + 3 * y)
    torch.testing.assert_close(add(x, y), x + y)  # and the plan still serves


def test_a_packet_replays_the_overload_it_picked():
    """Calling a packet (``tpublas.add``, not ``tpublas.add.Tensor``) replays the plan of the
    overload it picked for an earlier call of the same kinds of arguments, and picks again
    for any other call: a tensor, a number, then a tensor again as ``other``; another shape
    and dtype; a keyword."""
    g = torch.Generator().manual_seed(9)
    x, y = rand(g, (8, 128), torch.float32), rand(g, (8, 128), torch.float32)
    assert tpublas.add.Tensor is tpublas.add._overloads["Tensor"]
    for _ in range(3):
        x, y = rand(g, (8, 128), torch.float32), rand(g, (8, 128), torch.float32)
        torch.testing.assert_close(tpublas.add(x, y), x + y)
    assert tpublas.add._fast is not None and tpublas.add._fast.takes([x, y, 1])
    torch.testing.assert_close(tpublas.add(x, 2.5), x + 2.5)  # add.Scalar
    torch.testing.assert_close(tpublas.add(x, y), x + y)
    torch.testing.assert_close(tpublas.add(x, 3), x + 3)
    torch.testing.assert_close(tpublas.add(x, y, alpha=3), x + 3 * y)
    z = rand(g, (13, 70), torch.bfloat16)
    torch.testing.assert_close(tpublas.add(z, z), z + z)
    torch.testing.assert_close(tpublas.add(x, y), x + y)
    with pytest.raises(TypeError, match="no overload"):
        tpublas.add(x, "y")


def test_changed_number_and_list_arguments():
    """Numbers and lists are part of the plan's signature: another value (also of another
    type: `True` is not `1`), or a list mutated after the call, is not replayed."""
    g = torch.Generator().manual_seed(8)
    x = rand(g, (6, 40), torch.float32)
    dims = [1]
    torch.testing.assert_close(tpublas.sum.dim_IntList(x, dims), x.sum(1))
    dims[0] = 0  # the plan holds a copy of the list it was made for
    torch.testing.assert_close(tpublas.sum.dim_IntList(x, dims), x.sum(0))
    torch.testing.assert_close(tpublas.sum.dim_IntList(x, [1], True), x.sum(1, keepdim=True))
    for s in [2.5, 2.5, -1.0, 3]:
        torch.testing.assert_close(tpublas.mul.Scalar(x, s), x * s)
    torch.testing.assert_close(tpublas._softmax(x, 0, False), torch.softmax(x, 0))
    torch.testing.assert_close(tpublas._softmax(x, 1, False), torch.softmax(x, 1))


def test_a_plan_made_on_a_tensor_passed_twice_reads_each_argument():
    """`x - x` makes the plan on one tensor in both places; `x - y` and `y - x` then read
    each from its own place."""
    g = torch.Generator().manual_seed(9)
    x, y = rand(g, (8, 128), torch.float32), rand(g, (8, 128), torch.float32)
    sub = tpublas.sub.Tensor
    torch.testing.assert_close(sub(x, x), torch.zeros_like(x))
    assert sub._fast is not None
    torch.testing.assert_close(sub(x, y), x - y)
    torch.testing.assert_close(sub(y, x), y - x)
    torch.testing.assert_close(tpublas.div.Tensor(x, x), x / x)
    torch.testing.assert_close(tpublas.div.Tensor(y, x), y / x)


def test_one_element_tensors_are_not_frozen_into_a_plan():
    """A one-element tensor's value becomes a number on the host: a call on new values
    computes with them."""
    g = torch.Generator().manual_seed(10)
    x = rand(g, (8, 128), torch.float32)
    for v in [2.0, -3.0, 0.5]:
        s = torch.tensor([v])
        torch.testing.assert_close(tpublas.mul.Tensor(x, s), x * s)
        torch.testing.assert_close(tpublas.mul.Tensor(s, s), s * s)


def test_planned_operators_still_raise_their_errors():
    """With a plan made, a bad call raises what the full path raises."""
    x = torch.ones(5, 6)
    tpublas.add.Tensor(x, x)
    with pytest.raises(tpukit.ShapeError, match="broadcast"):
        tpublas.add.Tensor(x, torch.ones(3, 4))
    with pytest.raises(TypeError, match="must be a number"):
        tpublas.add.Tensor(x, x, alpha="2")
    with pytest.raises(tpukit.DTypeError, match="float64"):
        tpublas.add.Tensor(x.double(), x.double())


def test_the_interpret_device_is_not_planned_around():
    """Inside `tpublas.device("interpret")` a planned operator runs on the interpreter
    (exact), outside it on the plan again."""
    g = torch.Generator().manual_seed(11)
    x, y = rand(g, (8, 128), torch.float32), rand(g, (8, 128), torch.float32)
    tpublas.gelu(x)
    with tpublas.device("interpret"):
        torch.testing.assert_close(tpublas.gelu(y), F.gelu(y))
    torch.testing.assert_close(tpublas.gelu(y), F.gelu(y))


def test_the_mode_serves_planned_calls_and_counts_them():
    """Inside `tpublas.mode()`, repeated adds are served (by the plan after the first) with
    torch's results and counted; int64 adds beside them are left to torch as before."""
    g = torch.Generator().manual_seed(12)
    i = torch.arange(40).reshape(4, 10)
    xs = [rand(g, (4, 10), torch.float32) for _ in range(4)]
    with tpublas.mode() as m:
        got = [a + b for a, b in zip(xs, xs[1:], strict=False)]
        ints = i + i
    for r, a, b in zip(got, xs, xs[1:], strict=False):
        torch.testing.assert_close(r, a + b)
    torch.testing.assert_close(ints, i + i)
    assert m.served["aten.add.Tensor"] == 3
    assert m.fallback["aten.add.Tensor"] == 1


def test_torch_ops_planned_calls_keep_autograd_and_modes():
    """`torch.ops.tpublas`: plain calls are served by the plan with torch's results; a
    tensor needing a gradient still goes through autograd (the gradient is right), and a
    dispatch mode below autograd still sees the op."""
    g = torch.Generator().manual_seed(13)
    op = torch.ops.tpublas.mul.Tensor
    x, y = rand(g, (8, 128), torch.float32), rand(g, (8, 128), torch.float32)
    for _ in range(3):
        torch.testing.assert_close(op(x, y), x * y)
    xg = x.clone().requires_grad_(True)
    out = op(xg, y)
    assert out.requires_grad
    out.sum().backward()
    torch.testing.assert_close(xg.grad, y)

    seen = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Watch():
        torch.testing.assert_close(op(x, y), x * y)
    assert "tpublas.mul.Tensor" in seen


def test_torch_ops_under_vmap():
    """Under `torch.func.vmap` the op goes through torch's kernels (the plan sees no
    batched tensor) and gives torch's results."""
    g = torch.Generator().manual_seed(14)
    op = torch.ops.tpublas.mul.Tensor
    x, y = rand(g, (3, 8, 16), torch.float32), rand(g, (3, 8, 16), torch.float32)
    op(x[0], y[0])  # a plan for (8, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "no batching rule" performance warning
        torch.testing.assert_close(torch.func.vmap(op)(x, y), x * y)


def test_an_operator_keeps_a_plan_per_signature(monkeypatch):
    """A model calls one operator on several shapes in turn (each Linear layer's ``addmm``):
    after one call of each, every later call finds its own plan (none is made again), and
    gives torch's result on new values."""
    g = torch.Generator().manual_seed(17)
    op = tpublas.addmm.default
    shapes = [(64, 128, 384), (64, 128, 128), (64, 512, 128), (48, 128, 512)]
    args = [(rand(g, (n,), torch.float32), rand(g, (m, k), torch.float32),
             rand(g, (k, n), torch.float32)) for m, k, n in shapes]
    for a in args:
        op(*a)
    made = []
    planned = tpukit._native.tpublas_run_planned
    monkeypatch.setattr(tpukit._native, "tpublas_run_planned",
                        lambda *c: made.append(c[0]) or planned(*c))
    for _ in range(3):
        for bias, x, w in args:
            x.copy_(rand(g, x.shape, torch.float32))
            # Sums of up to 512 products of magnitude ~1: f32 roundings of ~1e-5 each way.
            torch.testing.assert_close(op(bias, x, w), torch.addmm(bias, x, w),
                                       rtol=1e-5, atol=1e-4)
    assert made == []


def test_parameters_are_read_as_tensors():
    """``nn.Parameter`` (a model's weights, a subclass of ``Tensor``) is read natively and
    planned like a plain tensor, in direct calls and inside the mode."""
    g = torch.Generator().manual_seed(19)
    w = torch.nn.Parameter(rand(g, (128, 96), torch.float32))
    x = rand(g, (64, 128), torch.float32)
    op = tpublas.mm.default
    op._fast = None
    torch.testing.assert_close(op(x, w), (x @ w).detach(), **tol(torch.float32))
    assert op._fast is not None and op._fast.takes([x, w])
    norm = torch.nn.LayerNorm(96)
    with tpublas.mode(fallback="error") as m:
        got = norm(x @ w)
    torch.testing.assert_close(got, norm(x @ w), **tol(torch.float32))
    assert m.served["aten.native_layer_norm.default"] == 1 and not m.fallback
    ln = tpublas.native_layer_norm.default
    assert ln._fast is not None and ln._fast.takes([got, [96], norm.weight, norm.bias, 1e-5])
