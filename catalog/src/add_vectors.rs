//! `o = x + y` over 1-D blocks of 1024. Lengths need not divide the block: the last block
//! overhangs the array and its extra stores are dropped.

use super::{Instance, bind};
use crate::prelude::*;
use tpukit_dsl::Result;

#[tpu_kernel]
pub fn add_vectors(x: In, y: In, o: Out) {
    o[..] = x[..] + y[..];
}

pub const BLOCK: usize = 1024;

/// Vectors of symbolic length `n` in blocks of [`BLOCK`].
pub fn spec(dtype: DType) -> CallSpec {
    let block = ArraySpec::new(dtype, ["n"]).blocked([BLOCK], [grid(0)]);
    CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("n", BLOCK))],
        inputs: vec![block.clone(), block.clone()],
        outputs: vec![block],
        ..Default::default()
    }
}

pub fn instance(shape: &[usize], dtype: DType) -> Result<Instance> {
    Ok(Instance {
        kernel: add_vectors(&spec(dtype))?,
        bindings: bind(&[("n", shape[0])]),
    })
}
