//! What `#[tpu_kernel]` expands to, pinned as printed IR in `tests/snapshots/NAME.ir`
//! (`UPDATE_SNAPSHOTS=1 cargo test --test macro_ir` rewrites them; review the diff).

mod common;

use common::*;
use std::path::PathBuf;
use tpukit::prelude::*;

fn check(name: &str, kernel: &Kernel) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/{name}.ir"));
    let actual = kernel.to_string();
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(actual, expected, "snapshot {name} changed");
}

#[tpu_kernel]
fn matmul(a: In, b: In, o: Out, acc: Scratch) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    if program_id(2) == num_programs(2) - 1 {
        o[..] = acc[..].cast(bf16);
    }
}

#[test]
fn ref_compound_assignment_and_when() {
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(2),
            GridAxis::parallel(2),
            GridAxis::arbitrary(3),
        ],
        inputs: vec![tiles(DType::BF16, 16, 32), tiles(DType::BF16, 32, 16)],
        outputs: vec![tiles(DType::BF16, 16, 16)],
        scratch: vec![ArraySpec::new(DType::F32, [16usize, 16])],
        ..Default::default()
    };
    check("macro_matmul", &matmul(&spec).unwrap());
}

/// `roll` and `gather` are the IR's `roll` and `gather` (`tests/common/mod.rs`, run on both
/// devices in `tests/ops.rs`).
#[test]
fn rolls_and_gathers_are_the_ir_ops() {
    check(
        "macro_rolls_and_gathers",
        &rolls_and_gathers(&rolls_and_gathers_spec()).unwrap(),
    );
}

#[tpu_kernel]
fn carried(x: In, o: Out, scale: f32) {
    let mut s = zeros(f32, [8, 128]);
    let mut m = full(f32, [8, 128], -1.0e30);
    for j in 0..2 {
        let v = x[(.., ds(j * 128, 128))] * scale;
        if j == 1 {
            m = m.max(v);
        } else {
            s = s + v;
        }
    }
    o[..] = s - m;
}

#[test]
fn loop_and_branch_carry_the_assigned_variables() {
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [8usize, 256])],
        outputs: vec![ArraySpec::new(DType::F32, [8usize, 128])],
        ..Default::default()
    };
    check("macro_carried", &carried(&spec, 0.5).unwrap());
}

/// `while` over a count read from scalar prefetch: the loop carries a vector and a scalar.
#[tpu_kernel]
fn bounded_while(count: Prefetch, x: In, o: Out) {
    let mut v = x[..];
    let mut i = 0;
    while i < count[program_id(0)] {
        v = v * 0.5 + 1.0;
        i = i + 1;
    }
    o[..] = v;
}

#[test]
fn while_carries_the_assigned_variables() {
    let block = ArraySpec::new(DType::F32, [16usize, 128]).blocked([8, 128], [grid(0), 0.into()]);
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(2)],
        prefetch: vec![ArraySpec::new(DType::I32, [2usize])],
        inputs: vec![block.clone()],
        outputs: vec![block],
        ..Default::default()
    };
    check("macro_while", &bounded_while(&spec).unwrap());
}

/// Manual DMA from a ref left in HBM, and a regular semaphore (`common::dma_rows`).
#[test]
fn dma_and_semaphore_calls() {
    check("macro_dma", &dma_rows(&dma_rows_spec(16)).unwrap());
}
