//! Row softmax over blocks of 8 rows: max, exp, sum and scale in one kernel. The row count
//! need not divide the block; overhanging rows read fill values and are never stored.

use super::{Instance, bind};
use crate::prelude::*;
use tpukit_dsl::Result;

#[tpu_kernel]
pub fn softmax(x: In, o: Out) {
    let v = x[..];
    let e = (v - v.reduce_max_keepdims(-1)).exp();
    o[..] = e / e.sum_keepdims(-1);
}

pub const BLOCK_ROWS: usize = 8;

/// `m` (symbolic) rows of `n` elements, each block whole rows.
pub fn spec(n: usize, dtype: DType) -> CallSpec {
    let rows = ArraySpec::new(dtype, [Dim::sym("m"), Dim::Static(n)])
        .blocked([BLOCK_ROWS, n], [grid(0), 0.into()]);
    CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", BLOCK_ROWS))],
        inputs: vec![rows.clone()],
        outputs: vec![rows],
        ..Default::default()
    }
}

pub fn instance(shape: &[usize], dtype: DType) -> Result<Instance> {
    Ok(Instance {
        kernel: softmax(&spec(shape[1], dtype))?,
        bindings: bind(&[("m", shape[0])]),
    })
}
