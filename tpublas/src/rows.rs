//! Row-wise operators — softmax, log-softmax, layer norm, RMS norm, and sum/mean/amax over
//! dims — as kernels over a `[rows, n]` view in blocks of [`ROWS`] whole rows.
//!
//! `rows` is a symbol (one compiled kernel serves any number of rows); the row length `n` is
//! part of the kernel (one kernel per normalized size, as hidden sizes are few). Reducing over
//! dims other than the last ones permutes them last on the host first (a copy).

use crate::BlasError;
use crate::layout::rows_of;
use crate::promote::served;
use tpukit::dsl::{ArraySpec, DType, Dim, Extent, GridAxis, Kernel, grid};
use tpukit::prelude::*;

/// Rows per block.
pub const ROWS: usize = 8;

#[tpu_kernel]
fn softmax_rows(x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    let e = (v - v.reduce_max_keepdims(-1)).exp();
    o[..] = (e / e.sum_keepdims(-1)).cast(out);
}

#[tpu_kernel]
fn log_softmax_rows(x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    let s = v - v.reduce_max_keepdims(-1);
    o[..] = (s - s.exp().sum_keepdims(-1).log()).cast(out);
}

#[tpu_kernel]
fn layer_norm_rows(
    x: In,
    w: In,
    b: In,
    o: Out,
    mean_o: Out,
    rstd_o: Out,
    n: usize,
    eps: f32,
    out: DType,
) {
    let v = x[..].cast(f32);
    let mean = v.sum_keepdims(-1) / (n as f32);
    let d = v - mean;
    let rstd = ((d * d).sum_keepdims(-1) / (n as f32) + eps).rsqrt();
    o[..] = (d * rstd * w[..].cast(f32) + b[..].cast(f32)).cast(out);
    mean_o[..] = mean;
    rstd_o[..] = rstd;
}

#[tpu_kernel]
fn rms_norm_rows(x: In, w: In, o: Out, rstd_o: Out, n: usize, eps: f32, out: DType) {
    let v = x[..].cast(f32);
    let rstd = ((v * v).sum_keepdims(-1) / (n as f32) + eps).rsqrt();
    o[..] = (v * rstd * w[..].cast(f32)).cast(out);
    rstd_o[..] = rstd;
}

#[tpu_kernel]
fn sum_rows(x: In, o: Out, scale: f32, out: DType) {
    o[..] = (x[..].cast(f32).sum_keepdims(-1) * scale).cast(out);
}

#[tpu_kernel]
fn amax_rows(x: In, o: Out) {
    o[..] = x[..].reduce_max_keepdims(-1);
}

fn block(dtype: DType, n: usize) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::sym("rows"), Dim::Static(n)])
        .blocked([ROWS, n], [grid(0), 0.into()])
}

fn spec(inputs: Vec<ArraySpec>, outputs: Vec<ArraySpec>) -> CallSpec {
    CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("rows", ROWS))],
        inputs,
        outputs,
        ..Default::default()
    }
}

/// `_softmax` (or `_log_softmax`) over rows of `n` elements of `dtype`.
pub fn softmax_kernel(log: bool, dtype: DType, n: usize) -> Result<Kernel, BlasError> {
    let s = spec(vec![block(dtype, n)], vec![block(dtype, n)]);
    Ok(if log {
        log_softmax_rows(&s, dtype)?
    } else {
        softmax_rows(&s, dtype)?
    })
}

/// Layer norm over rows of `n`; outputs the result, then f32 mean and rstd per row.
pub fn layer_norm_kernel(
    dtype: DType,
    n: usize,
    eps: f64,
    w: DType,
    b: DType,
) -> Result<Kernel, BlasError> {
    let stat = || block(DType::F32, 1);
    let s = spec(
        vec![
            block(dtype, n),
            ArraySpec::new(w, [n]),
            ArraySpec::new(b, [n]),
        ],
        vec![block(dtype, n), stat(), stat()],
    );
    Ok(layer_norm_rows(&s, n, eps as f32, dtype)?)
}

/// RMS norm over rows of `n`; outputs the result, then f32 rstd per row.
pub fn rms_norm_kernel(dtype: DType, n: usize, eps: f64, w: DType) -> Result<Kernel, BlasError> {
    let s = spec(
        vec![block(dtype, n), ArraySpec::new(w, [n])],
        vec![block(dtype, n), block(DType::F32, 1)],
    );
    Ok(rms_norm_rows(&s, n, eps as f32, dtype)?)
}

/// `r` over rows of `n` elements of `dtype`, one result per row.
pub fn reduce_kernel(r: Reduction, dtype: DType, n: usize) -> Result<Kernel, BlasError> {
    let s = spec(vec![block(dtype, n)], vec![block(dtype, 1)]);
    Ok(match r {
        Reduction::Sum => sum_rows(&s, 1.0, dtype)?,
        Reduction::Mean => sum_rows(&s, 1.0 / n as f32, dtype)?,
        Reduction::Amax => amax_rows(&s)?,
    })
}

