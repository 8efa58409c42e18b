//! Lowering the catalog's kernels (`tpukit-catalog`, the real ones, which links neither LLVM nor
//! the runtime): what each must lower to, asserted on the parts that matter. Kernels built for
//! one lowering rule are FileCheck tests (`tests/lower/*.ir`, `tests/filecheck.rs`); libtpu
//! compiles both kinds in the conformance suite.

use tpukit_catalog::Instance;
use tpukit_dsl::*;
use tpukit_mosaic::{Options, initial, lower};

/// The catalog kernel `name` for a problem `shape` and `dtype`.
fn catalog(name: &str, shape: &[usize], dtype: DType) -> Instance {
    tpukit_catalog::find(name)
        .unwrap_or_else(|| panic!("no catalog kernel `{name}`"))
        .instantiate(shape, dtype)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Lowers a catalog instance at its bindings.
fn check_instance(name: &str, instance: &Instance) -> tpukit_mosaic::Lowered {
    let options = Options {
        bindings: instance.bindings.clone(),
        ..Options::default()
    };
    lower(&instance.kernel, &options).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn a_divisible_shape_has_no_masks() {
    let l = check_instance(
        "add_vectors_f32",
        &catalog("add_vectors", &[4096], DType::F32),
    );
    assert!(!l.mosaic.contains("tpu.iota"));
    assert!(
        l.backend_config
            .starts_with(r#"{"custom_call_config": {"body": ""#)
    );
    assert_eq!(&l.body[..4], b"ML\xefR");
}

#[test]
fn edge_blocks_mask_loads_with_the_fill_value() {
    // m = 300, k = 200, n = 260: every grid axis ends in a partial block, so both operands'
    // loads are masked along both of their dims (the scratch accumulator's are not).
    let l = check_instance(
        "matmul_f32_edges",
        &catalog("matmul", &[300, 200, 260], DType::F32),
    );
    assert_eq!(
        l.mosaic.matches("\"tpu.iota\"").count(),
        4,
        "two masked dims per load"
    );
    assert!(l.mosaic.contains("iteration_bounds = array<i64: 3, 3, 2>"));
}

#[test]
fn an_unbound_symbol_is_a_clear_error() {
    let add = catalog("add_vectors", &[4096], DType::F32).kernel;
    let err = lower(&add, &Options::default()).unwrap_err();
    assert!(err.to_string().contains("has no binding"), "{err}");
}

#[test]
fn matmul_scratch_accumulator_under_when_on_an_arbitrary_axis() {
    let l = check_instance(
        "matmul_bf16",
        &catalog("matmul", &[256, 512, 384], DType::BF16),
    );
    let m = &l.mosaic;
    assert!(m.contains("iteration_bounds = array<i64: 2, 3, 4>"), "{m}");
    assert!(m.contains(
        "dimension_semantics = [#tpu.dimension_semantics<parallel>, \
         #tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<arbitrary>]"
    ));
    assert!(m.contains("scratch_operands = 1 : i64"));
    assert!(m.contains("memref<128x128xf32, #tpu.memory_space<vmem>>) attributes"));
    assert_eq!(m.matches("scf.if").count(), 2, "one per when");
    assert_eq!(m.matches("\"tpu.matmul\"").count(), 1);
    assert!(!m.contains("tpu.iota"), "divisible: no masks");
    // Readable: today's tpu dialect (jaxlib requires the hint). Serialized for version 11: the
    // older attributes, as jax 0.10.2 writes them.
    assert!(m.contains("transpose_lhs_hint = false"));
    let s = &l.serialized;
    assert!(
        s.contains("transpose_lhs = false, transpose_rhs = false"),
        "{s}"
    );
    assert!(!s.contains("transpose_lhs_hint"));
}

#[test]
fn softmax_reductions_keep_dims_by_shape_cast() {
    let l = check_instance("softmax_f32", &catalog("softmax", &[64, 256], DType::F32));
    let m = &l.mosaic;
    assert!(m.contains("vector.multi_reduction <maximumf>"));
    assert!(m.contains("vector.multi_reduction <add>"));
    assert_eq!(m.matches("vector.shape_cast").count(), 2, "keepdims, twice");
    assert!(m.contains("math.exp"));
}

#[test]
fn row_gather_index_map_reads_the_scalar_prefetch() {
    let l = check_instance(
        "row_gather_bf16",
        &catalog("row_gather", &[1000, 256, 64], DType::BF16),
    );
    let m = &l.mosaic;
    assert!(m.contains("scalar_prefetch = 1 : i64"));
    assert!(m.contains("%arg2: memref<64xi32, #tpu.memory_space<smem>>"));
    // Only the table's transform loads an index; both see the prefetch buffer.
    let transform_0 = m.split("func.func @transform_0").nth(1).unwrap();
    let (transform_0, transform_1) = transform_0.split_once("func.func @transform_1").unwrap();
    assert!(transform_0.contains("memref.load %arg2"));
    assert!(!transform_1.contains("memref.load"));
    // Squeezed rows are lifted to (r, 1, c) for the (8, 128) tiling: see tiling.rs.
    assert!(m.contains("window_bounds = array<i64: 1, 1, 128>"));
    assert!(
        l.stablehlo
            .contains("(tensor<1000x256xbf16>) -> tensor<1000x1x256xbf16>")
    );
}

/// (An output the body reads, or stores to under a mask: `tests/lower/initial.ir`.)
#[test]
fn outputs_start_as_the_callers_buffer_only_when_needed() {
    let add = catalog("add_vectors", &[4096], DType::F32);
    let o = add.kernel.operands.len() - 1;
    assert_eq!(initial::outputs(&add.kernel, false), Vec::<usize>::new());
    assert_eq!(initial::outputs(&add.kernel, true), vec![o]);
    let plain = check_instance("add_vectors", &add);
    assert!(!plain.stablehlo.contains("output_operand_aliases"));
    assert!(!plain.mosaic.contains("scf.if"));
}
