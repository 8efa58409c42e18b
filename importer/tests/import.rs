//! The Mosaic importer on real JAX output: bodies of Pallas kernels as tpukit's Python side
//! hands them over (`tests/import/*.mlir`, written by `python/tools/import_fixtures.py` with
//! jax 0.10.2). Each is imported, checked for its structure, and lowered back to Mosaic;
//! unsupported input fails with an error naming what and where.

use tpukit_dsl::{
    BlockDim, DType, ErrorKind, Extent, Kernel, OpKind, Region, Role, Semantics, Type, Window,
    print_kernel,
};
use tpukit_import::{CallOptions, import_mosaic, tensor_type};

/// A fixture: its body and the custom call's operand and result types (first two lines).
fn fixture(name: &str) -> (String, Vec<Type>, Vec<Type>) {
    let path = format!("{}/tests/import/{name}.mlir", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).expect("fixture");
    let header = |prefix: &str| -> Vec<Type> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .expect("header");
        line.split("; ")
            .map(|t| tensor_type(t).expect("tensor type"))
            .collect()
    };
    let (operands, results) = (header("// operands: "), header("// results: "));
    (text, operands, results)
}

fn import(name: &str) -> Kernel {
    let (text, operands, results) = fixture(name);
    import_mosaic(&text, &operands, &results, name).unwrap_or_else(|e| panic!("{e}"))
}

/// Every op kind name in a region, nested regions included.
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

fn block(k: &Kernel, operand: usize) -> Vec<BlockDim> {
    match &k.operands[operand].window {
        Window::Blocked(b) => b.block.clone(),
        Window::Whole => panic!("operand {operand} is whole"),
    }
}

