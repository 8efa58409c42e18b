//! Batch normalisation (`native_batch_norm`, `_native_batch_norm_legit_functional`,
//! `native_batch_norm_backward`) with channels as rows: `[N, C, *]` is permuted to
//! `[C, N·S]` (`S` the spatial size), and the row kernels of the layer norm serve it with a
//! weight and bias per row ([`Weights::PerRow`]):
//! - training forward: [`Norm::Layer`]'s kernel (one-pass Chan statistics in f32) gives the
//!   output, the batch mean and `invstd`; the running statistics are then updated as ATen
//!   does, `r ← (1 − momentum)·r + momentum·s`, with the *unbiased* variance for
//!   `running_var`. The variance is recovered from `invstd` as `invstd⁻² − eps` (relative
//!   error about `1e-7·(1 + eps/var)`);
//! - eval forward: `x·scale + shift` per channel, `scale = w·(running_var + eps)^-½`,
//!   `shift = b − running_mean·scale` (pointwise kernels; the `[C]` vectors are computed by
//!   tpuBLAS's pointwise kernels too);
//! - backward: the layer norm's input-gradient kernel with a weight per row (training; in
//!   eval the input gradient is `g·scale`), and `batch_norm_dwdb` for `Σ g·x̂` and `Σ g`
//!   per channel.
//!
//! `native_batch_norm` updates its running statistics in place in ATen; tpuBLAS's operators
//! return new arrays, so that overload refuses to train with running statistics and
//! `_native_batch_norm_legit_functional` (ATen's functional form) returns the updated ones
//! (`tpublas.mode()` writes them back for `native_batch_norm`).
//!
//! Statistics have ATen's dtypes: the input's, or f32 for a bf16 input with f32 parameters.

use crate::Result;
use crate::elementwise::{self, Binary, Unary};
use crate::launch::{Prepared, memo};
use crate::norm::Norm;
use crate::norm_backward;
use crate::rows::{self, Weights};
use crate::value::{Args, Value};
use crate::{copy, layout, promote};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{CallSpec, DType, Kernel};
use tpukit::prelude::*;

pub const ATEN: &str = "aten.native_batch_norm.default";
pub const ATEN_FUNCTIONAL: &str = "aten._native_batch_norm_legit_functional.default";
pub const ATEN_BACKWARD: &str = "aten.native_batch_norm_backward.default";

/// Per row: `dw = Σ g·x̂`, `db = Σ g` (`x̂ = (x − mean)·rstd`); overhanging columns read 0
/// in `g`, so they add nothing.
#[tpu_kernel]
fn batch_norm_dwdb(
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
    if program_id(2) == 0 {
        sw[..] = 0.0;
        sb[..] = 0.0;
    }
    let gv = g[..].cast(f32);
    let xhat = (x[..].cast(f32) - mean[..].cast(f32)) * rstd[..].cast(f32);
    sw[..] += (gv * xhat).sum_keepdims(-1);
    sb[..] += gv.sum_keepdims(-1);
    if program_id(2) == num_programs(2) - 1 {
        dw[..] = sw[..].cast(out);
        db[..] = sb[..].cast(out);
    }
}

pub fn dwdb_kernel(dtype: DType, stat: DType, param: DType) -> Result<Prepared> {
    memo(("batch_norm_dwdb", dtype, stat, param), || {
        Ok(build_dwdb(dtype, stat, param)?)
    })
}

fn build_dwdb(dtype: DType, stat: DType, param: DType) -> tpukit::dsl::Result<Kernel> {
    let spec = CallSpec {
        grid: rows::phased_grid(1),
        inputs: vec![
            rows::input(dtype, 0.0),
            rows::input(dtype, 0.0),
            rows::stat(stat),
            rows::stat(stat),
        ],
        outputs: vec![rows::stat(param), rows::stat(param)],
        scratch: vec![rows::acc(), rows::acc()],
        ..Default::default()
    };
    batch_norm_dwdb(&spec, param)
}

/// The (input, statistics, parameter) dtype combinations: all of one dtype, and for bf16
/// inputs also f32 statistics and parameters (a bf16 input through an f32 module).
fn combinations(dtype: DType) -> Vec<(DType, DType)> {
    let mut c = vec![(dtype, dtype)];
    if dtype == DType::BF16 {
        c.push((DType::F32, DType::F32));
    }
    c
}

