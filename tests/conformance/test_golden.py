"""Golden tests: every catalog kernel against the same kernel written in JAX Pallas.

Both are lowered for TPU on this CPU-only host: tpukit by its CLI, Pallas by
`jax.export(jax.jit(f), platforms=["tpu"])` (jax 0.10.2). Both bodies are deserialized by
jaxlib's tpu dialect and verified, then compared structurally (`golden.py`): kernel signature,
attributes and window params with their index maps, and the body's op sequence, modulo
locations, SSA names, constant placement and dead code.

Where tpukit legitimately differs, the difference is listed below in `ALLOWED`, hunk by hunk,
with the reason: the body comparison passes only when the diff consists of exactly those hunks,
so both an unexpected difference and a listed one that went away fail. Shapes divide the blocks
(Pallas pads edge blocks with unspecified values; tpukit masks them, see `test_edge_*`).
"""

import dataclasses
import difflib
import functools

import golden
import pytest
from conftest import tpukit

# Divisible shapes, one per kernel (tpukit's CLI shape: `tpukit list`).
SHAPES = {
    "add_vectors": (4096,),
    "softmax": (64, 256),
    "layer_norm": (64, 384),
    "matmul": (256, 512, 256),
    "row_gather": (1000, 256, 64),
    "flash_attention": (8, 512, 512, 128),
}
# Shapes the blocks do not divide: tpukit masks loads there, Pallas does not.
EDGE_SHAPES = {
    "add_vectors": (100003,),
    "softmax": (1003, 256),
    "layer_norm": (517, 384),
    "matmul": (300, 200, 260),
    "row_gather": (1000, 300, 77),
    "flash_attention": (3, 300, 333, 128),
}
DTYPES = ("f32", "bf16")


@dataclasses.dataclass(frozen=True)
class Hunk:
    """One allowed difference: these Pallas body lines became these tpukit lines."""

    pallas: tuple
    tpukit: tuple
    reason: str
    dtypes: tuple = DTYPES


WHEN_PREDICATE = Hunk(
    pallas=(
        "arith.extui(arith.cmpi) -> i32",
        "arith.cmpi(arith.extui, 0 : i32) -> i1 {predicate=1 : i64}",
    ),
    tpukit=(),
    reason="`pl.when` converts the i1 condition to i32 and compares it with 0 again "
    "(jax's bool lowering); tpukit branches on the comparison itself",
)

ALLOWED = {
    "add_vectors": [],
    "row_gather": [],
    # `pl.when(program_id(2) == 0)` and the causal block skip; the last step's below.
    "flash_attention": [WHEN_PREDICATE, WHEN_PREDICATE],
    "softmax": [
        Hunk(
            pallas=(
                (
                    "vector.multi_reduction(vector.load, splat(0xFF80) : vector<8xbf16>)"
                    " -> vector<8xbf16> {kind=#vector.kind<maximumf>,"
                    " reduction_dims=array<i64: 1>}"
                ),
                "vector.shape_cast(vector.multi_reduction) -> vector<8x1xbf16>",
            ),
            tpukit=(
                "arith.extf(vector.load) -> vector<8x256xf32>",
                (
                    "vector.multi_reduction(arith.extf, splat(0xFF800000) : vector<8xf32>)"
                    " -> vector<8xf32> {kind=#vector.kind<maximumf>,"
                    " reduction_dims=array<i64: 1>}"
                ),
                "arith.truncf(vector.multi_reduction) -> vector<8xbf16>",
                "vector.shape_cast(arith.truncf) -> vector<8x1xbf16>",
            ),
            reason="tpukit reduces every float in f32 (exact for max, rounding once for "
            "sum); Pallas reduces a bf16 max in bf16. Same values; fewer LLO ops on v6e "
            "(BENCHMARKS.md)",
            dtypes=("bf16",),
        ),
        Hunk(
            pallas=(
                "vector.shape_cast(vector.multi_reduction) -> vector<8x1xf32>",
                "arith.truncf(vector.shape_cast) -> vector<8x1xbf16>",
                "vector.broadcast(arith.truncf) -> vector<8x256xbf16>",
            ),
            tpukit=(
                "arith.truncf(vector.multi_reduction) -> vector<8xbf16>",
                "vector.shape_cast(arith.truncf) -> vector<8x1xbf16>",
                "vector.broadcast(vector.shape_cast) -> vector<8x256xbf16>",
            ),
            reason="keepdims and the cast back to bf16 in the other order: tpukit rounds "
            "the reduced vector, then reshapes it",
            dtypes=("bf16",),
        ),
    ],
    "layer_norm": [
        Hunk(
            pallas=(
                "vector.shape_cast(vector.load) -> vector<1x384xf32>",
                "vector.broadcast(vector.shape_cast) -> vector<16x384xf32>",
            ),
            tpukit=("vector.broadcast(vector.load) -> vector<16x384xf32>",),
            reason=f"{which}: jax broadcasts (n,) to (16, n) through a (1, n) reshape; "
            "tpukit's vector.broadcast adds the leading dimension itself",
        )
        for which in ("weight", "bias")
    ],
    "matmul": [
        WHEN_PREDICATE,
        Hunk(
            pallas=("vector.load(arg6, 0 : index, 0 : index) -> vector<128x128xf32>",),
            tpukit=(),
            reason="`acc[...] += dot(a, b)`: jax loads the accumulator before the dot, "
            "tpukit after it (the same load, moved: see the next hunk)",
        ),
        Hunk(
            pallas=(),
            tpukit=("vector.load(arg6, 0 : index, 0 : index) -> vector<128x128xf32>",),
            reason="the accumulator load, after the dot",
        ),
    ],
}