fn lowers(k: &Kernel) {
    let lowered = tpukit_mosaic::lower(k, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    assert!(lowered.stablehlo.contains("tpu_custom_call"));
}

#[test]
fn softmax_rows() {
    let k = import("softmax");
    assert_eq!(k.grid.len(), 1);
    assert_eq!(k.grid[0].extent, Extent::Static(2));
    let roles: Vec<Role> = k.operands.iter().map(|o| o.role).collect();
    assert_eq!(roles, [Role::Input, Role::Output]);
    assert_eq!(block(&k, 0), [BlockDim::Blocked(8), BlockDim::Blocked(128)]);
    let ops = names(&k);
    for want in ["load", "reduce_max", "exp", "reduce_sum", "div", "store"] {
        assert!(ops.contains(&want), "{want} missing from {ops:?}");
    }
    // The reductions' accumulators are their identities (-inf, 0): no combine op follows.
    assert!(!ops.contains(&"max"), "{ops:?}");
    lowers(&k);
}

#[test]
fn matmul_with_scratch_and_when() {
    let k = import("matmul");
    let sem: Vec<Semantics> = k.grid.iter().map(|a| a.semantics).collect();
    assert_eq!(
        sem,
        [
            Semantics::Parallel,
            Semantics::Parallel,
            Semantics::Arbitrary
        ]
    );
    let scratch = &k.operands[3];
    assert_eq!((scratch.role, scratch.dtype), (Role::Scratch, DType::F32));
    assert_eq!(k.operands[0].dtype, DType::BF16);
    let ops = names(&k);
    assert_eq!(ops.iter().filter(|n| **n == "if").count(), 2, "{ops:?}");
    assert!(ops.contains(&"dot"), "{ops:?}");
    let printed = print_kernel(&k, Default::default());
    assert!(printed.contains("program_id 2"), "{printed}");
    lowers(&k);
}

#[test]
fn gather_with_prefetch_index_map_and_loop() {
    let k = import("gather");
    assert_eq!(k.operands[0].role, Role::Prefetch);
    let Window::Blocked(b) = &k.operands[1].window else {
        panic!("input is blocked");
    };
    // The index map reads the prefetched array: block index idx[i].
    assert!(
        b.index_map
            .body
            .ops
            .iter()
            .any(|op| matches!(op.kind, OpKind::Load { .. }))
    );
    let ops = names(&k);
    assert!(ops.contains(&"for"), "{ops:?}");
    // Pallas's dead load before each store (the swap's old value) is not imported.
    let reads_output = k.body.body.ops.iter().any(|op| {
        matches!(op.kind, OpKind::Load { operand, .. } if k.operand(operand).role == Role::Output)
    });
    assert!(!reads_output);
    let printed = print_kernel(&k, tpukit_dsl::PrintOptions { locations: true });
    assert!(printed.contains("ds(%"), "dynamic slice start: {printed}");
    assert!(
        printed.contains("python/tools/import_fixtures.py:"),
        "{printed}"
    );
    lowers(&k);
}

#[test]
fn unknown_op_is_named_with_its_line() {
    let (text, operands, results) = fixture("softmax");
    let text = text.replacen("stable_mosaic.math.exp", "stable_mosaic.math.cbrt", 1);
    let e = import_mosaic(&text, &operands, &results, "softmax").unwrap_err();
    assert_eq!(e.op.as_deref(), Some("math.cbrt"));
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
    let loc = e.loc.expect("a location");
    assert_eq!(&*loc.file, "python/tools/import_fixtures.py");
}

#[test]
fn a_window_of_semaphores_is_refused_by_name() {
    let (text, operands, results) = fixture("softmax");
    let text = text.replace(
        "memref<8x128xf32, #tpu.memory_space<vmem>>",
        "memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>",
    );
    // Semaphores cross calls whole, as i32 counts: a windowed f32 array is no semaphore.
    let e = import_mosaic(&text, &operands, &results, "softmax").unwrap_err();
    assert!(
        e.to_string()
            .contains("is a semaphore array of shape [], but the call passes f32"),
        "{e}"
    );
    assert!(e.to_string().contains("with a window"), "{e}");
}

#[test]
fn windows_beyond_the_vmem_limit_are_refused_naming_each() {
    let (text, operands, results) = fixture("softmax");
    // Two double-buffered 8x128 f32 windows (grid of 2): 16 KiB.
    let import = |vmem_limit| {
        let options = CallOptions {
            vmem_limit,
            ..CallOptions::default()
        };
        tpukit_import::import_mosaic_with(&text, &operands, &results, "softmax", &options)
    };
    assert!(import(Some(16 << 10)).is_ok());
    let e = import(Some((16 << 10) - 1)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Memory, "{e}");
    let message = e.to_string();
    for part in [
        "vmem_limit_bytes (16383 bytes)",
        "input window allocation for operator input 0 of 0.01 MiB",
        "output window allocation for operator output 0",
        "The window shape is f32[8,128], while the full shape is f32[16,128].",
        "This allocation has 2 buffering levels.",
    ] {
        assert!(message.contains(part), "{part} not in {message}");
    }
    // A synchronous window is one buffer: 12 KiB.
    let single = text.replacen(
        "{transform_indices = @transform_0",
        "{pipeline_mode = #tpu.pipeline_mode<synchronous>, transform_indices = @transform_0",
        1,
    );
    let single = |vmem_limit| {
        let options = CallOptions {
            vmem_limit,
            ..CallOptions::default()
        };
        tpukit_import::import_mosaic_with(&single, &operands, &results, "softmax", &options)
    };
    assert!(single(Some(12 << 10)).is_ok());
    let e = single(Some((12 << 10) - 1)).unwrap_err();
    assert!(
        e.to_string()
            .contains("This allocation is single buffered."),
        "{e}"
    );
}

#[test]
fn call_types_must_match_the_kernel() {
    let (text, _, results) = fixture("softmax");
    let wrong = [Type::new(DType::I32, [16, 128])];
    let e = import_mosaic(&text, &wrong, &results, "softmax").unwrap_err();
    assert!(e.to_string().contains("is i32 in the call but f32"), "{e}");
    let e = import_mosaic(&text, &[], &results, "softmax").unwrap_err();
    assert!(e.to_string().contains("buffers"), "{e}");
}

#[test]
fn extracts_from_values_become_reshapes_and_picks() {
    // `x - x[3] - jnp.max(x)`: a row picked out (extract_strided_slice) and a reduction to a
    // scalar (vector.extract from a vector<1x1x1xf32>).
    let k = import("extract");
    let ops = names(&k);
    // The row: a maximum over dimension 0 where only row 3 is not -inf; the scalar: the
    // reduction's one element, reshaped.
    assert_eq!(
        ops.iter().filter(|n| **n == "reduce_max").count(),
        2,
        "{ops:?}"
    );
    assert!(ops.contains(&"iota") && ops.contains(&"select"), "{ops:?}");
    lowers(&k);
}

#[test]
fn strided_and_out_of_range_value_slices_are_refused_by_name() {
    // Wide slices (`x[:8]`) import through a scratch buffer (python/tests/
    // test_pallas_layout_ops.py); strided ones have no form, and a slice past the value's end
    // is malformed.
    let (text, operands, results) = fixture("extract");
    let strided = text.replacen("strides = [1, 1]", "strides = [2, 1]", 1);
    let e = import_mosaic(&strided, &operands, &results, "extract").unwrap_err();
    assert_eq!(e.op.as_deref(), Some("vector.extract_strided_slice"));
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
    assert!(e.message.contains("a strided slice of a value"), "{e}");
    let past = text.replacen("offsets = [3, 0]", "offsets = [8, 0]", 1);
    let e = import_mosaic(&past, &operands, &results, "extract").unwrap_err();
    assert_eq!(e.op.as_deref(), Some("vector.extract_strided_slice"));
    assert!(e.message.contains("elements 8..9 of dimension 0"), "{e}");
}

#[test]
fn nan_tests_become_self_comparisons() {
    // `x != 1.0` and `jnp.isnan(x)`: Pallas lowers both to `cmpf one` (ordered and unequal),
    // imported as `x == x and 1 == 1 and x != 1` (`x == x` is false only for NaN).
    let k = import("nan_tests");
    let ops = names(&k);
    assert!(ops.iter().filter(|n| **n == "eq").count() >= 4, "{ops:?}");
    assert!(ops.contains(&"ne") && ops.contains(&"and"), "{ops:?}");
    lowers(&k);
    let (text, operands, results) = fixture("nan_tests");
    let text = text.replacen("predicate = 6 : i64", "predicate = 9 : i64", 1);
    let e = import_mosaic(&text, &operands, &results, "nan_tests").unwrap_err();
    assert!(e.message.contains("predicate `ugt`"), "{e}");
}

#[test]
fn reshaped_dead_loads_of_swaps_are_dropped() {
    // `o_ref[0] = v`: Pallas loads the old row, reshapes it, and uses neither. Importing them
    // would make the output look read (and its lowering alias it).
    let k = import("swap_rows");
    let reads_output = k.body.body.ops.iter().any(|op| {
        matches!(op.kind, OpKind::Load { operand, .. } if k.operand(operand).role == Role::Output)
    });
    assert!(!reads_output, "{}", print_kernel(&k, Default::default()));
    assert_eq!(names(&k).iter().filter(|n| **n == "store").count(), 2);
    lowers(&k);
}

#[test]
fn one_dimensional_matmul_operands_and_trace_scopes() {
    // jnp.dot(x, v), jnp.einsum("mk,k->m", x, v) (inside trace_start/trace_stop) and
    // jnp.dot(u, x): each 1-D operand is made 2-D with a unit free dimension.
    let k = import("matvec");
    let dots: Vec<(Type, Type)> = k
        .body
        .body
        .ops
        .iter()
        .filter_map(|o| match &o.kind {
            OpKind::Dot { lhs, rhs, .. } => {
                Some((k.body.ty(*lhs).clone(), k.body.ty(*rhs).clone()))
            }
            _ => None,
        })
        .collect();
    let shapes: Vec<(Vec<usize>, Vec<usize>)> =
        dots.into_iter().map(|(l, r)| (l.shape, r.shape)).collect();
    assert_eq!(
        shapes,
        [
            (vec![16, 128], vec![128, 1]),
            (vec![16, 128], vec![128, 1]),
            (vec![1, 16], vec![16, 128]),
        ]
    );
    lowers(&k);
}

#[test]
fn index_maps_with_comparisons_and_selects() {
    // A causal-style block index: cmpi, select, extui of an i1, andi/ori, maxsi/minsi.
    let k = import("causal_map");
    let Window::Blocked(spec) = &k.operands[0].window else {
        panic!("operand 0 is whole");
    };
    let mut ops = Vec::new();
    op_names(&spec.index_map.body, &mut ops);
    for want in ["le", "gt", "select", "cast", "and", "or", "max", "min"] {
        assert!(ops.contains(&want), "{want} missing from {ops:?}");
    }
    lowers(&k);
}

#[test]
fn matmul_dimension_numbers_it_cannot_express_are_errors() {
    let (text, operands, results) = fixture("matvec");
    let numbers = "#tpu.dot_dimension_numbers<[1], [0], [0], [], [0, 0], [], []>";
    assert!(text.contains(numbers));
    for bad in [
        // the output ordered rhs free dimension first
        "#tpu.dot_dimension_numbers<[1], [0], [0], [], [1, 0], [], []>",
        // a batch dimension
        "#tpu.dot_dimension_numbers<[1], [0], [0], [], [0, 0], [0], [0]>",
        // two contracting dimensions
        "#tpu.dot_dimension_numbers<[0, 1], [0], [], [], [], [], []>",
        // too few lists
        "#tpu.dot_dimension_numbers<[1], [0]>",
    ] {
        let e = import_mosaic(&text.replacen(numbers, bad, 1), &operands, &results, "k")
            .expect_err(bad);
        assert!(e.to_string().contains("tpu.matmul"), "{bad}: {e}");
    }
}

#[test]
fn malformed_store_operand_segments_are_errors() {
    let (text, operands, results) = fixture("matvec");
    let good = "operandSegmentSizes = array<i32: 1, 1, 1, 0>";
    for bad in ["1, 1, -1, 0", "1, 1, 1, 2", "1, 1, 1"] {
        let bad = format!("operandSegmentSizes = array<i32: {bad}>");
        let e =
            import_mosaic(&text.replacen(good, &bad, 1), &operands, &results, "k").expect_err(&bad);
        assert!(e.to_string().contains("tpu.vector_store"), "{bad}: {e}");
    }
}

#[test]
fn transposes_concatenations_and_rotations() {
    // x.T is a transpose; the concatenation and the rotation each go through a scratch
    // buffer of their own (the result, and the operand twice along the rotated dimension)
    let k = import("layout");
    let ops = names(&k);
    assert_eq!(
        ops.iter().filter(|n| **n == "transpose").count(),
        1,
        "{ops:?}"
    );
    let scratch: Vec<_> = k
        .operands
        .iter()
        .filter(|o| o.role == Role::Scratch)
        .map(|o| format!("{:?}", o.shape))
        .collect();
    assert_eq!(scratch.len(), 2, "{scratch:?}");
    assert!(
        scratch[0].contains("16") && scratch[1].contains("256"),
        "{scratch:?}"
    );
    // stores: two pieces of the concatenation, two copies for the rotation, three outputs
    assert_eq!(ops.iter().filter(|n| **n == "store").count(), 7, "{ops:?}");
    lowers(&k);
}

#[test]
fn rotations_by_a_value_are_the_ir_roll() {
    // the rotation's shift becomes a value read from an input instead of a constant: the
    // IR's roll by that value, lowered back to `tpu.dynamic_rotate`, with no scratch buffer
    let (text, operands, results) = fixture("layout");
    let constant = "%14 = \"stable_mosaic.arith.constant\"() {value = 3 : i32} : () -> i32";
    assert!(text.contains(constant), "the fixture changed");
    let read = "%read = \"stable_mosaic.memref.load\"(%arg0, %0, %1) : (memref<8x128xf32, \
                #tpu.memory_space<vmem>>, index, index) -> f32 loc(#loc32)\n    \
                %14 = \"stable_mosaic.arith.fptosi\"(%read) : (f32) -> i32";
    let dynamic = text.replace(constant, read);
    let k = import_mosaic(&dynamic, &operands, &results, "roll").expect("imported");
    let printed = k.to_string();
    assert!(printed.contains("roll %"), "a roll by a value: {printed}");
    let scratch = k.operands.iter().filter(|o| o.role == Role::Scratch);
    assert_eq!(
        scratch.count(),
        1,
        "the concatenation's buffer only: {printed}"
    );
    lowers(&k);
}
