//! A row gather with scalar prefetch: `o[i, :] = table[idx[i], :]`. The index array is
//! prefetched and read by the table's index map, so each grid step's window is the gathered
//! row; squeezed block dims drop the row axis from the refs.

use super::{Instance, bind};
use crate::prelude::*;
use tpukit_dsl::Result;

#[tpu_kernel]
pub fn row_gather(idx: Prefetch, table: In, o: Out) {
    o[..] = table[..];
}

pub const BLOCK: usize = 128;

/// `k` rows gathered from a `rows x d` table by the i32 indices `idx[k]`.
pub fn spec(dtype: DType) -> CallSpec {
    let row = [BlockDim::Squeezed, BlockDim::Blocked(BLOCK)];
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("k", 1)),
            GridAxis::parallel(Extent::cdiv("d", BLOCK)),
        ],
        prefetch: vec![ArraySpec::new(DType::I32, ["k"])],
        inputs: vec![
            ArraySpec::new(dtype, ["rows", "d"]).blocked(row, [prefetch(0, [grid(0)]), grid(1)]),
        ],
        outputs: vec![ArraySpec::new(dtype, ["k", "d"]).blocked(row, [grid(0), grid(1)])],
        ..Default::default()
    }
}

pub fn instance(shape: &[usize], dtype: DType) -> Result<Instance> {
    Ok(Instance {
        kernel: row_gather(&spec(dtype))?,
        bindings: bind(&[("rows", shape[0]), ("d", shape[1]), ("k", shape[2])]),
    })
}
