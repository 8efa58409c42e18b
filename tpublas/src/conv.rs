//! 2-D convolution (`convolution`, `convolution_backward`; 1-D inputs run as images of one
//! row) as im2col + matmul (see [`crate::taps`] for why): the input, channels-last, is
//! gathered into `cols = [pixels, taps·C]` (zeros at padding taps), and
//! `out = cols @ W'` with `W' = weight` permuted to `[taps·C, OC]` (`addmm` with the bias as
//! a row); the result, channels-last, is permuted back to `[N, OC, OH, OW]`.
//!
//! Backward, each gradient only when `output_mask` asks for it (the others are returned as
//! empty `[0]` placeholders, which the Python frontend turns into ATen's undefined results):
//! - `grad_input`: `gcols = gO @ W'ᵀ` (`[pixels, taps·C]`), then col2im sums each input
//!   pixel's taps ([`crate::taps::col2im`]);
//! - `grad_weight`: `gOᵀ @ cols` (`[OC, taps·C]`), permuted to `[OC, C, KH, KW]`;
//! - `grad_bias`: `gO` summed over `N, OH, OW`.
//!
//! Grouped convolutions run group by group ([`crate::conv_groups`]); transposed ones are
//! refused with [`ErrorKind::Unsupported`].

use crate::Result;
use crate::launch::Prepared;
use crate::matmul::{Bias, Matmul};
use crate::reduction::Reduction;
use crate::taps::{self, Geometry};
use crate::value::{Args, Value};
use crate::{copy, promote};
use tpukit::dsl::DType;
use tpukit::dsl::ErrorKind;
use tpukit::prelude::*;

pub const ATEN: &str = "aten.convolution.default";
pub const ATEN_BACKWARD: &str = "aten.convolution_backward.default";

/// Every kernel convolution launches on `dtype` (forward and backward): the transposes,
/// im2col and col2im, the matmuls, and the bias gradient's row sum.
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    Ok(vec![taps::gather_kernel(dtype)?]
        .into_iter()
        .chain(copy::kernels(dtype)?)
        .chain([
            Matmul::Mm.kernel(dtype, Bias::Row)?,
            Matmul::Addmm.kernel(dtype, Bias::Row)?,
            crate::indexing::kernel(dtype)?,
        ])
        .chain(crate::concat::kernels(dtype)?)
        .collect())
}

pub fn backward_kernels(dtype: DType) -> Result<Vec<Prepared>> {
    Ok(vec![taps::sum_kernel(dtype)?, taps::gather_kernel(dtype)?]
        .into_iter()
        .chain(copy::kernels(dtype)?)
        .chain([
            Matmul::Mm.kernel(dtype, Bias::Row)?,
            crate::indexing::kernel(dtype)?,
        ])
        // The bias gradient is `sum`'s (`Reduction::run`: any window height and width).
        .chain(Reduction::Sum.kernels(dtype)?)
        .chain(crate::concat::kernels(dtype)?)
        .collect())
}

/// The arguments shared by both operators: input (as 4-D), weight (as 4-D), the window and
/// whether the input was 1-D (`[N, C, L]`). `first` is the index of `stride`.
struct Call {
    x: HostArray,
    w: HostArray,
    g: Geometry,
    one_d: bool,
}

fn call(a: &Args, x: &HostArray, w: &HostArray, first: usize) -> Result<Call> {
    promote::check(a.op, x)?;
    promote::check(a.op, w)?;
    if x.dtype() != w.dtype() {
        return Err(a
            .err(format!(
                "input and weight must have one dtype, got {} and {}",
                x.dtype(),
                w.dtype()
            ))
            .with_kind(ErrorKind::DType));
    }
    if a.bool_or(first + 3, false)? {
        return Err(a
            .err("transposed convolution is not supported")
            .with_kind(ErrorKind::Unsupported));
    }
    if a.int(first + 5)? != 1 {
        return Err(a.err("grouped calls run in conv_groups"));
    }
    let one_d = x.shape().len() == 3;
    let (x4, w4) = match (x.shape(), w.shape()) {
        ([n, c, l], [o, i, k]) if w.shape().len() == 3 => (
            x.clone().reshape(&[*n, *c, 1, *l]).expect("same size"),
            w.clone().reshape(&[*o, *i, 1, *k]).expect("same size"),
        ),
        (xs, ws) if xs.len() == 4 && ws.len() == 4 => (x.clone(), w.clone()),
        (xs, ws) => {
            return Err(a
                .err(format!(
                    "expected a 3-D or 4-D input and a weight of the same rank, got {xs:?} and \
                     {ws:?} (3-D convolution is not supported)"
                ))
                .with_kind(ErrorKind::Shape));
        }
    };
    if w4.shape()[1] != x4.shape()[1] {
        return Err(a
            .err(format!(
                "weight {:?} expects {} input channels, the input has {}",
                w.shape(),
                w4.shape()[1],
                x4.shape()[1]
            ))
            .with_kind(ErrorKind::Shape));
    }
    let pair = |i: usize, what: &str, min: i64| -> Result<[usize; 2]> {
        let v = taps::pair(a, i, what, min)?;
        Ok(if one_d { [1, v[1]] } else { v })
    };
    let mut pad = pair(first + 1, "padding", 0)?;
    if one_d {
        pad[0] = 0;
    }
    let kernel = [w4.shape()[2], w4.shape()[3]];
    let g = Geometry::new(
        a,
        x4.shape(),
        kernel,
        pair(first, "stride", 1)?,
        pad,
        pair(first + 2, "dilation", 1)?,
    )?;
    Ok(Call {
        x: x4,
        w: w4,
        g,
        one_d,
    })
}

