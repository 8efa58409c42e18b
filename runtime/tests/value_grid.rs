//! A grid axis sized at launch by the value of a one-element i32 operand (`Extent::Value`,
//! Pallas's `grid=(n,)` with `n` traced): one kernel serves every extent on both devices, the body
//! sees it through `num_programs`, and a negative value is a shape error naming the operand.

use tpukit_dsl::{ErrorKind, parse_kernel};
use tpukit_runtime::{Device, HostArray, launch};

/// The first `n` row blocks of `x` plus `n`; the other rows stay 0.
const FIRST_BLOCKS: &str = "kernel @first_blocks grid(arbitrary value(0), parallel 2) {
  prefetch %n: i32[]
  input %x: f32[m,256] block[8,128] fill 0.0 map(%0, %1) {
    yield %0, %1
  }
  output %o: f32[m,256] block[8,128] fill 0.0 map(%0, %1) {
    yield %0, %1
  }
body {
  %0 = num_programs 0 : i32[]
  %1 = cast %0 : f32[]
  %2 = broadcast %1 : f32[8,128]
  %3 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  %4 = add %3, %2 : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %4
  yield
}
";

const DEVICES: [Device; 2] = [Device::Cpu, Device::Interpret];

#[test]
fn one_kernel_serves_every_extent_on_both_devices() {
    let kernel = parse_kernel(FIRST_BLOCKS).unwrap();
    let rows = 44; // the last block overhangs the array
    let x: Vec<f64> = (0..rows * 256).map(|i| (i % 97) as f64 - 40.0).collect();
    let x = HostArray::from_f64(tpukit_dsl::DType::F32, &[rows, 256], &x);
    for device in DEVICES {
        for n in [0usize, 1, 3, 6] {
            let count = HostArray::from_f64(tpukit_dsl::DType::I32, &[], &[n as f64]);
            let out = launch(&kernel, device, &[&count, &x]).unwrap();
            let (got, xs) = (out[0].to_f64_vec(), x.to_f64_vec());
            for (i, (g, v)) in got.iter().zip(&xs).enumerate() {
                let want = if i / 256 < 8 * n { v + n as f64 } else { 0.0 };
                assert_eq!(*g, want, "{device:?} n={n} element {i}");
            }
        }
    }
}

#[test]
fn a_negative_extent_is_a_shape_error_naming_the_operand() {
    let kernel = parse_kernel(FIRST_BLOCKS).unwrap();
    let x = HostArray::zeros(tpukit_dsl::DType::F32, &[16, 256]);
    let count = HostArray::from_f64(tpukit_dsl::DType::I32, &[], &[-1.0]);
    for device in DEVICES {
        let e = launch(&kernel, device, &[&count, &x]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape, "{device:?}");
        assert!(
            e.to_string()
                .contains("operand `n` sizes a grid axis but holds -1"),
            "{e}"
        );
    }
}
