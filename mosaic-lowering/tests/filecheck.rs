//! FileCheck tests of the lowering: each `tests/lower/RULE.ir` holds kernels in IR text, each
//! followed by what it must lower to.
//!
//! A file is one or more cases separated by `// -----` lines. A case is a kernel
//! ([`tpukit_dsl::KernelFile`]: IR text with `// RUN: extents SYM=N …` or `// RUN: fit
//! edge|divisible` binding its symbols), and either
//! - `// CHECK…:` lines on the Mosaic module it lowers to and `// HLO…:` lines on the
//!   StableHLO module around it (see `filecheck/matcher.rs` for the directives), or
//! - `// expected-error: TEXT` lines: parsing, verifying or lowering it fails with an error
//!   containing each TEXT.
//!
//! Every unary, binary, comparison and reduction op is lowered by some passing case, so a
//! deleted lowering rule fails here. `tests/conformance/test_ir_files.py` compiles every case
//! that lowers with libtpu.

#[path = "filecheck/matcher.rs"]
mod matcher;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use tpukit_dsl::{BinaryOp, CmpOp, Kernel, KernelFile, OpKind, ReduceOp, Region, UnaryOp};
use tpukit_mosaic::{Options, lower};

/// One case of a file: its text with the lines of other cases blanked, so that line numbers
/// are the file's.
struct Case {
    text: String,
    /// The file's line the case starts on.
    line: usize,
}

fn cases(text: &str) -> Vec<Case> {
    let lines: Vec<&str> = text.lines().collect();
    let mut cases = Vec::new();
    let mut start = 0;
    for i in 0..=lines.len() {
        if i == lines.len() || lines[i].trim() == "// -----" {
            let mut t = "\n".repeat(start);
            for l in &lines[start..i] {
                t.push_str(l);
                t.push('\n');
            }
            cases.push(Case {
                text: t,
                line: start + 1,
            });
            start = i + 1;
        }
    }
    cases
}

fn lower_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/lower")
}

/// Runs one case; on success returns the kernel it lowered (none for an error case).
fn run(path: &Path, case: &Case) -> Result<Option<Kernel>, String> {
    let file = path
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(path)
        .display()
        .to_string();
    let expected: Vec<(usize, &str)> = case
        .text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            l.trim_start()
                .strip_prefix("// expected-error:")
                .map(|m| (i + 1, m.trim()))
        })
        .collect();
    let lowered = KernelFile::parse(&case.text, &file).and_then(|f| {
        let options = Options {
            bindings: f.bindings.clone().unwrap_or_default(),
            ..Options::default()
        };
        lower(&f.kernel, &options).map(|l| (f.kernel, l))
    });
    if !expected.is_empty() {
        let error = match lowered {
            Ok(_) => {
                return Err(format!(
                    "{file}:{}: the case lowered, expected an error",
                    expected[0].0
                ));
            }
            Err(e) => e.to_string(),
        };
        for (line, m) in expected {
            if !error.contains(m) {
                return Err(format!(
                    "{file}:{line}: expected-error: `{m}` is not in the error:\n  {error}"
                ));
            }
        }
        return Ok(None);
    }
    let (kernel, lowered) = lowered.map_err(|e| format!("{file}:{}: {e}", case.line))?;
    let mut checked = 0;
    for (prefix, output) in [("CHECK", &lowered.mosaic), ("HLO", &lowered.stablehlo)] {
        let directives =
            matcher::directives(&case.text, prefix).map_err(|e| format!("{file}: {e}"))?;
        checked += directives.len();
        matcher::check(output, &directives, &file, prefix)?;
    }
    if checked == 0 {
        return Err(format!(
            "{file}:{}: a case without CHECK or expected-error lines",
            case.line
        ));
    }
    Ok(Some(kernel))
}

