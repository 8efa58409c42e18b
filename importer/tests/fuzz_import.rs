//! Fuzzing the Mosaic and StableHLO importers: mutations of the real fixtures in
//! `tests/import/*.mlir` (line deletions and duplications, number edits, attribute edits,
//! truncations, op-name swaps) are imported or refused with an error, never a panic. A panic
//! fails the test and saves the input under `target/tmp/fuzz-import-*.mlir` to reproduce.
//!
//! The case count is `TPUKIT_FUZZ_CASES` (default 64: each case parses MLIR, a few seconds in
//! a debug build); `make fuzz` runs 1,000,000.

use proptest::prelude::*;
use proptest::test_runner::Config;
use std::panic::{AssertUnwindSafe, catch_unwind};
use tpukit_dsl::Type;
use tpukit_import::{import_mosaic, import_stablehlo, tensor_type};

fn config() -> Config {
    let cases = std::env::var("TPUKIT_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

const MOSAIC: [&str; 8] = [
    "causal_map",
    "extract",
    "gather",
    "matmul",
    "matvec",
    "nan_tests",
    "softmax",
    "swap_rows",
];
const STABLEHLO: [&str; 3] = ["stablehlo_mlp", "stablehlo_reductions", "stablehlo_sort"];

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/import/{name}.mlir", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("fixture")
}

/// The operand and result types a Mosaic fixture's first two lines name.
fn signature(text: &str) -> (Vec<Type>, Vec<Type>) {
    let header = |prefix: &str| -> Vec<Type> {
        let line = text.lines().find_map(|l| l.strip_prefix(prefix));
        line.expect("header")
            .split("; ")
            .map(|t| tensor_type(t).expect("tensor type"))
            .collect()
    };
    (header("// operands: "), header("// results: "))
}

/// Runs `f` on `text`; a panic saves `text` for reproduction and fails the test.
fn no_panic<T>(what: &str, text: &str, f: impl FnOnce() -> T) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        let path = format!("{}/fuzz-import-{what}.mlir", env!("CARGO_TARGET_TMPDIR"));
        std::fs::write(&path, text).expect("save the failing input");
        panic!("{what} importer panicked; input saved to {path}");
    }
}

/// One edit of a fixture; indices are taken modulo the number of candidates.
#[derive(Clone, Debug)]
enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    Truncate(usize),
    /// Replaces the i-th number with one of a list of edge values.
    Number(usize, usize),
    /// Swaps the names of the i-th and j-th ops (`"dialect.op"` or `dialect.op`).
    SwapOps(usize, usize),
    /// Removes the i-th `name = value` attribute or replaces its value.
    Attribute(usize, bool),
    Flip(usize, u8),
}

const NUMBERS: [&str; 9] = [
    "0",
    "-1",
    "1",
    "7",
    "2147483648",
    "-9223372036854775808",
    "99999999999999999999",
    "1.5",
    "0x7FC00000",
];

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<usize>()).prop_map(|(i, v)| Mutation::Number(i, v)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Mutation::SwapOps(i, j)),
        (any::<usize>(), any::<bool>()).prop_map(|(i, r)| Mutation::Attribute(i, r)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
    ]
}

