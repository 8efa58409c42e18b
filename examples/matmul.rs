//! A blocked bf16 matmul with an f32 scratch accumulator over an `arbitrary` k axis: the
//! accumulator is zeroed on the first k step and written out (as bf16) on the last. No
//! dimension divides its block: the overhanging parts of `a` and `b` read zeros along k, so
//! they add nothing, and the overhanging rows and columns of `o` are never stored.

use ndarray::Array2;
use rand::Rng;
use tpukit::catalog::matmul::{matmul, spec};
use tpukit::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (m, k, n) = (300, 200, 260);
    let kernel = matmul(&spec(DType::BF16), DType::BF16)?;
    println!("{kernel}");

    let mut rng = rand::rng();
    let mut random =
        |r, c| Array2::from_shape_fn((r, c), |_| bf16::from_f32(rng.random_range(-1.0f32..1.0)));
    let (a, b) = (random(m, k), random(k, n));
    for device in [Device::Interpret, Device::Cpu] {
        let out = launch(&kernel, device, &[&a.clone().into(), &b.clone().into()])?;
        let got = out[0].as_bf16().ok_or("bf16 output")?;

        let want = a.mapv(|v| v.to_f64()).dot(&b.mapv(|v| v.to_f64()));
        let worst = got
            .iter()
            .zip(want.iter())
            .map(|(g, w)| (g.to_f64() - w).abs() / (1.0 + w.abs()))
            .fold(0.0, f64::max);
        println!(
            "matmul on {device}: ({m}x{k}) @ ({k}x{n}) bf16, f32 accumulation, max relative error = {worst:e}"
        );
        if worst.is_nan() || worst >= 1.0 / 128.0 {
            return Err(format!("matmul on {device}: mismatch").into());
        }
        println!("matmul on {device}: OK");
    }
    Ok(())
}
