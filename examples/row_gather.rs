//! A row gather with scalar prefetch: `o[i, :] = table[idx[i], :]`. The index array is
//! prefetched and read by the table's index map, so each grid step's window is the gathered
//! row; squeezed block dims drop the row axis from the refs.

use ndarray::{Array1, Array2};
use rand::Rng;
use tpukit::catalog::row_gather::{row_gather, spec};
use tpukit::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (rows, width, k) = (1000, 300, 77);
    let kernel = row_gather(&spec(DType::F32))?;
    println!("{kernel}");

    let mut rng = rand::rng();
    let table = Array2::from_shape_fn((rows, width), |_| rng.random_range(-1.0f32..1.0));
    let idx = Array1::from_shape_fn(k, |_| rng.random_range(0..rows as i32));
    for device in [Device::Interpret, Device::Cpu] {
        let out = launch(
            &kernel,
            device,
            &[&idx.clone().into(), &table.clone().into()],
        )?;
        let got = out[0].as_f32().ok_or("f32 output")?;

        let ok = (0..k).all(|i| (0..width).all(|j| got[[i, j]] == table[[idx[i] as usize, j]]));
        println!(
            "row_gather on {device}: {k} rows of {width} gathered from a {rows}x{width} table: {}",
            if ok { "exact" } else { "WRONG" }
        );
        if !ok {
            return Err(format!("row_gather on {device}: mismatch").into());
        }
        println!("row_gather on {device}: OK");
    }
    Ok(())
}
