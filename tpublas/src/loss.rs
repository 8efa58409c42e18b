//! The negative log-likelihood loss (`nll_loss_forward`, `nll_loss_backward`): what
//! `cross_entropy` runs after `_log_softmax`, on `[N, C]` log-probabilities (or `[C]` with a
//! 0-d target) and class targets, `reduction` none (0), mean (1) or sum (2), `ignore_index`
//! rows contributing nothing. `weight` (per-class weights) is not served: a clear error.
//!
//! Both are row kernels over `[N, C]` (see [`crate::rows`]) taking the target as an int32
//! column `[N, 1]`: the forward picks `−x[i, t_i]` per row (a masked row sum, so nothing
//! else of the row is read into the result, NaNs included), the backward writes `−g_i` at
//! column `t_i` and 0 elsewhere. The host checks every target (`0 ≤ t < C` or
//! `ignore_index`, else a [`ErrorKind::Bounds`] error as ATen's "Target is out of bounds"),
//! maps ignored rows to −1 (which matches no column) and counts the others: that count is
//! `total_weight`. The per-row losses are summed by [`Reduction::Sum`]'s kernel and, for
//! `mean`, divided by `total_weight` by the scalar `div` kernel, all in f32.

use crate::elementwise::{Binary, binary_scalar};
use crate::launch::{Prepared, memo};
use crate::promote;
use crate::reduction::Reduction;
use crate::rows::{self, BM, BN};
use crate::value::{Args, Value};
use crate::{BlasError, Result};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{CallSpec, DType, Dim, Extent, GridAxis, Kernel, grid};
use tpukit::prelude::*;

/// `o[i] = −Σ_j [j = t_i]·x[i, j]`, accumulated over column blocks (overhangs read 0).
#[tpu_kernel]
fn nll_rows(x: In, t: In, o: Out, s: Scratch) {
    if program_id(2) == 0 {
        s[..] = 0.0;
    }
    let col = iota(i32, [16, 512], 1) + program_id(2) * 512;
    s[..] += where_(col == t[..], x[..].cast(f32), 0.0).sum_keepdims(-1);
    if program_id(2) == num_programs(2) - 1 {
        o[..] = -s[..];
    }
}

/// `o[i, j] = [j = t_i]·g_i` (`g` the per-row gradient, already negated).
#[tpu_kernel]
fn nll_backward_rows(t: In, g: In, o: Out, out: DType) {
    let col = iota(i32, [16, 512], 1) + program_id(1) * 512;
    o[..] = where_(col == t[..], g[..], 0.0).cast(out);
}

const _: () = assert!(BM == 16 && BN == 512);

/// The int32 target column `[m, 1]`.
fn target_column() -> ArraySpec {
    rows::stat(DType::I32)
}

fn forward_kernel(dtype: DType) -> Result<Prepared> {
    memo(("nll_loss_forward", dtype), || {
        let spec = CallSpec {
            grid: rows::phased_grid(1),
            inputs: vec![rows::input(dtype, 0.0), target_column()],
            outputs: vec![rows::stat(DType::F32)],
            scratch: vec![rows::acc()],
            ..Default::default()
        };
        Ok(nll_rows(&spec)?)
    })
}

fn backward_kernel(dtype: DType) -> Result<Prepared> {
    memo(("nll_loss_backward", dtype), || Ok(build_backward(dtype)?))
}

fn build_backward(dtype: DType) -> tpukit::dsl::Result<Kernel> {
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", BM)),
            GridAxis::parallel(Extent::cdiv("n", BN)),
        ],
        inputs: vec![target_column(), rows::stat(DType::F32)],
        outputs: vec![
            ArraySpec::new(dtype, [Dim::sym("m"), Dim::sym("n")])
                .blocked([BM, BN], [grid(0), grid(1)]),
        ],
        ..Default::default()
    };
    nll_backward_rows(&spec, dtype)
}

/// Every kernel of the forward for inputs of `dtype`: the row kernel and the row sum.
pub fn forward_kernels(dtype: DType) -> Result<Vec<Prepared>> {
    Ok(vec![
        forward_kernel(dtype)?,
        Reduction::Sum.kernel(DType::F32, DType::F32)?,
        crate::elementwise::binary_kernel(Binary::Div, DType::F32, crate::layout::Pattern::Scalar)?,
    ])
}

/// Every kernel of the backward for inputs of `dtype`.
pub fn backward_kernels(dtype: DType) -> Result<Vec<Prepared>> {
    Ok(vec![backward_kernel(dtype)?])
}

/// `reduction`: ATen's enum.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Reduce {
    None,
    Mean,
    Sum,
}

/// The checked arguments both directions share.
struct Problem {
    /// `[N, C]` (a `[C]` input as one row).
    x: HostArray,
    /// Int32 `[N, 1]`, ignored rows −1.
    target: HostArray,
    /// Rows not ignored.
    count: usize,
    reduce: Reduce,
    /// Whether the input was 1-D (`reduction='none'` then gives a 0-d result).
    one_row: bool,
}

