"""tpuBLAS reads contiguous CPU tensor arguments in place (no copy into the runtime): results
still match torch, the inputs' memory is left as it was, no result shares memory with an
input (also where an operator hands an input back reshaped or unchanged), and inputs that
cannot be read in place (strided, expanded, negated or offset views, bool and int64 tensors)
are copied and give the right answer. f32 and bf16, shapes that do not divide the blocks."""

import pytest
import torch

from tpukit import tpublas as tb

DTYPES = [torch.float32, torch.bfloat16]


def tol(dtype):
    return {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-5}


def span(t: torch.Tensor) -> tuple[int, int]:
    """The byte range of a tensor's whole storage."""
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def fresh(result: torch.Tensor, *inputs: torch.Tensor) -> bool:
    """Whether `result`'s storage overlaps no input's."""
    lo, hi = span(result)
    return all(hi <= a or b <= lo for a, b in map(span, inputs))


def random(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(37, 1029), (3, 5, 7), (4097,)])
def test_contiguous_inputs_read_in_place(dtype, shape):
    """Elementwise, broadcast, row and reduction operators on contiguous tensors: right
    results, inputs untouched, fresh results."""
    x, y = random(shape, dtype, 1), random(shape, dtype, 2)
    row = random(shape[-1:], dtype, 3)
    before = [t.clone() for t in (x, y, row)]
    cases = [
        (tb.add.Tensor(x, y, alpha=2), x.float() + 2 * y.float()),
        (tb.mul.Tensor(x, row), x.float() * row.float()),
        (tb.neg(x), -x.float()),
        (tb.gelu(x), torch.nn.functional.gelu(x.float())),
        (tb._softmax(x, -1, False), torch.softmax(x.float(), -1)),
        (tb.sum.dim_IntList(x, [-1]), x.float().sum(-1)),
    ]
    for got, want in cases:
        assert got.dtype == dtype
        torch.testing.assert_close(got.float(), want.to(dtype).float(), **tol(dtype))
        assert fresh(got, x, y, row)
    for t, b in zip((x, y, row), before, strict=True):
        assert torch.equal(t, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_results_never_alias_inputs(dtype):
    """Operators that may hand an input back (an identity permutation, a one-tensor cat, a
    zero pad, a copy) return new memory, and writing the result leaves the input alone."""
    x = random((5, 7), dtype)
    before = x.clone()
    results = [
        tb.clone(x),
        tb._to_copy(x, dtype=dtype),
        tb.permute(x, [0, 1]),
        tb.transpose.int(x, 0, 0),
        tb.cat([x]),
        tb.constant_pad_nd(x, [0, 0]),
        tb.tril(x, 10),
    ]
    for r in results:
        assert fresh(r, x)
        assert torch.equal(r, before)
        r.fill_(0)
    assert torch.equal(x, before)


@pytest.mark.parametrize("dtype", DTYPES)
def test_views_that_cannot_be_read_in_place_are_copied(dtype):
    """Transposed, strided, expanded, offset and negated views give torch's answer."""
    base = random((64, 130), dtype)
    other = random((130, 64), dtype, 5)
    views = {
        "transposed": base.T,
        "strided": base[:, ::2].T.contiguous().T,
        "step": other[::2, :],
        "offset": other[1:, 1:][:, :63],
        "expanded": random((1, 64), dtype, 6).expand(130, 64),
        "negated": torch._neg_view(other),
    }
    for name, v in views.items():
        w = random(v.shape, dtype, 7)
        got = tb.add.Tensor(v, w)
        want = (v.float() + w.float()).to(dtype)
        torch.testing.assert_close(got.float(), want.float(), **tol(dtype), msg=name)
        assert fresh(got, v, w)


def test_in_place_operators_still_write_their_input():
    """`add_` under `tpublas.mode()` updates the tensor (the inputs read in place are not the
    memory written); a tensor added to itself in place doubles."""
    x = random((9, 333), torch.float32)
    y = random((9, 333), torch.float32, 1)
    want = x + y
    ptr = x.data_ptr()
    with tb.mode():
        x.add_(y)
    assert x.data_ptr() == ptr
    torch.testing.assert_close(x, want)
    z = y.clone()
    with tb.mode():
        z.add_(z)
    torch.testing.assert_close(z, 2 * y)


def test_index_and_bool_tensors():
    """int32 indices are read in place, int64 ones narrowed (a copy), bool conditions copied:
    the results are torch's."""
    table = random((50, 17), torch.float32)
    idx = torch.tensor([3, 0, 49, 7, 7], dtype=torch.int32)
    torch.testing.assert_close(tb.embedding(table, idx), table[idx.long()])
    torch.testing.assert_close(tb.embedding(table, idx.long()), table[idx.long()])
    torch.testing.assert_close(tb.index_select(table, 1, idx[:2]), table[:, [3, 0]])
    cond = random((50, 17), torch.float32, 3) > 0
    other = random((50, 17), torch.float32, 4)
    torch.testing.assert_close(tb.where.self(cond, table, other), torch.where(cond, table, other))


def test_large_results_reuse_only_freed_memory():
    """Results above 32 MiB (whose freed blocks the extension keeps for reuse) never share
    memory with a live result or an input, and are right whether their block is new or
    reused."""
    n = 9 << 20  # 36 MiB of f32
    x, y = random((n,), torch.float32, 1), random((n,), torch.float32, 2)
    want = x + y
    first = tb.add.Tensor(x, y)
    second = tb.add.Tensor(x, y)  # `first` is alive: a new block
    assert fresh(second, first, x, y)
    torch.testing.assert_close(first, want)
    torch.testing.assert_close(second, want)
    del first
    third = tb.mul.Tensor(x, y)  # may reuse `first`'s block, and computes into all of it
    assert fresh(third, second, x, y)
    torch.testing.assert_close(third, x * y)
    torch.testing.assert_close(second, want)
