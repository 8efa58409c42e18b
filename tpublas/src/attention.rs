//! Scaled dot-product attention as PyTorch's CPU path dispatches it
//! (`_scaled_dot_product_flash_attention_for_cpu` and its backward). Without an `attn_mask`
//! and with a head dim the fused kernels take (see [`crate::flash_attention`]), each
//! direction is those kernels; otherwise it is composed of tpuBLAS's kernels over
//! `[B·H, L, S]` score matrices:
//!
//! - forward: `s = q @ kᵀ` (`bmm`, `kᵀ` by the transpose kernel), scaled and, with
//!   `is_causal`, masked (`col > row` → −∞, top-left aligned as ATen) by `scores`; the
//!   row `logsumexp` by `logsumexp`; `p = softmax(s)` (the softmax kernel);
//!   `out = p @ v`. Returns `(out, logsumexp)` as ATen: `logsumexp` is `[B, H, L]` f32.
//! - backward: `p = exp(s − logsumexp)` (recomputed from the `logsumexp` given);
//!   `dv = pᵀ @ dout`; `dp = dout @ vᵀ`; `ds = p·(dp − Σ dp·p)` (the softmax-backward
//!   kernel) times the scale; `dq = ds @ k`; `dk = dsᵀ @ q`.
//!
//! An `attn_mask` broadcasting to `[.., L, S]` is added to the scaled scores: a float mask as
//! it is, a bool mask as 0 where true and −∞ where false (the `where` kernel), materialised
//! at `[B·H, L, S]` on the host and added by the `add` kernel.
//!
//! bf16 operands are converted to f32 first and every intermediate stays f32 (as ATen's
//! kernel accumulates in f32); results are rounded once to the operands' dtype. Dropout
//! (`dropout_p > 0`) is not served: a clear error.

use crate::cast;
use crate::copy::permute;
use crate::elementwise::{Binary, Unary, binary, binary_scalar, unary};
use crate::flash_attention::Fused;
use crate::launch::{Prepared, memo};
use crate::matmul::{Bias, Matmul};
use crate::promote;
use crate::rows::{self, BM, BN};
use crate::softmax::Softmax;
use crate::value::{Args, Value};
use crate::{BlasError, Result};
use tpukit::dsl::{CallSpec, DType, ErrorKind};
use tpukit::prelude::*;

pub const FORWARD: &str = "aten._scaled_dot_product_flash_attention_for_cpu.default";
pub const BACKWARD: &str = "aten._scaled_dot_product_flash_attention_for_cpu_backward.default";

/// `o = s·scale`, and −∞ where `causal` and the column is past the row.
#[tpu_kernel]
fn scaled_scores(s: In, scale: In, causal: In, o: Out, neg_inf: f32) {
    let row = iota(i32, [16, 512], 0) + program_id(1) * 16;
    let col = iota(i32, [16, 512], 1) + program_id(2) * 512;
    let masked = (col > row).cast(f32) * causal[..] > 0.5;
    o[..] = where_(masked, neg_inf, s[..] * scale[..]);
}

/// Row `logsumexp`: the online maximum and rescaled sum of softmax, written as
/// `mx + log(sm)` after the last column block (overhangs read −∞; the sum is masked to the
/// row, as softmax's, so the CPU backend clips an overhanging window).
#[tpu_kernel]
fn logsumexp_rows(x: In, o: Out, mx: Scratch, sm: Scratch, bm: usize, bn: usize) {
    let v = x[..];
    if program_id(2) == 0 {
        mx[..] = -3.0e38;
        sm[..] = 0.0;
    }
    let valid = iota(i32, [bm, bn], 1) + program_id(2) * (bn as i32) < dim(x, 1);
    let old = mx[..];
    let new = old.max(v.reduce_max_keepdims(-1));
    let e = where_(valid, (v - new).exp(), 0.0);
    sm[..] = sm[..] * (old - new).exp() + e.sum_keepdims(-1);
    mx[..] = new;
    if program_id(2) == num_programs(2) - 1 {
        o[..] = mx[..] + sm[..].log();
    }
}

const _: () = assert!(BM == 16 && BN == 512);

fn scores_kernel() -> Result<Prepared> {
    memo("attention_scores", || {
        let spec = rows::matrices(DType::F32, DType::F32, 2);
        Ok(scaled_scores(&spec, f32::NEG_INFINITY)?)
    })
}

