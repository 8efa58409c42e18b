//! Inputs an adversarial caller might give — blocks larger than memory, results larger than
//! memory, an empty list of outputs, grids with more steps than an i64 counts — fail with an
//! error of the right kind, never a crash, an abort or a write past a buffer.

mod common;

use common::*;
use tpukit::dsl::ErrorKind;
use tpukit::prelude::*;
use tpukit::runtime::RuntimeError;

#[tpu_kernel]
fn copy(x: In, o: Out) {
    o[..] = x[..];
}

fn copy_with_block(bm: usize, bn: usize) -> Result<Kernel, tpukit::dsl::Error> {
    let spec = CallSpec {
        grid: grid2(bm, bn),
        inputs: vec![tiles(DType::F32, bm, bn)],
        outputs: vec![tiles(DType::F32, bm, bn)],
        ..Default::default()
    };
    copy(&spec)
}

#[track_caller]
fn fails_with<T: std::fmt::Debug>(
    r: Result<T, impl Into<RuntimeError>>,
    kind: ErrorKind,
    part: &str,
) {
    let e: RuntimeError = r.map_err(Into::into).expect_err("expected an error");
    assert_eq!(e.kind, kind, "{e}");
    assert!(
        e.message.contains(part),
        "error {e} does not mention {part:?}"
    );
}

/// A 2^31 x 2^31 block (its staging size wraps to 0 bytes in a `usize`) and a 65536^2 one
/// (16 GiB per worker) on a 10 x 20 array: refused by the verifier, before any backend sizes
/// a buffer.
pub fn huge_blocks_are_refused(device: Device) {
    let x = HostArray::zeros(DType::F32, &[10, 20]);
    for b in [1usize << 31, 65536] {
        let r = copy_with_block(b, b)
            .map_err(RuntimeError::from)
            .and_then(|k| launch(&k, device, &[&x]));
        fails_with(r, ErrorKind::Shape, "limited to 2147483648 bytes");
    }
}

/// A block much larger than its array but within the limit runs, and is exact.
pub fn large_blocks_on_small_arrays_are_exact(device: Device) {
    let k = copy_with_block(1024, 2048).unwrap();
    let (x, xv) = random(&mut rng(1), DType::F32, &[10, 20], -1.0, 1.0);
    let out = launch(&k, device, &[&x]).unwrap();
    assert_eq!(out[0].shape(), &[10, 20]);
    assert_eq!(out[0].to_f64_vec(), xv);
}

#[tpu_kernel]
fn outer_sum(x: In, y: In, o: Out) {
    o[..] = x[..].broadcast_to([8, 128]) + y[..].broadcast_to([8, 128]);
}

fn outer_sum_kernel() -> Kernel {
    let spec = CallSpec {
        grid: grid2(8, 128),
        inputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(1)])
                .blocked([8, 1], [grid(0), 0.into()]),
            ArraySpec::new(DType::F32, [Dim::Static(1), Dim::sym("n")])
                .blocked([1, 128], [0.into(), grid(1)]),
        ],
        outputs: vec![tiles(DType::F32, 8, 128)],
        ..Default::default()
    };
    outer_sum(&spec).unwrap()
}

/// `(2^20, 1) + (1, 2^20)` is a 4 TiB result: an `ErrorKind::Memory` error naming the
/// output, not an abort; the same kernel on small arrays is exact.
pub fn results_larger_than_memory_are_errors(device: Device) {
    let k = outer_sum_kernel();
    let x = HostArray::zeros(DType::F32, &[1 << 20, 1]);
    let y = HostArray::zeros(DType::F32, &[1, 1 << 20]);
    fails_with(
        launch(&k, device, &[&x, &y]),
        ErrorKind::Memory,
        "output `o`",
    );
    let (x, xv) = random(&mut rng(2), DType::F32, &[13, 1], -1.0, 1.0);
    let (y, yv) = random(&mut rng(3), DType::F32, &[1, 300], -1.0, 1.0);
    let out = launch(&k, device, &[&x, &y]).unwrap();
    let want: Vec<f64> = xv
        .iter()
        .flat_map(|a| yv.iter().map(move |b| (*a as f32 + *b as f32) as f64))
        .collect();
    assert_eq!(out[0].to_f64_vec(), want);
}

/// `launch_into` with no output arrays for a kernel that has one: an error, not a panic.
pub fn an_empty_output_list_is_refused(device: Device) {
    let k = copy_with_block(8, 128).unwrap();
    let x = HostArray::zeros(DType::F32, &[16, 128]);
    fails_with(
        launch_into(&k, device, &[&x], &mut []),
        ErrorKind::Invalid,
        "has 1 outputs, got 0 output arrays",
    );
}

/// A grid whose step count overflows an i64 is refused by the compiled backend (which
/// linearises the grid into an i64), not wrapped.
#[test]
fn grids_with_more_steps_than_an_i64_are_refused() {
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(1usize << 40),
            GridAxis::parallel(1usize << 40),
        ],
        inputs: vec![
            ArraySpec::new(DType::F32, ["m", "n"]).blocked([8, 128], [0.into(), 0.into()]),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, ["m", "n"]).blocked([8, 128], [0.into(), 0.into()]),
        ],
        ..Default::default()
    };
    let k = copy(&spec).unwrap();
    let x = HostArray::zeros(DType::F32, &[8, 128]);
    fails_with(
        launch(&k, Device::Cpu, &[&x]),
        ErrorKind::Shape,
        "more steps than an i64",
    );
}

macro_rules! device_tests {
    ($module:ident, $device:expr) => {
        mod $module {
            use super::*;
            device_tests!(@each $device; huge_blocks_are_refused,
                large_blocks_on_small_arrays_are_exact, results_larger_than_memory_are_errors,
                an_empty_output_list_is_refused);
        }
    };
    (@each $device:expr; $($test:ident),* $(,)?) => {
        $(#[test] fn $test() { super::$test($device) })*
    };
}

device_tests!(interpret, Device::Interpret);
device_tests!(cpu, Device::Cpu);
