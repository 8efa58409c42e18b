//! Bad launches and bad kernels fail with errors naming the kernel, the operand or op (with
//! its source line), the grid step and the index — never a crash or a wrong answer.

mod common;

use common::*;
use tpukit::dsl::ErrorKind;
use tpukit::prelude::*;
use tpukit::runtime::RuntimeError;

/// An error that says what kind of failure it is.
trait Kinded: std::fmt::Display {
    fn kind(&self) -> ErrorKind;
}

impl Kinded for tpukit::dsl::Error {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl Kinded for RuntimeError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

/// Checks that `r` failed with an error of `kind` whose message mentions every one of
/// `parts`.
#[track_caller]
fn fails<T: std::fmt::Debug, E: Kinded>(r: Result<T, E>, kind: ErrorKind, parts: &[&str]) {
    let e = r.expect_err("expected an error");
    assert_eq!(e.kind(), kind, "{e}");
    let e = e.to_string();
    for p in parts {
        assert!(e.contains(p), "error {e:?} does not mention {p:?}");
    }
}

#[tpu_kernel]
fn copy(x: In, o: Out) {
    o[..] = x[..];
}

fn copy_kernel(map_row: tpukit::dsl::IndexExpr) -> Kernel {
    let spec = CallSpec {
        grid: grid2(8, 128),
        inputs: vec![ArraySpec::new(DType::F32, ["m", "n"]).blocked([8, 128], [map_row, grid(1)])],
        outputs: vec![tiles(DType::F32, 8, 128)],
        ..Default::default()
    };
    copy(&spec).unwrap()
}

pub fn index_map_pointing_past_the_array(device: Device) {
    let k = copy_kernel(grid(0) + 1);
    let x = HostArray::zeros(DType::F32, &[16, 128]);
    fails(
        launch(&k, device, &[&x]),
        ErrorKind::Bounds,
        &[
            "kernel `copy`",
            "index map of input `x`",
            "grid point [1, 0]",
            "block index [2, 0]",
            "element 16 of dim 0",
            "[16, 128]",
        ],
    );
}

#[tpu_kernel]
fn window(x: In, o: Out) {
    let j = program_id(0) * 100;
    o[..] = x[(.., ds(j, 64))];
}

pub fn dynamic_slice_outside_the_block(device: Device) {
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(2)],
        inputs: vec![
            ArraySpec::new(DType::F32, [8usize, 128]).blocked([8, 128], [0.into(), 0.into()]),
        ],
        outputs: vec![ArraySpec::new(DType::F32, [8usize, 64])],
        ..Default::default()
    };
    let k = window(&spec).unwrap();
    let x = HostArray::zeros(DType::F32, &[8, 128]);
    fails(
        launch(&k, device, &[&x]),
        ErrorKind::Bounds,
        &[
            "kernel `window`",
            "op `load` at tests/errors.rs:",
            "grid step [1]",
            "slice 100..164 of dim 1",
            "block of `x` (extent 128)",
        ],
    );
}

pub fn wrong_arrays_are_refused(device: Device) {
    let k = copy_kernel(grid(0));
    let x = HostArray::zeros(DType::F32, &[16, 128]);
    fails(
        launch(&k, device, &[]),
        ErrorKind::Invalid,
        &["kernel `copy`", "takes 1 input arrays", "got 0"],
    );
    fails(
        launch(&k, device, &[&HostArray::zeros(DType::BF16, &[16, 128])]),
        ErrorKind::DType,
        &["input `x` must be f32, got a bf16 array"],
    );
    fails(
        launch(&k, device, &[&HostArray::zeros(DType::F32, &[16])]),
        ErrorKind::Shape,
        &["input `x` must have rank 2, got shape [16]"],
    );
    let mut outs = vec![HostArray::zeros(DType::F32, &[16, 100])];
    fails(
        launch_into(&k, device, &[&x], &mut outs),
        ErrorKind::Shape,
        &["output `o` has shape [16, 100] but `n` is bound to 128 by input `x`"],
    );
}

#[tpu_kernel]
fn mixes(x: In, o: Out) {
    o[..] = x[..] + x[..].cast(bf16);
}

