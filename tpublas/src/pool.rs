//! 2-D max pooling (`max_pool2d_with_indices` and its backward) over window taps (see
//! [`crate::taps`]: channels-last rows, prefetched row numbers per `(pixel, tap)`).
//!
//! Forward: grid `(pixels, channel blocks, taps arbitrary)`; each output row keeps its best
//! value and that value's position in the image plane (`y·w + x`, ATen's index) in scratch.
//! A tap replaces the best when it is the first tap inside the image, or greater, or NaN —
//! ATen's rule (`val > max || isnan(val)`), so the first of equal maxima wins and the last
//! NaN does. Padding taps are skipped.
//!
//! Backward: for each *input* pixel, the sum over the output pixels whose window holds it
//! (their taps, [`crate::taps::Geometry::backward`]) of the gradient where the saved index
//! is this pixel's position: a gather, so no two steps write one row. Indices that ATen's
//! forward would not produce (pointing outside the window) are not followed.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::taps::{self, Geometry, PoolWindow};
use crate::value::{Args, Value};
use crate::{copy, promote};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{CallSpec, DType, Kernel};
use tpukit::prelude::*;

pub const ATEN: &str = "aten.max_pool2d_with_indices.default";
pub const ATEN_BACKWARD: &str = "aten.max_pool2d_with_indices_backward.default";

#[tpu_kernel]
fn max_taps(
    rows: Prefetch,
    pos: Prefetch,
    x: In,
    o: Out,
    idx: Out,
    best: Scratch,
    arg: Scratch,
    out: DType,
) {
    let t = program_id(2);
    if t == 0 {
        best[..] = 0.0;
        arg[..] = -1;
    }
    let at = pos[(program_id(0), t)];
    if at >= 0 {
        let v = x[..].cast(f32);
        let take = (arg[..] < 0) | (v > best[..]) | (v != v);
        best[..] = where_(take, v, best[..]);
        arg[..] = where_(take, at, arg[..]);
    }
    if t == num_programs(2) - 1 {
        o[..] = best[..].cast(out);
        idx[..] = arg[..];
    }
}

#[tpu_kernel]
fn max_taps_backward(
    rows: Prefetch,
    target: Prefetch,
    g: In,
    idx: In,
    o: Out,
    acc: Scratch,
    out: DType,
) {
    let t = program_id(2);
    if t == 0 {
        acc[..] = 0.0;
    }
    let at = target[(program_id(0), t)];
    if at >= 0 {
        acc[..] += where_(idx[..] == at, g[..].cast(f32), 0.0);
    }
    if t == num_programs(2) - 1 {
        o[..] = acc[..].cast(out);
    }
}

pub fn kernel(dtype: DType) -> Result<Prepared> {
    memo(("max_taps", dtype), || Ok(build(dtype)?))
}

fn build(dtype: DType) -> tpukit::dsl::Result<Kernel> {
    let spec = CallSpec {
        grid: taps::reducing_grid(),
        prefetch: taps::prefetch_specs(),
        inputs: vec![taps::rows_in(
            dtype,
            prefetch(0, [grid(0), grid(2)]),
            grid(1),
        )],
        outputs: vec![taps::rows_out(dtype), taps::rows_out(DType::I32)],
        scratch: vec![
            ArraySpec::new(DType::F32, [taps::BC]),
            ArraySpec::new(DType::I32, [taps::BC]),
        ],
    };
    max_taps(&spec, dtype)
}

pub fn backward_kernel(dtype: DType) -> Result<Prepared> {
    memo(("max_taps_backward", dtype), || Ok(build_backward(dtype)?))
}

fn build_backward(dtype: DType) -> tpukit::dsl::Result<Kernel> {
    let row = || prefetch(0, [grid(0), grid(2)]);
    let spec = CallSpec {
        grid: taps::reducing_grid(),
        prefetch: taps::prefetch_specs(),
        inputs: vec![
            taps::rows_in(dtype, row(), grid(1)),
            taps::rows_in(DType::I32, row(), grid(1)),
        ],
        outputs: vec![taps::rows_out(dtype)],
        scratch: vec![ArraySpec::new(DType::F32, [taps::BC])],
    };
    max_taps_backward(&spec, dtype)
}

/// Every kernel the forward launches on `dtype`: the pooling, and the transposes to and
/// from channels-last (of the values and of the i32 indices).
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    Ok(vec![kernel(dtype)?]
        .into_iter()
        .chain(copy::kernels(dtype)?)
        .chain(copy::kernels(DType::I32)?)
        .collect())
}