/// The names of every op in `r` and the regions nested in it.
fn op_names(r: &Region, names: &mut BTreeSet<&'static str>) {
    for op in &r.ops {
        names.insert(op.kind.name());
        if let OpKind::For { body, .. } = &op.kind {
            op_names(body, names);
        }
        if let OpKind::If {
            then_region,
            else_region,
            ..
        } = &op.kind
        {
            op_names(then_region, names);
            op_names(else_region, names);
        }
    }
}

#[test]
fn every_lowering_file_checks() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(lower_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ir"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no files in {}", lower_dir().display());
    let mut failures = Vec::new();
    let mut lowered = BTreeSet::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        for case in cases(&text) {
            match run(path, &case) {
                Ok(Some(k)) => op_names(&k.body.body, &mut lowered),
                Ok(None) => {}
                Err(e) => failures.push(e),
            }
        }
    }
    let mut family: Vec<&str> = UnaryOp::ALL.iter().map(|o| o.name()).collect();
    family.extend(BinaryOp::ALL.iter().map(|o| o.name()));
    family.extend(CmpOp::ALL.iter().map(|o| o.name()));
    family.extend(ReduceOp::ALL.iter().map(|o| o.name()));
    let missing: Vec<&str> = family
        .into_iter()
        .filter(|n| !lowered.contains(n))
        .collect();
    if !missing.is_empty() {
        failures.push(format!(
            "no passing case in tests/lower lowers: {}",
            missing.join(", ")
        ));
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

// The matcher itself: a CHECK test is only as good as its failures.

fn check(output: &str, checks: &str) -> Result<(), String> {
    let directives = matcher::directives(checks, "CHECK")?;
    matcher::check(output, &directives, "t.ir", "CHECK")
}

const OUTPUT: &str = "func.func @main(%arg0: i32) {\n  %0 = arith.addf %a, %b : f32\n  %1 = math.exp %0 : f32\n  return\n}\nfunc.func @transform_0() {\n  return\n}\n";

#[test]
fn matcher_accepts_what_the_output_says() {
    check(OUTPUT, "// CHECK-LABEL: func.func @main\n// CHECK: arith.addf\n// CHECK-SAME: : f32\n// CHECK-NEXT: math.exp {{%[0-9]+}}\n// CHECK-NOT: math.log\n// CHECK: return\n// CHECK-LABEL: @transform_0\n// CHECK-NEXT: return").unwrap();
    check(OUTPUT, "// CHECK: %0   =   arith.addf").unwrap();
}

#[test]
fn matcher_failures_name_the_line_the_pattern_and_the_output() {
    let e = check(OUTPUT, "// CHECK: arith.addf\n// CHECK-NEXT: return").unwrap_err();
    assert!(
        e.starts_with("t.ir:2: CHECK-NEXT: `return` not found; output from line 3:"),
        "{e}"
    );
    assert!(e.contains("    3 |   %1 = math.exp %0 : f32"), "{e}");
    let e = check(
        OUTPUT,
        "// CHECK: arith.addf\n// CHECK-NOT: math.exp\n// CHECK: return",
    )
    .unwrap_err();
    assert!(
        e.contains("t.ir:2: CHECK-NOT: `math.exp` found on output line 3"),
        "{e}"
    );
    let e = check(OUTPUT, "// CHECK: math.exp\n// CHECK: arith.addf").unwrap_err();
    assert!(e.contains("t.ir:2: CHECK: `arith.addf` not found"), "{e}");
    let e = check(
        OUTPUT,
        "// CHECK-LABEL: @transform_0\n// CHECK-LABEL: @main",
    )
    .unwrap_err();
    assert!(e.contains("CHECK-LABEL: `@main` not found"), "{e}");
    // A CHECK-NOT is bounded by its label's block.
    check(
        OUTPUT,
        "// CHECK-LABEL: @main\n// CHECK-NOT: transform\n// CHECK-LABEL: @transform_0",
    )
    .unwrap();
    let e = check(OUTPUT, "// CHECK: addf\n// CHECK-SAME: math.exp").unwrap_err();
    assert!(e.contains("CHECK-SAME: `math.exp` not found"), "{e}");
}