/// Byte ranges of the tokens `is_start`/`is_part` delimit.
fn spans(
    text: &str,
    is_start: impl Fn(u8) -> bool,
    is_part: impl Fn(u8) -> bool,
) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !is_part(b[i - 1]);
        if boundary && is_start(b[i]) {
            let s = i;
            while i < b.len() && is_part(b[i]) {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

fn splice(text: &str, (s, e): (usize, usize), with: &str) -> String {
    format!("{}{with}{}", &text[..s], &text[e..])
}

fn apply(text: &str, m: &Mutation) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return text.to_string();
    }
    match *m {
        Mutation::DeleteLine(i) | Mutation::DuplicateLine(i) => {
            let mut lines = lines;
            let at = i % lines.len();
            if matches!(m, Mutation::DeleteLine(_)) {
                lines.remove(at);
            } else {
                lines.insert(at, lines[at]);
            }
            lines.join("\n")
        }
        Mutation::Truncate(i) => {
            let mut at = i % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text[..at].to_string()
        }
        Mutation::Number(i, v) => {
            let nums = spans(text, |c| c.is_ascii_digit(), |c| c.is_ascii_digit());
            if nums.is_empty() {
                return text.to_string();
            }
            splice(text, nums[i % nums.len()], NUMBERS[v % NUMBERS.len()])
        }
        Mutation::SwapOps(i, j) => {
            let part = |c: u8| c.is_ascii_alphanumeric() || c == b'.' || c == b'_';
            let ops: Vec<_> = spans(text, |c| c.is_ascii_lowercase(), part)
                .into_iter()
                .filter(|&(s, e)| {
                    let t = &text[s..e];
                    [
                        "tpu.",
                        "arith.",
                        "vector.",
                        "math.",
                        "scf.",
                        "memref.",
                        "stablehlo.",
                        "func.",
                    ]
                    .iter()
                    .any(|d| t.starts_with(d))
                })
                .collect();
            if ops.len() < 2 {
                return text.to_string();
            }
            let (a, b) = (ops[i % ops.len()], ops[j % ops.len()]);
            let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
            if first == second {
                return text.to_string();
            }
            let (t1, t2) = (&text[first.0..first.1], &text[second.0..second.1]);
            format!(
                "{}{t2}{}{t1}{}",
                &text[..first.0],
                &text[first.1..second.0],
                &text[second.1..]
            )
        }
        Mutation::Attribute(i, remove) => {
            let attrs: Vec<usize> = text.match_indices(" = ").map(|(p, _)| p).collect();
            if attrs.is_empty() {
                return text.to_string();
            }
            let p = attrs[i % attrs.len()];
            let end = text[p + 3..]
                .find([',', '}', '>', '\n'])
                .map_or(text.len(), |e| p + 3 + e);
            if remove {
                splice(text, (p, end), "")
            } else {
                splice(text, (p + 3, end), "unit")
            }
        }
        Mutation::Flip(i, b) => {
            let mut bytes = text.as_bytes().to_vec();
            let n = bytes.len();
            bytes[i % n] = b;
            String::from_utf8_lossy(&bytes).into_owned()
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_mosaic_bodies_never_panic(
        which in 0usize..MOSAIC.len(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let original = fixture(MOSAIC[which]);
        let (operands, results) = signature(&original);
        let mut text = original;
        for m in &mutations {
            text = apply(&text, m);
        }
        no_panic("mosaic", &text, || import_mosaic(&text, &operands, &results, "fuzz"));
    }

    #[test]
    fn mutated_stablehlo_modules_never_panic(
        which in 0usize..STABLEHLO.len(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut text = fixture(STABLEHLO[which]);
        for m in &mutations {
            text = apply(&text, m);
        }
        no_panic("stablehlo", &text, || import_stablehlo(&text, "fuzz"));
    }
}

/// Found by fuzzing: a NUL byte in the text panicked inside melior (it makes a C string).
#[test]
fn a_nul_byte_is_an_error() {
    let text = fixture("matvec").replacen("arith.mulf", "arith.\0ulf", 1);
    let (operands, results) = signature(&text);
    let e = import_mosaic(&text, &operands, &results, "nul").unwrap_err();
    assert!(e.to_string().contains("NUL byte"), "{e}");
    let e = import_stablehlo("module {\0}", "nul").unwrap_err();
    assert!(e.to_string().contains("NUL byte"), "{e}");
}

/// Found by fuzzing: a `stablehlo.slice` whose limit is below its start (the reductions
/// fixture with one start index edited) underflowed a `usize`.
#[test]
fn a_slice_limit_below_its_start_is_an_error() {
    let text = fixture("fuzz/slice_limit_below_start");
    let e = import_stablehlo(&text, "slice").unwrap_err();
    assert!(e.to_string().contains("below its start"), "{e}");
}

/// Found by fuzzing: a store at a negative static start (the causal_map fixture with one
/// index constant edited to -1) overflowed while the verifier wrote its error message.
#[test]
fn a_negative_static_start_is_an_error() {
    let text = fixture("fuzz/negative_store_start");
    let (operands, results) = signature(&text);
    let e = import_mosaic(&text, &operands, &results, "negative").unwrap_err();
    assert!(e.to_string().contains("outside"), "{e}");
}

/// Found by fuzzing (`make fuzz`-style run of 20,000 cases): `scratch_operands = -1` became a
/// huge count and the buffer-count sum overflowed.
#[test]
fn a_negative_scratch_count_is_an_error() {
    let text = fixture("fuzz/negative_scratch_count");
    let (operands, results) = signature(&text);
    let e = import_mosaic(&text, &operands, &results, "negative").unwrap_err();
    assert!(
        e.to_string()
            .contains("scratch_operands = -1 is not a count"),
        "{e}"
    );
}
