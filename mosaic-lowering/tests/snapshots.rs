//! Lowering filetests: each kernel's Mosaic text is pinned in `tests/snapshots/NAME.mlir`.
//! `UPDATE_SNAPSHOTS=1 cargo test -p tpukit-mosaic` rewrites them; review the diff.
//! One test binary on purpose: each one links MLIR statically.

use std::path::PathBuf;
use tpukit_dsl::*;
use tpukit_mosaic::{Options, lower};

fn check(name: &str, kernel: &Kernel, bindings: &[(&str, usize)]) -> tpukit_mosaic::Lowered {
    let options = Options {
        bindings: bindings.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        ..Options::default()
    };
    let lowered = lower(kernel, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let path = dir.join(format!("{name}.mlir"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &lowered.mosaic).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_SNAPSHOTS=1)", path.display()));
    assert_eq!(lowered.mosaic, expected, "snapshot {name} changed");
    lowered
}

fn rows(dtype: DType, block: [usize; 2]) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::sym("m"), Dim::sym("n")]).blocked(block, [grid(0), grid(1)])
}

/// `o = x + y` over a 2-D grid of (8, 128) blocks.
fn add(dtype: DType) -> Kernel {
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", 8)),
            GridAxis::parallel(Extent::cdiv("n", 128)),
        ],
        inputs: vec![rows(dtype, [8, 128]), rows(dtype, [8, 128])],
        outputs: vec![rows(dtype, [8, 128])],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("add", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let y = b.declare(Role::Input, "y").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    b.set_loc(Some(Loc::new("add.rs", 3, 5)));
    let xv = b.load(x, &[]).unwrap();
    let yv = b.load(y, &[]).unwrap();
    let s = b.binary(BinaryOp::Add, xv, yv).unwrap();
    b.store(o, &[], s).unwrap();
    b.finish().unwrap()
}

#[test]
fn add_divisible_has_no_masks() {
    let l = check("add_f32", &add(DType::F32), &[("m", 32), ("n", 256)]);
    assert!(!l.mosaic.contains("tpu.iota"));
    assert!(
        l.backend_config
            .starts_with(r#"{"custom_call_config": {"body": ""#)
    );
    assert_eq!(&l.body[..4], b"ML\xefR");
}

#[test]
fn add_edge_blocks_mask_loads_with_the_fill_value() {
    // 30 rows and 200 columns: both grid axes end in a partial block.
    let l = check("add_f32_edges", &add(DType::F32), &[("m", 30), ("n", 200)]);
    assert_eq!(
        l.mosaic.matches("\"tpu.iota\"").count(),
        4,
        "two masked dims per load"
    );
    assert!(l.mosaic.contains("iteration_bounds = array<i64: 4, 2>"));
}

#[test]
fn an_unbound_symbol_is_a_clear_error() {
    let err = lower(&add(DType::F32), &Options::default()).unwrap_err();
    assert!(err.to_string().contains("has no binding"), "{err}");
}
