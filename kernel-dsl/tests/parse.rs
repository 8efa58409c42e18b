//! The parser is the printer's inverse: every kernel printed and parsed back is the same
//! kernel (with its source locations when they were printed), and bad text is an error that
//! names the line, the column and what was expected.

mod common;

use proptest::prelude::*;
use std::path::PathBuf;
use tpukit_dsl::*;

/// Structural equality that also holds for NaN constants (`Literal`'s `==` follows f64's):
/// the derived `Debug` shows every field, floats in their shortest round-tripping form.
fn same(a: &Kernel, b: &Kernel) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

/// `parse(print(k)) == k`, with locations printed and without; the text and hash agree.
fn assert_round_trips(k: &Kernel) {
    let located = print_kernel(k, PrintOptions { locations: true });
    let parsed = parse_kernel(&located).unwrap_or_else(|e| panic!("{e}\n{located}"));
    assert!(same(&parsed, k), "with locations:\n{located}");
    assert_eq!(
        print_kernel(&parsed, PrintOptions { locations: true }),
        located
    );
    let plain = k.to_string();
    let parsed = parse_kernel(&plain).unwrap_or_else(|e| panic!("{e}\n{plain}"));
    assert!(same(&parsed, &k.without_locations()), "{plain}");
    assert_eq!(parsed.to_string(), plain);
    assert_eq!(parsed.structural_hash(), k.structural_hash());
}

#[test]
fn the_shared_kernels_round_trip() {
    for k in [
        common::add(DType::BF16),
        common::add(DType::F32),
        common::matmul(),
        common::chunked_sum(),
        common::gather(),
    ] {
        assert_round_trips(&k);
    }
}

