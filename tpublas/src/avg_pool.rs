//! 2-D average pooling (`avg_pool2d` and its backward) over window taps (see
//! [`crate::taps`]): the forward is the tap sum of [`crate::taps::sum_kernel`] (padding taps
//! skipped) divided per output pixel by ATen's divisor — `divisor_override`, else the window
//! size with `count_include_pad`, else the number of taps inside the image. The backward
//! divides the gradient by the same divisors and sums, for each input pixel, the output
//! pixels whose window holds it (the same kernel on [`Geometry::backward`]'s table).
//!
//! The division is the pointwise `div` with a per-pixel `[pixels, 1]` column, so for bf16 the
//! sum is rounded once before it (ATen divides in f32 and rounds once).

use crate::Result;
use crate::elementwise::{self, Binary};
use crate::launch::Prepared;
use crate::taps::{self, Geometry, PoolWindow};
use crate::value::{Args, Value};
use crate::{copy, promote};
use tpukit::dsl::DType;
use tpukit::dsl::ErrorKind;
use tpukit::prelude::*;

pub const ATEN: &str = "aten.avg_pool2d.default";
pub const ATEN_BACKWARD: &str = "aten.avg_pool2d_backward.default";

/// Every kernel either direction launches on `dtype`: the tap sum, the transposes to and
/// from channels-last, and the division by a column.
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let mut k = vec![taps::sum_kernel(dtype)?];
    k.extend(copy::kernels(dtype)?);
    k.extend(Binary::Div.kernels(dtype)?);
    Ok(k)
}

/// The window of `(self, kernel_size, stride=[], padding=0, ceil_mode, count_include_pad,
/// divisor_override)` arguments from `first` (the kernel size), and the divisor of each
/// output pixel (one image plane: the same for every image and channel).
fn window(a: &Args, shape: &[usize], first: usize) -> Result<(Geometry, Vec<f64>)> {
    let window = PoolWindow::from_args(a, first)?;
    window.check(a, first + 3)?;
    let include_pad = a.bool_or(first + 4, true)?;
    let override_ = match a.values.get(first + 5) {
        Some(Value::Int(d)) if *d != 0 => Some(*d as f64),
        Some(Value::Int(_)) => return Err(a.err("divisor_override must not be 0")),
        _ => None,
    };
    let g = window.geometry(a, shape, [1, 1])?;
    let plane = Geometry { n: 1, ..g.clone() };
    let (_, pos) = plane.forward();
    let divisors = pos
        .chunks(g.taps())
        .map(|taps| match (override_, include_pad) {
            (Some(d), _) => d,
            (None, true) => g.taps() as f64,
            (None, false) => taps.iter().filter(|&&p| p >= 0).count() as f64,
        })
        .collect();
    Ok((g, divisors))
}

/// `[N·C, H, W]` planes as channels-last rows `[H·W, N·C]`.
fn plane_rows(x: &HostArray, nc: usize, h: usize, w: usize) -> Result<HostArray> {
    taps::to_rows(&x.clone().reshape(&[1, nc, h, w]).expect("same size"))
}

/// `[pixels, N·C]` rows divided by each pixel's divisor.
fn divided(rows: &HostArray, divisors: &[f64]) -> Result<HostArray> {
    let column = HostArray::from_f64(DType::F32, &[divisors.len(), 1], divisors);
    let out = elementwise::binary(Binary::Div, rows, &column, 1.0)?;
    Ok(promote::to(&out, rows.dtype()))
}

/// `avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
/// divisor_override)`; 3-D inputs are one image.
pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN, args);
    let x = a.tensor(0)?;
    promote::check(ATEN, x)?;
    let (g, divisors) = window(&a, x.shape(), 1)?;
    let nc = g.n * g.c;
    let rows = plane_rows(x, nc, g.h, g.w)?;
    let plane = Geometry {
        n: 1,
        c: nc,
        ..g.clone()
    };
    let (r, pos) = plane.forward();
    let ok: Vec<i32> = pos.iter().map(|&p| i32::from(p >= 0)).collect();
    let t = g.taps();
    let sums = crate::launch::one(
        &taps::sum_kernel(x.dtype())?,
        &[&taps::table(&r, t), &taps::table(&ok, t), &rows],
    )?;
    let out = taps::from_rows(divided(&sums, &divisors)?, 1, g.out[0], g.out[1])?;
    let mut shape = x.shape().to_vec();
    let rank = shape.len();
    shape[rank - 2..].copy_from_slice(&g.out);
    Ok(vec![out.reshape(&shape).expect("same size")])
}

/// `avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
/// count_include_pad, divisor_override)` → `grad_input`.
pub fn run_backward(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN_BACKWARD, args);
    let (grad, x) = (a.tensor(0)?, a.tensor(1)?);
    promote::check(ATEN_BACKWARD, grad)?;
    let (g, divisors) = window(&a, x.shape(), 2)?;
    let mut out_shape = x.shape().to_vec();
    let rank = out_shape.len();
    out_shape[rank - 2..].copy_from_slice(&g.out);
    if grad.shape() != out_shape.as_slice() || grad.dtype() != x.dtype() {
        return Err(a
            .err(format!(
                "grad_output must be {} of the pooled shape {out_shape:?}, got {} {:?}",
                x.dtype(),
                grad.dtype(),
                grad.shape()
            ))
            .with_kind(ErrorKind::Shape));
    }
    let nc = g.n * g.c;
    let scaled = divided(&plane_rows(grad, nc, g.out[0], g.out[1])?, &divisors)?;
    let plane = Geometry {
        n: 1,
        c: nc,
        ..g.clone()
    };
    let (pixels, ok) = plane.backward();
    let t = g.taps();
    let rows = crate::launch::one(
        &taps::sum_kernel(grad.dtype())?,
        &[&taps::table(&pixels, t), &taps::table(&ok, t), &scaled],
    )?;
    let planes = taps::from_rows(rows, 1, g.h, g.w)?;
    Ok(vec![planes.reshape(x.shape()).expect("same size")])
}