fn check(op: &str, x: &HostArray) -> Result<(), BlasError> {
    if !served(x.dtype()) {
        return Err(BlasError::new(
            op,
            format!("tpuBLAS serves f32 and bf16 tensors, got {}", x.dtype()),
        ));
    }
    if x.shape().is_empty() {
        return Err(BlasError::new(op, "needs a tensor of rank >= 1"));
    }
    Ok(())
}

/// `dim` as an axis of a rank-`rank` tensor (negative counts from the end).
fn axis(op: &str, dim: i64, rank: usize) -> Result<usize, BlasError> {
    let d = if dim < 0 { dim + rank as i64 } else { dim };
    if d < 0 || d as usize >= rank {
        return Err(BlasError::new(
            op,
            format!("dim {dim} is out of range for rank {rank}"),
        ));
    }
    Ok(d as usize)
}

/// `x` with axis `d` moved last, and the permutation that undoes it.
fn move_last(x: &HostArray, d: usize) -> (HostArray, Vec<usize>) {
    let rank = x.shape().len();
    let mut perm: Vec<usize> = (0..rank).filter(|&a| a != d).collect();
    perm.push(d);
    let mut inverse = vec![0; rank];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p] = i;
    }
    if d == rank - 1 {
        (x.clone(), inverse)
    } else {
        (x.permuted(&perm), inverse)
    }
}

/// `_softmax(x, dim, half_to_float=False)` and `_log_softmax`.
fn softmax_like(op: &str, log: bool, x: &HostArray, dim: i64) -> Result<HostArray, BlasError> {
    check(op, x)?;
    let d = axis(op, dim, x.shape().len())?;
    let (moved, inverse) = move_last(x, d);
    let (rows, n) = rows_of(moved.shape());
    let dtype = x.dtype();
    let s = spec(vec![block(dtype, n)], vec![block(dtype, n)]);
    let k = if log {
        log_softmax_rows(&s, dtype)?
    } else {
        softmax_rows(&s, dtype)?
    };
    let flat = moved.clone().reshape(&[rows, n]).expect("same size");
    let out = launch(&k, Device::Cpu, &[&flat])?.remove(0);
    let out = out.reshape(moved.shape()).expect("same size");
    Ok(if d == x.shape().len() - 1 {
        out
    } else {
        out.permuted(&inverse)
    })
}

/// `aten._softmax(x, dim, False)`.
pub fn softmax(x: &HostArray, dim: i64) -> Result<HostArray, BlasError> {
    softmax_like("aten._softmax.default", false, x, dim)
}

/// `aten._log_softmax(x, dim, False)`.
pub fn log_softmax(x: &HostArray, dim: i64) -> Result<HostArray, BlasError> {
    softmax_like("aten._log_softmax.default", true, x, dim)
}

/// The weight (or bias) of a norm over `n` trailing elements: given, or all `fill`.
fn affine(op: &str, p: Option<&HostArray>, n: usize, fill: f64) -> Result<HostArray, BlasError> {
    match p {
        None => Ok(HostArray::from_f64(DType::F32, &[n], &vec![fill; n])),
        Some(p) if p.shape().iter().product::<usize>() == n && served(p.dtype()) => {
            Ok(p.clone().reshape(&[n]).expect("same size"))
        }
        Some(p) => Err(BlasError::new(
            op,
            format!(
                "weight/bias of shape {:?} {} does not match {n} normalized elements",
                p.shape(),
                p.dtype()
            ),
        )),
    }
}

/// The rows × n view of `x` normalized over its last `normalized` dims.
fn norm_view(op: &str, x: &HostArray, normalized: &[usize]) -> Result<(usize, usize), BlasError> {
    check(op, x)?;
    let s = x.shape();
    if normalized.is_empty()
        || normalized.len() > s.len()
        || s[s.len() - normalized.len()..] != *normalized
    {
        return Err(BlasError::new(
            op,
            format!("normalized_shape {normalized:?} is not a suffix of {s:?}"),
        ));
    }
    let n: usize = normalized.iter().product();
    Ok((s.iter().product::<usize>() / n.max(1), n))
}