#[test]
fn every_printer_snapshot_parses_to_its_own_text() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "ir") {
            let text = std::fs::read_to_string(&path).unwrap();
            let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let options = PrintOptions {
                locations: text.contains("  // "),
            };
            assert_eq!(print_kernel(&k, options), text, "{}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 5, "snapshots in {}", dir.display());
}

#[test]
fn op_names_are_unique_across_op_families() {
    let mut names: Vec<&str> = UnaryOp::ALL.iter().map(|o| o.name()).collect();
    names.extend(BinaryOp::ALL.iter().map(|o| o.name()));
    names.extend(CmpOp::ALL.iter().map(|o| o.name()));
    names.extend(ReduceOp::ALL.iter().map(|o| o.name()));
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(
        names.len(),
        n,
        "the parser resolves an op by its name alone"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_kernels_round_trip(
        dtype in 0u8..6,
        names in 0u8..4,
        located in any::<bool>(),
        steps in prop::collection::vec(
            (any::<u8>(), any::<u8>(), any::<u8>(), prop_oneof![
                Just(0.0), Just(-0.0), Just(f64::INFINITY), Just(f64::NEG_INFINITY),
                Just(f64::NAN), Just(1e-30), Just(3.4e38), -1e6f64..1e6,
            ]),
            0..40,
        ),
    ) {
        let frame = common::random::Frame { dtype, names, located };
        let k = common::random::kernel(&frame, &steps);
        assert_round_trips(&k);
    }
}

/// Asserts that parsing `text` fails with a message containing every one of `parts`.
fn fails(text: &str, parts: &[&str]) {
    let e = parse_kernel_in(text, "t.ir").expect_err("expected an error");
    assert_eq!(e.kind, ErrorKind::Invalid);
    let e = e.to_string();
    for p in parts {
        assert!(e.contains(p), "error {e:?} does not mention {p:?}");
    }
}

const ADD: &str = "kernel @add grid(parallel cdiv(n, 128)) {
  input %x: f32[n] block[128] fill 0.0 map(%0) {
    yield %0
  }
  output %o: f32[n] block[128] fill 0.0 map(%0) {
    yield %0
  }
body {
  %0 = load %x[ds(0, 128)] : f32[128]
  %1 = add %0, %0 : f32[128]
  store %o[ds(0, 128)], %1
  yield
}
";

#[test]
fn hand_written_text_parses() {
    let k = parse_kernel(ADD).unwrap();
    assert_eq!(k.to_string(), ADD);
    assert_eq!(k.symbols(), vec!["n".to_string()]);
}

#[test]
fn syntax_errors_say_where_and_what_was_expected() {
    fails(
        &ADD.replace("%1 = add", "%1 add"),
        &["t.ir:10:6", "expected `=`, found `add`"],
    );
    fails(
        &ADD.replace("add %0, %0", "add %0 %0"),
        &["t.ir:10:15", "expected `,`, found `%0`"],
    );
    fails(
        &ADD.replace("add", "plus"),
        &["t.ir:10:8", "unknown op `plus`"],
    );
    fails(
        &ADD.replace("grid(parallel", "grid(sideways"),
        &["t.ir:1:18", "`parallel` or `arbitrary`"],
    );
    fails(
        &ADD.replace("f32[128]\n  %1", "f33[128]\n  %1"),
        &["t.ir:9:30", "expected a dtype"],
    );
    fails(
        &ADD.replace("load %x", "load %z"),
        &["t.ir:9:13", "unknown operand `%z` (declared: %x, %o)"],
    );
    fails(
        &ADD.replace("  yield\n}", "  yield\n"),
        &["expected an op or `}`, found the end of the input"],
    );
    fails(
        &format!("{ADD}kernel"),
        &["t.ir:14:1", "expected the end of the kernel"],
    );
    fails(
        &ADD.replace(" : f32[128]\n  %1", " : f32[128]  // not a location\n  %1"),
        &["t.ir:9:40", "expected a source location"],
    );
    fails(
        &ADD.replace("%1 = add %0, %0", "%2 = add %0, %0")
            .replace("], %1", "], %2"),
        &["%1 is never defined"],
    );
    fails(
        &ADD.replace("%1 = add", "%0 = add"),
        &["t.ir:10:3", "%0 is defined twice"],
    );
    fails(
        &ADD.replace("map(%0)", "map(%0) #"),
        &["t.ir:2:48", "unexpected character `#`"],
    );
}

#[test]
fn verifier_errors_point_at_the_op_in_the_text() {
    fails(
        &ADD.replace("%1 = add %0, %0 : f32[128]", "%1 = add %0, %0 : bf16[128]"),
        &["op `add`", "expected f32[128], got bf16[128]", "t.ir:10:3"],
    );
    // An op's own location wins.
    fails(
        &ADD.replace("f32[128]\n  store", "bf16[128]  // k.rs:4:2\n  store"),
        &["op `add`", "k.rs:4:2"],
    );
}

#[test]
fn comments_on_their_own_lines_are_ignored() {
    let commented = format!(
        "// RUN: fit edge\n// CHECK: anything\n{}",
        ADD.replace("  yield\n}", "  // between ops\n  yield\n}")
    );
    assert_eq!(parse_kernel(&commented).unwrap().to_string(), ADD);
}

#[test]
fn a_kernel_file_binds_its_symbols() {
    let file = KernelFile::parse(&format!("// RUN: extents n=200\n{ADD}"), "t.ir").unwrap();
    assert_eq!(file.bindings.unwrap()["n"], 200);
    let file = KernelFile::parse(&format!("// RUN: fit edge\n{ADD}"), "t.ir").unwrap();
    assert_eq!(file.bindings.unwrap()["n"], 2 * 128 + 64 + 1);
    assert!(KernelFile::parse(ADD, "t.ir").unwrap().bindings.is_none());
    for (run, message) in [
        (
            "extents q=3",
            "`q` is not a symbol of the kernel (its symbols: n)",
        ),
        ("extents", "no extent for the symbol `n`"),
        ("extents n=x", "`x` is not an extent"),
        ("fit tight", "expected `fit edge` or `fit divisible`"),
        (
            "lower",
            "expected `extents SYM=N …` or `fit edge|divisible`, found `lower`",
        ),
    ] {
        let e = KernelFile::parse(&format!("{ADD}// RUN: {run}\n"), "t.ir").unwrap_err();
        let e = e.to_string();
        assert!(e.contains(message) && e.contains("t.ir:14:1"), "{run}: {e}");
    }
}

/// `pl.Element` windows (`BlockDim::Element`, printed `el8`) round trip; `el` without a size
/// is an error naming what was expected.
#[test]
fn element_windows_round_trip() {
    let mut rows = ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)]).blocked(
        [8, 128],
        [
            grid(0) * IndexExpr::Const(5) + IndexExpr::Const(4),
            0.into(),
        ],
    );
    rows.block.as_mut().unwrap().block = vec![BlockDim::Element(8), BlockDim::Element(128)];
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::Static(3))],
        inputs: vec![rows],
        outputs: vec![ArraySpec::new(DType::F32, [24, 128]).blocked([8, 128], [grid(0), 0.into()])],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("element", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let v = b.load(x, &[]).unwrap();
    b.store(o, &[], v).unwrap();
    let k = b.finish().unwrap();
    assert!(k.to_string().contains("block[el8,el128]"), "{k}");
    assert_round_trips(&k);
    let bad = k.to_string().replace("el8,", "el,");
    let e = parse_kernel(&bad).unwrap_err().to_string();
    assert!(e.contains("an element block size"), "{e}");
}