/// Every kernel the forward launches on inputs of `dtype`.
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let mut k = copy::kernels(dtype)?;
    for (stat, param) in combinations(dtype) {
        k.push(Norm::Layer.kernel_by(dtype, stat, Weights::PerRow)?);
        for d in [stat, param] {
            k.extend(elementwise_kernels(d)?);
        }
    }
    k.extend(Binary::Mul.kernels(dtype)?);
    k.extend(Binary::Add.kernels(dtype)?);
    Ok(k)
}

/// The pointwise kernels run on the `[C]` statistics and parameters of `dtype`.
fn elementwise_kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let mut k = Vec::new();
    for b in [Binary::Add, Binary::Sub, Binary::Mul, Binary::Pow] {
        k.extend(b.kernels(dtype)?);
        k.extend(b.scalar_kernels(dtype)?);
    }
    k.extend(Unary::Rsqrt.kernels(dtype)?);
    k.extend(Unary::Neg.kernels(dtype)?);
    Ok(k)
}

pub fn backward_kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let mut k = copy::kernels(dtype)?;
    for (stat, param) in combinations(dtype) {
        k.push(norm_backward::dx_kernel_by(dtype, stat, Weights::PerRow)?);
        k.push(dwdb_kernel(dtype, stat, param)?);
        for d in [stat, param] {
            k.extend(elementwise_kernels(d)?);
        }
    }
    k.extend(Binary::Mul.kernels(dtype)?);
    Ok(k)
}

/// The input `[N, C, *]` and its channels-as-rows view.
struct Channels {
    shape: Vec<usize>,
    n: usize,
    c: usize,
    s: usize,
}

impl Channels {
    fn new(a: &Args, x: &HostArray) -> Result<Channels> {
        let shape = x.shape().to_vec();
        if shape.len() < 2 {
            return Err(a
                .err(format!(
                    "expected an input of at least 2 dims, got {shape:?}"
                ))
                .with_kind(ErrorKind::Shape));
        }
        let (n, c) = (shape[0], shape[1]);
        let s = shape[2..].iter().product();
        Ok(Channels { shape, n, c, s })
    }

    /// `[C, N·S]` rows of `x`.
    fn rows(&self, x: &HostArray) -> Result<HostArray> {
        let t = x
            .clone()
            .reshape(&[self.n, self.c, self.s])
            .expect("same size");
        let t = copy::permute(&t, &[1, 0, 2])?;
        Ok(t.reshape(&[self.c, self.n * self.s]).expect("same size"))
    }

    /// `[C, N·S]` rows back as `[N, C, *]`.
    fn unrows(&self, rows: HostArray) -> Result<HostArray> {
        let t = rows.reshape(&[self.c, self.n, self.s]).expect("same size");
        let t = copy::permute(&t, &[1, 0, 2])?;
        Ok(t.reshape(&self.shape).expect("same size"))
    }

    /// A `[C]` vector as an f32 `[C, 1]` column, or `fill` everywhere.
    fn column(&self, v: Option<&HostArray>, fill: f64) -> HostArray {
        match v {
            Some(v) => promote::to(v, DType::F32)
                .reshape(&[self.c, 1])
                .expect("same size"),
            None => HostArray::from_f64(DType::F32, &[self.c, 1], &vec![fill; self.c]),
        }
    }

    /// A `[C]` vector broadcast to `[N, C, 1]` (small: one value per image and channel), so
    /// `x` viewed as `[N, C, S]` meets it as the pointwise kernels' `[m, 1]` column.
    fn per_image(&self, op: &str, v: &HostArray) -> Result<HostArray> {
        let v = v.clone().reshape(&[1, self.c, 1]).expect("same size");
        Ok(layout::expand(op, &v, &[self.n, self.c, 1])?.expect("broadcasts"))
    }

    /// `x·scale + shift` per channel (eval forward, and eval input gradients without shift).
    fn affine(
        &self,
        op: &str,
        x: &HostArray,
        scale: &HostArray,
        shift: Option<&HostArray>,
    ) -> Result<HostArray> {
        let x3 = x
            .clone()
            .reshape(&[self.n, self.c, self.s])
            .expect("same size");
        let mut y = elementwise::binary(Binary::Mul, &x3, &self.per_image(op, scale)?, 1.0)?;
        if let Some(shift) = shift {
            y = elementwise::binary(Binary::Add, &y, &self.per_image(op, shift)?, 1.0)?;
        }
        Ok(promote::to(&y, x.dtype())
            .reshape(&self.shape)
            .expect("same size"))
    }
}

