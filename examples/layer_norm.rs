//! Layer norm over rows of a bf16 array, computed in f32 (as a TPU would), with f32 weight and
//! bias read whole by every grid step.

use ndarray::{Array1, Array2, Axis};
use rand::Rng;
use tpukit::prelude::*;

#[tpu_kernel]
fn layer_norm(x: In, w: In, b: In, o: Out, n: usize, eps: f32) {
    let v = x[..].cast(f32);
    let mean = v.sum_keepdims(-1) / (n as f32);
    let d = v - mean;
    let var = (d * d).sum_keepdims(-1) / (n as f32);
    o[..] = (d * (var + eps).rsqrt() * w[..] + b[..]).cast(bf16);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (m, n, eps) = (517, 384, 1e-5f32);
    let rows = |d| {
        ArraySpec::new(d, [Dim::sym("m"), Dim::Static(n)]).blocked([16, n], [grid(0), 0.into()])
    };
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", 16))],
        inputs: vec![
            rows(DType::BF16),
            ArraySpec::new(DType::F32, [n]),
            ArraySpec::new(DType::F32, [n]),
        ],
        outputs: vec![rows(DType::BF16)],
        ..Default::default()
    };
    let kernel = layer_norm(&spec, n, eps)?;
    println!("{kernel}");

    let mut rng = rand::rng();
    let x = Array2::from_shape_fn((m, n), |_| bf16::from_f32(rng.random_range(-3.0f32..3.0)));
    let w = Array1::from_shape_fn(n, |_| rng.random_range(0.5f32..1.5));
    let b = Array1::from_shape_fn(n, |_| rng.random_range(-0.5f32..0.5));
    let out = launch(
        &kernel,
        Device::Interpret,
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
    println!("layer_norm: {m}x{n} bf16, max relative error vs ndarray (f64) = {worst:e}");
    if worst < 1.0 / 128.0 {
        println!("layer_norm: OK");
        Ok(())
    } else {
        Err("layer_norm: mismatch".into())
    }
}