/// `aten.native_layer_norm(x, normalized_shape, weight, bias, eps)` → `(out, mean, rstd)`;
/// `mean` and `rstd` are f32 with the normalized dims kept as size 1 (ATen's shapes).
pub fn native_layer_norm(
    x: &HostArray,
    normalized: &[usize],
    weight: Option<&HostArray>,
    bias: Option<&HostArray>,
    eps: f64,
) -> Result<(HostArray, HostArray, HostArray), BlasError> {
    let op = "aten.native_layer_norm.default";
    let (rows, n) = norm_view(op, x, normalized)?;
    let (w, b) = (affine(op, weight, n, 1.0)?, affine(op, bias, n, 0.0)?);
    let dtype = x.dtype();
    let stat = || block(DType::F32, 1);
    let s = spec(
        vec![
            block(dtype, n),
            ArraySpec::new(w.dtype(), [n]),
            ArraySpec::new(b.dtype(), [n]),
        ],
        vec![block(dtype, n), stat(), stat()],
    );
    let k = layer_norm_rows(&s, n, eps as f32, dtype)?;
    let flat = x.clone().reshape(&[rows, n]).expect("same size");
    let mut outs = launch(&k, Device::Cpu, &[&flat, &w, &b])?;
    let stat_shape = kept_shape(x.shape(), normalized.len());
    let rstd = outs
        .pop()
        .expect("rstd")
        .reshape(&stat_shape)
        .expect("same size");
    let mean = outs
        .pop()
        .expect("mean")
        .reshape(&stat_shape)
        .expect("same size");
    let out = outs
        .pop()
        .expect("out")
        .reshape(x.shape())
        .expect("same size");
    Ok((out, mean, rstd))
}

/// `aten._fused_rms_norm(x, normalized_shape, weight, eps)` → `(out, rstd)`.
pub fn fused_rms_norm(
    x: &HostArray,
    normalized: &[usize],
    weight: Option<&HostArray>,
    eps: f64,
) -> Result<(HostArray, HostArray), BlasError> {
    let op = "aten._fused_rms_norm.default";
    let (rows, n) = norm_view(op, x, normalized)?;
    let w = affine(op, weight, n, 1.0)?;
    let k = rms_norm_kernel(x.dtype(), n, eps, w.dtype())?;
    let flat = x.clone().reshape(&[rows, n]).expect("same size");
    let mut outs = launch(&k, Device::Cpu, &[&flat, &w])?;
    let rstd = outs
        .pop()
        .expect("rstd")
        .reshape(&kept_shape(x.shape(), normalized.len()))
        .expect("same size");
    let out = outs
        .pop()
        .expect("out")
        .reshape(x.shape())
        .expect("same size");
    Ok((out, rstd))
}

/// `shape` with its last `k` dims set to 1.
fn kept_shape(shape: &[usize], k: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    let r = s.len();
    for d in &mut s[r - k..] {
        *d = 1;
    }
    s
}

/// How [`reduce`] combines.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// `aten.sum.dim_IntList`
    Sum,
    /// `aten.mean.dim`
    Mean,
    /// `aten.amax.default`
    Amax,
}

impl Reduction {
    pub fn aten(self) -> &'static str {
        match self {
            Reduction::Sum => "aten.sum.dim_IntList",
            Reduction::Mean => "aten.mean.dim",
            Reduction::Amax => "aten.amax.default",
        }
    }
}

/// `sum/mean/amax(x, dims, keepdim)`: the reduced dims are moved last (a host copy unless
/// they already are) and reduced by one row-wise kernel, accumulating in f32.
pub fn reduce(
    r: Reduction,
    x: &HostArray,
    dims: &[i64],
    keepdim: bool,
) -> Result<HostArray, BlasError> {
    let op = r.aten();
    check(op, x)?;
    let rank = x.shape().len();
    let mut axes: Vec<usize> = dims
        .iter()
        .map(|&d| axis(op, d, rank))
        .collect::<Result<_, _>>()?;
    if axes.is_empty() {
        axes = (0..rank).collect(); // ATen: an empty dim list reduces everything.
    }
    axes.sort_unstable();
    axes.dedup();
    let kept: Vec<usize> = (0..rank).filter(|a| !axes.contains(a)).collect();
    let perm: Vec<usize> = kept.iter().chain(&axes).copied().collect();
    let moved = if perm.iter().enumerate().all(|(i, &p)| i == p) {
        x.clone()
    } else {
        x.permuted(&perm)
    };
    let n: usize = axes.iter().map(|&a| x.shape()[a]).product();
    let rows: usize = kept.iter().map(|&a| x.shape()[a]).product();
    let k = reduce_kernel(r, x.dtype(), n)?;
    let flat = moved.reshape(&[rows, n]).expect("same size");
    let out = launch(&k, Device::Cpu, &[&flat])?.remove(0);
    let shape: Vec<usize> = if keepdim {
        (0..rank)
            .map(|a| if axes.contains(&a) { 1 } else { x.shape()[a] })
            .collect()
    } else {
        kept.iter().map(|&a| x.shape()[a]).collect()
    };
    Ok(out.reshape(&shape).expect("same size"))
}
