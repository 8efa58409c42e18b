//! Row softmax over blocks of 8 rows: max, exp, sum and scale in one kernel. The row count
//! does not divide the block; the overhanging rows read fill values and are never stored.

use ndarray::{Array2, Axis};
use rand::Rng;
use tpukit::catalog::softmax::{softmax, spec};
use tpukit::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (m, n) = (1003, 256);
    let kernel = softmax(&spec(n, DType::F32))?;
    println!("{kernel}");

    let mut rng = rand::rng();
    let x = Array2::from_shape_fn((m, n), |_| rng.random_range(-4.0f32..4.0));
    for device in [Device::Interpret, Device::Cpu] {
        let out = launch(&kernel, device, &[&x.clone().into()])?;
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
        println!("softmax on {device}: {m}x{n} f32, max |tpukit - ndarray (f64)| = {err:e}");
        if err.is_nan() || err >= 1e-6 {
            return Err(format!("softmax on {device}: mismatch").into());
        }
        println!("softmax on {device}: OK");
    }
    Ok(())
}
