//! Reused cheap values on the CPU backend (`Uses::recomputed` in
//! `runtime/src/cpu/codegen/analysis.rs`): a multiply of a loaded ref used twice is computed
//! at each use instead of stored, so a load it reads must still see the ref as it was at the
//! load when a store to the ref comes before the last use.

mod common;

use common::*;
use tpukit::dsl::parse_kernel;
use tpukit::prelude::*;

/// `r = x; b = 2·r; r = b; o = b + b; p = r`: `b` is read after the store to `r` it is
/// computed from.
const KERNEL: &str = "kernel @recomputed grid() {
  input %x: f32[8,128]
  output %o: f32[8,128]
  output %p: f32[8,128]
  scratch %r: f32[8,128]
body {
  %0 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  store %r[ds(0, 8), ds(0, 128)], %0
  %1 = load %r[ds(0, 8), ds(0, 128)] : f32[8,128]
  %2 = const 2.0 : f32[8,128]
  %3 = mul %1, %2 : f32[8,128]
  store %r[ds(0, 8), ds(0, 128)], %3
  %4 = add %3, %3 : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %4
  %5 = load %r[ds(0, 8), ds(0, 128)] : f32[8,128]
  store %p[ds(0, 8), ds(0, 128)], %5
  yield
}
";

#[test]
fn a_recomputed_value_reads_its_load_as_it_was() {
    let k = parse_kernel(KERNEL).unwrap();
    let (x, xs) = random(&mut rng(21), DType::F32, &[8, 128], -4.0, 4.0);
    for device in [Device::Interpret, Device::Cpu] {
        let out = launch(&k, device, &[&x]).unwrap();
        let four: Vec<f64> = xs.iter().map(|v| 4.0 * v).collect();
        let two: Vec<f64> = xs.iter().map(|v| 2.0 * v).collect();
        assert_close(&format!("{device} o"), &out[0].to_f64_vec(), &four, 0.0);
        assert_close(&format!("{device} p"), &out[1].to_f64_vec(), &two, 0.0);
    }
}
