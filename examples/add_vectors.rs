//! The seed's add kernel: `o = x + y` over 1-D blocks of 1024, on a length that does not
//! divide the block (the last block overhangs the array; its extra stores are dropped).

use ndarray::Array1;
use rand::Rng;
use tpukit::prelude::*;

#[tpu_kernel]
fn add_vectors(x: In, y: In, o: Out) {
    o[..] = x[..] + y[..];
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 100_003;
    let block = ArraySpec::new(DType::F32, ["n"]).blocked([1024], [grid(0)]);
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("n", 1024))],
        inputs: vec![block.clone(), block.clone()],
        outputs: vec![block],
        ..Default::default()
    };
    let kernel = add_vectors(&spec)?;
    println!("{kernel}");

    let mut rng = rand::rng();
    let x = Array1::from_shape_fn(n, |_| rng.random_range(-1.0f32..1.0));
    let y = Array1::from_shape_fn(n, |_| rng.random_range(-1.0f32..1.0));
    let out = launch(
        &kernel,
        Device::Interpret,
        &[&x.clone().into(), &y.clone().into()],
    )?;
    let got = out[0].as_f32().ok_or("f32 output")?;
    let want = &x + &y;
    let err = max_abs_diff(got.iter(), want.iter());
    println!("add_vectors: n = {n}, max |tpukit - ndarray| = {err:e}");
    check(err == 0.0, "add_vectors")
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
