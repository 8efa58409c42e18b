"""tpukit.helion control flow, against torch eager on `cpu` and `interpret`, f32 and bf16:
compile-time `if` (an `hl.constexpr` argument, a Python value, `x is not None`) deciding while
tracing with variables assigned in one branch only (also carried through nested loops), device
`if` on a device scalar, and the scoping of names bound in nested functions and lambdas."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tpukit.helion.language as hl  # noqa: E402
from tpukit import helion  # noqa: E402

pytestmark = pytest.mark.usefixtures("torch_seed")

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: dict(rtol=1e-5, atol=1e-5), BF16: dict(rtol=2e-2, atol=5e-2)}


def close(actual, expected, dtype):
    torch.testing.assert_close(actual.float(), expected.float(), **TOL[dtype])


@helion.kernel(config=helion.Config(block_sizes=[8, 128]))
def col_stats(x, bias, with_sq: hl.constexpr = True):
    """Per-row sums of x (+ bias) and, when `with_sq`, of its squares: `acc_sq` and `b` are
    assigned in one branch only, carried through the nested loop and used under the same
    compile-time conditions, as in Helion's layer_norm backward."""
    m, n = x.size()
    s = torch.empty([m], dtype=torch.float32)
    sq = torch.zeros([m], dtype=torch.float32)
    for tm in hl.tile(m):
        acc = hl.zeros([tm], dtype=torch.float32)
        if with_sq:
            acc_sq = hl.zeros([tm], dtype=torch.float32)
        for tn in hl.tile(n):
            v = x[tm, tn].to(torch.float32)
            if bias is not None:
                b = bias[tn].to(torch.float32)
                v = v + b[None, :]
            acc = acc + v.sum(1)
            if with_sq:
                acc_sq = acc_sq + (v * v).sum(1)
        s[tm] = acc
        if with_sq:
            sq[tm] = acc_sq
    return s, sq


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("with_sq", [True, False])
@pytest.mark.parametrize("with_bias", [True, False])
def test_compile_time_if_with_one_sided_variables(device, dtype, with_sq, with_bias):
    x = torch.randn(37, 300, dtype=dtype)
    bias = torch.randn(300, dtype=dtype) if with_bias else None
    s, sq = col_stats(x, bias, with_sq)
    v = x.float() + (bias.float() if with_bias else 0)
    close(s, v.sum(1), dtype)
    close(sq, (v * v).sum(1) if with_sq else torch.zeros(37), dtype)


@helion.kernel(config=helion.Config(block_sizes=[128]))
def scaled(x, mode: hl.constexpr):
    """A Python string decides which branch exists; `y` is assigned in each branch."""
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        v = x[t]
        if mode == "double":
            y = v * 2
        elif mode == "square":
            y = v * v
        else:
            y = -v
        out[t] = y
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("mode", ["double", "square", "neg"])
def test_compile_time_if_on_a_python_value(device, dtype, mode):
    x = torch.randn(300, dtype=dtype)
    expect = {"double": x * 2, "square": x * x, "neg": -x}[mode]
    close(scaled(x, mode), expect, dtype)


@helion.kernel
def even_rows_doubled(x):
    """A device condition (on an `hl.grid` index): a lax.cond over `v`, assigned in both
    branches."""
    out = torch.empty_like(x)
    for i in hl.grid(x.size(0)):
        v = x[i, :]
        if i % 2 == 0:
            v = v * 2
        else:
            v = v + 1
        out[i, :] = v
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_device_if_still_branches_on_device(device, dtype):
    x = torch.randn(7, 300, dtype=dtype)
    expect = x + 1
    expect[::2] = x[::2] * 2
    close(even_rows_doubled(x), expect, dtype)


@helion.kernel(config=helion.Config(block_sizes=[8, 128]))
def nested_scopes(x):
    """`label` is a Python string defined before the nested loop; the nested `def` and the
    lambda bind their own `label`/`v`, which must not make the loop carry the string."""
    m, n = x.size()
    out = torch.empty([m], dtype=torch.float32)
    for tm in hl.tile(m):
        label = "rows"
        acc = hl.zeros([tm], dtype=torch.float32)
        for tn in hl.tile(n):

            def twice(v):
                label = v * 2
                return label

            plus_one = lambda v: [label + 1 for label in (v,)][0]  # noqa: E731
            acc = acc + plus_one(twice(x[tm, tn].to(torch.float32))).sum(1)
        assert label == "rows"
        out[tm] = acc
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_names_bound_in_nested_functions_and_lambdas_are_not_carried(device, dtype):
    x = torch.randn(21, 300, dtype=dtype)
    close(nested_scopes(x), (x.float() * 2 + 1).sum(1), dtype)