/// The optional `[C]` parameters and statistics, checked: each of `c` elements and a
/// dtype tpuBLAS serves.
fn vectors<'a>(
    a: &Args<'a>,
    first: usize,
    count: usize,
    c: usize,
) -> Result<Vec<Option<&'a HostArray>>> {
    (first..first + count)
        .map(|i| {
            let v = a.opt_tensor(i)?;
            if let Some(v) = v {
                promote::check(a.op, v)?;
                if v.shape().iter().product::<usize>() != c || v.shape().len() != 1 {
                    return Err(a
                        .err(format!(
                            "argument {i} must have shape [{c}], got {:?}",
                            v.shape()
                        ))
                        .with_kind(ErrorKind::Shape));
                }
            }
            Ok(v)
        })
        .collect()
}

/// `(running_var + eps)^-½` in the running variance's dtype.
fn eval_rstd(rv: &HostArray, eps: f64) -> Result<HostArray> {
    let v = elementwise::binary_scalar(Binary::Add, rv, eps, 1.0)?;
    elementwise::unary(Unary::Rsqrt, &v)
}

/// The forward: `(out, save_mean, save_invstd, running_mean', running_var')`, the last two
/// absent unless training with running statistics.
fn forward(a: &Args) -> Result<Vec<HostArray>> {
    let x = a.tensor(0)?;
    promote::check(a.op, x)?;
    let ch = Channels::new(a, x)?;
    let v = vectors(a, 1, 4, ch.c)?;
    let (w, b, rm, rv) = (v[0], v[1], v[2], v[3]);
    let training = a.bool_or(5, true)?;
    let (momentum, eps) = (a.scalar_or(6, 0.1)?, a.scalar_or(7, 1e-5)?);
    let param = w.or(rm).map_or(x.dtype(), HostArray::dtype);
    let stat = if x.dtype() == DType::BF16 && param == DType::F32 {
        DType::F32
    } else {
        x.dtype()
    };
    if !training {
        let (Some(rm), Some(rv)) = (rm, rv) else {
            return Err(a.err("running_mean and running_var are needed in eval mode"));
        };
        let rstd = eval_rstd(rv, eps)?;
        let ones = HostArray::from_f64(rv.dtype(), &[ch.c], &vec![1.0; ch.c]);
        let scale = elementwise::binary(Binary::Mul, w.unwrap_or(&ones), &rstd, 1.0)?;
        let shift = elementwise::binary(Binary::Mul, rm, &scale, 1.0)?;
        let shift = match b {
            Some(b) => elementwise::binary(Binary::Sub, b, &shift, 1.0)?,
            None => elementwise::unary(Unary::Neg, &shift)?,
        };
        let out = ch.affine(a.op, x, &scale, Some(&shift))?;
        let empty = HostArray::zeros(stat, &[0]);
        return Ok(vec![out, empty.clone(), empty]);
    }
    let m = ch.n * ch.s;
    let kernel = Norm::Layer.kernel_by(x.dtype(), stat, Weights::PerRow)?;
    let (wc, bc) = (ch.column(w, 1.0), ch.column(b, 0.0));
    let eps_operand = layout::scalar_operand(eps, 2);
    let rows_x = ch.rows(x)?;
    let mut outs = crate::launch::all(&kernel, &[&rows_x, &wc, &bc, &eps_operand])?;
    let rstd = outs
        .pop()
        .expect("rstd")
        .reshape(&[ch.c])
        .expect("same size");
    let mean = outs
        .pop()
        .expect("mean")
        .reshape(&[ch.c])
        .expect("same size");
    let out = ch.unrows(outs.pop().expect("out"))?;
    let mut result = vec![out, mean.clone(), rstd.clone()];
    if let (Some(rm), Some(rv)) = (rm, rv) {
        let var = elementwise::binary_scalar(Binary::Pow, &rstd, -2.0, 1.0)?;
        let var = elementwise::binary_scalar(Binary::Sub, &var, eps, 1.0)?;
        let unbiased = m as f64 / (m as f64 - 1.0);
        let update = |r: &HostArray, s: &HostArray, factor: f64| -> Result<HostArray> {
            let kept = elementwise::binary_scalar(Binary::Mul, r, 1.0 - momentum, 1.0)?;
            let s = promote::to(s, r.dtype());
            let next = elementwise::binary(Binary::Add, &kept, &s, momentum * factor)?;
            Ok(promote::to(&next, r.dtype()))
        };
        result.push(update(rm, &mean, 1.0)?);
        result.push(update(rv, &var, unbiased)?);
    }
    Ok(result)
}

