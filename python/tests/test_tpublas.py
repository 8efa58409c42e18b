"""tpukit.tpublas: every operator against torch's own ATen operator (computed in float64 on the
same inputs), f32 and bf16, shapes off the blocks; numpy and JAX arrays in and out; overload
dispatch and argument errors; the torch custom ops; and the shipped bundle serving every first
call in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tpukit  # noqa: E402
import tpukit.tpublas as tb  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16
# Relative and absolute error allowed per result dtype: f32 results computed in f32 (several
# ulp after a reduction), bf16 results rounded once from f32 (half a bf16 ulp is 2^-9).
TOL = {F32: (2e-5, 2e-5), BF16: (1.6e-2, 1.6e-2)}
TOL_KW = {d: {"rtol": r, "atol": a} for d, (r, a) in TOL.items()}


def rand(*shape, dtype=F32, lo=-2.0, hi=2.0, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def pos(*shape, dtype=F32, seed=0):
    return rand(*shape, dtype=dtype, lo=0.1, hi=2.0, seed=seed)


def to64(v):
    if isinstance(v, torch.Tensor) and v.is_floating_point():
        return v.double()
    if isinstance(v, (list, tuple)):
        return type(v)(to64(x) for x in v)
    return v


def aten(name):
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def check(name, args, kwargs=None, reference_args=None, tol=None):
    """Runs ``tpublas.<name>`` and ATen's operator; ATen on the original dtypes gives the
    expected dtypes and shapes, ATen in float64 the expected values."""
    kwargs = kwargs or {}
    packet, _, overload = name.partition(".")
    op = getattr(getattr(tb, packet), overload or "default")
    got = op(*args, **kwargs)
    want_like = aten(name)(*args, **kwargs)
    ref_args, ref_kwargs = reference_args or (to64(list(args)), to64(kwargs))
    want = aten(name)(*ref_args, **ref_kwargs)
    got, want_like, want = (
        [x] if isinstance(x, torch.Tensor) else list(x) for x in (got, want_like, want)
    )
    assert len(got) == len(want_like)
    for i, (g, like, w) in enumerate(zip(got, want_like, want, strict=True)):
        what = f"{name} result {i}"
        assert isinstance(g, torch.Tensor), what
        assert g.dtype == like.dtype, f"{what}: dtype {g.dtype}, ATen gives {like.dtype}"
        assert g.shape == like.shape, f"{what}: shape {tuple(g.shape)} != {tuple(like.shape)}"
        rtol, atol = tol or TOL[g.dtype]
        torch.testing.assert_close(g.double(), w.double(), rtol=rtol, atol=atol, msg=what,
                                   equal_nan=True)
    return got


UNARY = ["neg", "abs", "exp", "tanh", "sigmoid", "relu", "silu", "gelu"]
POSITIVE = ["log", "sqrt", "rsqrt"]
SHAPES = [(37, 1100), (3, 5, 600), (5000,)]


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name", UNARY + POSITIVE)
@pytest.mark.parametrize("shape", SHAPES)
def test_unary(name, shape, dtype):
    x = (pos if name in POSITIVE else rand)(*shape, dtype=dtype)
    check(name, (x,))


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_gelu_tanh(dtype):
    check("gelu", (rand(37, 1100, dtype=dtype),), {"approximate": "tanh"})


BROADCASTS = [
    ((37, 1100), (37, 1100)),  # same shape
    ((3, 5, 600), (600,)),  # a row
    ((3, 5, 600), (3, 5, 1)),  # a column
    ((37, 1100), (1,)),  # one element
    ((37, 1100), ()),  # 0-d
    ((3, 1, 600), (1, 4, 1)),  # anything else (materialised)
]


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name", ["add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor",
                                  "maximum", "minimum", "pow.Tensor_Tensor"])
@pytest.mark.parametrize(("xs", "ys"), BROADCASTS)
def test_binary_broadcasts(name, xs, ys, dtype):
    x = pos(*xs, dtype=dtype) if name.startswith("pow") else rand(*xs, dtype=dtype)
    y = pos(*ys, dtype=dtype, seed=1)
    kwargs = {"alpha": 0.5} if name in ("add.Tensor", "sub.Tensor") else {}
    check(name, (x, y), kwargs)


def test_binary_promotes_mixed_dtypes():
    check("add.Tensor", (rand(37, 1100, dtype=BF16), rand(1100, dtype=F32)))
    check("mul.Tensor", (rand(37, 1100, dtype=F32), rand(37, 1100, dtype=BF16)))


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize(("name", "kwargs"), [("add.Scalar", {"alpha": 3}), ("sub.Scalar", {}),
                                              ("mul.Scalar", {}), ("div.Scalar", {}),
                                              ("pow.Tensor_Scalar", {})])
def test_scalar_overloads(name, kwargs, dtype):
    check(name, (pos(37, 1100, dtype=dtype), 2.5), kwargs)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("exponent", [2, 3, 2.0, 3.0, -1.0, 1.5])
def test_pow_by_a_number(exponent, dtype):
    # Squares and cubes are products, as ATen's CPU kernel computes them: bit for bit
    # ATen's on signed inputs; other exponents go through `powf` (positive bases).
    x = rand(37, 1100, dtype=dtype) * 4
    if exponent in (2, 3):
        got, want = tb.pow.Tensor_Scalar(x, exponent), torch.pow(x, exponent)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    check("pow.Tensor_Scalar", (pos(37, 1100, dtype=dtype) + 0.5, exponent))


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_where_clamp_and_backward_ops(dtype):
    x, g = rand(37, 1100, dtype=dtype), rand(37, 1100, dtype=dtype, seed=3)
    check("where.self", (rand(37, 1, seed=5) > 0, x, rand(1100, dtype=dtype, seed=4)))
    check("clamp", (x, -0.5, 0.7))
    check("clamp", (x, None, 0.7))
    check("threshold_backward", (g, x, 0.25))
    check("gelu_backward", (g, x))
    check("gelu_backward", (g, x), {"approximate": "tanh"})


# Leading dims take the column kernels (windows of 64 × 128: rows and columns that
# overhang, one window, a row shorter than one); others the row kernels.
REDUCE = [((37, 1100), [1]), ((37, 1100), [0]), ((3, 5, 600), [0, 2]), ((6, 200), []),
          ((2, 3, 130), [0, 1]), ((300, 3, 7), [0]), ((128, 128), [-2])]


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize(("shape", "dims"), REDUCE)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions(shape, dims, keepdim, dtype):
    x = rand(*shape, dtype=dtype)
    n = max(1, int(np.prod([shape[d] for d in dims] or shape)))
    # f32 sums of n terms of |x| <= 2: absolute error ~ n·2^-24·2 at worst.
    tol = (2e-5, 2e-5 + 1.2e-7 * n) if dtype == F32 else None
    check("sum.dim_IntList", (x, dims, keepdim), tol=tol)
    check("mean.dim", (x, dims, keepdim))
    check("amax", (x, dims, keepdim))
    check("sum.dim_IntList", (x, dims, keepdim), {"dtype": F32}, tol=(2e-5, 2e-5 + 1.2e-7 * n))


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize(
    ("shape", "dim"),
    # Rows read twice (4500: two 4096-column windows), and rows that fit one window (f32
    # results normalised in the output window: 1100 and 2048 columns, 130 rows of 37, 1800
    # of 5, 21 of 1024 in 16-row windows).
    [((37, 1100), 1), ((37, 130), 0), ((3, 5, 600), 1), ((19, 2048), 1), ((21, 1024), 1),
     ((9, 4500), 1)],
)
def test_softmax_family(shape, dim, dtype):
    x = rand(*shape, dtype=dtype) * 3
    check("_softmax", (x, dim, False))
    check("_log_softmax", (x, dim, False))
    if dtype == BF16:
        # ATen's CPU kernel refuses half_to_float; the CUDA one returns f32 softmax values.
        y = tb._softmax(x, dim, True)
        assert y.dtype == F32
        torch.testing.assert_close(y.double(), torch.softmax(x.double(), dim), **TOL_KW[F32])
    y = torch.softmax(x.float(), dim).to(dtype)
    g = rand(*shape, dtype=dtype, seed=7)
    ref = ((g.double(), y.double(), dim, torch.float64), {})
    check("_softmax_backward_data", (g, y, dim, dtype), reference_args=ref)


INTERPRET_ONLY = textwrap.dedent(
    """
    import json, numpy as np
    import tpukit.tpublas as tb
    from tpukit import _native
    x = np.random.default_rng(0).standard_normal((29, 300)).astype(np.float32)
    with tb.device("interpret"):
        tb._softmax(x, 1, False); tb.mul(x, x); tb.sum(x, [0], True)
    print(json.dumps(_native.cache_stats()))
    tb._softmax(x, 1, False)
    print(json.dumps(_native.cache_stats()))
    """
)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_operators_run_on_the_interpreter_when_asked(dtype):
    """`with tb.device("interpret")` runs operators on the reference interpreter, whose
    results match ATen's; in a fresh process, nothing is compiled, fetched or linked for the
    CPU backend until an operator runs outside it."""
    x = rand(29, 300, dtype=dtype, seed=3) * 3
    w = pos(300, dtype=dtype)
    with tb.device("interpret"):
        check("_softmax", (x, 1, False))
        check("mul.Tensor", (x, w))
        check("sum.dim_IntList", (x, [0], True))
    with pytest.raises(ValueError, match="unknown device"), tb.device("tpu"):
        pass
    done = subprocess.run([sys.executable, "-c", INTERPRET_ONLY], capture_output=True,
                          text=True, env={**os.environ, "TPUKIT_TORCH": "0"}, check=False)
    assert done.returncode == 0, done.stderr
    inside, outside = (json.loads(line) for line in done.stdout.splitlines()[-2:])
    assert inside == [0, 0, 0, 0], "the interpreter used the CPU backend"
    assert sum(outside[:3]) > 0, "outside `device`, operators run on the CPU backend"


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("params", [None, "same", "f32"])
def test_layer_norm_forward_and_backward(params, dtype):
    x = rand(3, 13, 700, dtype=dtype)
    pdtype = {None: None, "same": dtype, "f32": F32}[params]
    w = rand(700, dtype=pdtype, seed=1) if pdtype else None
    b = rand(700, dtype=pdtype, seed=2) if pdtype else None
    out, mean, rstd = check("native_layer_norm", (x, [700], w, b, 1e-5), tol=_norm_tol(dtype))
    g = rand(3, 13, 700, dtype=dtype, seed=3)
    args = (g, x, [700], mean, rstd, w, b, [True, True, True])
    if w is None:
        # ATen gives no weight and bias gradients without them; tpuBLAS gives them for a
        # weight of ones and a bias of zeros, which is what the reference uses.
        got = tb.native_layer_norm_backward(*args)
        ones, zeros = torch.ones(700, dtype=torch.float64), torch.zeros(700, dtype=torch.float64)
        ref = to64([g, x, [700], mean, rstd]) + [ones, zeros, [True, True, True]]
        want = aten("native_layer_norm_backward")(*ref)
        for i in range(3):
            torch.testing.assert_close(got[i].double(), want[i], **_norm_tol_kw(dtype))
        return
    check("native_layer_norm_backward", args, tol=(2e-4, 2e-4) if dtype == F32 else (3e-2, 3e-2))


def _norm_tol(dtype):
    return (1e-4, 1e-4) if dtype == F32 else (2e-2, 3e-2)


def _norm_tol_kw(dtype):
    rtol, atol = _norm_tol(dtype)
    return {"rtol": rtol, "atol": atol}


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("n", [1100, 4500])  # 4500: two 4096-column windows
def test_rms_norm(dtype, n):
    x = rand(37, n, dtype=dtype)
    if not hasattr(torch.ops.aten, "_fused_rms_norm"):
        pytest.skip("this torch has no aten._fused_rms_norm")
    check("_fused_rms_norm", (x, [n], rand(n, dtype=dtype, seed=1), 1e-6),
          tol=_norm_tol(dtype))


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize(("shape", "dim"), [((37, 1100), 1), ((37, 130), 0)])
def test_cumsum(shape, dim, dtype):
    x = rand(*shape, dtype=dtype)
    n = shape[dim]
    tol = (2e-5, 1e-6 * n) if dtype == F32 else (2e-2, 2e-2 + 4e-3 * n**0.5)
    check("cumsum", (x, dim), tol=tol)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_products(dtype):
    a, b = rand(70, 150, dtype=dtype), rand(150, 130, dtype=dtype, seed=1)
    tol = (1e-4, 1e-4) if dtype == F32 else (2e-2, 5e-2)
    check("mm", (a, b), tol=tol)
    check("bmm", (rand(2, 20, 140, dtype=dtype), rand(2, 140, 30, dtype=dtype, seed=1)), tol=tol)
    check("addmm", (rand(130, dtype=dtype, seed=2), a, b), tol=tol)
    check("addmm", (rand(70, 130, dtype=dtype, seed=2), a, b), {"beta": 0.5, "alpha": 2.0},
          tol=tol)
    bias = torch.full((70, 1), float("nan"), dtype=dtype)
    check("addmm", (bias, a, b), {"beta": 0.0, "alpha": 2.0}, tol=tol)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_gathers_copies_and_cat(dtype):
    x = rand(37, 600, dtype=dtype)
    check("index_select", (x, 1, torch.tensor([5, 0, 599, 5])))
    check("index_select", (x, 0, torch.tensor([36, 2], dtype=torch.int32)))
    check("embedding", (rand(100, 300, dtype=dtype), torch.tensor([[9, 0], [99, 3]])))
    check("permute", (rand(2, 3, 130, dtype=dtype), [2, 0, 1]))
    check("transpose.int", (x, 0, 1))
    check("cat", ([x, rand(2, 600, dtype=dtype, seed=1)], 0))
    check("cat", ([rand(3, 6, dtype=dtype), rand(3, 2, dtype=F32, seed=1)], -1))
    # One part left once the empty 1-D tensors are skipped (a key cache's first step): a
    # row-major copy of a strided view.
    heads = rand(2, 64, 384, dtype=dtype).view(2, 64, 12, 32)[:, :, 4:8].transpose(1, 2)
    got = check("cat", ([torch.zeros(0, dtype=dtype), heads], -2))[0]
    assert got.is_contiguous() and got.data_ptr() != heads.data_ptr()


EMPTY = [
    ("neg", lambda e: (e,)),
    ("add.Tensor", lambda e: (e, e)),
    ("add.Tensor", lambda e: (e, rand(5))),
    ("mul.Scalar", lambda e: (e, 2.0)),
    ("sum.dim_IntList", lambda e: (e, [0])),
    ("sum.dim_IntList", lambda e: (e, [1], True)),
    ("mean.dim", lambda e: (e, [0])),
    ("amax", lambda e: (e, [1])),
    ("_softmax", lambda e: (e, 1, False)),
    ("_softmax", lambda e: (e, 0, False)),
    ("_log_softmax", lambda e: (e, -1, False)),
    ("native_layer_norm", lambda e: (e, [5], None, None, 1e-5)),
    ("cumsum", lambda e: (e, 0)),
    ("cumsum", lambda e: (e, 1)),
    ("mm", lambda e: (e, rand(5, 3))),
    ("mm", lambda e: (rand(3, 0), rand(0, 4))),
    ("addmm", lambda e: (rand(4), rand(3, 0), rand(0, 4))),
    ("index_select", lambda e: (e, 1, torch.tensor([4, 0]))),
    ("embedding", lambda e: (rand(7, 3), torch.zeros(0, dtype=torch.int64))),
    ("transpose.int", lambda e: (e, 0, 1)),
    ("permute", lambda e: (e, [1, 0])),
    ("cat", lambda e: ([e, rand(2, 5)], 0)),
    ("where.self", lambda e: (e > 0, e, e)),
]


@pytest.mark.parametrize(("name", "args"), EMPTY, ids=[f"{n}-{i}" for i, (n, _) in
                                                        enumerate(EMPTY)])
def test_empty_tensors_as_aten(name, args):
    """Zero-size dims anywhere (an empty reduced dim sums to 0 and means NaN, as in ATen)."""
    check(name, args(torch.zeros(0, 5)))
    if name in ("sum.dim_IntList", "mean.dim", "cumsum", "_softmax"):
        check(name, args(torch.zeros(5, 0)))


# --- array kinds, dispatch, errors ---------------------------------------------------------


def test_numpy_and_jax_arrays_in_and_out():
    x = np.random.default_rng(0).standard_normal((37, 1100)).astype(np.float32)
    y = tb.add(x, x[0], alpha=2)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.flags.writeable
    np.testing.assert_allclose(y, x + 2 * x[0], rtol=1e-6)
    xb = x.astype(ml_dtypes.bfloat16)
    out, mean, rstd = tb.native_layer_norm(xb, [1100], None, None, 1e-5)
    assert out.dtype == ml_dtypes.bfloat16 and mean.shape == (37, 1)
    ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2e-2, atol=3e-2)
    idx = np.array([3, 1, 3])  # int64, as numpy makes them
    np.testing.assert_array_equal(tb.embedding(x, idx), x[idx])
    jnp = pytest.importorskip("jax.numpy")
    jx = jnp.asarray(x)
    s = tb._softmax(jx, 1, False)
    assert type(s).__module__.startswith("jax")
    np.testing.assert_allclose(np.asarray(s), np.asarray(jax_softmax(jx)), rtol=1e-5, atol=1e-7)


def jax_softmax(x):
    import jax

    return jax.nn.softmax(x, axis=1)


def test_overloads_dispatch_on_argument_types():
    x = np.ones((4, 5), np.float32)
    assert tb.add.overloads() == ["Tensor", "Scalar"]
    np.testing.assert_array_equal(tb.add(x, 2.0), x + 2)
    np.testing.assert_array_equal(tb.add(x, x, alpha=3), x * 4)
    np.testing.assert_array_equal(tb.add.Scalar(x, 1, 2), x + 2)
    np.testing.assert_array_equal(tb.pow(x * 3, 2), x * 9)
    with pytest.raises(TypeError, match="no overload"):
        tb.add(x, "two")
    with pytest.raises(AttributeError, match="no overload 'Sclar'"):
        tb.add.Sclar  # noqa: B018


def test_ops_lists_every_operator_with_its_schema():
    infos = tb.ops()
    names = {i.name for i in infos}
    assert {"aten.add.Tensor", "aten._softmax.default", "aten.native_layer_norm.default",
            "aten.embedding.default", "aten.cat.default"} <= names
    assert len(infos) >= 45
    for i in infos:
        assert i.schema.startswith(i.name.removeprefix("aten.").removesuffix(".default"))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda x: tb.mm(x, x), tpukit.ShapeError, "cannot be multiplied"),
        (lambda x: tb.neg(x.astype(np.float64)), tpukit.DTypeError, "float64"),
        (lambda x: tb._softmax(x, 5, False), tpukit.ShapeError, "dim 5 is out of range"),
        (lambda x: tb.add(x, np.ones((3, 4), np.float32)), tpukit.ShapeError, "broadcast"),
        (lambda x: tb.neg(x, x), TypeError, "takes 1 positional"),
        (lambda x: tb.gelu(x, approximate="fast"), tpukit.TpukitError, "approximate='fast'"),
        (lambda x: tb.sum(x, [0], keepdims=True), TypeError, "unexpected keyword"),
        (lambda x: tb.embedding(x, np.array([2**40])), tpukit.BoundsError, "int32"),
        (lambda x: tb.index_select(x, 0, np.array([9])), tpukit.BoundsError, "out of range"),
        (lambda x: tb.native_layer_norm(x, [7], None, None, 1e-5), tpukit.ShapeError,
         "normalized_shape"),
        (lambda x: tb.mm(x, x.astype(ml_dtypes.bfloat16).T), tpukit.DTypeError, "same dtype"),
    ],
)
def test_bad_arguments_are_clear_errors(call, error, match):
    """Each failure raises the class of its kind (all `tpukit.TpukitError`s) or Python's own
    for a call that does not bind, with a message naming the operator."""
    with pytest.raises(error, match=match) as e:
        call(np.ones((5, 6), np.float32))
    if issubclass(error, tpukit.TpukitError):
        assert type(e.value) is error, type(e.value)


# --- torch.library -------------------------------------------------------------------------


def test_torch_custom_ops():
    x = rand(37, 1100)
    torch.testing.assert_close(torch.ops.tpublas.add.Tensor(x, x, alpha=2), 3 * x)
    torch.testing.assert_close(torch.ops.tpublas._softmax(x, 1, False), torch.softmax(x, 1))
    out, mean, rstd = torch.ops.tpublas.native_layer_norm(x, [1100], None, None, 1e-5)
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, [1100]), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("add.Tensor", lambda: (rand(8, 300), rand(300, seed=1))),
        ("_softmax", lambda: (rand(8, 300), 1, False)),
        ("mm", lambda: (rand(20, 30), rand(30, 40, seed=1))),
        ("native_layer_norm", lambda: (rand(8, 300), [300], rand(300), rand(300), 1e-5)),
        ("permute", lambda: (rand(2, 3, 130), [2, 0, 1])),
    ],
)
def test_torch_opcheck(op, args):
    """torch's own checks of a custom op: schema, fake (meta) kernel, registration."""
    packet, _, overload = op.partition(".")
    target = getattr(getattr(torch.ops.tpublas, packet), overload or "default")
    torch.library.opcheck(target, args(), test_utils=("test_schema", "test_faketensor"))


