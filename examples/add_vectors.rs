//! The seed's add kernel: `o = x + y` over 1-D blocks of 1024, on a length that does not
//! divide the block (the last block overhangs the array; its extra stores are dropped).

use ndarray::Array1;
use rand::Rng;
use tpukit::catalog::add_vectors::{add_vectors, spec};
use tpukit::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 100_003;
    let kernel = add_vectors(&spec(DType::F32))?;
    println!("{kernel}");

    let mut rng = rand::rng();
    let x = Array1::from_shape_fn(n, |_| rng.random_range(-1.0f32..1.0));
    let y = Array1::from_shape_fn(n, |_| rng.random_range(-1.0f32..1.0));
    for device in [Device::Interpret, Device::Cpu] {
        let out = launch(&kernel, device, &[&x.clone().into(), &y.clone().into()])?;
        let got = out[0].as_f32().ok_or("f32 output")?;
        let want = &x + &y;
        let err = max_abs_diff(got.iter(), want.iter());
        println!("add_vectors on {device}: n = {n}, max |tpukit - ndarray| = {err:e}");
        check(err == 0.0, &format!("add_vectors on {device}"))?;
    }
    Ok(())
}

fn max_abs_diff<'a>(a: impl Iterator<Item = &'a f32>, b: impl Iterator<Item = &'a f32>) -> f32 {
    a.zip(b).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max)
}

fn check(ok: bool, name: &str) -> Result<(), Box<dyn std::error::Error>> {
    if ok {
        println!("{name}: OK");
        Ok(())
    } else {
        Err(format!("{name}: result does not match the reference").into())
    }
}