/// Reads `self, target, weight, reduction, ignore_index` from argument `first` on.
fn problem(a: &Args, first: usize) -> Result<Problem> {
    let x = a.tensor(first)?;
    promote::check(a.op, x)?;
    let t = a.tensor(first + 1)?;
    if a.opt_tensor(first + 2)?.is_some() {
        return Err(a
            .err("per-class `weight` is not served (weight=None only)")
            .with_kind(ErrorKind::Unsupported));
    }
    let reduce = match a.int(first + 3)? {
        0 => Reduce::None,
        1 => Reduce::Mean,
        2 => Reduce::Sum,
        r => return Err(a.err(format!("unknown reduction {r} (0 none, 1 mean, 2 sum)"))),
    };
    let ignore = a.int(first + 4)?;
    let (n, c, one_row) = match (x.shape(), t.shape()) {
        ([c], []) => (1, *c, true),
        ([n, c], [m]) if n == m => (*n, *c, false),
        (xs, ts) => {
            return Err(a
                .err(format!(
                    "expects input [N, C] with target [N] (or [C] with a 0-d target), got {xs:?} and {ts:?}"
                ))
                .with_kind(ErrorKind::Shape));
        }
    };
    if !matches!(t.dtype(), DType::I32) {
        return Err(a
            .err(format!(
                "the target must be an integer tensor, got {}",
                t.dtype()
            ))
            .with_kind(ErrorKind::DType));
    }
    let mut count = 0;
    let mut column = Vec::with_capacity(n);
    for v in t.to_f64_vec() {
        let v = v as i64;
        if v == ignore {
            column.push(-1.0);
        } else if v < 0 || v as usize >= c {
            return Err(a
                .err(format!("Target {v} is out of bounds (classes: {c})"))
                .with_kind(ErrorKind::Bounds));
        } else {
            count += 1;
            column.push(v as f64);
        }
    }
    Ok(Problem {
        x: x.clone().reshape(&[n, c]).expect("same size"),
        target: HostArray::from_f64(DType::I32, &[n, 1], &column),
        count,
        reduce,
        one_row,
    })
}

/// `nll_loss_forward(self, target, weight, reduction, ignore_index) -> (output, total_weight)`.
pub fn forward(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new("aten.nll_loss_forward.default", args);
    let p = problem(&a, 0)?;
    let dtype = p.x.dtype();
    let rows = crate::launch::one(&forward_kernel(dtype)?, &[&p.x, &p.target])?;
    let n = rows.shape()[0];
    // ATen leaves total_weight 0 for reduction=none on a batch (not on one row).
    let counted = if p.reduce == Reduce::None && !p.one_row {
        0
    } else {
        p.count
    };
    let total = HostArray::from_f64(dtype, &[], &[counted as f64]);
    let output = match p.reduce {
        Reduce::None => {
            let shape: &[usize] = if p.one_row { &[] } else { &[n] };
            promote::to(&rows, dtype).reshape(shape).expect("same size")
        }
        Reduce::Sum | Reduce::Mean => {
            let flat = rows.reshape(&[1, n]).expect("same size");
            let sum = Reduction::Sum.kernel(DType::F32, DType::F32)?;
            let s = crate::launch::one(&sum, &[&flat])?;
            let s = if p.reduce == Reduce::Mean {
                binary_scalar(
                    Binary::Div,
                    &s.reshape(&[1]).expect("one"),
                    p.count as f64,
                    1.0,
                )?
            } else {
                s
            };
            promote::to(&s, dtype).reshape(&[]).expect("one element")
        }
    };
    Ok(vec![output, total])
}

/// `nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index,
/// total_weight) -> grad_input`.
pub fn backward(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new("aten.nll_loss_backward.default", args);
    let g = a.tensor(0)?;
    let p = problem(&a, 1)?;
    let total = a.tensor(6)?;
    let n = p.x.shape()[0];
    let per_row: Vec<f64> = match p.reduce {
        Reduce::None => {
            if g.shape().iter().product::<usize>() != n {
                return Err(a
                    .err(format!(
                        "grad_output {:?} does not match {n} rows",
                        g.shape()
                    ))
                    .with_kind(ErrorKind::Shape));
            }
            g.to_f64_vec().iter().map(|v| -v).collect()
        }
        Reduce::Sum | Reduce::Mean => {
            let one = |t: &HostArray, what: &str| match t.to_f64_vec().as_slice() {
                [v] => Ok(*v),
                _ => Err(a
                    .err(format!("{what} must have one element, got {:?}", t.shape()))
                    .with_kind(ErrorKind::Shape)),
            };
            let gv = one(g, "grad_output")? as f32;
            let scale = if p.reduce == Reduce::Mean {
                gv / one(total, "total_weight")? as f32
            } else {
                gv
            };
            vec![-f64::from(scale); n]
        }
    };
    let g_rows = HostArray::from_f64(DType::F32, &[n, 1], &per_row);
    let mut out = HostArray::try_zeros(p.x.dtype(), p.x.shape(), "grad_input")
        .map_err(|e| BlasError::new(a.op, e.message).with_kind(e.kind))?;
    crate::launch::into(
        &backward_kernel(p.x.dtype())?,
        &[&p.target, &g_rows],
        std::slice::from_mut(&mut out),
    )?;
    let shape = if p.one_row {
        vec![p.x.shape()[1]]
    } else {
        p.x.shape().to_vec()
    };
    Ok(vec![out.reshape(&shape).expect("same size")])
}
