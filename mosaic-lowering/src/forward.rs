//! Store-to-load forwarding of windows, before the kernel is lowered: a load of a ref that
//! reads exactly what an earlier unmasked store in the same straight-line code wrote becomes
//! that stored value, and a store that a later store of the same window overwrites before
//! anything reads memory is dropped.
//!
//! A kernel may keep a value in its output window and read it back (tpuBLAS's softmax
//! normalises `exp` in its f32 output window, as ATen does: on the CPU backend the output's
//! stores then overlap the `exp` arithmetic). Mosaic keeps such a store and reload as vector
//! stores and loads; after this pass the kernel lowers as if it had kept the value in
//! registers.
//!
//! What it relies on, conservatively:
//! - straight-line code of one region, and the branch that an `if` on a constant takes (it is
//!   the code that runs); any other op with regions (loops, other `if`s), DMA, semaphore and
//!   print ops end what is known, as does a store to another operand (it could alias);
//! - a load is forwarded only when its indexers (the same SSA values for dynamic starts) and
//!   its type are those of the store, unmasked both;
//! - a store is dropped only when a later unmasked store has the same indexers and no load
//!   that stays (of any operand: operands could alias) runs in between.
//!
//! A forwarded load becomes a `reshape` of the stored value to its own type, which lowers to
//! nothing.

use std::collections::{HashMap, HashSet};
use tpukit_dsl::{Func, Indexer, Kernel, Op, OpKind, OperandId, Region, ValueId};

/// `kernel` with forwarded loads and overwritten stores of its body rewritten (see the
/// module docs); an unchanged copy if there are none.
pub fn stored_windows(kernel: &Kernel) -> Kernel {
    let mut found = Found::default();
    let mut known = Known::default();
    let mut n = 0;
    scan(
        &kernel.body,
        &kernel.body.body,
        &mut known,
        &mut found,
        &mut n,
    );
    let mut kernel = kernel.clone();
    if !found.forwarded.is_empty() || !found.dropped.is_empty() {
        let mut n = 0;
        rewrite(&mut kernel.body.body, &found, &mut n);
    }
    kernel
}

/// The decisions, by the op's position in a pre-order walk of the body.
#[derive(Default)]
struct Found {
    /// Loads that read a stored value: the value.
    forwarded: HashMap<usize, ValueId>,
    /// Stores overwritten before anything reads memory.
    dropped: HashSet<usize>,
}

/// What the code run so far has stored, per operand.
#[derive(Default)]
struct Known(HashMap<OperandId, Stored>);

struct Stored {
    /// The store's position (see [`Found`]).
    at: usize,
    index: Vec<Indexer>,
    value: ValueId,
    /// Whether a load that stays has run since the store (it may read the stored elements).
    read: bool,
}

impl Known {
    fn forget(&mut self) {
        self.0.clear();
    }

    fn read(&mut self) {
        self.0.values_mut().for_each(|s| s.read = true);
    }
}

fn scan(f: &Func, region: &Region, known: &mut Known, found: &mut Found, n: &mut usize) {
    for op in &region.ops {
        let at = *n;
        *n += 1;
        match &op.kind {
            OpKind::Load {
                operand,
                index,
                mask: None,
                ..
            } => match known.0.get(operand) {
                Some(s) if s.index == *index && f.ty(s.value) == f.ty(op.results[0]) => {
                    found.forwarded.insert(at, s.value);
                }
                _ => known.read(),
            },
            OpKind::Load { .. } => known.read(),
            OpKind::Store {
                operand,
                index,
                value,
                mask,
            } => {
                known.0.retain(|o, _| o == operand);
                match (known.0.remove(operand), mask) {
                    (Some(s), None) if !s.read && s.index == *index => {
                        found.dropped.insert(s.at);
                    }
                    _ => {}
                }
                if mask.is_none() {
                    let (index, value) = (index.clone(), *value);
                    let stored = Stored {
                        at,
                        index,
                        value,
                        read: false,
                    };
                    known.0.insert(*operand, stored);
                }
            }
            OpKind::If {
                cond,
                then_region,
                else_region,
            } => match region.bool_constant(*cond) {
                // The branch that runs, as if it stood here; the other one never runs.
                Some(taken) => {
                    for (branch, runs) in [(then_region, taken), (else_region, !taken)] {
                        if runs {
                            scan(f, branch, known, found, n);
                        } else {
                            *n += count(branch);
                        }
                    }
                }
                None => barrier(f, op, known, found, n),
            },
            OpKind::For { .. } | OpKind::While { .. } | OpKind::Print { .. } => {
                barrier(f, op, known, found, n)
            }
            kind if kind.is_dma() => barrier(f, op, known, found, n),
            _ => {}
        }
    }
}

/// An op after which nothing stored is known (its regions scanned on their own).
fn barrier(f: &Func, op: &Op, known: &mut Known, found: &mut Found, n: &mut usize) {
    known.forget();
    for region in op.kind.regions() {
        scan(f, region, &mut Known::default(), found, n);
    }
}

/// How many ops `region` holds, nested ones too (positions a skipped branch takes).
fn count(region: &Region) -> usize {
    region
        .ops
        .iter()
        .map(|op| 1 + op.kind.regions().into_iter().map(count).sum::<usize>())
        .sum()
}

