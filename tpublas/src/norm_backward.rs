//! `native_layer_norm_backward`, computing in f32. The input gradient is
//! `dx = rstd · (g·w − a/n − x̂·b/n)` with `x̂ = (x − mean)·rstd` and the row sums
//! `a = Σ g·w`, `b = Σ g·w·x̂`; the weight and bias gradients are the column sums
//! `dw = Σ_rows g·x̂`, `db = Σ_rows g`.
//!
//! Rows that fit one window (see [`rows::width`]) take one pass over `g` and `x`: the rows are
//! split into [`chunks`] of consecutive rows (the `[m, n]` arrays viewed as `[p, m/p, n]`), a
//! `parallel` grid axis over the chunks and an `arbitrary` one over each chunk's windows;
//! each step writes its rows' `dx` and adds their column sums to the chunk's `[1, n]`
//! accumulators, written at the chunk's last step as its row of the `[p, 1, n]` partial
//! sums, which a second kernel adds up. Columns alone cannot split the work: `n = 768` is
//! two 512-column blocks (threads split 2:1), and a column kernel reads `g` and `x` again.
//!
//! Wider rows, and row counts with no divisor that makes enough chunks, take two kernels:
//! - a two-phase row kernel (see [`crate::rows`]) for the input gradient: phase 0 sums
//!   `a` and `b` per row, phase 1 writes `dx` (rows that fit one window: one phase);
//! - a column kernel for the weight and bias gradients: grid
//!   `(cdiv(n, BN) parallel, cdiv(m, BM) arbitrary)`, `[1, BN]` f32 accumulators.
//!
//! Overhanging rows and columns read 0 in `g`, so they add nothing to either sum (the
//! input gradient's second sum is masked to the row as well, see `layer_norm_dx`).

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::rows::{self, BM, BN, Weights};
use crate::softmax::Reads;
use crate::value::{Args, Value};
use crate::{layout, promote};
use tpukit::dsl::{ArraySpec, BlockDim, CallSpec, DType, Dim, Extent, GridAxis, Kernel, grid};
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

/// The one-pass backward over chunks of rows that fit one window (see the module docs): `g`,
/// `x`, `dx` are `[p, m/p, n]`, the statistics `[p, m/p, 1]`, `pw`/`pb` the `[p, 1, n]`
/// partial column sums; grid `(p parallel, cdiv(m/p, bm) arbitrary, cdiv(n, bn)
/// arbitrary)`, whose last axis must have one step (`n ≤ bn`: the accumulators hold one
/// window's columns). That axis places the column windows as the row kernels' do, so the CPU
/// backend sees that `dx`'s windows cover it (no zero-filling first) and clips them.
#[tpu_kernel]
fn layer_norm_backward_row(
    g: In,
    x: In,
    mean: In,
    rstd: In,
    w: In,
    dx: Out,
    pw: Out,
    pb: Out,
    sw: Scratch,
    sb: Scratch,
    out: DType,
    bm: usize,
    bn: usize,
) {
    let gv = g[..].cast(f32);
    let gw = gv * w[..];
    let r = rstd[..].cast(f32);
    let xhat = (x[..].cast(f32) - mean[..].cast(f32)) * r;
    let valid = iota(i32, [bm, bn], 1) + program_id(2) * (bn as i32) < dim(x, 2);
    let a = gw.sum_keepdims(-1);
    let b = where_(valid, gw * xhat, 0.0).sum_keepdims(-1);
    let n = dim(x, 2).cast(f32);
    dx[..] = (r * (gw - a / n - xhat * b / n)).cast(out);
    if program_id(1) == 0 {
        sw[..] = 0.0;
        sb[..] = 0.0;
    }
    sw[..] += (gv * xhat).sum_keepdims(0);
    sb[..] += gv.sum_keepdims(0);
    if program_id(1) == num_programs(1) - 1 {
        pw[..] = sw[..];
        pb[..] = sb[..];
    }
}

