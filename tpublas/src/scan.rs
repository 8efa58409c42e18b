//! `cumsum` along a dimension as a row kernel (see [`crate::rows`]): one pass over the column
//! blocks in order, carrying each row's running total in `[BM, 1]` f32 scratch. Inside a
//! block the prefix sums are one `dot` with the upper-triangular ones matrix
//! (`tri[i, j] = i ≤ j`), accumulated in f32 (ATen accumulates bf16 in f32 too).
//! Overhanging columns read 0 and come after every real column, so they change no sum.

use crate::launch::{Prepared, memo};
use crate::rows::{self, BM, BN};
use crate::value::{Args, Value};
use crate::{BlasError, layout, promote};
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

/// The kernel over `[m, n]` rows of `dtype`.
pub fn kernel(dtype: DType) -> std::result::Result<Prepared, BlasError> {
    memo(("cumsum", dtype), || build(dtype))
}

fn build(dtype: DType) -> std::result::Result<Kernel, BlasError> {
    let spec = CallSpec {
        grid: rows::phased_grid(1),
        inputs: vec![rows::input(dtype, 0.0)],
        outputs: vec![rows::output(dtype, 1)],
        scratch: vec![rows::acc()],
        ..Default::default()
    };
    Ok(cumsum_rows(&spec, BN, dtype)?)
}

/// Every kernel for inputs of `dtype`: the scan, and the transpose that moves `dim` last.
pub fn kernels(dtype: DType) -> std::result::Result<Vec<Prepared>, BlasError> {
    Ok(vec![kernel(dtype)?, crate::copy::kernel(dtype)?])
}

/// `cumsum(x, dim, dtype=None)`; the result keeps `x`'s dtype (an explicit f32/bf16 `dtype`
/// argument converts `x` first, as ATen does).
pub fn run(args: &[Value]) -> std::result::Result<Vec<HostArray>, BlasError> {
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
