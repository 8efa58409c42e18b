//! `cumsum` along a dimension as a row kernel (see [`crate::rows`]): one pass over the column
//! blocks in order, carrying each row's running total in `[BM, 1]` f32 scratch. Inside a
//! block the prefix sums are one `dot` with the upper-triangular ones matrix
//! (`tri[i, j] = i ≤ j`), accumulated in f32 (ATen accumulates bf16 in f32 too).
//! Overhanging columns read 0 and come after every real column, so they change no sum.
//!
//! The dot multiplies every element by 0 for the columns before it, and `0 · NaN` and
//! `0 · inf` are NaN: a non-finite element would poison the sums before it. So the dot runs on
//! the finite elements only (the others read 0), and a second dot of the same triangle counts
//! the non-finite ones seen so far, per column, in one f32 code: `NaNs + 256 · (+infs) +
//! 65536 · (-infs)` (at most 128 of each, so every count is an exact f32 integer below
//! 2^24). Each column then adds what its sequential sum would have met: `+inf`, `-inf`, or NaN
//! (a NaN, or infinities of both signs), exactly as ATen's sequential scan gives.
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
fn cumsum_rows(x: In, o: Out, carry: Scratch, bn: usize, inf: f32, out: DType) {
    if program_id(2) == 0 {
        carry[..] = 0.0;
    }
    let v = x[..].cast(f32);
    let tri = (iota(i32, [bn, bn], 0) <= iota(i32, [bn, bn], 1)).cast(f32);
    let zero = zeros(f32, [16, bn]);
    let finite = (v - v) == zero;
    // (`v == v` is false for NaN only; Mosaic has no unordered `!=`.)
    let code = where_(
        v == v,
        where_(
            v > zero,
            full(f32, [16, bn], 256.0),
            full(f32, [16, bn], 65536.0),
        ),
        full(f32, [16, bn], 1.0),
    );
    let seen = dot(where_(finite, zero, code), tri);
    let nans = seen - (seen * 0.00390625).floor() * 256.0;
    let low = seen - (seen * 0.0000152587890625).floor() * 65536.0;
    let infs = full(f32, [16, bn], inf);
    let pos = where_(low >= full(f32, [16, bn], 256.0), infs, zero);
    let neg = where_(seen >= full(f32, [16, bn], 65536.0), zero - infs, zero);
    let nan = where_(nans > zero, infs, zero);
    let special = pos + neg + (nan - nan);
    o[..] = (dot(where_(finite, v, zero), tri) + carry[..] + special).cast(out);
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
    cumsum_rows(&spec, SCAN_BN, f32::INFINITY, dtype)
}

/// Every kernel for inputs of `dtype`: the scan, and the transpose that moves `dim` last.
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let mut k = vec![kernel(dtype)?];
    k.extend(crate::copy::kernels(dtype)?);
    Ok(k)
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
