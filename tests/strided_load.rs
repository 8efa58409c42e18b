//! The IR's strided load (`ds(start, size, stride)`): every `stride`-th element from `start`,
//! on every device, from its text form (which round-trips); a span past the ref is an error
//! naming the access, also for a dynamic start.

mod common;

use common::*;
use tpukit::dsl::parse_kernel;
use tpukit::prelude::*;

const KERNEL: &str = "kernel @strided grid() {
  input %at: i32[1]
  input %x: f32[37,130]
  output %rows: f32[8,130]
  output %cols: f32[12,40]
body {
  %0 = load %at[0] : i32[]
  %1 = load %x[ds(%0, 8, 4), ds(0, 130)] : f32[8,130]
  store %rows[ds(0, 8), ds(0, 130)], %1
  %2 = load %x[ds(1, 12, 2), ds(2, 40, 3)] : f32[12,40]
  store %cols[ds(0, 12), ds(0, 40)], %2
  yield
}
";

fn strided_loads(device: Device) {
    let k = parse_kernel(KERNEL).unwrap();
    assert_eq!(
        parse_kernel(&k.to_string()).unwrap().to_string(),
        k.to_string()
    );
    let (x, data) = random(&mut rng(5), DType::F32, &[37, 130], -4.0, 4.0);
    for at in [0, 3, 8] {
        let start = HostArray::from_f64(DType::I32, &[1], &[at as f64]);
        let out = launch(&k, device, &[&start, &x]).unwrap();
        let rows: Vec<f64> = out[0].to_f64_vec();
        for i in 0..8 {
            for j in 0..130 {
                assert_eq!(
                    rows[i * 130 + j],
                    data[(at + 4 * i) * 130 + j],
                    "row {i} from {at}"
                );
            }
        }
        let cols: Vec<f64> = out[1].to_f64_vec();
        for i in 0..12 {
            for j in 0..40 {
                assert_eq!(cols[i * 40 + j], data[(1 + 2 * i) * 130 + 2 + 3 * j]);
            }
        }
    }
    // Rows 9, 13, …, 37: the last is past the array's 37 rows.
    let start = HostArray::from_f64(DType::I32, &[1], &[9.0]);
    let err = launch(&k, device, &[&start, &x]).unwrap_err().to_string();
    assert!(err.contains("op `load`") && err.contains("9..38"), "{err}");
}

#[test]
fn a_span_past_the_ref_is_refused_statically() {
    let text = KERNEL.replace("ds(1, 12, 2)", "ds(15, 12, 2)");
    let err = parse_kernel(&text).unwrap_err().to_string();
    assert!(err.contains("outside"), "{err}");
}

#[test]
fn interpret() {
    strided_loads(Device::Interpret);
}

#[test]
fn cpu() {
    strided_loads(Device::Cpu);
}
