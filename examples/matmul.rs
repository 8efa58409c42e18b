//! A blocked bf16 matmul with an f32 scratch accumulator over an `arbitrary` k axis: the
//! accumulator is zeroed on the first k step and written out (as bf16) on the last. No
//! dimension divides its block: the overhanging parts of `a` and `b` read zeros along k, so
//! they add nothing, and the overhanging rows and columns of `o` are never stored.

use ndarray::Array2;
use rand::Rng;
use tpukit::prelude::*;

#[tpu_kernel]
fn matmul(a: In, b: In, o: Out, acc: Scratch) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    if program_id(2) == num_programs(2) - 1 {
        o[..] = acc[..].cast(bf16);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (m, k, n, bm, bk, bn) = (300, 200, 260, 128, 128, 128);
    let array = |r: &str, c: &str| ArraySpec::new(DType::BF16, [Dim::sym(r), Dim::sym(c)]);
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", bm)),
            GridAxis::parallel(Extent::cdiv("n", bn)),
            GridAxis::arbitrary(Extent::cdiv("k", bk)),
        ],
        inputs: vec![
            array("m", "k").blocked([bm, bk], [grid(0), grid(2)]),
            array("k", "n").blocked([bk, bn], [grid(2), grid(1)]),
        ],
        outputs: vec![array("m", "n").blocked([bm, bn], [grid(0), grid(1)])],
        scratch: vec![ArraySpec::new(DType::F32, [bm, bn])],
        ..Default::default()
    };
    let kernel = matmul(&spec)?;
    println!("{kernel}");

    let mut rng = rand::rng();
    let mut random =
        |r, c| Array2::from_shape_fn((r, c), |_| bf16::from_f32(rng.random_range(-1.0f32..1.0)));
    let (a, b) = (random(m, k), random(k, n));
    let out = launch(
        &kernel,
        Device::Interpret,
        &[&a.clone().into(), &b.clone().into()],
    )?;
    let got = out[0].as_bf16().ok_or("bf16 output")?;

    let want = a.mapv(|v| v.to_f64()).dot(&b.mapv(|v| v.to_f64()));
    let worst = got
        .iter()
        .zip(want.iter())
        .map(|(g, w)| (g.to_f64() - w).abs() / (1.0 + w.abs()))
        .fold(0.0, f64::max);
    println!(
        "matmul: ({m}x{k}) @ ({k}x{n}) bf16, f32 accumulation, max relative error = {worst:e}"
    );
    if worst < 1.0 / 128.0 {
        println!("matmul: OK");
        Ok(())
    } else {
        Err("matmul: mismatch".into())
    }
}
