//! Lowering filetests: each kernel's Mosaic text is pinned in `tests/snapshots/NAME.mlir`.
//! `UPDATE_SNAPSHOTS=1 cargo test -p tpukit-mosaic` rewrites them; review the diff.
//! One test binary on purpose: each one links MLIR statically.
//!
//! The catalog's kernels are the real ones (`tpukit-catalog`, which links neither LLVM nor
//! the runtime); the kernels built here cover what no catalog kernel has.

use std::path::PathBuf;
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

/// Lowers and pins a catalog instance (see [`check`]).
fn check_instance(name: &str, instance: &Instance) -> tpukit_mosaic::Lowered {
    let bindings: Vec<(&str, usize)> = instance
        .bindings
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    check(name, &instance.kernel, &bindings)
}

fn options(bindings: &[(&str, usize)]) -> Options {
    Options {
        bindings: bindings.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        ..Options::default()
    }
}

fn check(name: &str, kernel: &Kernel, bindings: &[(&str, usize)]) -> tpukit_mosaic::Lowered {
    let lowered = lower(kernel, &options(bindings)).unwrap_or_else(|e| panic!("{name}: {e}"));
    pin(&format!("{name}.mlir"), &lowered.mosaic);
    pin(&format!("{name}.stablehlo.mlir"), &lowered.stablehlo);
    lowered
}

/// Compares `text` with `tests/snapshots/FILE` (or rewrites it with `UPDATE_SNAPSHOTS`).
/// `NAME.mlir` is the Mosaic module to review; `NAME.stablehlo.mlir` the StableHLO module
/// around it, which `tests/conformance/test_snapshots.py` compiles with libtpu.
fn pin(file: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(file);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, text).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_SNAPSHOTS=1)", path.display()));
    assert_eq!(text, expected, "snapshot {file} changed");
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

/// A `for` loop carrying an f32 accumulator over four column chunks of the block
/// (`pl.ds(c * 128, 128)`), then an `if` with a result: doubled on the first grid step.
fn chunked_sum() -> Kernel {
    let spec = CallSpec {
        grid: vec![GridAxis::arbitrary(Extent::cdiv("m", 8))],
        inputs: vec![
            ArraySpec::new(DType::BF16, [Dim::sym("m"), Dim::Static(512)])
                .blocked([8, 512], [grid(0), 0.into()]),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)])
                .blocked([8, 128], [grid(0), 0.into()]),
        ],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("chunked_sum", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let zeros = b.splat(0.0f32, DType::F32, &[8, 128]).unwrap();
    let total = b
        .for_loop(0i32, 4i32, 1i32, &[zeros], |b, c, carried| {
            let start = b.binary(BinaryOp::Mul, c, 128i32)?;
            let chunk = b.load(x, &[Ix::Full, Ix::Ds(start.into(), 128)])?;
            let wide = b.cast(chunk, DType::F32)?;
            Ok(vec![b.binary(BinaryOp::Add, carried[0], wide)?])
        })
        .unwrap()[0];
    let step = b.program_id(0).unwrap();
    let first = b.compare(CmpOp::Eq, step, 0i32).unwrap();
    let out = b
        .if_else(
            first,
            |b| Ok(vec![b.binary(BinaryOp::Mul, total, 2.0f32)?]),
            |_| Ok(vec![total]),
        )
        .unwrap()[0];
    b.store(o, &[], out).unwrap();
    b.finish().unwrap()
}

#[test]
fn for_loop_carries_a_value_and_if_yields_one() {
    let l = check("chunked_sum", &chunked_sum(), &[("m", 32)]);
    let m = &l.mosaic;
    assert_eq!(m.matches("scf.for").count(), 1);
    assert!(m.contains("iter_args("), "the accumulator is carried: {m}");
    assert!(m.contains("-> (vector<8x128xf32>)"));
    assert_eq!(
        m.matches("scf.yield").count(),
        3,
        "loop body and both branches"
    );
    assert!(m.contains("scf.if"));
    assert!(
        m.contains("arith.index_cast"),
        "the dynamic start indexes the load"
    );
}

/// One f32 input and output of `m` rows of 128, in blocks of 8 rows.
fn row_blocks() -> CallSpec {
    let rows = ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)])
        .blocked([8, 128], [grid(0), 0.into()]);
    CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", 8))],
        inputs: vec![rows.clone()],
        outputs: vec![rows],
        ..Default::default()
    }
}

