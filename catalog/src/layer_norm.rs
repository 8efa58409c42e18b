//! Layer norm over rows, computed in f32 (as a TPU would) whatever the storage dtype, with f32
//! weight and bias read whole by every grid step.

use super::{Instance, bind};
use crate::prelude::*;
use tpukit_dsl::Result;

#[tpu_kernel]
pub fn layer_norm(x: In, w: In, b: In, o: Out, n: usize, eps: f32, out: DType) {
    let v = x[..].cast(f32);
    let mean = v.sum_keepdims(-1) / (n as f32);
    let d = v - mean;
    let var = (d * d).sum_keepdims(-1) / (n as f32);
    o[..] = (d * (var + eps).rsqrt() * w[..] + b[..]).cast(out);
}

pub const BLOCK_ROWS: usize = 16;
pub const EPS: f32 = 1e-5;

/// `m` (symbolic) rows of `n` elements of `dtype`; `w` and `b` are f32 vectors of `n`.
pub fn spec(n: usize, dtype: DType) -> CallSpec {
    let rows = ArraySpec::new(dtype, [Dim::sym("m"), Dim::Static(n)])
        .blocked([BLOCK_ROWS, n], [grid(0), 0.into()]);
    CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", BLOCK_ROWS))],
        inputs: vec![
            rows.clone(),
            ArraySpec::new(DType::F32, [n]),
            ArraySpec::new(DType::F32, [n]),
        ],
        outputs: vec![rows],
        ..Default::default()
    }
}

pub fn instance(shape: &[usize], dtype: DType) -> Result<Instance> {
    let n = shape[1];
    Ok(Instance {
        kernel: layer_norm(&spec(n, dtype), n, EPS, dtype)?,
        bindings: bind(&[("m", shape[0])]),
    })
}
