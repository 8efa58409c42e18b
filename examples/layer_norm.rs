//! Layer norm over rows of a bf16 array, computed in f32 (as a TPU would), with f32 weight and
//! bias read whole by every grid step.

use ndarray::{Array1, Array2, Axis};
use rand::Rng;
use tpukit::catalog::layer_norm::{EPS, layer_norm, spec};
use tpukit::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (m, n, eps) = (517, 384, EPS);
    let kernel = layer_norm(&spec(n, DType::BF16), n, eps, DType::BF16)?;
    println!("{kernel}");

    let mut rng = rand::rng();
    let x = Array2::from_shape_fn((m, n), |_| bf16::from_f32(rng.random_range(-3.0f32..3.0)));
    let w = Array1::from_shape_fn(n, |_| rng.random_range(0.5f32..1.5));
    let b = Array1::from_shape_fn(n, |_| rng.random_range(-0.5f32..0.5));
    for device in [Device::Interpret, Device::Cpu] {
        let out = launch(
            &kernel,
            device,
            &[&x.clone().into(), &w.clone().into(), &b.clone().into()],
        )?;
        let got = out[0].as_bf16().ok_or("bf16 output")?;

        let xf = x.mapv(|v| v.to_f64());
        let mut worst = 0.0f64;
        for (i, row) in xf.axis_iter(Axis(0)).enumerate() {
            let mean = row.sum() / n as f64;
            let var = row.mapv(|v| (v - mean) * (v - mean)).sum() / n as f64;
            for j in 0..n {
                let want = (row[j] - mean) / (var + eps as f64).sqrt() * w[j] as f64 + b[j] as f64;
                let got = got[[i, j]].to_f64();
                // bf16 keeps 8 significant bits: one rounding of the result is 2^-8 relative.
                worst = worst.max((got - want).abs() / (1.0 + want.abs()));
            }
        }
        println!(
            "layer_norm on {device}: {m}x{n} bf16, max relative error vs ndarray (f64) = {worst:e}"
        );
        if worst.is_nan() || worst >= 1.0 / 128.0 {
            return Err(format!("layer_norm on {device}: mismatch").into());
        }
        println!("layer_norm on {device}: OK");
    }
    Ok(())
}
