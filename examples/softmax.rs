//! Row softmax over blocks of 8 rows: max, exp, sum and scale in one kernel. The row count
//! does not divide the block; the overhanging rows read fill values and are never stored.

use ndarray::{Array2, Axis};
use rand::Rng;
use tpukit::prelude::*;

#[tpu_kernel]
fn softmax(x: In, o: Out) {
    let v = x[..];
    let e = (v - v.reduce_max_keepdims(-1)).exp();
    o[..] = e / e.sum_keepdims(-1);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (m, n) = (1003, 256);
    let rows = ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(n)])
        .blocked([8, n], [grid(0), 0.into()]);
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", 8))],
        inputs: vec![rows.clone()],
        outputs: vec![rows],
        ..Default::default()
    };
    let kernel = softmax(&spec)?;
    println!("{kernel}");

    let mut rng = rand::rng();
    let x = Array2::from_shape_fn((m, n), |_| rng.random_range(-4.0f32..4.0));
    let out = launch(&kernel, Device::Interpret, &[&x.clone().into()])?;
    let got = out[0].as_f32().ok_or("f32 output")?;

    let mut want = x.mapv(f64::from);
    for mut row in want.axis_iter_mut(Axis(0)) {
        let max = row.fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        row.mapv_inplace(|v| (v - max).exp());
        let sum = row.sum();
        row.mapv_inplace(|v| v / sum);
    }
    let err = got
        .iter()
        .zip(want.iter())
        .map(|(g, w)| (f64::from(*g) - w).abs())
        .fold(0.0, f64::max);
    println!("softmax: {m}x{n} f32, max |tpukit - ndarray (f64)| = {err:e}");
    if err < 1e-6 {
        println!("softmax: OK");
        Ok(())
    } else {
        Err("softmax: mismatch".into())
    }
}