def test_reading_a_variable_a_compile_time_if_left_unassigned_names_it():
    @helion.kernel(config=helion.Config(block_sizes=[128]))
    def wrong(x, flag: hl.constexpr):
        out = torch.empty_like(x)
        for t in hl.tile(x.size(0)):
            if flag:
                y = x[t]
            for _ in hl.tile(x.size(0)):
                if flag:
                    y = y + 1
            if y:
                out[t] = x[t]
        return out

    with pytest.raises(helion.exc.UndefinedVariable, match="branch not taken"):
        wrong(torch.randn(256), False)


@helion.kernel(config=helion.Config(block_sizes=[8, 128, 128]))
def two_phase_sums(x, first: hl.constexpr):
    """Flex attention's form: temporaries (`v`, `s`) assigned in one loop under a compile-time
    `if` and again in a later loop, where they are local to each iteration."""
    out = torch.empty([x.size(0)], dtype=torch.float32)
    for tm in hl.tile(x.size(0)):
        acc = hl.zeros([tm], dtype=torch.float32)
        if first:
            for tn in hl.tile(x.size(1)):
                v = x[tm, tn].to(torch.float32)
                s = v.sum(1)
                acc = acc + s
        for tn in hl.tile(x.size(1)):
            v = x[tm, tn].to(torch.float32) * 2
            s = v.sum(1)
            acc = acc + s
        out[tm] = acc
    return out


@pytest.mark.parametrize("first", [False, True])
def test_a_temporary_first_assigned_in_a_loop_is_local_to_it(device, first):
    x = torch.randn(20, 300)
    close(two_phase_sums(x, first), x.sum(1) * (3 if first else 2), F32)


def test_stored_names_are_those_of_the_enclosing_scope():
    import ast

    from tpukit.helion._rewrite import _stored_names

    body = ast.parse(
        "a = 1\n"
        "def f(p):\n    b = p\n"
        "g = lambda q: [c for c in q]\n"
        "h = [d for d in range(3) if (e := d)]\n"
        "class K:\n    k = 1\n"
    ).body
    assert _stored_names(body) == {"a", "f", "g", "h", "e", "K"}


@helion.kernel(config=helion.Config(block_sizes=[8, 128]))
def masked_rows(x, labels, ignore: hl.constexpr):
    """`continue` under compile-time conditions, in the grid loop and in a nested loop (as in
    Helion's jsd example): the rest of that iteration is skipped."""
    m, n = x.size()
    out = torch.zeros([m], dtype=torch.float32)
    for tm in hl.tile(m):
        if labels is not None:
            out[tm] = labels[tm]
            continue
        acc = hl.zeros([tm], dtype=torch.float32)
        for tn in hl.tile(n):
            if ignore:
                continue
            acc = acc + x[tm, tn].to(torch.float32).sum(1)
        out[tm] = acc + 1
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_continue_under_a_compile_time_if(device, dtype):
    x = torch.randn(21, 300, dtype=dtype)
    close(masked_rows(x, None, False), x.float().sum(1) + 1, dtype)
    close(masked_rows(x, None, True), torch.ones(21), dtype)
    labels = torch.randn(21)
    close(masked_rows(x, labels, False), labels, dtype)


def test_continue_under_a_device_condition_is_data_dependent():
    @helion.kernel
    def skips(x):
        out = torch.zeros_like(x)
        for i in hl.grid(x.size(0)):
            if x[i, 0] > 0:
                continue
            out[i, :] = x[i, :]
        return out

    with pytest.raises(helion.exc.UnsupportedConstruct, match="data-dependent"):
        skips(torch.randn(4, 128))


@helion.kernel(config=helion.Config(block_sizes=[8, 64]))
def last_of_chunk(x):
    """`min(tile.begin + chunk, n) - 1` (Helion's gdn_fwd_h): the last row of each chunk,
    read at a device scalar index; Python values still use the builtins."""
    n, d = x.size()
    out = torch.empty([n, d], dtype=x.dtype)
    for tn in hl.tile(n):
        last = min(tn.begin + 8, n) - 1
        top = max(3, 1, 2)
        out[tn, :] = x[tn, :] * 0 + x[last, :][None, :] + (top - 3)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_builtin_min_max_on_device_scalars(device, dtype):
    x = torch.randn(37, 64, dtype=dtype)
    rows = torch.arange(37)
    last = torch.minimum((rows // 8) * 8 + 8, torch.tensor(37)) - 1
    close(last_of_chunk(x), x[last], dtype)


@helion.kernel(config=helion.Config(block_sizes=[128]))
def maybe_scaled(x, scale):
    """A host variable assigned under a host `if` and used in the device loop under the same
    condition (unbound when the branch is not taken)."""
    out = torch.empty_like(x)
    if scale is not None:
        s = scale * 2
    for t in hl.tile(x.size(0)):
        v = x[t]
        if scale is not None:
            v = v * s[t]
        out[t] = v
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_host_variable_assigned_in_one_branch(device, dtype):
    x, scale = torch.randn(300, dtype=dtype), torch.randn(300, dtype=dtype)
    close(maybe_scaled(x, scale), x * (scale * 2), dtype)
    close(maybe_scaled(x, None), x, dtype)
