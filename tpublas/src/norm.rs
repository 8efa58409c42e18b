//! Normalisations over the trailing dims (`native_layer_norm`, `_fused_rms_norm`) as
//! two-phase row kernels (see [`crate::rows`]), computing in f32.
//!
//! Layer norm's statistics are exact in one pass over the row: each column block's count
//! (its real columns, a scalar), mean and sum of squared deviations (masked to the real
//! columns; two passes over the block, the second from cache) are merged into the running
//! ones with Chan's parallel update, so no `E[x²] − E[x]²` cancellation. Phase 1 writes
//! `(x − mean) · rstd · w + b` and the per-row `mean` and `rstd`.
//!
//! Weight and bias reach the kernel as f32 `[1, n]` rows whatever their dtype (the host
//! widens them, exactly): Mosaic cannot broadcast a row loaded from a bf16 `[1, n]` window
//! across sublanes ("Not implemented: Sublane broadcast"), even after a cast to f32. `eps`
//! is a run-time scalar (`[1, 1]` f32), so every `eps` shares one compiled kernel.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::rows::{self, BM, BN, Weights};
use crate::value::{Args, Value};
use crate::{layout, promote};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{CallSpec, DType, Kernel};
use tpukit::prelude::*;

#[tpu_kernel]
fn layer_norm_rows(
    x: In,
    w: In,
    b: In,
    eps: In,
    o: Out,
    mean_out: Out,
    rstd_out: Out,
    cnt: Scratch,
    mean: Scratch,
    m2: Scratch,
    bm: usize,
    bn: usize,
    out: DType,
    stat: DType,
) {
    let v = x[..].cast(f32);
    if program_id(1) == 0 {
        if program_id(2) == 0 {
            cnt[..] = 0.0;
            mean[..] = 0.0;
            m2[..] = 0.0;
        }
        let start = program_id(2) * (bn as i32);
        let valid = iota(i32, [bm, bn], 1) + start < dim(x, 1);
        let c = (dim(x, 1) - start).min(bn as i32).cast(f32);
        let mb = v.sum_keepdims(-1) / c;
        let d = where_(valid, v - mb, 0.0);
        let n_old = cnt[..];
        let n_new = n_old + c;
        let delta = mb - mean[..];
        mean[..] = mean[..] + delta * c / n_new;
        m2[..] = m2[..] + (d * d).sum_keepdims(-1) + delta * delta * n_old * c / n_new;
        cnt[..] = n_new;
    }
    if program_id(1) == 1 {
        let rstd = (m2[..] / cnt[..] + eps[..]).rsqrt();
        let mu = mean[..];
        o[..] = ((v - mu) * rstd * w[..].cast(f32) + b[..].cast(f32)).cast(out);
        mean_out[..] = mu.cast(stat);
        rstd_out[..] = rstd.cast(stat);
    }
}