def test_torch_export_and_compile_trace_the_custom_ops():
    class Model(torch.nn.Module):
        def forward(self, x, w):
            return torch.ops.tpublas._softmax(torch.ops.tpublas.mm(x, w), 1, False)

    x, w = rand(16, 64), rand(64, 300, seed=1)
    want = torch.softmax(x @ w, 1)
    exported = torch.export.export(Model(), (x, w))
    code = exported.graph_module.code
    assert "tpublas.mm.default" in code and "tpublas._softmax.default" in code
    torch.testing.assert_close(exported.module()(x, w), want, rtol=1e-4, atol=1e-5)
    compiled = torch.compile(Model(), backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, w), want, rtol=1e-4, atol=1e-5)


# --- the shipped bundle ---------------------------------------------------------------------

# One call of every operator through every kernel it declares, in a fresh process: with the
# shipped bundle, nothing is compiled.
EVERY_KERNEL = textwrap.dedent(
    """
    import json, sys
    import numpy as np, ml_dtypes
    import tpukit.tpublas as tb
    from tpukit import _native
    for dt in (np.float32, ml_dtypes.bfloat16):
        other = ml_dtypes.bfloat16 if dt == np.float32 else np.float32
        r = np.random.default_rng(0)
        t = lambda *s, d=dt: (r.random(s) + 0.5).astype(d)
        x = t(3, 600)
        for name in ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu",
                     "silu", "gelu"]:
            getattr(tb, name)(x)
        tb.gelu(x, approximate="tanh")
        for name in ["add", "sub", "mul", "div", "maximum", "minimum", "pow"]:
            for y in [t(3, 600), t(600), t(3, 1), t(1), t(3, 600, d=other)]:
                getattr(tb, name)(x, y)
        for name in ["add", "sub", "mul", "div", "pow"]:
            getattr(tb, name)(x, 2.5)
        tb.where(x > 1, x, t(600)); tb.clamp(x, 0.7, None)
        tb.threshold_backward(x, x, 0.9); tb.gelu_backward(x, x)
        tb.gelu_backward(x, x, approximate="tanh")
        for name in ["sum", "mean", "amax"]:
            getattr(tb, name)(t(2, 3, 130), [0, 2], True)
        for name in ["_softmax", "_log_softmax"]:
            getattr(tb, name)(x, 0, False)
            getattr(tb, name)(x, 1, dt == ml_dtypes.bfloat16)
        tb._softmax_backward_data(x, x, 0, dt)
        if dt == np.float32:
            tb._softmax_backward_data(x, x, 1, ml_dtypes.bfloat16)
        for w in [None, t(600), t(600, d=np.float32)]:
            tb.native_layer_norm(x, [600], w, w, 1e-6)
            tb._fused_rms_norm(x, [600], w, None)
        for s in {dt, np.float32}:
            tb.native_layer_norm_backward(x, x, [600], t(3, 1, d=s), t(3, 1, d=s), t(600, d=s),
                                          None, [True, True, True])
        tb.cumsum(x, 0)
        tb.mm(t(30, 20), t(20, 10)); tb.bmm(t(2, 30, 20), t(2, 20, 10))
        tb.addmm(t(10), t(30, 20), t(20, 10)); tb.addmm(t(30, 10), t(30, 20), t(20, 10))
        tb.index_select(x, 1, np.array([5, 0])); tb.embedding(t(10, 300), np.array([9, 0]))
        tb.permute(t(2, 3, 130), [2, 0, 1]); tb.cat([t(3, 6), t(3, 2)], 1)
        # the training-step operators
        ti, one = np.array([5, -100, 599]), np.array(1.0, dtype=dt)
        for red in (0, 1, 2):
            tb.nll_loss_forward(x, ti, None, red, -100)
            tb.nll_loss_backward(t(3) if red == 0 else one, x, ti, None, red, -100, one)
        tb._log_softmax_backward_data(x, x, 1, dt); tb.tanh_backward(x, x)
        tb.full([3, 5000], 2.0, dtype=dt); tb.arange(1.0, 9000.0, 2.0, dtype=dt)
        tb.clone(x); tb._to_copy(x, dtype=other); tb.masked_fill(x, x > 1, -1.0)
        tb.embedding_dense_backward(x, np.array([5, 0, 5]), 7, 0, False)
        for name in ["eq", "ne", "lt", "le", "gt", "ge"]:
            getattr(tb, name)(x, 1.0)
        tb.bernoulli(x, 0.3); tb.constant_pad_nd(x, [1, 2, 0, 3], -1.0)
        tb.tril(x, -1); tb.triu(x); tb._safe_softmax(x, 1)
        if dt == ml_dtypes.bfloat16:
            tb._safe_softmax(x, 1, np.float32)
        q, k = t(2, 3, 70, 40), t(2, 3, 90, 40)
        for causal in (False, True):
            o, lse = tb._scaled_dot_product_flash_attention_for_cpu(q, k, k, 0.0, causal)
            tb._scaled_dot_product_flash_attention_for_cpu_backward(o, q, k, k, o, lse, 0.0,
                                                                    causal)
        if dt == np.float32:
            i = np.array([1, 2], np.int32)
            tb.full([3], 2, dtype=np.int32); tb.arange(1, 9000, 2, dtype=np.int32)
            tb.constant_pad_nd(i, [0, 1], -100); tb.clone(i); tb.tril(x > 1)
            for name in ["add", "sub", "mul"]:
                getattr(tb, name)(i, 3)
    print(json.dumps(_native.cache_stats()))
    """
)


