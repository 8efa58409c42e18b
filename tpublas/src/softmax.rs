//! The softmax family along one dimension (`_softmax`, `_log_softmax`,
//! `_softmax_backward_data`, `_log_softmax_backward_data`, `_safe_softmax`) as two-phase row kernels (see [`crate::rows`]).
//!
//! Softmax keeps a running row maximum `mx` and a running sum `sm` of `exp(x − mx)`,
//! rescaling the sum when the maximum grows (online softmax), so each row is read twice
//! whatever its length; a row that fits one window is read once (`softmax_row`). The maximum starts at −3e38, not −∞: a column block whose elements
//! are all −∞ then leaves `sm` at 0 instead of NaN (−∞ − −∞), and a row that is −∞
//! throughout ends as 0/0 = NaN, as in ATen.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::rows::{self, BM, BN};
use crate::value::{Args, Value};
use crate::{layout, promote};
use tpukit::dsl::{CallSpec, DType, Kernel};
use tpukit::prelude::*;

/// Phase 0: running max and rescaled sum. Phase 1: `exp(x − mx) · (1 / sm)`, or with `log`,
/// `x − mx − log(sm)`: one division per row, as ATen's CPU softmax (a division per element
/// cost the CPU backend a fifth of the kernel). Overhanging columns read −∞, and the sum is
/// masked to the row (`valid`): `exp(−∞ − mx)` is 0 too, but only the mask shows the CPU
/// backend that the sum leaves them out, so it clips an overhanging window instead of
/// staging it (`cpu::codegen::clip`; staging cost rows of 1000 a third of their time).
#[tpu_kernel]
fn softmax_rows(
    x: In,
    o: Out,
    mx: Scratch,
    sm: Scratch,
    log: bool,
    safe: bool,
    out: DType,
    bm: usize,
    bn: usize,
) {
    let v = x[..].cast(f32);
    if program_id(1) == 0 {
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
    }
    if program_id(1) == 1 {
        if log {
            o[..] = (v - mx[..] - sm[..].log()).cast(out);
        } else if safe {
            // A row that is −∞ throughout has `sm` = 0: `_safe_softmax` makes it 0, not NaN.
            o[..] = where_(sm[..] == 0.0, 0.0, (v - mx[..]).exp() * (1.0 / sm[..])).cast(out);
        } else {
            o[..] = ((v - mx[..]).exp() * (1.0 / sm[..])).cast(out);
        }
    }
}

/// [`softmax_rows`] for rows that fit one window (a one-phase grid with one column block):
/// the row's maximum, then `e = exp(x − mx)` once, its sum and `e · (1 / sm)`, as ATen's CPU
/// softmax; two phases compute `exp` twice. The maximum is at least −3e38 for the same reason
/// as there. With `in_output` (f32 results), `e` is written to the output window and
/// normalised there, as ATen does: the CPU backend then stores the output in the loop that
/// computes `exp`, where the stores overlap its arithmetic, and rescales it while it is in
/// cache (kept in the workspace instead, `e` made a last loop that only loads, multiplies and
/// stores wait on the output's memory: 40% of the kernel's CPU time on 4096×1024). The Mosaic
/// lowering forwards the stored window to the loads (`tpukit_mosaic`'s `forward`), so on a TPU
/// it costs what the register form does.
#[tpu_kernel]
fn softmax_row(
    x: In,
    o: Out,
    log: bool,
    safe: bool,
    out: DType,
    in_output: bool,
    bm: usize,
    bn: usize,
) {
    let v = x[..].cast(f32);
    let mx = v.reduce_max_keepdims(-1).max(-3.0e38);
    // The row's columns: the sums are masked to them as in `softmax_rows`.
    let valid = iota(i32, [bm, bn], 1) + program_id(2) * (bn as i32) < dim(x, 1);
    if log {
        let sm = where_(valid, (v - mx).exp(), 0.0).sum_keepdims(-1);
        o[..] = (v - mx - sm.log()).cast(out);
    } else if in_output {
        // Both branches of a flag are built: the casts (none for f32) type this one for any
        // `out`.
        o[..] = where_(valid, (v - mx).exp(), 0.0).cast(out);
        let sm = o[..].cast(f32).sum_keepdims(-1);
        if safe {
            o[..] = where_(sm == 0.0, 0.0, o[..].cast(f32) * (1.0 / sm)).cast(out);
        } else {
            o[..] = (o[..].cast(f32) * (1.0 / sm)).cast(out);
        }
    } else {
        let e = where_(valid, (v - mx).exp(), 0.0);
        let sm = e.sum_keepdims(-1);
        if safe {
            o[..] = where_(sm == 0.0, 0.0, e * (1.0 / sm)).cast(out);
        } else {
            o[..] = (e * (1.0 / sm)).cast(out);
        }
    }
}