#[tpu_kernel]
fn rms_norm_rows(
    x: In,
    w: In,
    eps: In,
    o: Out,
    rstd_out: Out,
    ss: Scratch,
    out: DType,
    stat: DType,
) {
    let v = x[..].cast(f32);
    if program_id(1) == 0 {
        if program_id(2) == 0 {
            ss[..] = 0.0;
        }
        ss[..] += (v * v).sum_keepdims(-1);
    }
    if program_id(1) == 1 {
        let rstd = (ss[..] / dim(x, 1).cast(f32) + eps[..]).rsqrt();
        o[..] = (v * rstd * w[..].cast(f32)).cast(out);
        rstd_out[..] = rstd.cast(stat);
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Norm {
    Layer,
    Rms,
}

impl Norm {
    pub fn aten(self) -> &'static str {
        match self {
            Norm::Layer => "aten.native_layer_norm.default",
            Norm::Rms => "aten._fused_rms_norm.default",
        }
    }

    /// The kernel over `[m, n]` rows of `dtype` in windows of `bn` columns (see
    /// [`rows::width`]) with an f32 `[1, n]` weight (and bias) and a run-time `eps`;
    /// statistics (`[m, 1]`) of `stat`.
    pub fn kernel(self, dtype: DType, stat: DType, bn: usize) -> Result<Prepared> {
        self.kernel_for(dtype, stat, Weights::PerColumn, bn)
    }

    /// The kernel with the weight and bias varying as `weights` says (a batch norm is the
    /// layer norm kernel with channels as rows and a weight per row), in windows of [`BN`].
    pub fn kernel_by(self, dtype: DType, stat: DType, weights: Weights) -> Result<Prepared> {
        self.kernel_for(dtype, stat, weights, BN)
    }

    fn kernel_for(
        self,
        dtype: DType,
        stat: DType,
        weights: Weights,
        bn: usize,
    ) -> Result<Prepared> {
        memo(("norm", self, dtype, stat, weights, bn), || {
            Ok(self.build(dtype, stat, weights, bn)?)
        })
    }

    fn build(
        self,
        dtype: DType,
        stat: DType,
        weights: Weights,
        bn: usize,
    ) -> tpukit::dsl::Result<Kernel> {
        let mut spec = CallSpec {
            grid: rows::phased_grid_by(2, bn),
            inputs: vec![rows::input_by(dtype, 0.0, bn), weights.spec_by(bn)],
            outputs: vec![rows::output_by(dtype, 2, bn), rows::stat(stat)],
            scratch: vec![rows::acc()],
            ..Default::default()
        };
        match self {
            Norm::Layer => {
                spec.inputs.push(weights.spec_by(bn));
                spec.inputs.push(layout::scalar(2));
                spec.outputs.insert(1, rows::stat(stat));
                spec.scratch = vec![rows::acc(); 3];
                layer_norm_rows(&spec, BM, bn, dtype, stat)
            }
            Norm::Rms => {
                spec.inputs.push(layout::scalar(2));
                rms_norm_rows(&spec, dtype, stat)
            }
        }
    }

    /// Every kernel for inputs of `dtype`, one per dtype its statistics can have (see
    /// `Norm::stat`) and window width.
    pub fn kernels(self, dtype: DType) -> Result<Vec<Prepared>> {
        let mut k = Vec::new();
        for bn in rows::WIDTHS {
            k.push(self.kernel(dtype, self.stat(dtype, dtype), bn)?);
            if dtype == DType::BF16 && self == Norm::Layer {
                k.push(self.kernel(dtype, DType::F32, bn)?);
            }
        }
        if dtype == DType::BF16 {
            k.push(crate::cast::kernel(DType::BF16, DType::F32)?); // bf16 weights
        }
        Ok(k)
    }

    /// The dtype of the statistics for inputs of `x` and parameters of `param`, as ATen's:
    /// layer norm's are the input's, or f32 for bf16 inputs with f32 weights (its mixed
    /// type); RMS norm's are always f32 (its opmath type).
    fn stat(self, x: DType, param: DType) -> DType {
        match self {
            Norm::Rms => DType::F32,
            Norm::Layer if x == DType::BF16 && param == DType::F32 => DType::F32,
            Norm::Layer => x,
        }
    }

    /// `native_layer_norm(x, normalized_shape, weight?, bias?, eps)` → `(out, mean, rstd)`;
    /// `_fused_rms_norm(x, normalized_shape, weight?, eps?)` → `(out, rstd)`. Statistics
    /// have `x`'s shape with the normalised dims set to 1, and the dtype `Norm::stat`
    /// gives. RMS norm's `eps` defaults to f32's machine epsilon (ATen's: its opmath type's).
    pub fn run(self, args: &[Value]) -> Result<Vec<HostArray>> {
        let a = Args::new(self.aten(), args);
        let x = a.tensor(0)?;
        promote::check(self.aten(), x)?;
        let normalized: Vec<usize> = a
            .int_list(1)?
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| a.err("negative normalized_shape")))
            .collect::<Result<_>>()?;
        let n = normalized_size(&a, &normalized, x.shape())?;
        let rank = x.shape().len();
        let weight = a.opt_tensor(2)?;
        let (bias, eps) = match self {
            Norm::Layer => (a.opt_tensor(3)?, a.scalar_or(4, 1e-5)?),
            Norm::Rms => (None, a.scalar_or(3, f32::EPSILON as f64)?),
        };
        let param = weight.map_or(x.dtype(), HostArray::dtype);
        for p in weight.iter().chain(bias.iter()) {
            promote::check(self.aten(), p)?;
            if p.shape() != normalized.as_slice() || p.dtype() != param {
                return Err(a.err(format!(
                    "weight and bias must be {param} of shape {normalized:?}, got {} {:?}",
                    p.dtype(),
                    p.shape()
                )));
            }
        }
        let stat = self.stat(x.dtype(), param);
        let vector = |t: Option<&HostArray>, fill: f64| -> Result<HostArray> {
            Ok(match t {
                Some(t) => crate::cast::to(t, DType::F32)?
                    .reshape(&[1, n])
                    .expect("same size"),
                None => HostArray::from_f64(DType::F32, &[1, n], &vec![fill; n]),
            })
        };
        // The leading extents (not `numel / n`: `n` may be 0).
        let m: usize = x.shape()[..rank - normalized.len()].iter().product();
        let rows_x = x.clone().reshape(&[m, n]).expect("same size");
        let k = self.kernel(x.dtype(), stat, rows::width(n))?;
        let (w, b) = (vector(weight, 1.0)?, vector(bias, 0.0)?);
        let eps = layout::scalar_operand(eps, 2);
        let inputs: Vec<&HostArray> = match self {
            Norm::Layer => vec![&rows_x, &w, &b, &eps],
            Norm::Rms => vec![&rows_x, &w, &eps],
        };
        let mut outs = crate::launch::all(&k, &inputs)?;
        if n == 0 {
            // No column block ran: the variance (and mean square) is 0/0, so ATen's rstd is
            // NaN (the last statistic of both norms).
            let rstd = outs.last_mut().expect("rstd");
            *rstd = HostArray::from_f64(rstd.dtype(), rstd.shape(), &vec![f64::NAN; m]);
        }
        let mut stat_shape = x.shape().to_vec();
        for s in &mut stat_shape[rank - normalized.len()..] {
            *s = 1;
        }
        let mut it = outs.into_iter();
        let mut result = vec![layout::unflatten(it.next().expect("out"), x.shape())];
        result.extend(it.map(|s| s.reshape(&stat_shape).expect("same size")));
        Ok(result)
    }
}

/// The element count of `normalized` (a norm's `normalized_shape`), which must be the
/// trailing dims of `shape`.
pub(crate) fn normalized_size(a: &Args, normalized: &[usize], shape: &[usize]) -> Result<usize> {
    let rank = shape.len();
    if normalized.len() > rank || shape[rank - normalized.len()..] != *normalized {
        return Err(a
            .err(format!(
                "normalized_shape {normalized:?} is not the trailing shape of {shape:?}"
            ))
            .with_kind(ErrorKind::Shape));
    }
    Ok(normalized.iter().product())
}