/// `if flag { o = x * 2 } else { o = x }` with `flag` a bool known when the kernel is built (a
/// `#[tpu_kernel]` bool host parameter), then `where(!flag, x, o)`: scalar i1 constants, a
/// scalar `not` and a scalar condition broadcast.
fn bool_flag(flag: bool) -> Kernel {
    let mut b = KernelBuilder::new("bool_flag", &row_blocks()).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let xv = b.load(x, &[]).unwrap();
    let y = b
        .if_else(
            flag,
            |b| Ok(vec![b.binary(BinaryOp::Mul, xv, 2.0f32)?]),
            |_| Ok(vec![xv]),
        )
        .unwrap()[0];
    let flag = b.constant(flag, Type::scalar(DType::Bool));
    let off = b.unary(UnaryOp::Not, flag).unwrap();
    let y = b.select(off, xv, y).unwrap();
    b.store(o, &[], y).unwrap();
    b.finish().unwrap()
}

#[test]
fn a_bool_constant_is_an_i1_attribute() {
    let l = check("bool_flag", &bool_flag(true), &[("m", 16)]);
    let m = &l.mosaic;
    assert!(m.contains("arith.constant true"), "{m}");
    assert!(m.contains("scf.if %true"), "{m}");
    assert!(m.contains("vector.broadcast %"), "{m}");
    let off = lower(&bool_flag(false), &options(&[("m", 16)])).unwrap();
    assert!(
        off.mosaic.contains("arith.constant false"),
        "{}",
        off.mosaic
    );
}

/// `o = x + 1` over 1-D blocks of exactly 128 elements on 200: the edge block's load is
/// masked, with positions from a 2-D iota (Mosaic has no 1-D `tpu.iota`).
fn add_one_1d() -> Kernel {
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("n", 128))],
        inputs: vec![ArraySpec::new(DType::F32, ["n"]).blocked([128], [grid(0)])],
        outputs: vec![ArraySpec::new(DType::F32, ["n"]).blocked([128], [grid(0)])],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("add_one_1d", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let xv = b.load(x, &[]).unwrap();
    let y = b.binary(BinaryOp::Add, xv, 1.0f32).unwrap();
    b.store(o, &[], y).unwrap();
    b.finish().unwrap()
}

#[test]
fn a_1d_edge_block_of_128_is_masked_with_a_2d_iota() {
    let l = check("add_one_1d_edges", &add_one_1d(), &[("n", 200)]);
    let m = &l.mosaic;
    let iotas: Vec<&str> = m.lines().filter(|l| l.contains("tpu.iota")).collect();
    assert_eq!(iotas.len(), 1, "one masked dim: {m}");
    assert!(iotas[0].contains("() -> vector<1x128xi32>"), "{}", iotas[0]);
    assert!(
        m.contains("vector.shape_cast %2 : vector<1x128xi32> to vector<128xi32>"),
        "{m}"
    );
}

/// The IR's rank-1 `iota`, of 256 (two rows of lanes) and of 300 (not whole lanes), written
/// out as f32: built from 2-D iotas as edge masks are.
fn iota_1d() -> Kernel {
    let spec = CallSpec {
        outputs: vec![
            ArraySpec::new(DType::F32, [256]),
            ArraySpec::new(DType::F32, [300]),
        ],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("iota_1d", &spec).unwrap();
    for (name, n) in [("o256", 256), ("o300", 300)] {
        let o = b.declare(Role::Output, name).unwrap();
        let i = b.iota(DType::I32, &[n], 0).unwrap();
        let i = b.cast(i, DType::F32).unwrap();
        b.store(o, &[], i).unwrap();
    }
    b.finish().unwrap()
}

#[test]
fn a_rank_1_iota_is_built_from_a_2d_one() {
    let l = check("iota_1d", &iota_1d(), &[]);
    let m = &l.mosaic;
    for line in m.lines().filter(|l| l.contains("tpu.iota")) {
        assert!(
            line.contains("vector<2x128xi32>") || line.contains("vector<1x300xi32>"),
            "{line}"
        );
    }
    assert_eq!(m.matches("vector.shape_cast").count(), 2, "{m}");
}

/// `o[i] += x[i, k]` over an `arbitrary` k axis: the body reads its output, which must start
/// as the caller's buffer (as Helion's `hl.atomic_add` and split-K matmul read it).
fn accumulate() -> Kernel {
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", 8)),
            GridAxis::arbitrary(Extent::cdiv("k", 128)),
        ],
        inputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::sym("k")])
                .blocked([8, 128], [grid(0), grid(1)]),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)])
                .blocked([8, 128], [grid(0), 0.into()]),
        ],
        ..Default::default()
    };
    add_into_output("accumulate", &spec, false)
}