fn logsumexp_kernel() -> Result<Prepared> {
    memo("attention_logsumexp", || {
        let spec = CallSpec {
            grid: rows::phased_grid(1),
            inputs: vec![rows::input(DType::F32, f64::NEG_INFINITY)],
            outputs: vec![rows::stat(DType::F32)],
            scratch: vec![rows::acc(), rows::acc()],
            ..Default::default()
        };
        Ok(logsumexp_rows(&spec, BM, BN)?)
    })
}

/// Every kernel either direction launches for operands of `dtype`.
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let mut k = vec![
        scores_kernel()?,
        logsumexp_kernel()?,
        Matmul::Bmm.kernel(DType::F32, Bias::Row)?,
    ];
    k.extend(crate::copy::kernels(DType::F32)?);
    k.extend([
        Softmax::Softmax.kernel(DType::F32, DType::F32)?,
        Softmax::Backward.kernel(DType::F32, DType::F32)?,
        crate::elementwise::binary_kernel(Binary::Sub, DType::F32, crate::layout::Pattern::Column)?,
        Unary::Exp.kernel(DType::F32)?,
        crate::elementwise::binary_kernel(Binary::Mul, DType::F32, crate::layout::Pattern::Scalar)?,
        crate::elementwise::binary_kernel(Binary::Add, DType::F32, crate::layout::Pattern::Same)?,
        crate::elementwise::where_kernel(DType::F32)?,
    ]);
    if dtype != DType::F32 {
        k.extend(cast::kernels(dtype)?);
        k.push(cast::kernel(DType::F32, dtype)?);
    }
    k.extend(crate::flash_attention::kernels(dtype)?);
    Ok(k)
}

/// The checked operands, as f32 `[B·H, L, E]` arrays.
struct Operands {
    /// `[B, H]` (or whatever leading dims the operands have).
    lead: Vec<usize>,
    dtype: DType,
    scale: f64,
    causal: bool,
    /// The additive f32 mask at `[B·H, L, S]`.
    mask: Option<HostArray>,
}

/// `x` (`[..lead dims, rows, E]`) as a `[B·H, rows, E]` array (no copy).
fn batches(x: &HostArray, lead: usize) -> HostArray {
    let s = x.shape();
    let b: usize = s[..lead].iter().product();
    x.clone()
        .reshape(&[b, s[lead], s[lead + 1]])
        .expect("same size")
}

/// [`batches`] as f32.
fn f32_batches(x: &HostArray, lead: usize) -> Result<HostArray> {
    let x = if x.dtype() == DType::F32 {
        x.clone()
    } else {
        cast::copy(x, DType::F32)?
    };
    Ok(batches(&x, lead))
}

fn bmm(x: &HostArray, y: &HostArray) -> Result<HostArray> {
    crate::launch::one(&Matmul::Bmm.kernel(DType::F32, Bias::Row)?, &[x, y])
}

fn transpose(x: &HostArray) -> Result<HostArray> {
    permute(x, &[0, 2, 1])
}

