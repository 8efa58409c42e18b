//! Printer snapshots: each kernel's text is pinned in `tests/snapshots/NAME.ir`.
//! `UPDATE_SNAPSHOTS=1 cargo test -p tpukit-dsl` rewrites them; review the diff.

mod common;

use std::path::PathBuf;
use tpukit_dsl::{DType, Kernel, PrintOptions, print_kernel};

fn check(name: &str, kernel: &Kernel, options: PrintOptions) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/{name}.ir"));
    let actual = print_kernel(kernel, options);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_SNAPSHOTS=1)", path.display()));
    assert_eq!(actual, expected, "snapshot {name} changed");
}

#[test]
fn add_bf16() {
    check(
        "add_bf16",
        &common::add(DType::BF16),
        PrintOptions::default(),
    );
}

#[test]
fn add_with_locations() {
    check(
        "add_locations",
        &common::add(DType::F32),
        PrintOptions { locations: true },
    );
}

#[test]
fn matmul_with_scratch_and_when() {
    check("matmul", &common::matmul(), PrintOptions::default());
}

#[test]
fn for_loop_with_two_carried_values() {
    check(
        "chunked_sum",
        &common::chunked_sum(),
        PrintOptions::default(),
    );
}

#[test]
fn prefetch_index_map_and_squeezed_dims() {
    check("gather", &common::gather(), PrintOptions::default());
}
