//! A row gather with scalar prefetch: `o[i, :] = table[idx[i], :]`. The index array is
//! prefetched and read by the table's index map, so each grid step's window is the gathered
//! row; squeezed block dims drop the row axis from the refs.

use ndarray::{Array1, Array2};
use rand::Rng;
use tpukit::prelude::*;

#[tpu_kernel]
fn row_gather(idx: Prefetch, table: In, o: Out) {
    o[..] = table[..];
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (rows, width, k) = (1000, 300, 77);
    let row = [BlockDim::Squeezed, BlockDim::Blocked(128)];
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("k", 1)),
            GridAxis::parallel(Extent::cdiv("d", 128)),
        ],
        prefetch: vec![ArraySpec::new(DType::I32, ["k"])],
        inputs: vec![
            ArraySpec::new(DType::F32, ["rows", "d"])
                .blocked(row, [prefetch(0, [grid(0)]), grid(1)]),
        ],
        outputs: vec![ArraySpec::new(DType::F32, ["k", "d"]).blocked(row, [grid(0), grid(1)])],
        ..Default::default()
    };
    let kernel = row_gather(&spec)?;
    println!("{kernel}");

    let mut rng = rand::rng();
    let table = Array2::from_shape_fn((rows, width), |_| rng.random_range(-1.0f32..1.0));
    let idx = Array1::from_shape_fn(k, |_| rng.random_range(0..rows as i32));
    let out = launch(
        &kernel,
        Device::Interpret,
        &[&idx.clone().into(), &table.clone().into()],
    )?;
    let got = out[0].as_f32().ok_or("f32 output")?;

    let ok = (0..k).all(|i| (0..width).all(|j| got[[i, j]] == table[[idx[i] as usize, j]]));
    println!(
        "row_gather: {k} rows of {width} gathered from a {rows}x{width} table: {}",
        if ok { "exact" } else { "WRONG" }
    );
    if ok {
        println!("row_gather: OK");
        Ok(())
    } else {
        Err("row_gather: mismatch".into())
    }
}