/// Reads `(q, k, v)` at `first..` and `dropout_p`, `is_causal`, `attn_mask`, `scale` at
/// `rest..`; checks shapes and dtypes.
fn operands(a: &Args, first: usize, rest: usize) -> Result<Operands> {
    let (q, k, v) = (a.tensor(first)?, a.tensor(first + 1)?, a.tensor(first + 2)?);
    for t in [q, k, v] {
        promote::check(a.op, t)?;
    }
    let r = q.shape().len();
    let lead = &q.shape()[..r.saturating_sub(2)];
    let fits = r >= 2
        && [k, v]
            .iter()
            .all(|t| t.shape().len() == r && &t.shape()[..r - 2] == lead)
        && k.shape()[r - 1] == q.shape()[r - 1]
        && k.shape()[r - 2] == v.shape()[r - 2]
        && q.dtype() == k.dtype()
        && q.dtype() == v.dtype();
    if !fits {
        return Err(a
            .err(format!(
                "expects q [.., L, E], k [.., S, E], v [.., S, Ev] of one dtype, got {:?}, {:?}, {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            ))
            .with_kind(ErrorKind::Shape));
    }
    if a.scalar_or(rest, 0.0)? != 0.0 {
        return Err(a
            .err("dropout_p > 0 is not served (use dropout outside attention)")
            .with_kind(ErrorKind::Unsupported));
    }
    let (l, s_len) = (q.shape()[r - 2], k.shape()[r - 2]);
    let mask = match a.opt_tensor(rest + 2)? {
        None => None,
        Some(m) => Some(additive_mask(a, m, &with_last(lead, &[l, s_len]))?),
    };
    let e = q.shape()[r - 1] as f64;
    Ok(Operands {
        lead: lead.to_vec(),
        dtype: q.dtype(),
        scale: a.opt_scalar(rest + 3)?.unwrap_or(1.0 / e.sqrt()),
        causal: a.bool_or(rest + 1, false)?,
        mask,
    })
}

/// `attn_mask` as an additive f32 mask at `[B·H, L, S]` (`shape` is `[.., L, S]`).
fn additive_mask(a: &Args, m: &HostArray, shape: &[usize]) -> Result<HostArray> {
    let additive = if m.dtype() == DType::Bool {
        let zero = HostArray::from_f64(DType::F32, &[], &[0.0]);
        let ninf = HostArray::from_f64(DType::F32, &[], &[f64::NEG_INFINITY]);
        crate::elementwise::where_(m, &zero, &ninf)?
    } else {
        promote::check(a.op, m)?;
        promote::to(m, DType::F32)
    };
    let full = crate::layout::expand(a.op, &additive, shape)?.ok_or_else(|| {
        a.err(format!(
            "attn_mask {:?} does not broadcast to {shape:?}",
            m.shape()
        ))
        .with_kind(ErrorKind::Shape)
    })?;
    let (l, s) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let b = shape.iter().product::<usize>() / (l * s).max(1);
    Ok(full.reshape(&[b, l, s]).expect("same size"))
}

/// `q`, `k`, `v` (at `first..`) as `[B·H, rows, E]` arrays of their dtype, with the call's
/// scale and causality, if the fused kernels serve the call (no `attn_mask`; see
/// [`Fused::serves`]).
fn fused(a: &Args, p: &Operands, first: usize) -> Result<Option<Fused>> {
    if p.mask.is_some() {
        return Ok(None);
    }
    let n = p.lead.len();
    let operand = |i: usize| a.tensor(first + i).map(|t| batches(t, n));
    let [q, k, v] = [operand(0)?, operand(1)?, operand(2)?];
    Ok(Fused::serves(&q, &k, &v).then_some(Fused {
        q,
        k,
        v,
        scale: p.scale,
        causal: p.causal,
    }))
}

/// The fused backward of `f` (see [`fused`]): `grad_out` and `out` read at the operands'
/// dtype, `logsumexp` as f32.
fn fused_backward(a: &Args, f: &Fused) -> Result<Vec<HostArray>> {
    let q = &f.q;
    // `grad_out` and `out` have the query's shape (its head dim is the value's here).
    let like_query = |i: usize| -> Result<HostArray> {
        let t = a.tensor(i)?;
        if t.shape() != a.tensor(1)?.shape() {
            return Err(
                BlasError::new(BACKWARD, "grad_out or out do not match the query")
                    .with_kind(ErrorKind::Shape),
            );
        }
        Ok(promote::to(t, q.dtype())
            .reshape(q.shape())
            .expect("same size"))
    };
    let (dout, out) = (like_query(0)?, like_query(4)?);
    let (b, l) = (q.shape()[0], q.shape()[1]);
    let lse = a.tensor(5)?;
    if lse.shape().iter().product::<usize>() != b * l {
        return Err(
            BlasError::new(BACKWARD, "logsumexp does not match the operands")
                .with_kind(ErrorKind::Shape),
        );
    }
    let lse = promote::to(lse, DType::F32)
        .reshape(&[b, l, 1])
        .expect("same size");
    let grads = f.backward(&dout, &out, &lse)?;
    grads
        .into_iter()
        .zip([1, 2, 3])
        .map(|(g, i)| Ok(g.reshape(a.tensor(i)?.shape()).expect("same size")))
        .collect()
}

/// The scaled, masked scores `[B·H, L, S]` of f32 `q`, `k`.
fn scores(p: &Operands, q: &HostArray, k: &HostArray) -> Result<HostArray> {
    let s = bmm(q, &transpose(k)?)?;
    let scale = crate::layout::scalar_operand(p.scale, 2);
    let causal = crate::layout::scalar_operand(f64::from(u8::from(p.causal)), 2);
    let scored = crate::launch::one(&scores_kernel()?, &[&s, &scale, &causal])?;
    match &p.mask {
        None => Ok(scored),
        Some(m) => binary(Binary::Add, &scored, m, 1.0),
    }
}

/// `[b, m, n]` as rows `[b·m, n]`.
fn as_rows(x: &HostArray) -> HostArray {
    let s = x.shape();
    x.clone().reshape(&[s[0] * s[1], s[2]]).expect("same size")
}

fn finish(x: HostArray, dtype: DType, shape: &[usize]) -> Result<HostArray> {
    let x = if dtype == DType::F32 {
        x
    } else {
        cast::copy(&x, dtype)?
    };
    Ok(x.reshape(shape).expect("same size"))
}

fn with_last(lead: &[usize], last: &[usize]) -> Vec<usize> {
    lead.iter().chain(last).copied().collect()
}

/// `(output, logsumexp)`.
pub fn forward(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(FORWARD, args);
    let p = operands(&a, 0, 3)?;
    let n = p.lead.len();
    if let Some(f) = fused(&a, &p, 0)? {
        let [out, lse] = <[HostArray; 2]>::try_from(f.forward()?).expect("out, logsumexp");
        let l = f.q.shape()[1];
        return Ok(vec![
            out.reshape(a.tensor(0)?.shape()).expect("same size"),
            lse.reshape(&with_last(&p.lead, &[l])).expect("same size"),
        ]);
    }
    let [q, k, v] = [0, 1, 2].map(|i| a.tensor(i).and_then(|t| f32_batches(t, n)));
    let (q, k, v) = (q?, k?, v?);
    let (l, ev) = (q.shape()[1], v.shape()[2]);
    let s = scores(&p, &q, &k)?;
    let rows_s = as_rows(&s);
    let lse = crate::launch::one(&logsumexp_kernel()?, &[&rows_s])?;
    let probs = crate::launch::one(
        &Softmax::Softmax.kernel(DType::F32, DType::F32)?,
        &[&rows_s],
    )?;
    let probs = probs.reshape(s.shape()).expect("same size");
    let out = bmm(&probs, &v)?;
    Ok(vec![
        finish(out, p.dtype, &with_last(&p.lead, &[l, ev]))?,
        lse.reshape(&with_last(&p.lead, &[l])).expect("same size"),
    ])
}

/// `(grad_query, grad_key, grad_value)`.
pub fn backward(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(BACKWARD, args);
    let p = operands(&a, 1, 6)?;
    let n = p.lead.len();
    if let Some(f) = fused(&a, &p, 1)? {
        return fused_backward(&a, &f);
    }
    let [dout, q, k, v] = [0, 1, 2, 3].map(|i| a.tensor(i).and_then(|t| f32_batches(t, n)));
    let (dout, q, k, v) = (dout?, q?, k?, v?);
    let lse = a.tensor(5)?;
    let (b, l, s_len) = (q.shape()[0], q.shape()[1], k.shape()[1]);
    if dout.shape() != [b, l, v.shape()[2]] || lse.shape().iter().product::<usize>() != b * l {
        return Err(
            BlasError::new(BACKWARD, "grad_out or logsumexp do not match the operands")
                .with_kind(ErrorKind::Shape),
        );
    }
    let lse = promote::to(lse, DType::F32)
        .reshape(&[b * l, 1])
        .expect("same size");
    let s = scores(&p, &q, &k)?;
    let centered = binary(Binary::Sub, &as_rows(&s), &lse, 1.0)?;
    let probs = unary(Unary::Exp, &centered)?
        .reshape(&[b, l, s_len])
        .expect("same size");
    let dv = bmm(&transpose(&probs)?, &dout)?;
    let dp = bmm(&dout, &transpose(&v)?)?;
    let backward = Softmax::Backward.kernel(DType::F32, DType::F32)?;
    let ds = crate::launch::one(&backward, &[&as_rows(&dp), &as_rows(&probs)])?;
    let ds = binary_scalar(Binary::Mul, &ds, p.scale, 1.0)?
        .reshape(&[b, l, s_len])
        .expect("same size");
    let dq = bmm(&ds, &k)?;
    let dk = bmm(&transpose(&ds)?, &q)?;
    let shape_of = |i: usize| a.tensor(i).map(|t| t.shape().to_vec());
    Ok(vec![
        finish(dq, p.dtype, &shape_of(1)?)?,
        finish(dk, p.dtype, &shape_of(2)?)?,
        finish(dv, p.dtype, &shape_of(3)?)?,
    ])
}
