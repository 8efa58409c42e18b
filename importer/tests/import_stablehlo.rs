//! The StableHLO importer on real JAX output: pure JAX functions (no Pallas call) as tpukit's
//! Python side hands them over (`tests/import/stablehlo_*.mlir`, written by
//! `python/tools/import_fixtures.py` with jax 0.10.2). Each becomes one grid step over whole
//! arrays; unsupported ops fail with an error naming the op and the Python line.

use tpukit_dsl::{DType, ErrorKind, Kernel, OpKind, Region, Role, Window};
use tpukit_import::{import_stablehlo, stablehlo_ops};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/import/stablehlo_{name}.mlir",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).expect("fixture")
}

fn import(name: &str) -> Kernel {
    import_stablehlo(&fixture(name), name).unwrap_or_else(|e| panic!("{e}"))
}

fn op_names(region: &Region, out: &mut Vec<&'static str>) {
    for op in &region.ops {
        out.push(op.kind.name());
        for r in op.kind.regions() {
            op_names(r, out);
        }
    }
}

fn names(k: &Kernel) -> Vec<&'static str> {
    let mut v = Vec::new();
    op_names(&k.body.body, &mut v);
    v
}

fn count(k: &Kernel, role: Role) -> usize {
    k.operands_with_role(role).count()
}

#[test]
fn matmul_bias_gelu_is_one_step_over_whole_arrays() {
    let k = import("mlp");
    assert!(k.grid.is_empty(), "one step: {:?}", k.grid);
    assert_eq!((count(&k, Role::Input), count(&k, Role::Output)), (3, 1));
    assert!(k.operands.iter().all(|o| matches!(o.window, Window::Whole)));
    assert!(k.operands.iter().all(|o| o.dtype == DType::BF16));
    let ops = names(&k);
    for want in ["load", "dot", "broadcast", "exp", "select", "store"] {
        assert!(ops.contains(&want), "no `{want}` in {ops:?}");
    }
    // One matrix product; the exact gelu's erfc arrives as JAX's polynomial in plain
    // StableHLO ops (f32, between converts), imported op by op.
    assert_eq!(ops.iter().filter(|n| **n == "dot").count(), 1, "{ops:?}");
    assert!(!ops.contains(&"erf"), "{ops:?}");
    assert!(ops.contains(&"cast"), "{ops:?}");
}

#[test]
fn reductions_inline_calls_and_slice_through_scratch() {
    let k = import("reductions");
    assert_eq!((count(&k, Role::Input), count(&k, Role::Output)), (1, 2));
    // Two slices and a concatenation, one whole scratch buffer each.
    assert_eq!(count(&k, Role::Scratch), 3);
    let reductions: Vec<_> = k
        .body
        .body
        .ops
        .iter()
        .filter_map(|op| match &op.kind {
            OpKind::Reduce { op, axes, .. } => Some((op.name(), axes.clone())),
            _ => None,
        })
        .collect();
    // mean over axis 0 (in the inlined @centre), max over (0, 2), sum over axis 1.
    assert_eq!(
        reductions,
        [
            ("reduce_sum", vec![0]),
            ("reduce_max", vec![0, 2]),
            ("reduce_sum", vec![1])
        ]
    );
}

#[test]
fn unsupported_op_is_named_with_its_python_line() {
    let e = import_stablehlo(&fixture("sort"), "sort").unwrap_err();
    let message = e.to_string();
    assert!(message.contains("stablehlo.sort"), "{message}");
    assert!(message.contains("unsupported"), "{message}");
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert!(
        message.contains("python/tools/import_fixtures.py:"),
        "no Python line in {message}"
    );
    assert_eq!(e.kernel.as_deref(), Some("sort"));
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    let e = import_stablehlo("this is not MLIR", "bad").unwrap_err();
    assert!(e.to_string().contains("cannot parse"), "{e}");
    let e = import_stablehlo("module {}", "empty").unwrap_err();
    assert!(e.to_string().contains("@main"), "{e}");
}

#[test]
fn the_rule_table_names_each_op_once() {
    let mut ops: Vec<_> = stablehlo_ops().collect();
    let n = ops.len();
    ops.sort();
    ops.dedup();
    assert_eq!(ops.len(), n);
    for op in [
        "stablehlo.dot_general",
        "stablehlo.reduce",
        "stablehlo.broadcast_in_dim",
    ] {
        assert!(ops.contains(&op), "{op}");
    }
}

/// A `@main` of one `8x128xf32` argument whose body is `body`, returning `%r` of type `out`.
fn main_of(body: &str, out: &str) -> String {
    format!(
        r#""builtin.module"() ({{
  "func.func"() ({{
  ^bb0(%arg0: tensor<8x128xf32>):
{body}
    "func.return"(%r) : ({out}) -> ()
  }}) {{function_type = (tensor<8x128xf32>) -> {out}, sym_name = "main"}} : () -> ()
}}) : () -> ()
"#
    )
}

#[test]
fn dimension_numbers_out_of_range_are_errors_not_panics() {
    let broadcast = main_of(
        r#"    %r = "stablehlo.broadcast_in_dim"(%arg0) {broadcast_dimensions = array<i64: 0, 5>} : (tensor<8x128xf32>) -> tensor<2x8x128xf32>"#,
        "tensor<2x8x128xf32>",
    );
    let e = import_stablehlo(&broadcast, "k").unwrap_err();
    assert!(e.to_string().contains("broadcast_dimensions"), "{e}");
    let dot = main_of(
        r#"    %r = "stablehlo.dot_general"(%arg0, %arg0) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [7], rhs_contracting_dimensions = [1]>} : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x8xf32>"#,
        "tensor<8x8xf32>",
    );
    let e = import_stablehlo(&dot, "k").unwrap_err();
    assert!(e.to_string().contains("dimension numbers"), "{e}");
}