/// `grad_input = y · (g − Σ g·y)`: phase 0 sums `g·y` (overhangs read 0), phase 1 writes.
#[tpu_kernel]
fn softmax_backward_rows(g: In, y: In, o: Out, dot: Scratch, out: DType) {
    let gv = g[..].cast(f32);
    let yv = y[..].cast(f32);
    if program_id(1) == 0 {
        if program_id(2) == 0 {
            dot[..] = 0.0;
        }
        dot[..] += (gv * yv).sum_keepdims(-1);
    }
    if program_id(1) == 1 {
        o[..] = (yv * (gv - dot[..])).cast(out);
    }
}

/// `grad_input = g − exp(y) · Σ g` (`y` the log-softmax output): phase 0 sums `g`
/// (overhangs read 0), phase 1 writes.
#[tpu_kernel]
fn log_softmax_backward_rows(g: In, y: In, o: Out, total: Scratch, out: DType) {
    let gv = g[..].cast(f32);
    if program_id(1) == 0 {
        if program_id(2) == 0 {
            total[..] = 0.0;
        }
        total[..] += gv.sum_keepdims(-1);
    }
    if program_id(1) == 1 {
        o[..] = (gv - y[..].cast(f32).exp() * total[..]).cast(out);
    }
}

const _: () = assert!(BM == 16 && BN == 512);

/// How many times a softmax kernel (or layer norm's input gradient, `norm_backward`) reads
/// each row, which picks its shape.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reads {
    /// Two phases over column blocks (`softmax_rows` and the backward kernels): rows of any
    /// length.
    Twice,
    /// One window per row (`softmax_row`): rows of at most the window's width. Only the
    /// forward operators have such a kernel; the backward ones read [`Reads::Twice`] (but
    /// layer norm's input gradient has one).
    Once,
}