/// A grid axis sized by a one-element i32 operand at launch (`grid=(n,)` with `n` traced).
const VALUE_GRID: &str = "kernel @first_blocks grid(arbitrary value(0), parallel 2) {
  prefetch %n: i32[]
  input %x: f32[m,256] block[8,128] fill 0.0 map(%0, %1) {
    yield %0, %1
  }
  output %o: f32[m,256] block[8,128] fill 0.0 map(%0, %1) {
    yield %0, %1
  }
body {
  %0 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %0
  yield
}
";

#[test]
fn a_grid_extent_read_from_an_operand_round_trips() {
    let k = parse_kernel(VALUE_GRID).unwrap();
    assert_eq!(k.to_string(), VALUE_GRID);
    assert_eq!(k.grid[0].extent, Extent::Value { operand: 0 });
    assert_eq!(k.grid_values(), vec![0]);
    assert_eq!(k.symbols(), vec!["m".to_string()]);
    let mut bindings = Bindings::new();
    assert_eq!(k.grid[0].extent.resolve(&bindings), None);
    bindings.insert(value_key(0), 5);
    assert_eq!(k.grid[0].extent.resolve(&bindings), Some(5));
    assert_round_trips(&k);
}

#[test]
fn a_grid_extent_operand_must_be_a_leading_one_element_i32_prefetch() {
    let one = VALUE_GRID.replace("%n: i32[]", "%n: i32[1]");
    assert_round_trips(&parse_kernel(&one).unwrap());
    let not_scalar = VALUE_GRID.replace("%n: i32[]", "%n: i32[2]");
    fails(
        &not_scalar,
        &["operand `n`", "one-element i32 scalar-prefetch operand"],
    );
    let input = VALUE_GRID.replace("value(0)", "value(1)");
    fails(
        &input,
        &["operand `x`", "one-element i32 scalar-prefetch operand"],
    );
    let read = VALUE_GRID.replace(
        "  store %o[ds(0, 8), ds(0, 128)], %0\n",
        "  %1 = load %n[] : i32[]\n  store %o[ds(0, 8), ds(0, 128)], %0\n",
    );
    fails(
        &read,
        &["`n` sizes the grid and is no buffer of the kernel"],
    );
    let missing = VALUE_GRID.replace("value(0)", "value(7)");
    fails(&missing, &["value of operand 7, but the kernel has 3"]);
    let second = VALUE_GRID.replace(
        "  prefetch %n: i32[]\n",
        "  prefetch %rows: i32[4]\n  prefetch %n: i32[]\n",
    );
    fails(
        &second.replace("value(0)", "value(1)"),
        &["operand `n` sizes the grid, so it must come before every other operand"],
    );
}

#[test]
fn print_ops_round_trip_and_take_i32_scalars() {
    let text = ADD.replace(
        "  %1 = add %0, %0 : f32[128]\n",
        "  %1 = add %0, %0 : f32[128]\n  %2 = program_id 0 : i32[]\n  print \"step $0 \\\"x\\\"\", %2\n  print \"done\"\n",
    );
    let k = parse_kernel(&text).unwrap();
    assert_eq!(k.to_string(), text);
    assert_round_trips(&k);
    let float = text.replace("print \"step $0 \\\"x\\\"\", %2", "print \"x $0\", %1");
    fails(&float, &["op `print`", "argument 0"]);
    assert_eq!(
        format_message("a $0 b $1 $2 $$1 $x", &[7, -3]),
        "a 7 b -3 $2 $-3 $x"
    );
}

#[test]
fn an_output_that_starts_undefined_round_trips_and_hashes_apart() {
    let text = ADD.replace(
        "output %o: f32[n] block",
        "output %o: f32[n] undefined block",
    );
    let k = parse_kernel(&text).unwrap();
    assert_eq!(k.operands[1].initial, Initial::Undefined);
    assert_eq!(k.operands[0].initial, Initial::Caller);
    assert_eq!(k.to_string(), text);
    assert_round_trips(&k);
    assert_ne!(
        k.structural_hash(),
        parse_kernel(ADD).unwrap().structural_hash()
    );
    fails(
        &ADD.replace("input %x: f32[n] block", "input %x: f32[n] undefined block"),
        &["only an output starts undefined"],
    );
}