/// `o[..] += x[..]` on `spec`'s windows: a kernel that reads its output. With `prefetched`,
/// a scalar-prefetch operand (`idx`) comes first.
fn add_into_output(name: &str, spec: &CallSpec, prefetched: bool) -> Kernel {
    let mut b = KernelBuilder::new(name, spec).unwrap();
    if prefetched {
        b.declare(Role::Prefetch, "idx").unwrap();
    }
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let old = b.load(o, &[]).unwrap();
    let xv = b.load(x, &[]).unwrap();
    let sum = b.binary(BinaryOp::Add, old, xv).unwrap();
    b.store(o, &[], sum).unwrap();
    b.finish().unwrap()
}

#[test]
fn an_output_the_body_reads_starts_as_the_callers_buffer() {
    // 30 rows: the last row block is an edge block, its output loads are masked too.
    let l = check("accumulate_f32", &accumulate(), &[("m", 30), ("k", 384)]);
    let m = &l.mosaic;
    // The initial contents: a window after the input, placed like the output.
    let signature = "%arg2: memref<8x128xf32, #tpu.memory_space<vmem>>, \
                     %arg3: memref<8x128xf32, #tpu.memory_space<vmem>>, \
                     %arg4: memref<8x128xf32, #tpu.memory_space<vmem>>) attributes";
    assert!(m.contains(signature), "{m}");
    assert_eq!(m.matches("transform_indices = @transform_").count(), 3);
    let transform = |t: usize| {
        let f = m
            .split(&format!("func.func @transform_{t}("))
            .nth(1)
            .unwrap();
        f.split_once("\n  }").unwrap().0.to_string()
    };
    assert_eq!(
        transform(1),
        transform(2),
        "initial contents move with the output"
    );
    // Copied in under `scf.if` on the first step of each visit, before the body's own ops.
    let body = m.split("func.func @transform_0").next().unwrap();
    let (prologue, rest) = body.split_once("scf.if").unwrap();
    assert!(!prologue.contains("vector.load"), "{prologue}");
    let (then, _) = rest.split_once("} else {").unwrap();
    assert!(then.contains("vector.load %arg3"), "{then}");
    let store = then
        .lines()
        .find(|l| l.contains("tpu.vector_store"))
        .unwrap();
    assert!(store.contains(", %arg4, "), "{store}");
    // The custom call takes the output's initial contents and writes the output into them.
    let h = &l.stablehlo;
    assert!(
        h.contains("(tensor<30x384xf32>, tensor<30x128xf32>) -> tensor<30x128xf32>"),
        "{h}"
    );
    assert!(h.contains(
        "output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], \
         operand_index = 1, operand_tuple_indices = []>]"
    ));
}

#[test]
fn outputs_start_as_the_callers_buffer_only_when_needed() {
    let add = catalog("add_vectors", &[4096], DType::F32).kernel;
    let accumulate = accumulate();
    let o = |k: &Kernel| k.operands.len() - 1;
    assert_eq!(initial::outputs(&add, false), Vec::<usize>::new());
    assert_eq!(initial::outputs(&add, true), vec![o(&add)]);
    assert_eq!(initial::outputs(&accumulate, false), vec![o(&accumulate)]);
    let plain = lower(&add, &options(&[("n", 4096)])).unwrap();
    assert!(!plain.stablehlo.contains("output_operand_aliases"));
    assert!(!plain.mosaic.contains("scf.if"));
}

/// `o = x` stored where `x > 0`: the masked-off elements keep the caller's values, so the
/// output starts as the caller's buffer though the body never loads it.
fn masked_store() -> Kernel {
    let mut b = KernelBuilder::new("masked_store", &row_blocks()).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let xv = b.load(x, &[]).unwrap();
    let positive = b.compare(CmpOp::Gt, xv, 0.0f32).unwrap();
    b.store_masked(o, &[], xv, positive).unwrap();
    b.finish().unwrap()
}

#[test]
fn a_masked_store_keeps_the_callers_values() {
    let k = masked_store();
    assert_eq!(initial::outputs(&k, false), vec![1]);
    let l = lower(&k, &options(&[("m", 16)])).unwrap();
    assert!(l.stablehlo.contains("output_operand_aliases"));
    assert!(l.mosaic.contains("masked"), "{}", l.mosaic);
}