#[test]
fn build_errors_point_at_the_users_line() {
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [8usize])],
        outputs: vec![ArraySpec::new(DType::F32, [8usize])],
        ..Default::default()
    };
    let line = 1 + include_str!("errors.rs")
        .lines()
        .position(|l| l.trim() == "o[..] = x[..] + x[..].cast(bf16);")
        .expect("the body of `mixes`");
    fails(
        mixes(&spec),
        ErrorKind::DType,
        &[
            "kernel `mixes`",
            "op `add`",
            "f32 and bf16",
            &format!("tests/errors.rs:{line}:"),
        ],
    );
    let too_few = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [8usize])],
        ..Default::default()
    };
    fails(
        mixes(&too_few),
        ErrorKind::Invalid,
        &[
            "kernel `mixes`",
            "parameter `o` is output #0 but the call spec gives 0 output operand(s)",
        ],
    );
}

#[tpu_kernel]
fn forgets_init(o: Out, acc: Scratch) {
    acc[..] += 1.0;
    o[..] = acc[..];
}

pub fn uninitialised_scratch_reads_nan_not_zero(device: Device) {
    let spec = CallSpec {
        outputs: vec![ArraySpec::new(DType::F32, [4usize])],
        scratch: vec![ArraySpec::new(DType::F32, [4usize])],
        ..Default::default()
    };
    let out = launch(&forgets_init(&spec).unwrap(), device, &[]).unwrap();
    assert!(
        out[0].to_f64_vec().iter().all(|v| v.is_nan()),
        "a kernel that never initialises its scratch must not look right"
    );
}

#[tpu_kernel]
fn overruns(x: In, o: Out) {
    let mut acc = zeros(f32, [8, 128]);
    for j in 0..3 {
        acc = acc + x[(.., ds(j * 128, 128))];
    }
    o[..] = acc;
}

pub fn errors_inside_loops_name_the_inner_op(device: Device) {
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [8usize, 256])],
        outputs: vec![ArraySpec::new(DType::F32, [8usize, 128])],
        ..Default::default()
    };
    let k = overruns(&spec).unwrap();
    let x = HostArray::zeros(DType::F32, &[8, 256]);
    let e = launch(&k, device, &[&x]).unwrap_err();
    let message = e.to_string();
    assert_eq!(message.matches("kernel `overruns`").count(), 1, "{e}");
    fails::<(), _>(
        Err(e),
        ErrorKind::Bounds,
        &[
            "op `load` at tests/errors.rs:",
            "slice 256..384 of dim 1 is outside the array of `x` (extent 256)",
        ],
    );
}

#[test]
fn debug_mode_reports_an_out_of_bounds_index_map() {
    let k = copy_kernel(grid(0) + 1);
    let x = HostArray::zeros(DType::F32, &[16, 128]);
    fails(
        launch_with(&k, Device::Cpu, &[&x], LaunchOptions { debug: true }),
        ErrorKind::Bounds,
        &[
            "kernel `copy`",
            "index map of input `x`",
            "grid point [1, 0]",
            "block index [2, 0]",
            "element 16 of dim 0",
        ],
    );
}

#[test]
fn debug_mode_runs_correct_kernels_unchanged() {
    let k = copy_kernel(grid(0));
    let (x, xv) = random(&mut rng(9), DType::F32, &[21, 300], -1.0, 1.0);
    let out = launch_with(&k, Device::Cpu, &[&x], LaunchOptions { debug: true }).unwrap();
    assert_eq!(out[0].to_f64_vec(), xv);
}

/// One test per behaviour and device, as in `ops.rs`.
macro_rules! device_tests {
    ($module:ident, $device:expr) => {
        mod $module {
            use super::*;
            device_tests!(@each $device; index_map_pointing_past_the_array,
                dynamic_slice_outside_the_block, wrong_arrays_are_refused,
                uninitialised_scratch_reads_nan_not_zero, errors_inside_loops_name_the_inner_op);
        }
    };
    (@each $device:expr; $($test:ident),* $(,)?) => {
        $(#[test] fn $test() { super::$test($device) })*
    };
}

device_tests!(interpret, Device::Interpret);
device_tests!(cpu, Device::Cpu);
