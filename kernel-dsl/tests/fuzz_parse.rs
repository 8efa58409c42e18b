//! Fuzzing the kernel-IR text parser: arbitrary strings and mutations (byte flips,
//! truncations, token swaps, line deletions) of printed random kernels never panic; every
//! error from the lexer or parser carries a position; whatever parses is verified and
//! round-trips through the printer.
//!
//! The case count is `TPUKIT_FUZZ_CASES` (default 256, a few seconds in a debug build);
//! `make fuzz` runs 1,000,000.

mod common;

use proptest::prelude::*;
use proptest::test_runner::Config;
use tpukit_dsl::*;

fn config() -> Config {
    let cases = std::env::var("TPUKIT_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Parses `text`; a panic is a failure showing the input, an error must carry a position
/// when the text does not lex or parse, and a parsed kernel must verify and round-trip.
fn check(text: &str) {
    let result = std::panic::catch_unwind(|| parse_kernel(text));
    let Ok(result) = result else {
        panic!("parse_kernel panicked on:\n{text:?}");
    };
    match result {
        Ok(k) => {
            verify(&k).unwrap_or_else(|e| panic!("parsed but does not verify: {e}\n{text}"));
            let printed = print_kernel(&k, PrintOptions { locations: true });
            let again = parse_kernel(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
            assert_eq!(
                print_kernel(&again, PrintOptions { locations: true }),
                printed
            );
        }
        Err(e) => {
            // Lexer and parser errors carry `(at <input>:line:col)`; verifier errors name
            // the op or operand instead when the spec, not a line, is wrong.
            let shown = e.to_string();
            assert!(
                e.loc.is_some() || shown.contains("(at ") || e.op.is_some() || shown.contains('`'),
                "error without a position: {shown}\n{text:?}"
            );
        }
    }
}

/// One edit of a printed kernel; positions are taken modulo the text's length.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, u8),
    DeleteLine(usize),
    SwapTokens(usize, usize),
    DuplicateLine(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![
        any::<u8>(),
        prop::sample::select(b"()[]{}<>,:=%\"\\0123456789-.xe#@ \n".to_vec()),
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), byte).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::DeleteLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapTokens(a, b)),
        any::<usize>().prop_map(Mutation::DuplicateLine),
    ]
}

/// Applies `m` to `text` at the byte level, keeping the result valid UTF-8 (lossily).
fn apply(text: &str, m: &Mutation) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let n = bytes.len().max(1);
    match *m {
        Mutation::Flip(i, b) => {
            if !bytes.is_empty() {
                bytes[i % n] = b;
            }
        }
        Mutation::Truncate(i) => bytes.truncate(i % n),
        Mutation::Insert(i, b) => bytes.insert(i % (bytes.len() + 1), b),
        Mutation::DeleteLine(i) | Mutation::DuplicateLine(i) => {
            let mut lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let at = i % lines.len();
                if matches!(m, Mutation::DeleteLine(_)) {
                    lines.remove(at);
                } else {
                    lines.insert(at, lines[at]);
                }
            }
            return lines.join("\n");
        }
        Mutation::SwapTokens(a, b) => {
            let mut toks: Vec<&str> = text.split(' ').collect();
            let len = toks.len();
            toks.swap(a % len, b % len);
            return toks.join(" ");
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_strings_never_panic(text in ".{0,200}") {
        check(&text);
    }

    #[test]
    fn kernel_like_strings_never_panic(
        text in "(kernel|grid|in|out|scratch|prefetch|%[a-z0-9]+|[0-9]+|=|:|,|\\(|\\)|\\[|\\]|\\{|\\}|<|>|f32|bf16|i32|load|store|add| |\n){0,60}"
    ) {
        check(&text);
    }

    #[test]
    fn mutated_kernels_never_panic(
        dtype in 0u8..6,
        names in 0u8..4,
        located in any::<bool>(),
        steps in prop::collection::vec(
            (any::<u8>(), any::<u8>(), any::<u8>(), -1e3f64..1e3),
            0..20,
        ),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let frame = common::random::Frame { dtype, names, located };
        let k = common::random::kernel(&frame, &steps);
        let mut text = print_kernel(&k, PrintOptions { locations: located });
        for m in &mutations {
            text = apply(&text, m);
        }
        check(&text);
    }

    #[test]
    fn mutated_shared_kernels_never_panic(
        which in 0usize..5,
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let k = match which {
            0 => common::add(DType::BF16),
            1 => common::matmul(),
            2 => common::chunked_sum(),
            3 => common::gather(),
            _ => common::add(DType::I32),
        };
        let mut text = print_kernel(&k, PrintOptions { locations: true });
        for m in &mutations {
            text = apply(&text, m);
        }
        check(&text);
    }
}