impl Reads {
    /// [`Reads::Once`] when a row of `n` elements fits a window of `bn` columns.
    pub fn fitting(n: usize, bn: usize) -> Reads {
        if n <= bn { Reads::Once } else { Reads::Twice }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Softmax {
    Softmax,
    LogSoftmax,
    Backward,
    LogBackward,
    /// `_safe_softmax`: rows that are −∞ throughout give 0.
    Safe,
}

impl Softmax {
    pub fn aten(self) -> &'static str {
        match self {
            Softmax::Softmax => "aten._softmax.default",
            Softmax::LogSoftmax => "aten._log_softmax.default",
            Softmax::Backward => "aten._softmax_backward_data.default",
            Softmax::LogBackward => "aten._log_softmax_backward_data.default",
            Softmax::Safe => "aten._safe_softmax.default",
        }
    }

    /// The kernel over `[m, n]` rows of `dtype`, output `out`, in windows of [`BN`] columns.
    pub fn kernel(self, dtype: DType, out: DType) -> Result<Prepared> {
        self.kernel_by(dtype, out, BM, BN, Reads::Twice)
    }

    /// [`Softmax::kernel`] in windows of `bm` rows and `bn` columns (see [`rows::height`],
    /// [`rows::width`]), reading each row as `reads` says ([`Reads::Once`] only for rows of
    /// at most `bn` elements).
    pub fn kernel_by(
        self,
        dtype: DType,
        out: DType,
        bm: usize,
        bn: usize,
        reads: Reads,
    ) -> Result<Prepared> {
        let reads = if self.forward() { reads } else { Reads::Twice };
        memo(("softmax", self, dtype, out, bm, bn, reads), || {
            Ok(self.build(dtype, out, bm, bn, reads)?)
        })
    }

    fn forward(self) -> bool {
        matches!(self, Softmax::Softmax | Softmax::LogSoftmax | Softmax::Safe)
    }

    fn build(
        self,
        dtype: DType,
        out: DType,
        bm: usize,
        bn: usize,
        reads: Reads,
    ) -> tpukit::dsl::Result<Kernel> {
        let (log, safe) = (self == Softmax::LogSoftmax, self == Softmax::Safe);
        // One phase per read of a row: the forward kernels that read rows twice keep the
        // running maximum and sum between them, the backward ones a row dot product or sum.
        let phases = match reads {
            Reads::Once => 1,
            Reads::Twice => 2,
        };
        let input = |fill| rows::input_of(dtype, fill, bm, bn);
        let spec = |inputs, scratch| CallSpec {
            grid: rows::phased_grid_of(phases, bm, bn),
            inputs,
            outputs: vec![rows::output_of(out, phases, bm, bn)],
            scratch,
            ..Default::default()
        };
        let x = || vec![input(f64::NEG_INFINITY)];
        match self {
            _ if reads == Reads::Once => softmax_row(
                &spec(x(), vec![]),
                log,
                safe,
                out,
                out == DType::F32,
                bm,
                bn,
            ),
            Softmax::Softmax | Softmax::LogSoftmax | Softmax::Safe => {
                let scratch = vec![rows::acc_of(bm), rows::acc_of(bm)];
                softmax_rows(&spec(x(), scratch), log, safe, out, bm, bn)
            }
            Softmax::Backward | Softmax::LogBackward => {
                let spec = spec(vec![input(0.0), input(0.0)], vec![rows::acc_of(bm)]);
                if self == Softmax::Backward {
                    softmax_backward_rows(&spec, out)
                } else {
                    log_softmax_backward_rows(&spec, out)
                }
            }
        }
    }

    /// Every kernel for inputs of `dtype`, in every window height and width: output of the same dtype, the other float dtype
    /// (`half_to_float` for bf16 inputs; the backward of a `half_to_float` softmax takes f32
    /// gradients and returns bf16), and the transpose that moves `dim` last.
    pub fn kernels(self, dtype: DType) -> Result<Vec<Prepared>> {
        let other = match (self, dtype) {
            (Softmax::Backward, DType::F32) => Some(DType::BF16),
            (Softmax::Softmax | Softmax::LogSoftmax | Softmax::Safe, DType::BF16) => {
                Some(DType::F32)
            }
            _ => None,
        };
        let mut k = Vec::new();
        let readings: &[Reads] = if self.forward() {
            &[Reads::Twice, Reads::Once]
        } else {
            &[Reads::Twice]
        };
        for bm in [BM, rows::SHORT] {
            for bn in rows::WIDTHS {
                for &reads in readings {
                    k.push(self.kernel_by(dtype, dtype, bm, bn, reads)?);
                    if let Some(out) = other {
                        k.push(self.kernel_by(dtype, out, bm, bn, reads)?);
                    }
                }
            }
        }
        k.extend(crate::copy::kernels(dtype)?);
        Ok(k)
    }

    /// `_softmax(x, dim, half_to_float)`, `_log_softmax(x, dim, half_to_float)`,
    /// `_softmax_backward_data(grad_output, output, dim, input_dtype)`.
    pub fn run(self, args: &[Value]) -> Result<Vec<HostArray>> {
        let a = Args::new(self.aten(), args);
        let (inputs, dim_arg) = match self {
            Softmax::Backward | Softmax::LogBackward => (vec![a.tensor(0)?, a.tensor(1)?], 2),
            _ => (vec![a.tensor(0)?], 1),
        };
        let x = inputs[0];
        for t in &inputs {
            promote::check(self.aten(), t)?;
            if t.shape() != x.shape() || t.dtype() != x.dtype() {
                return Err(a.err(format!(
                    "grad_output and output differ: {} {:?} vs {} {:?}",
                    x.dtype(),
                    x.shape(),
                    t.dtype(),
                    t.shape()
                )));
            }
        }
        let d = a.dim(a.int(dim_arg)?, x.shape().len())?;
        let out = match self {
            Softmax::Backward => a.opt_dtype(3)?.unwrap_or(x.dtype()),
            // ATen's CPU kernel checks `input_dtype` but returns the gradient's dtype.
            Softmax::LogBackward => {
                a.opt_dtype(3)?;
                x.dtype()
            }
            Softmax::Safe => a.opt_dtype(2)?.unwrap_or(x.dtype()),
            _ if a.bool_or(2, false)? => DType::F32,
            _ => x.dtype(),
        };
        let dims = if x.shape().is_empty() {
            vec![]
        } else {
            vec![d]
        };
        let mut perm = Vec::new();
        let mut rows_in = Vec::new();
        for t in &inputs {
            let (r, p) = layout::to_rows(t, &dims)?;
            rows_in.push(r);
            perm = p;
        }
        let refs: Vec<&HostArray> = rows_in.iter().collect();
        let (m, n) = (rows_in[0].shape()[0], rows_in[0].shape()[1]);
        let bn = rows::width(n);
        let k = self.kernel_by(x.dtype(), out, rows::height(m), bn, Reads::fitting(n, bn))?;
        let o = crate::launch::one(&k, &refs)?;
        Ok(vec![layout::from_rows(o, x.shape(), &perm)?])
    }
}