fn rewrite(region: &mut Region, found: &Found, n: &mut usize) {
    let mut kept = Vec::with_capacity(region.ops.len());
    for mut op in std::mem::take(&mut region.ops) {
        let at = *n;
        *n += 1;
        for sub in op.kind.regions_mut() {
            rewrite(sub, found, n);
        }
        if found.dropped.contains(&at) {
            continue;
        }
        if let Some(&x) = found.forwarded.get(&at) {
            op.kind = OpKind::Reshape { x };
        }
        kept.push(op);
    }
    region.ops = kept;
}

#[cfg(test)]
mod tests {
    use super::stored_windows;
    use tpukit_dsl::parse_kernel;

    /// The body lines of a kernel with input `%x` and output `%o` (f32, (8, 128) blocks)
    /// whose body is `body`, after the pass, without the closing `yield`.
    fn forwarded(body: &str) -> Vec<String> {
        let text = format!(
            "kernel @k grid(parallel 2) {{
  input %x: f32[16,128] block[8,128] fill 0.0 map(%0) {{
    %1 = const 0 : i32[]
    yield %0, %1
  }}
  output %o: f32[16,128] block[8,128] fill 0.0 map(%0) {{
    %1 = const 0 : i32[]
    yield %0, %1
  }}
body {{
{body}
  yield
}}
"
        );
        let kernel = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let printed = stored_windows(&kernel).to_string();
        let body = printed.split("body {").nth(1).expect("a body");
        let lines: Vec<String> = body.lines().map(|l| l.trim().to_string()).collect();
        lines
            .into_iter()
            .filter(|l| !l.is_empty() && l != "}" && l != "yield")
            .collect()
    }

    const WHOLE: &str = "[ds(0, 8), ds(0, 128)]";

    fn load(v: usize, of: &str) -> String {
        format!("  %{v} = load %{of}{WHOLE} : f32[8,128]")
    }

    fn store(v: usize) -> String {
        format!("  store %o{WHOLE}, %{v}")
    }

    /// Normalised in place: `o = exp(x)`, then `o = o + o`.
    #[test]
    fn a_stored_window_read_back_is_the_stored_value() {
        let body = [
            load(0, "x"),
            "  %1 = exp %0 : f32[8,128]".into(),
            store(1),
            load(2, "o"),
            "  %3 = add %2, %2 : f32[8,128]".into(),
            store(3),
        ]
        .join("\n");
        let lines = forwarded(&body);
        assert!(
            lines.iter().any(|l| l.starts_with("%2 = reshape %1")),
            "{lines:#?}"
        );
        // The first store is overwritten before anything reads memory.
        let stores: Vec<_> = lines.iter().filter(|l| l.starts_with("store")).collect();
        assert_eq!(stores, [&format!("store %o{WHOLE}, %3")], "{lines:#?}");
    }

    #[test]
    fn what_may_change_the_window_between_keeps_the_load() {
        // Each case with the next free value number.
        let cases: [(Vec<String>, usize); 3] = [
            // A masked store (part of the window).
            (
                vec![
                    "  %2 = const true : bool[8,128]".into(),
                    format!("  store %o{WHOLE}, %1 mask %2"),
                ],
                3,
            ),
            // A store to another part of the window.
            (
                vec![
                    "  %2 = load %x[ds(0, 4), ds(0, 128)] : f32[4,128]".into(),
                    "  store %o[ds(0, 4), ds(0, 128)], %2".into(),
                ],
                3,
            ),
            // A loop (what it stores is not known here).
            (
                vec![
                    "  %2 = const 0 : i32[]".into(),
                    "  %3 = const 1 : i32[]".into(),
                    format!(
                        "  for %4 = %2 to %3 step %3 iter() : () {{\n  store %o{WHOLE}, %0\n    yield\n  }}"
                    ),
                ],
                5,
            ),
        ];
        for (case, at) in cases {
            let mut body = vec![load(0, "x"), "  %1 = exp %0 : f32[8,128]".into(), store(1)];
            body.extend(case);
            body.push(load(at, "o"));
            body.push(store(at));
            let lines = forwarded(&body.join("\n"));
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&format!("%{at} = load %o"))),
                "{lines:#?}"
            );
        }
    }

    #[test]
    fn a_store_stays_when_a_load_runs_before_it_is_overwritten() {
        let body = [
            load(0, "x"),
            store(0),
            // Another operand's load: operands could alias.
            load(1, "x"),
            "  %2 = exp %1 : f32[8,128]".into(),
            store(2),
        ]
        .join("\n");
        let lines = forwarded(&body);
        assert_eq!(
            lines.iter().filter(|l| l.starts_with("store")).count(),
            2,
            "{lines:#?}"
        );
    }

    /// The branch a constant takes runs where the `if` stands; another `if` ends what is
    /// known.
    #[test]
    fn a_constant_branch_is_straight_line_code() {
        let branch = |at: usize| {
            format!(
                "  if %{} : () {{\n{}\n    yield\n  }} else {{\n    yield\n  }}",
                at - 1,
                load(at, "o")
            )
        };
        let constant = [
            load(0, "x"),
            store(0),
            "  %1 = const true : bool[]".into(),
            branch(2),
        ];
        let lines = forwarded(&constant.join("\n"));
        assert!(
            lines.iter().any(|l| l.starts_with("%2 = reshape %0")),
            "{lines:#?}"
        );
        let guarded = [
            load(0, "x"),
            store(0),
            "  %1 = program_id 0 : i32[]".into(),
            "  %2 = const 0 : i32[]".into(),
            "  %3 = eq %1, %2 : bool[]".into(),
            branch(4),
        ];
        let lines = forwarded(&guarded.join("\n"));
        assert!(
            lines.iter().any(|l| l.starts_with("%4 = load %o")),
            "{lines:#?}"
        );
    }
}