/// `dw`, `db` (`[1, n]` of `out`): the column sums of the `[p, n]` partial sums, `p` at most
/// [`MAX_CHUNKS`] (one window's rows; overhanging rows read 0).
#[tpu_kernel]
fn column_sums(pw: In, pb: In, dw: Out, db: Out, out: DType) {
    dw[..] = pw[..].sum_keepdims(0).cast(out);
    db[..] = pb[..].sum_keepdims(0).cast(out);
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

/// The most chunks the one-pass backward splits its rows into: enough to keep 16 threads
/// busy, few enough that the partial sums (`p · n` f32 each) stay small beside the input.
pub const MAX_CHUNKS: usize = 16;

/// How many chunks of consecutive rows the one-pass backward splits `m` rows into: the
/// largest divisor of `m` of at most [`MAX_CHUNKS`] whose chunks hold at least one window of
/// [`BM`] rows (1 for fewer rows). `None` where that leaves fewer than 4 chunks for rows of 4
/// windows or more (a prime `m`): one thread would run most of the work.
pub fn chunks(m: usize) -> Option<usize> {
    let most = MAX_CHUNKS.min(m / BM).max(1);
    let p = (1..=most).rev().find(|p| m.is_multiple_of(*p)).unwrap_or(1);
    (p >= 4 || m.div_ceil(BM) < 4).then_some(p)
}

/// The one-pass kernel (`layer_norm_backward_row`) for `g`, `x` of `dtype`, statistics of
/// `stat`, in windows of `bn` columns (rows of at most `bn` elements).
pub fn row_kernel(dtype: DType, stat: DType, bn: usize) -> Result<Prepared> {
    memo(("layer_norm_backward_row", dtype, stat, bn), || {
        let block = |c: usize| {
            [
                BlockDim::Squeezed,
                BlockDim::Blocked(c),
                BlockDim::Blocked(bn),
            ]
        };
        let rows = |d: DType| {
            ArraySpec::new(d, ["p", "r", "n"]).blocked(block(BM), [grid(0), grid(1), grid(2)])
        };
        let stat = ArraySpec::new(stat, [Dim::sym("p"), Dim::sym("r"), Dim::Static(1)]).blocked(
            [
                BlockDim::Squeezed,
                BlockDim::Blocked(BM),
                BlockDim::Blocked(1),
            ],
            [grid(0), grid(1), 0.into()],
        );
        let partial = ArraySpec::new(DType::F32, [Dim::sym("p"), Dim::Static(1), Dim::sym("n")])
            .blocked(block(1), [grid(0), 0.into(), grid(2)]);
        let spec = CallSpec {
            grid: vec![
                GridAxis::parallel(Extent::cdiv("p", 1)),
                GridAxis::arbitrary(Extent::cdiv("r", BM)),
                GridAxis::arbitrary(Extent::cdiv("n", bn)),
            ],
            inputs: vec![
                rows(dtype),
                rows(dtype),
                stat.clone(),
                stat,
                rows::column_vector_by(DType::F32, bn),
            ],
            outputs: vec![rows(dtype), partial.clone(), partial],
            scratch: vec![ArraySpec::new(DType::F32, [1, bn]); 2],
            ..Default::default()
        };
        Ok(layer_norm_backward_row(&spec, dtype, BM, bn)?)
    })
}

/// The kernel adding up the one-pass kernel's partial sums into gradients of `param`.
pub fn sums_kernel(param: DType) -> Result<Prepared> {
    memo(("layer_norm_backward_sums", param), || {
        let partial =
            ArraySpec::new(DType::F32, ["p", "n"]).blocked([MAX_CHUNKS, BN], [0.into(), grid(0)]);
        let row = ArraySpec::new(param, [Dim::Static(1), Dim::sym("n")])
            .blocked([1, BN], [0.into(), grid(0)]);
        let spec = CallSpec {
            grid: vec![GridAxis::parallel(Extent::cdiv("n", BN))],
            inputs: vec![partial.clone(), partial],
            outputs: vec![row.clone(), row],
            ..Default::default()
        };
        Ok(column_sums(&spec, param)?)
    })
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
            k.push(row_kernel(dtype, stat, bn)?);
        }
        k.push(dwdb_kernel(dtype, stat, stat)?);
        k.push(sums_kernel(stat)?);
    }
    if dtype == DType::BF16 {
        k.push(crate::cast::kernel(DType::BF16, DType::F32)?); // bf16 weights
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
        Some(w) => crate::cast::to(w, DType::F32)?
            .reshape(&[1, n])
            .expect("same size"),
        None => HostArray::from_f64(DType::F32, &[1, n], &vec![1.0; n]),
    };
    let bn = rows::width(n);
    let reads = Reads::fitting(n, bn);
    let (dx, dw, db) = match (reads, chunks(m)) {
        (Reads::Once, Some(p)) => one_pass(&[g, x, mean, rstd], &w, p, bn, param)?,
        _ => two_kernels(&[g, x, mean, rstd], &w, bn, reads, param)?,
    };
    let params = |t: HostArray| t.reshape(&normalized).expect("same size");
    Ok(vec![
        layout::unflatten(dx, x.shape()),
        params(dw),
        params(db),
    ])
}