/// `o[idx[i], :] += x[i, :]`: rows of `x` added into the rows of `o` that the scalar-prefetch
/// `idx` names, one row per step of the `arbitrary` axis (`index_add`, an embedding's
/// gradient). The output's index map reads `idx`, at this step and at the previous one.
fn scatter_add() -> Kernel {
    let row = [BlockDim::Squeezed, BlockDim::Blocked(128)];
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("d", 128)),
            GridAxis::arbitrary(Extent::cdiv("k", 1)),
        ],
        prefetch: vec![ArraySpec::new(DType::I32, ["k"])],
        inputs: vec![ArraySpec::new(DType::F32, ["k", "d"]).blocked(row, [grid(1), grid(0)])],
        outputs: vec![
            ArraySpec::new(DType::F32, ["rows", "d"])
                .blocked(row, [prefetch(0, [grid(1)]), grid(0)]),
        ],
        ..Default::default()
    };
    add_into_output("scatter_add", &spec, true)
}

#[test]
fn a_visit_of_an_output_block_placed_by_scalar_prefetch_starts_where_its_row_changes() {
    let l = check(
        "scatter_add",
        &scatter_add(),
        &[("rows", 64), ("d", 256), ("k", 40)],
    );
    let m = &l.mosaic;
    let (prologue, _) = m.split_once("scf.if").unwrap();
    assert_eq!(
        prologue.matches("memref.load %arg2").count(),
        2,
        "idx at this step and at the previous one: {prologue}"
    );
    // Prefetch, the input and the output's initial contents, rows lifted to (r, 1, c) for
    // the tiling (see tiling.rs), and the output.
    assert!(
        l.stablehlo.contains(
            ": (tensor<40xi32>, tensor<40x1x256xf32>, tensor<64x1x256xf32>) -> \
             tensor<64x1x256xf32>"
        ),
        "{}",
        l.stablehlo
    );
    assert!(l.stablehlo.contains("operand_index = 2"));
}

/// Two outputs of which only the second is read: `o = x` and `acc += x` over an `arbitrary`
/// axis, `acc` a whole-array window (placed once, for the whole grid).
fn two_outputs() -> Kernel {
    let spec = CallSpec {
        grid: vec![GridAxis::arbitrary(Extent::cdiv("m", 8))],
        inputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)])
                .blocked([8, 128], [grid(0), 0.into()]),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)])
                .blocked([8, 128], [grid(0), 0.into()]),
            ArraySpec::new(DType::F32, [8, 128]),
        ],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("two_outputs", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let acc = b.declare(Role::Output, "acc").unwrap();
    let xv = b.load(x, &[]).unwrap();
    b.store(o, &[], xv).unwrap();
    let old = b.load(acc, &[]).unwrap();
    let sum = b.binary(BinaryOp::Add, old, xv).unwrap();
    b.store(acc, &[], sum).unwrap();
    b.finish().unwrap()
}

#[test]
fn only_the_output_read_is_aliased_and_a_whole_window_is_copied_on_the_first_step() {
    let l = check("two_outputs", &two_outputs(), &[("m", 32)]);
    let h = &l.stablehlo;
    assert!(
        h.contains(
            "(tensor<32x128xf32>, tensor<8x128xf32>) -> (tensor<32x128xf32>, tensor<8x128xf32>)"
        ),
        "{h}"
    );
    assert!(h.contains(
        "output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [1], \
         operand_index = 1, operand_tuple_indices = []>]"
    ));
    // The whole-array window never moves: copied on step 0 only, no index map evaluated.
    let m = &l.mosaic;
    let (prologue, _) = m.split_once("scf.if").unwrap();
    assert!(
        prologue.contains("arith.cmpi eq, %arg0, %c0_i32"),
        "{prologue}"
    );
    assert!(!prologue.contains("arith.cmpi ne"), "{prologue}");
}

/// `o = o * 2` without a grid: the body runs once, the copy is unconditional.
fn double_in_place() -> Kernel {
    let spec = CallSpec {
        outputs: vec![ArraySpec::new(DType::BF16, [16, 256])],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("double_in_place", &spec).unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let v = b.load(o, &[]).unwrap();
    let twice = b.binary(BinaryOp::Mul, v, 2.0f32).unwrap();
    b.store(o, &[], twice).unwrap();
    b.finish().unwrap()
}

#[test]
fn without_a_grid_the_initial_contents_are_copied_once() {
    let l = check("double_in_place_bf16", &double_in_place(), &[]);
    let m = &l.mosaic;
    assert!(!m.contains("scf.if"), "{m}");
    assert!(!m.contains("window_params"), "{m}");
    let (copy, _) = m.split_once("arith.mulf").unwrap();
    assert!(copy.contains("vector.load %arg0"), "{copy}");
    assert!(
        l.stablehlo
            .contains("(tensor<16x256xbf16>) -> tensor<16x256xbf16>")
    );
}