# The grid extent of the `arbitrary` axis whose last step writes the output, per kernel and
# shape: the `num_programs(2) - 1` condition holds it as a constant.
LAST_STEPS = {
    "matmul": lambda shape: -(-shape[1] // 128),
    "flash_attention": lambda shape: -(-shape[2] // 128),
}


def last_step(steps):
    """The `num_programs(2) - 1` hunk of a kernel whose axis 2 takes `steps` steps."""
    return Hunk(
        pallas=(
            f"arith.cmpi(arg2, {steps - 1} : i32) -> i1 {{predicate=0 : i64}}",
            *WHEN_PREDICATE.pallas,
        ),
        tpukit=(
            f"arith.subi({steps} : i32, 1 : i32) -> i32 {{overflowFlags=#arith.overflow<none>}}",
            "arith.cmpi(arg2, arith.subi) -> i1 {predicate=0 : i64}",
        ),
        reason="`num_programs(2) - 1`: jax folds it to a constant, tpukit emits the "
        "subtraction of two constants (Mosaic's canonicalizer folds it); plus the "
        "`pl.when` predicate as above",
    )


# -- lowering both sides -------------------------------------------------------------------


def cli_shape(shape):
    return "x".join(map(str, shape))


@functools.cache
def tpukit_text(name, shape, dtype):
    return tpukit("lower", name, "--shape", cli_shape(shape), "--dtype", dtype)


@functools.cache
def pallas_text(name, shape, dtype, variant=None):
    import jax
    import pallas_twins
    from jax import export

    make = pallas_twins.twins()[name]
    call, args = make(shape, dtype, **dict(variant or ()))
    return export.export(jax.jit(call), platforms=["tpu"])(*args).mlir_module()


@pytest.fixture(scope="session")
def deserializer():
    return golden.Deserializer()


def kernel_of(deserializer, text, unmask=False):
    body, _ = golden.body_of(text)
    return golden.normal_form(*deserializer.module(body), unmask=unmask)


# -- the comparison ------------------------------------------------------------------------


def line(entry):
    """One body entry as a line: `name(operands) -> results {attr=value, ...}`."""
    if len(entry) == 1:
        return entry[0]
    name, operands, results, attrs = entry
    text = f"{name}({', '.join(operands)}) -> {', '.join(results)}".rstrip()
    if attrs:
        text += " {" + ", ".join(f"{k}={v}" for k, v in attrs) + "}"
    return text


def body_hunks(pallas, ours):
    """The non-equal hunks of the two bodies' line sequences, as `(pallas, tpukit)` pairs."""
    a = [line(e) for e in pallas.body]
    b = [line(e) for e in ours.body]
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return [
        (tuple(a[i1:i2]), tuple(b[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def compare(pallas, ours, allowed):
    """Every difference between two kernels that `allowed` does not list (empty: equal)."""
    problems = []
    for field in ("name", "version", "signature", "attributes", "functions"):
        theirs, mine = getattr(pallas, field), getattr(ours, field)
        if theirs != mine:
            problems.append(f"{field}:\n  Pallas: {theirs}\n  tpukit: {mine}")
    expected = [(h.pallas, h.tpukit) for h in allowed]
    found = body_hunks(pallas, ours)
    for hunk in found:
        if hunk not in expected:
            problems.append(
                "unexpected body difference:\n"
                + "".join(f"  - {x}\n" for x in hunk[0])
                + "".join(f"  + {x}\n" for x in hunk[1])
            )
    for hunk in expected:
        if hunk not in found:
            problems.append(f"an allowed difference no longer occurs: {hunk}")
    if not problems and found != expected:
        problems.append(f"allowed differences out of order: {found}")
    return problems


def allowed(name, dtype, shape):
    steps = LAST_STEPS.get(name)
    hunks = ALLOWED[name] + ([last_step(steps(shape))] if steps else [])
    return [h for h in hunks if dtype in h.dtypes]


CASES = [(name, dtype) for name in SHAPES for dtype in DTYPES]


def test_every_catalog_kernel_has_a_twin():
    import pallas_twins
    from test_conformance import catalog  # tpuBLAS operators have no twins yet

    assert sorted(catalog()) == sorted(SHAPES) == sorted(pallas_twins.twins())
    assert sorted(ALLOWED) == sorted(SHAPES)


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_mosaic_kernel_matches_pallas(deserializer, name, dtype):
    shape = SHAPES[name]
    pallas = kernel_of(deserializer, pallas_text(name, shape, dtype))
    ours = kernel_of(deserializer, tpukit_text(name, shape, dtype))
    assert pallas.body, "the Pallas body normalised to nothing"
    problems = compare(pallas, ours, allowed(name, dtype, shape))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_custom_call_matches_pallas(deserializer, name, dtype):
    """The StableHLO around the kernel: ops, custom call attributes, backend_config."""
    shape = SHAPES[name]
    theirs = golden.stablehlo_form(pallas_text(name, shape, dtype))
    mine = golden.stablehlo_form(tpukit_text(name, shape, dtype))
    assert mine == theirs


# -- the comparison can fail ---------------------------------------------------------------


def test_a_different_kernel_does_not_match(deserializer):
    """softmax's Pallas body against tpukit's layer_norm: everything differs."""
    pallas = kernel_of(deserializer, pallas_text("softmax", (64, 384), "f32"))
    ours = kernel_of(deserializer, tpukit_text("layer_norm", (64, 384), "f32"))
    problems = compare(pallas, ours, [])
    assert any(p.startswith("name:") for p in problems)
    assert any(p.startswith("signature:") for p in problems)
    assert any(p.startswith("unexpected body difference") for p in problems)


@pytest.mark.parametrize(
    ("variant", "field"),
    [
        ({"semantics": "arbitrary"}, "attributes:"),  # dimension_semantics
        ({"op": "sub"}, "unexpected body difference"),  # arith.subf, not addf
        ({"swap": True}, "unexpected body difference"),  # loads y before x
        ({"block": 512}, "signature:"),  # memref<512x...>, window_bounds, grid
    ],
)
def test_a_changed_twin_does_not_match(deserializer, variant, field):
    """One change to the add twin is one reported difference (the compare is not loose)."""
    shape = SHAPES["add_vectors"]
    only_field = "block" not in variant  # a change of block size shows everywhere
    variant = tuple(variant.items())
    pallas = kernel_of(deserializer, pallas_text("add_vectors", shape, "f32", variant))
    ours = kernel_of(deserializer, tpukit_text("add_vectors", shape, "f32"))
    problems = compare(pallas, ours, [])
    assert problems and problems[0].startswith(field), problems
    if only_field:
        assert all(p.startswith(field) for p in problems), problems


def test_an_allowed_difference_that_does_not_occur_fails(deserializer):
    shape = SHAPES["add_vectors"]
    pallas = kernel_of(deserializer, pallas_text("add_vectors", shape, "f32"))
    ours = kernel_of(deserializer, tpukit_text("add_vectors", shape, "f32"))
    problems = compare(pallas, ours, [WHEN_PREDICATE])
    hunk = (WHEN_PREDICATE.pallas, WHEN_PREDICATE.tpukit)
    assert problems == [f"an allowed difference no longer occurs: {hunk}"]


# -- edge shapes ---------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_edge_shapes_differ_only_by_masks(deserializer, name, dtype):
    """On shapes the blocks do not divide, tpukit's body is Pallas's plus load masks:
    with every `select(iota mask, load, fill)` read as the load, the comparison is the
    divisible one (same allowed differences)."""
    shape = EDGE_SHAPES[name]
    pallas = kernel_of(deserializer, pallas_text(name, shape, dtype))
    ours = kernel_of(deserializer, tpukit_text(name, shape, dtype), unmask=True)
    assert ours.masks > 0, "an edge shape with no masked load"
    problems = compare(pallas, ours, allowed(name, dtype, shape))
    assert not problems, "\n".join(problems)
    # Without unmasking, the masks are a difference.
    assert compare(pallas, kernel_of(deserializer, tpukit_text(name, shape, dtype)), [])
