//! `native_layer_norm_backward` in two kernels, computing in f32:
//! - a two-phase row kernel (see [`crate::rows`]) for the input gradient: phase 0 sums
//!   `a = Σ g·w` and `b = Σ g·w·x̂` per row (`x̂ = (x − mean)·rstd`), phase 1 writes
//!   `dx = rstd · (g·w − a/n − x̂·b/n)`;
//! - a column kernel for the weight and bias gradients, `dw = Σ_rows g·x̂`, `db = Σ_rows g`:
//!   grid `(cdiv(n, BN) parallel, cdiv(m, BM) arbitrary)`, `[1, BN]` f32 accumulators.
//!
//! Overhanging rows and columns read 0 in `g`, so they add nothing to either sum (the
//! input gradient's second sum is masked to the row as well, see `layer_norm_dx`).

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::rows::{self, BM, BN, Weights};
use crate::softmax::Reads;
use crate::value::{Args, Value};
use crate::{layout, promote};
use tpukit::dsl::{ArraySpec, CallSpec, DType, Dim, Extent, GridAxis, Kernel, grid};
use tpukit::prelude::*;

pub const ATEN: &str = "aten.native_layer_norm_backward.default";

#[tpu_kernel]
fn layer_norm_dx(
    g: In,
    x: In,
    mean: In,
    rstd: In,
    w: In,
    dx: Out,
    a: Scratch,
    b: Scratch,
    out: DType,
    bm: usize,
    bn: usize,
) {
    let gw = g[..].cast(f32) * w[..];
    let r = rstd[..].cast(f32);
    let xhat = (x[..].cast(f32) - mean[..].cast(f32)) * r;
    if program_id(1) == 0 {
        if program_id(2) == 0 {
            a[..] = 0.0;
            b[..] = 0.0;
        }
        // `g·w` is 0 past the row, `x̂` is not: the mask shows the CPU backend that the
        // second sum leaves those columns out, so it clips an overhanging window.
        let valid = iota(i32, [bm, bn], 1) + program_id(2) * (bn as i32) < dim(x, 1);
        a[..] += gw.sum_keepdims(-1);
        b[..] += where_(valid, gw * xhat, 0.0).sum_keepdims(-1);
    }
    if program_id(1) == 1 {
        let n = dim(x, 1).cast(f32);
        dx[..] = (r * (gw - a[..] / n - xhat * b[..] / n)).cast(out);
    }
}

/// [`layer_norm_dx`] for rows that fit one window (a one-phase grid with one column block):
/// both sums, then `dx`, in one pass over the row; the two phases read `g` and `x` twice.
#[tpu_kernel]
fn layer_norm_dx_row(
    g: In,
    x: In,
    mean: In,
    rstd: In,
    w: In,
    dx: Out,
    out: DType,
    bm: usize,
    bn: usize,
) {
    let gw = g[..].cast(f32) * w[..];
    let r = rstd[..].cast(f32);
    let xhat = (x[..].cast(f32) - mean[..].cast(f32)) * r;
    let valid = iota(i32, [bm, bn], 1) + program_id(2) * (bn as i32) < dim(x, 1);
    let a = gw.sum_keepdims(-1);
    let b = where_(valid, gw * xhat, 0.0).sum_keepdims(-1);
    let n = dim(x, 1).cast(f32);
    dx[..] = (r * (gw - a / n - xhat * b / n)).cast(out);
}

#[tpu_kernel]
fn layer_norm_dwdb(
    g: In,
    x: In,
    mean: In,
    rstd: In,
    dw: Out,
    db: Out,
    sw: Scratch,
    sb: Scratch,
    out: DType,
) {
    if program_id(1) == 0 {
        sw[..] = 0.0;
        sb[..] = 0.0;
    }
    let gv = g[..].cast(f32);
    let xhat = (x[..].cast(f32) - mean[..].cast(f32)) * rstd[..].cast(f32);
    sw[..] += (gv * xhat).sum_keepdims(0);
    sb[..] += gv.sum_keepdims(0);
    if program_id(1) == num_programs(1) - 1 {
        dw[..] = sw[..].cast(out);
        db[..] = sb[..].cast(out);
    }
}

/// The input-gradient kernel: `g`, `x` of `dtype`, statistics of `stat`, f32 weight row,
/// in windows of `bn` columns (see [`rows::width`]), reading each row as `reads` says
/// ([`Reads::Once`] only for rows of at most `bn` elements).
pub fn dx_kernel(dtype: DType, stat: DType, bn: usize, reads: Reads) -> Result<Prepared> {
    memo(("layer_norm_dx", dtype, stat, bn, reads), || {
        Ok(build_dx(dtype, stat, Weights::PerColumn, bn, reads)?)
    })
}

/// [`dx_kernel`] with a weight per row (`Weights::PerRow`: a batch norm's, channels as rows;
/// the weight is then constant along each row, so the same formula is its input gradient),
/// in two phases over windows of [`BN`] columns.
pub fn dx_kernel_by(dtype: DType, stat: DType, weights: Weights) -> Result<Prepared> {
    memo(("layer_norm_dx", dtype, stat, weights), || {
        Ok(build_dx(dtype, stat, weights, BN, Reads::Twice)?)
    })
}