def fresh_process(**env):
    """Runs EVERY_KERNEL in a new Python with ``env`` (and no cache directory or bundle
    settings of this one); returns where its kernels came from."""
    base = {k: v for k, v in os.environ.items() if k not in ("TPUKIT_BUNDLE", "TPUKIT_CACHE_DIR")}
    done = subprocess.run([sys.executable, "-c", EVERY_KERNEL], capture_output=True, text=True,
                          env={**base, **env}, check=False)
    assert done.returncode == 0, done.stderr
    compiled, _disk, bundle, _corrupt = json.loads(done.stdout.splitlines()[-1])
    return {"compiled": compiled, "bundle": bundle, "stderr": done.stderr}


def shipped_bundle():
    path = os.path.join(os.path.dirname(tpukit.__file__), "host.tpkb")
    assert os.path.exists(path), "the package ships no bundle: run `make setup`"
    return path


def test_every_first_call_in_a_fresh_process_is_served_from_the_bundle():
    shipped_bundle()
    s = fresh_process()
    assert s["compiled"] == 0, f"compiled {s['compiled']} kernels, not loaded from the bundle"
    assert s["bundle"] > 100


def test_a_damaged_bundle_is_refused_and_kernels_are_compiled(tmp_path):
    data = bytearray(open(shipped_bundle(), "rb").read())
    data[100] ^= 0x01  # inside the checksummed index
    bad = tmp_path / "bad.tpkb"
    bad.write_bytes(bytes(data))
    s = fresh_process(TPUKIT_BUNDLE=str(bad))
    assert "refused" in s["stderr"] and "checksum" in s["stderr"]
    assert s["compiled"] > 100 and s["bundle"] == 0


def test_zero_dim_tensors_stay_zero_dim():
    s, x = rand(), rand(3, 5)
    check("neg", (s,))
    check("mul.Scalar", (s, 3))
    check("add.Tensor", (s, s))
    assert tb.neg(s.numpy()).shape == ()
    check("mul.Tensor", (x, s))
