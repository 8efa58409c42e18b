//! Flash attention forward written in Rust (`tpukit::catalog::flash_attention`): online
//! softmax over 128-key blocks with f32 running statistics, causal block skipping. Runs full
//! and causal attention, f32 and bf16, on lengths that do not divide the blocks (and more
//! keys than queries), on the interpreter and the compiled CPU backend, each checked against
//! plain f64 attention on the same (rounded) inputs.

use ndarray::{Array3, Axis, s};
use rand::Rng;
use tpukit::catalog::flash_attention::{flash_attention, spec};
use tpukit::prelude::*;

/// `softmax(q·kᵀ·scale) · v` per batch-head in f64; causal: query `i` sees keys `j ≤ i`.
fn reference(
    q: &Array3<f64>,
    k: &Array3<f64>,
    v: &Array3<f64>,
    scale: f64,
    causal: bool,
) -> Array3<f64> {
    let mut out = Array3::zeros(q.raw_dim());
    for b in 0..q.len_of(Axis(0)) {
        let (qb, kb, vb) = (
            q.slice(s![b, .., ..]),
            k.slice(s![b, .., ..]),
            v.slice(s![b, .., ..]),
        );
        let mut scores = qb.dot(&kb.t()) * scale;
        for (i, mut row) in scores.axis_iter_mut(Axis(0)).enumerate() {
            if causal {
                row.slice_mut(s![i + 1..]).fill(f64::NEG_INFINITY);
            }
            let max = row.fold(f64::NEG_INFINITY, |a, &x| a.max(x));
            row.mapv_inplace(|x| (x - max).exp());
            let sum = row.sum();
            row.mapv_inplace(|x| x / sum);
        }
        out.slice_mut(s![b, .., ..]).assign(&scores.dot(&vb));
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (bh, l, len_s, d) = (3, 300, 333, 64);
    let scale = 1.0 / (d as f32).sqrt();
    let mut rng = rand::rng();
    let mut random = |n| Array3::from_shape_fn((bh, n, d), |_| rng.random_range(-2.0f32..2.0));
    let (q, k, v) = (random(l), random(len_s), random(len_s));

    for dtype in [DType::F32, DType::BF16] {
        // The inputs as the kernel sees them (bf16-rounded for bf16), and their f64 values.
        let (host, wide): (Vec<HostArray>, Vec<Array3<f64>>) = [&q, &k, &v]
            .iter()
            .map(|x| match dtype {
                DType::BF16 => {
                    let r = x.mapv(bf16::from_f32);
                    (r.clone().into(), r.mapv(|e| e.to_f64()))
                }
                _ => ((*x).clone().into(), x.mapv(f64::from)),
            })
            .unzip();
        // bf16 rounds p before `p·v` and the result once: a few bf16 ulps.
        let tolerance = if dtype == DType::BF16 { 1e-2 } else { 1e-5 };
        for causal in [false, true] {
            let kernel = flash_attention(&spec(d, dtype), scale, i32::from(causal), dtype)?;
            let want = reference(&wide[0], &wide[1], &wide[2], f64::from(scale), causal);
            let inputs: Vec<&HostArray> = host.iter().collect();
            for device in [Device::Interpret, Device::Cpu] {
                let out = launch(&kernel, device, &inputs)?;
                let got = out[0].to_f64_vec();
                let worst = got
                    .iter()
                    .zip(want.iter())
                    .map(|(g, w)| (g - w).abs() / (1.0 + w.abs()))
                    .fold(0.0, f64::max);
                let kind = if causal { "causal" } else { "full" };
                println!(
                    "flash attention on {device}: {kind}, {bh}x{l} queries, {len_s} keys, d={d}, {dtype}, max relative error = {worst:.1e}"
                );
                if worst.is_nan() || worst >= tolerance {
                    return Err(
                        format!("flash attention on {device} ({kind}, {dtype}): mismatch").into(),
                    );
                }
            }
        }
    }
    println!("flash attention: OK");
    Ok(())
}