fn build_dx(
    dtype: DType,
    stat: DType,
    weights: Weights,
    bn: usize,
    reads: Reads,
) -> tpukit::dsl::Result<Kernel> {
    let phases = match reads {
        Reads::Once => 1,
        Reads::Twice => 2,
    };
    let spec = CallSpec {
        grid: rows::phased_grid_by(phases, bn),
        inputs: vec![
            rows::input_by(dtype, 0.0, bn),
            rows::input_by(dtype, 0.0, bn),
            rows::stat(stat),
            rows::stat(stat),
            weights.spec_by(bn),
        ],
        outputs: vec![rows::output_by(dtype, phases, bn)],
        scratch: match reads {
            Reads::Once => vec![],
            Reads::Twice => vec![rows::acc(), rows::acc()],
        },
        ..Default::default()
    };
    match reads {
        Reads::Once => layer_norm_dx_row(&spec, dtype, BM, bn),
        Reads::Twice => layer_norm_dx(&spec, dtype, BM, bn),
    }
}

/// The weight/bias-gradient kernel; gradients of `param`.
pub fn dwdb_kernel(dtype: DType, stat: DType, param: DType) -> Result<Prepared> {
    memo(("layer_norm_dwdb", dtype, stat, param), || {
        Ok(build_dwdb(dtype, stat, param)?)
    })
}

fn build_dwdb(dtype: DType, stat: DType, param: DType) -> tpukit::dsl::Result<Kernel> {
    let tiles = |d: DType| ArraySpec::new(d, ["m", "n"]).blocked([BM, BN], [grid(1), grid(0)]);
    let stat_col =
        ArraySpec::new(stat, [Dim::sym("m"), Dim::Static(1)]).blocked([BM, 1], [grid(1), 0.into()]);
    let row = ArraySpec::new(param, [Dim::Static(1), Dim::sym("n")])
        .blocked([1, BN], [0.into(), grid(0)]);
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("n", BN)),
            GridAxis::arbitrary(Extent::cdiv("m", BM)),
        ],
        inputs: vec![tiles(dtype), tiles(dtype), stat_col.clone(), stat_col],
        outputs: vec![row.clone(), row],
        scratch: vec![ArraySpec::new(DType::F32, [1, BN]); 2],
        ..Default::default()
    };
    layer_norm_dwdb(&spec, param)
}

/// Every kernel for inputs of `dtype`: both kernels with statistics and parameters of the
/// input's dtype, and for bf16 inputs also with f32 ones (a forward pass with f32 weights).
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let stats: &[DType] = if dtype == DType::BF16 {
        &[DType::BF16, DType::F32]
    } else {
        &[dtype]
    };
    let mut k = Vec::new();
    for &stat in stats {
        for bn in rows::WIDTHS {
            for reads in [Reads::Twice, Reads::Once] {
                k.push(dx_kernel(dtype, stat, bn, reads)?);
            }
        }
        k.push(dwdb_kernel(dtype, stat, stat)?);
    }
    Ok(k)
}

/// `native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?,
/// bias?, output_mask)` → `(grad_input, grad_weight, grad_bias)`. All three are computed
/// whatever `output_mask` says; without a weight, the weight is 1 and the last two are
/// still returned (of `input`'s dtype).
pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN, args);
    let (g, x) = (a.tensor(0)?, a.tensor(1)?);
    let normalized: Vec<usize> = a.int_list(2)?.iter().map(|&d| d.max(0) as usize).collect();
    let (mean, rstd) = (a.tensor(3)?, a.tensor(4)?);
    let weight = a.opt_tensor(5)?;
    for t in [g, x, mean, rstd].into_iter().chain(weight) {
        promote::check(ATEN, t)?;
    }
    if g.shape() != x.shape() || g.dtype() != x.dtype() {
        return Err(a.err("grad_out and input must have one shape and dtype"));
    }
    let n = crate::norm::normalized_size(&a, &normalized, x.shape())?;
    let m = x.shape().iter().product::<usize>() / n.max(1);
    if mean.shape().iter().product::<usize>() != m || rstd.dtype() != mean.dtype() {
        return Err(a.err("mean and rstd must hold one value per normalised row"));
    }
    let param = weight.map_or(x.dtype(), HostArray::dtype);
    let w = match weight {
        Some(w) => promote::to(w, DType::F32)
            .reshape(&[1, n])
            .expect("same size"),
        None => HostArray::from_f64(DType::F32, &[1, n], &vec![1.0; n]),
    };
    let rows_of = |t: &HostArray, c: usize| t.clone().reshape(&[m, c]).expect("same size");
    let (g2, x2) = (rows_of(g, n), rows_of(x, n));
    let (mean2, rstd2) = (rows_of(mean, 1), rows_of(rstd, 1));
    let stat = mean.dtype();
    let bn = rows::width(n);
    let dx = crate::launch::one(
        &dx_kernel(x.dtype(), stat, bn, Reads::fitting(n, bn))?,
        &[&g2, &x2, &mean2, &rstd2, &w],
    )?;
    let mut dwdb = crate::launch::all(
        &dwdb_kernel(x.dtype(), stat, param)?,
        &[&g2, &x2, &mean2, &rstd2],
    )?;
    let db = dwdb
        .pop()
        .expect("db")
        .reshape(&normalized)
        .expect("same size");
    let dw = dwdb
        .pop()
        .expect("dw")
        .reshape(&normalized)
        .expect("same size");
    Ok(vec![layout::unflatten(dx, x.shape()), dw, db])
}