/// The gradients from `[g, x, mean, rstd]` and the `[1, n]` f32 weight in one pass over
/// `p` chunks of rows (see the module docs): `dx` as `[p, m/p, n]`, `dw` and `db` as `[1, n]`.
fn one_pass(
    arrays: &[&HostArray; 4],
    w: &HostArray,
    p: usize,
    bn: usize,
    param: DType,
) -> Result<(HostArray, HostArray, HostArray)> {
    let (x, n) = (arrays[1], w.shape()[1]);
    let r = x.shape().iter().product::<usize>() / n.max(1) / p;
    debug_assert_eq!(arrays[2].shape().iter().product::<usize>(), p * r);
    let chunked = |t: &HostArray, c: usize| t.clone().reshape(&[p, r, c]).expect("same size");
    let (g, x) = (chunked(arrays[0], n), chunked(x, n));
    let (mean, rstd) = (chunked(arrays[2], 1), chunked(arrays[3], 1));
    let mut outs = crate::launch::all(
        &row_kernel(x.dtype(), mean.dtype(), bn)?,
        &[&g, &x, &mean, &rstd, w],
    )?;
    let partial = |t: HostArray| t.reshape(&[p, n]).expect("same size");
    let (pb, pw) = (
        partial(outs.pop().expect("pb")),
        partial(outs.pop().expect("pw")),
    );
    let mut sums = crate::launch::all(&sums_kernel(param)?, &[&pw, &pb])?;
    let db = sums.pop().expect("db");
    Ok((outs.pop().expect("dx"), sums.pop().expect("dw"), db))
}

/// The gradients in two kernels (see the module docs): `dx` as `[m, n]`, `dw` and `db` as
/// `[1, n]`.
fn two_kernels(
    arrays: &[&HostArray; 4],
    w: &HostArray,
    bn: usize,
    reads: Reads,
    param: DType,
) -> Result<(HostArray, HostArray, HostArray)> {
    let n = w.shape()[1];
    let m = arrays[1].shape().iter().product::<usize>() / n.max(1);
    let rows_of = |t: &HostArray, c: usize| t.clone().reshape(&[m, c]).expect("same size");
    let (g, x) = (rows_of(arrays[0], n), rows_of(arrays[1], n));
    let (mean, rstd) = (rows_of(arrays[2], 1), rows_of(arrays[3], 1));
    let dx = crate::launch::one(
        &dx_kernel(x.dtype(), mean.dtype(), bn, reads)?,
        &[&g, &x, &mean, &rstd, w],
    )?;
    let mut dwdb = crate::launch::all(
        &dwdb_kernel(x.dtype(), mean.dtype(), param)?,
        &[&g, &x, &mean, &rstd],
    )?;
    let db = dwdb.pop().expect("db");
    Ok((dx, dwdb.pop().expect("dw"), db))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_divide_the_rows_into_whole_windows() {
        // At most MAX_CHUNKS, each at least a window of BM rows where there are enough rows.
        assert_eq!(chunks(4096), Some(16));
        assert_eq!(chunks(96), Some(6));
        assert_eq!(chunks(300), Some(15));
        assert_eq!(chunks(4098), Some(6));
        // Fewer rows than 4 windows: one chunk is little work.
        assert_eq!(chunks(5), Some(1));
        assert_eq!(chunks(37), Some(1));
        assert_eq!(chunks(0), Some(1));
        // A prime count of many rows would leave one thread all the work.
        assert_eq!(chunks(67), None);
        assert_eq!(chunks(4099), None);
        for m in 0..2000 {
            if let Some(p) = chunks(m) {
                assert!(p <= MAX_CHUNKS && m % p == 0, "{m} rows in {p} chunks");
            }
        }
    }
}