impl Call {
    /// `[N, OC, OH, OW]` (or `[N, OC, OW]` for a 1-D call) from channels-last rows.
    fn output(&self, rows: HostArray) -> Result<HostArray> {
        let [oh, ow] = self.g.out;
        let out = taps::from_rows(rows, self.g.n, oh, ow)?;
        Ok(if self.one_d {
            let s = out.shape().to_vec();
            out.reshape(&[s[0], s[1], s[3]]).expect("same size")
        } else {
            out
        })
    }

    /// The weight as `[taps·C, OC]` (`forward`) or `[OC, taps·C]`.
    fn weight(&self, forward: bool) -> Result<HostArray> {
        let oc = self.w.shape()[0];
        let k = self.g.taps() * self.g.c;
        if forward {
            let t = copy::permute(&self.w, &[2, 3, 1, 0])?;
            Ok(t.reshape(&[k, oc]).expect("same size"))
        } else {
            let t = copy::permute(&self.w, &[0, 2, 3, 1])?;
            Ok(t.reshape(&[oc, k]).expect("same size"))
        }
    }

    fn cols(&self) -> Result<HostArray> {
        taps::im2col(&taps::to_rows(&self.x)?, &self.g)
    }
}

fn mm(a: &HostArray, b: &HostArray) -> Result<HostArray> {
    crate::launch::one(&Matmul::Mm.kernel(a.dtype(), Bias::Row)?, &[a, b])
}

/// `convolution(input, weight, bias?, stride, padding, dilation, transposed,
/// output_padding, groups)`.
pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN, args);
    if a.int(8)? != 1 {
        return crate::conv_groups::run(args);
    }
    let c = call(&a, a.tensor(0)?, a.tensor(1)?, 3)?;
    let cols = c.cols()?;
    let w = c.weight(true)?;
    let rows = match a.opt_tensor(2)? {
        None => mm(&cols, &w)?,
        Some(b) => {
            let oc = c.w.shape()[0];
            if b.shape() != [oc] || b.dtype() != c.x.dtype() {
                return Err(a
                    .err(format!(
                        "bias must be {} of shape [{oc}], got {} {:?}",
                        c.x.dtype(),
                        b.dtype(),
                        b.shape()
                    ))
                    .with_kind(ErrorKind::Shape));
            }
            let args = [b.clone().into(), cols.into(), w.into()];
            Matmul::Addmm.run(&args)?.remove(0)
        }
    };
    Ok(vec![c.output(rows)?])
}

/// `convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding,
/// dilation, transposed, output_padding, groups, output_mask)` →
/// `(grad_input, grad_weight, grad_bias)`.
pub fn run_backward(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN_BACKWARD, args);
    if a.int(9)? != 1 {
        return crate::conv_groups::run_backward(args);
    }
    let (grad, x, w) = (a.tensor(0)?, a.tensor(1)?, a.tensor(2)?);
    promote::check(ATEN_BACKWARD, grad)?;
    let c = call(&a, x, w, 4)?;
    let mask = a.int_list(10)?;
    let want = |i: usize| mask.get(i).is_none_or(|&m| m != 0);
    let (oc, [oh, ow]) = (c.w.shape()[0], c.g.out);
    let expected: Vec<usize> = if c.one_d {
        vec![c.g.n, oc, ow]
    } else {
        vec![c.g.n, oc, oh, ow]
    };
    if grad.shape() != expected.as_slice() {
        return Err(a
            .err(format!(
                "grad_output of shape {:?} does not match the output {expected:?}",
                grad.shape()
            ))
            .with_kind(ErrorKind::Shape));
    }
    let g4 = grad
        .clone()
        .reshape(&[c.g.n, oc, oh, ow])
        .expect("same size");
    if grad.dtype() != c.x.dtype() {
        return Err(a
            .err("grad_output must have the input's dtype")
            .with_kind(ErrorKind::DType));
    }
    let empty = || HostArray::zeros(c.x.dtype(), &[0]);
    let mut out = vec![empty(), empty(), empty()];
    if want(0) {
        let g_rows = taps::to_rows(&g4)?;
        let gcols = mm(&g_rows, &c.weight(false)?)?;
        let rows = taps::col2im(&gcols, &c.g)?;
        let gx = taps::from_rows(rows, c.g.n, c.g.h, c.g.w)?;
        out[0] = gx.reshape(x.shape()).expect("same size");
    }
    if want(1) {
        let g_t = copy::permute(&g4, &[1, 0, 2, 3])?
            .reshape(&[oc, c.g.pixels()])
            .expect("same size");
        let gw = mm(&g_t, &c.cols()?)?;
        let [kh, kw] = c.g.kernel;
        let gw = gw.reshape(&[oc, kh, kw, c.g.c]).expect("same size");
        out[1] = copy::permute(&gw, &[0, 3, 1, 2])?
            .reshape(w.shape())
            .expect("same size");
    }
    if want(2) {
        let sum = [g4.into(), Value::IntList(vec![0, 2, 3]), false.into()];
        out[2] = Reduction::Sum.run(&sum)?.remove(0);
    }
    Ok(out)
}
