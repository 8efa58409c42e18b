//! `cumsum` along a dimension as a row kernel (see [`crate::rows`]): one pass over the column
//! blocks in order, carrying each row's running total in `[BM, 1]` f32 scratch. Inside a
//! block the prefix sums are one `dot` with the upper-triangular ones matrix
//! (`tri[i, j] = i ≤ j`), accumulated in f32 (ATen accumulates bf16 in f32 too).
//! Overhanging columns read 0 and come after every real column, so they change no sum.
//!
//! Blocks are [`SCAN_BN`] = 128 columns wide, not the rows layout's 512: the triangular dot
//! costs `BN` multiply-adds per element, and 128 is one MXU tile on a TPU.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::rows::{self, BM};
use crate::value::{Args, Value};
use crate::{layout, promote};
use tpukit::dsl::{CallSpec, DType, Kernel};
use tpukit::prelude::*;

#[tpu_kernel]
fn cumsum_rows(x: In, o: Out, carry: Scratch, bn: usize, out: DType) {
    if program_id(2) == 0 {
        carry[..] = 0.0;
    }
    let v = x[..].cast(f32);
    let tri = (iota(i32, [bn, bn], 0) <= iota(i32, [bn, bn], 1)).cast(f32);
    o[..] = (dot(v, tri) + carry[..]).cast(out);
    carry[..] += v.sum_keepdims(-1);
}

pub const ATEN: &str = "aten.cumsum.default";

/// Columns per window.
pub const SCAN_BN: usize = 128;

/// The kernel over `[m, n]` rows of `dtype`.
pub fn kernel(dtype: DType) -> Result<Prepared> {
    memo(("cumsum", dtype), || Ok(build(dtype)?))
}

fn build(dtype: DType) -> tpukit::dsl::Result<Kernel> {
    let spec = CallSpec {
        grid: rows::phased_grid_by(1, SCAN_BN),
        inputs: vec![rows::input_by(dtype, 0.0, SCAN_BN)],
        outputs: vec![rows::output_by(dtype, 1, SCAN_BN)],
        scratch: vec![rows::acc()],
        ..Default::default()
    };
    cumsum_rows(&spec, SCAN_BN, dtype)
}

/// Every kernel for inputs of `dtype`: the scan, and the transpose that moves `dim` last.
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    Ok(vec![kernel(dtype)?, crate::copy::kernel(dtype)?])
}

/// `cumsum(x, dim, dtype=None)`; the result keeps `x`'s dtype (an explicit f32/bf16 `dtype`
/// argument converts `x` first, as ATen does).
pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN, args);
    let x = a.tensor(0)?;
    promote::check(ATEN, x)?;
    let d = a.dim(a.int(1)?, x.shape().len())?;
    let x = match a.opt_dtype(2)? {
        Some(t) => promote::to(x, t),
        None => x.clone(),
    };
    let dims = if x.shape().is_empty() {
        vec![]
    } else {
        vec![d]
    };
    let (r, perm) = layout::to_rows(&x, &dims)?;
    let o = crate::launch::one(&kernel(x.dtype())?, &[&r])?;
    Ok(vec![layout::from_rows(o, x.shape(), &perm)?])
}

const _: () = assert!(BM == 16);