/// `native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training,
/// momentum, eps)` → `(out, save_mean, save_invstd)` (empty statistics in eval, as ATen's).
/// Training with running statistics is refused: ATen updates them in place, which a
/// tpuBLAS operator cannot; `_native_batch_norm_legit_functional` returns them.
pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN, args);
    if a.bool_or(5, true)? && (a.opt_tensor(3)?.is_some() || a.opt_tensor(4)?.is_some()) {
        return Err(a
            .err(
                "training with running statistics updates them in place, which tpuBLAS \
                 operators do not do: call _native_batch_norm_legit_functional, which returns \
                 the updated statistics (tpublas.mode() does this for you)",
            )
            .with_kind(ErrorKind::Unsupported));
    }
    let mut out = forward(&a)?;
    out.truncate(3);
    Ok(out)
}

/// `_native_batch_norm_legit_functional(input, weight?, bias?, running_mean, running_var,
/// training, momentum, eps)` → `(out, save_mean, save_invstd, running_mean',
/// running_var')` (the running statistics returned unchanged in eval).
pub fn run_functional(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN_FUNCTIONAL, args);
    let (rm, rv) = (a.tensor(3)?.clone(), a.tensor(4)?.clone());
    let mut out = forward(&a)?;
    if out.len() == 3 {
        out.extend([rm, rv]);
    }
    Ok(out)
}

/// `native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?,
/// save_mean?, save_invstd?, train, eps, output_mask)` → `(grad_input, grad_weight,
/// grad_bias)`, all three computed (the Python frontend drops the masked ones).
pub fn run_backward(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN_BACKWARD, args);
    let (g, x) = (a.tensor(0)?, a.tensor(1)?);
    promote::check(a.op, g)?;
    promote::check(a.op, x)?;
    if g.shape() != x.shape() || g.dtype() != x.dtype() {
        return Err(a
            .err("grad_out and input must have one shape and dtype")
            .with_kind(ErrorKind::Shape));
    }
    let ch = Channels::new(&a, x)?;
    let v = vectors(&a, 2, 5, ch.c)?;
    let (w, rm, rv, save_mean, save_rstd) = (v[0], v[1], v[2], v[3], v[4]);
    let train = a.bool_or(7, true)?;
    let eps = a.scalar_or(8, 1e-5)?;
    let (mean, rstd) = if train {
        match (save_mean, save_rstd) {
            (Some(m), Some(r)) => (m.clone(), r.clone()),
            _ => return Err(a.err("save_mean and save_invstd are needed in training mode")),
        }
    } else {
        match (rm, rv) {
            (Some(m), Some(v)) => (m.clone(), eval_rstd(v, eps)?),
            _ => return Err(a.err("running_mean and running_var are needed in eval mode")),
        }
    };
    let stat = mean.dtype();
    let param = w.map_or(stat, HostArray::dtype);
    let column = |t: &HostArray| t.clone().reshape(&[ch.c, 1]).expect("same size");
    let (mean_c, rstd_c) = (column(&mean), column(&promote::to(&rstd, stat)));
    let (rows_g, rows_x) = (ch.rows(g)?, ch.rows(x)?);
    let gx = if train {
        let k = norm_backward::dx_kernel_by(x.dtype(), stat, Weights::PerRow)?;
        let wc = ch.column(w, 1.0);
        ch.unrows(crate::launch::one(
            &k,
            &[&rows_g, &rows_x, &mean_c, &rstd_c, &wc],
        )?)?
    } else {
        let scale = match w {
            Some(w) => elementwise::binary(Binary::Mul, w, &rstd, 1.0)?,
            None => rstd.clone(),
        };
        ch.affine(a.op, g, &scale, None)?
    };
    let mut dwdb = crate::launch::all(
        &dwdb_kernel(x.dtype(), stat, param)?,
        &[&rows_g, &rows_x, &mean_c, &rstd_c],
    )?;
    let db = dwdb.pop().expect("db").reshape(&[ch.c]).expect("same size");
    let dw = dwdb.pop().expect("dw").reshape(&[ch.c]).expect("same size");
    Ok(vec![gx, dw, db])
}