pub fn backward_kernels(dtype: DType) -> Result<Vec<Prepared>> {
    Ok(vec![backward_kernel(dtype)?]
        .into_iter()
        .chain(copy::kernels(dtype)?)
        .chain(copy::kernels(DType::I32)?)
        .collect())
}

/// The window of a call `(…, kernel_size, stride=[], padding=0, dilation=1, ceil_mode)`
/// whose arguments start at `first`; an empty stride means the kernel size (ATen's default).
fn geometry(a: &Args, shape: &[usize], first: usize) -> Result<Geometry> {
    let window = PoolWindow::from_args(a, first)?;
    let dilation = taps::pair_or(a, first + 3, "dilation", 1, Some(1))?;
    window.check(a, first + 4)?;
    window.geometry(a, shape, dilation)
}

/// `max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)` →
/// `(out, indices)`, `indices` i32 (positions in each `h·w` plane; the Python frontend
/// widens them to ATen's int64). 3-D inputs are one image.
pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN, args);
    let x = a.tensor(0)?;
    promote::check(ATEN, x)?;
    let g = geometry(&a, x.shape(), 1)?;
    let (nc, h, w) = (g.n * g.c, g.h, g.w);
    // Channels-last rows, with every (n, c) plane a "channel" of one image row per pixel.
    let planes = x.clone().reshape(&[1, nc, h, w]).expect("same size");
    let rows = taps::to_rows(&planes)?;
    let flat = Geometry {
        n: 1,
        c: nc,
        ..g.clone()
    };
    let (r, pos) = flat.forward();
    let t = g.taps();
    let mut outs = crate::launch::all(
        &kernel(x.dtype())?,
        &[&taps::table(&r, t), &taps::table(&pos, t), &rows],
    )?;
    let mut shape = x.shape().to_vec();
    let rank = shape.len();
    shape[rank - 2..].copy_from_slice(&g.out);
    let mut result = Vec::new();
    for o in outs.drain(..) {
        let planes = taps::from_rows(o, 1, g.out[0], g.out[1])?;
        result.push(planes.reshape(&shape).expect("same size"));
    }
    Ok(result)
}

/// `max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding,
/// dilation, ceil_mode, indices)` → `grad_input`.
pub fn run_backward(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN_BACKWARD, args);
    let (grad, x, indices) = (a.tensor(0)?, a.tensor(1)?, a.tensor(7)?);
    promote::check(ATEN_BACKWARD, grad)?;
    let g = geometry(&a, x.shape(), 2)?;
    let mut out_shape = x.shape().to_vec();
    let rank = out_shape.len();
    out_shape[rank - 2..].copy_from_slice(&g.out);
    if grad.shape() != out_shape.as_slice() || indices.shape() != out_shape.as_slice() {
        return Err(a
            .err(format!(
                "grad_output and indices must have the pooled shape {out_shape:?}, got {:?} and {:?}",
                grad.shape(),
                indices.shape()
            ))
            .with_kind(ErrorKind::Shape));
    }
    if indices.dtype() != DType::I32 {
        return Err(a
            .err(format!("indices must be i32, got {}", indices.dtype()))
            .with_kind(ErrorKind::DType));
    }
    let nc = g.n * g.c;
    let planes = |t: &HostArray| {
        t.clone()
            .reshape(&[1, nc, g.out[0], g.out[1]])
            .expect("same size")
    };
    let (grows, irows) = (
        taps::to_rows(&planes(grad))?,
        taps::to_rows(&planes(indices))?,
    );
    let flat = Geometry {
        n: 1,
        c: nc,
        ..g.clone()
    };
    let (pixels, ok) = flat.backward();
    let target: Vec<i32> = ok
        .iter()
        .enumerate()
        .map(|(i, &ok)| {
            if ok == 1 {
                (i / flat.taps()) as i32
            } else {
                -1
            }
        })
        .collect();
    let t = g.taps();
    let out = crate::launch::one(
        &backward_kernel(grad.dtype())?,
        &[
            &taps::table(&pixels, t),
            &taps::table(&target, t),
            &grows,
            &irows,
        ],
    )?;
    let planes = taps::from_rows(out, 1, g.h, g.w)?;
    Ok(vec![planes.reshape(x.shape()).expect("same size")])
}
