//! Sliding windows (convolution, pooling) as *taps*: an `[N, C, H, W]` tensor is presented
//! channels-last, as the rows `[N·H·W, C]` (so one pixel's channels are one contiguous row),
//! and output pixel `p = (n, oh, ow)` reads, at tap `t = (kh, kw)`, the input row of pixel
//! `(n, oh·s − pad + kh·d, ow·s − pad + kw·d)`. A [`Geometry`] computes, on the host, the
//! row numbers of every `(pixel, tap)` and whether that tap is in the image (padding taps are
//! not); the kernels prefetch both, their index maps read the row and their bodies skip the
//! padding taps (their row number is clamped to 0, a row that exists).
//!
//! Two kernels live here, both over rows of `BC` channels:
//! - [`gather_kernel`] (im2col): `[P, T, C]` with zeros at padding taps, so a convolution is one
//!   matmul of `[P, T·C] @ [T·C, OC]`;
//! - [`sum_kernel`] (col2im): for each *input* pixel, the sum over its taps of the rows of a
//!   `[P·T, C]` array that the forward gather read it into — the adjoint of the gather,
//!   computed as a gather so that no two grid steps write one row (an f32 accumulator over
//!   an `arbitrary` tap axis).
//!
//! Why gathers and matmuls rather than one direct kernel: the matmul kernels are already
//! blocked for the MXU and cover every extent, while a direct kernel would multiply
//! `[1, C]` rows (C is 3 for an image) one tap at a time.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::value::Args;
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{BlockDim, CallSpec, DType, IndexExpr, Kernel};
use tpukit::prelude::*;

/// Channels per window (1-D windows of 512 do not compile for bf16; see
/// [`crate::indexing::BN`]).
pub const BC: usize = 128;

#[tpu_kernel]
fn gather_taps(rows: Prefetch, ok: Prefetch, x: In, o: Out) {
    let keep = ok[(program_id(0), program_id(1))];
    if keep > 0 {
        o[..] = x[..];
    }
    if keep == 0 {
        o[..] = 0.0;
    }
}

#[tpu_kernel]
fn sum_taps(rows: Prefetch, ok: Prefetch, x: In, o: Out, acc: Scratch, out: DType) {
    let t = program_id(2);
    if t == 0 {
        acc[..] = 0.0;
    }
    if ok[(program_id(0), t)] > 0 {
        acc[..] += x[..].cast(f32);
    }
    if t == num_programs(2) - 1 {
        o[..] = acc[..].cast(out);
    }
}

/// The prefetched `[pixels, taps]` row numbers and flags.
pub fn prefetch_specs() -> Vec<ArraySpec> {
    vec![ArraySpec::new(DType::I32, ["p", "t"]); 2]
}

/// A 1-D window of `BC` channels of row `row` of the `[r, c]` rows `dtype`.
pub fn rows_in(dtype: DType, row: IndexExpr, block: IndexExpr) -> ArraySpec {
    ArraySpec::new(dtype, ["r", "c"])
        .blocked([BlockDim::Squeezed, BlockDim::Blocked(BC)], [row, block])
}

/// The `[p, c]` per-pixel output rows of a kernel whose grid is `(p, c-blocks, taps)`.
pub fn rows_out(dtype: DType) -> ArraySpec {
    ArraySpec::new(dtype, ["p", "c"]).blocked(
        [BlockDim::Squeezed, BlockDim::Blocked(BC)],
        [grid(0), grid(1)],
    )
}

/// The grid `(p parallel, c-blocks parallel, t arbitrary)` of a kernel reducing over taps.
pub fn reducing_grid() -> Vec<GridAxis> {
    vec![
        GridAxis::parallel(Extent::cdiv("p", 1)),
        GridAxis::parallel(Extent::cdiv("c", BC)),
        GridAxis::arbitrary(Extent::cdiv("t", 1)),
    ]
}

/// The im2col kernel for rows of `dtype`.
pub fn gather_kernel(dtype: DType) -> Result<Prepared> {
    memo(("gather_taps", dtype), || Ok(build_gather(dtype)?))
}

fn build_gather(dtype: DType) -> tpukit::dsl::Result<Kernel> {
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("p", 1)),
            GridAxis::parallel(Extent::cdiv("t", 1)),
            GridAxis::parallel(Extent::cdiv("c", BC)),
        ],
        prefetch: prefetch_specs(),
        inputs: vec![rows_in(dtype, prefetch(0, [grid(0), grid(1)]), grid(2))],
        outputs: vec![ArraySpec::new(dtype, ["p", "t", "c"]).blocked(
            [
                BlockDim::Squeezed,
                BlockDim::Squeezed,
                BlockDim::Blocked(BC),
            ],
            [grid(0), grid(1), grid(2)],
        )],
        ..Default::default()
    };
    gather_taps(&spec)
}

/// The col2im kernel for rows of `dtype`.
pub fn sum_kernel(dtype: DType) -> Result<Prepared> {
    memo(("sum_taps", dtype), || Ok(build_sum(dtype)?))
}

fn build_sum(dtype: DType) -> tpukit::dsl::Result<Kernel> {
    let spec = CallSpec {
        grid: reducing_grid(),
        prefetch: prefetch_specs(),
        inputs: vec![rows_in(dtype, prefetch(0, [grid(0), grid(2)]), grid(1))],
        outputs: vec![rows_out(dtype)],
        scratch: vec![ArraySpec::new(DType::F32, [BC])],
    };
    sum_taps(&spec, dtype)
}

/// The shape of a 2-D sliding window over `[n, c, h, w]`: extents, kernel, stride, padding,
/// dilation, and the output extents they give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub pad: [usize; 2],
    pub dilation: [usize; 2],
    pub out: [usize; 2],
}

/// A 2-element list argument (`int[2]`), one value standing for both (as ATen's).
pub fn pair(a: &Args, i: usize, what: &str, min: i64) -> Result<[usize; 2]> {
    pair_or(a, i, what, min, None)
}

/// [`pair`], `default` when the argument is absent (`None`: required).
pub fn pair_or(
    a: &Args,
    i: usize,
    what: &str,
    min: i64,
    default: Option<usize>,
) -> Result<[usize; 2]> {
    let v = match (a.opt_int_list(i)?, default) {
        (None, Some(d)) => return Ok([d, d]),
        _ => a.int_list(i)?,
    };
    let v = match v[..] {
        [x] => [x, x],
        [x, y] => [x, y],
        _ => return Err(a.err(format!("{what} must have 1 or 2 values, got {v:?}"))),
    };
    if v.iter().any(|&x| x < min) {
        return Err(a
            .err(format!("{what} must be at least {min}, got {v:?}"))
            .with_kind(ErrorKind::Shape));
    }
    Ok(v.map(|x| x as usize))
}

/// A pooling call's window: its `kernel_size, stride=[], padding=0` arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolWindow {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub pad: [usize; 2],
}

impl PoolWindow {
    /// The window of arguments from `first` (the kernel size); an empty stride means the
    /// kernel size (ATen's default).
    pub fn from_args(a: &Args, first: usize) -> Result<PoolWindow> {
        let kernel = pair(a, first, "kernel_size", 1)?;
        let stride = match a.opt_int_list(first + 1)? {
            Some(s) if !s.is_empty() => pair(a, first + 1, "stride", 1)?,
            _ => kernel,
        };
        let pad = pair_or(a, first + 2, "padding", 0, Some(0))?;
        Ok(PoolWindow {
            kernel,
            stride,
            pad,
        })
    }

    /// Refuses `ceil_mode=True` (the argument at `ceil_mode`: unsupported) and, as ATen,
    /// padding more than half of the kernel.
    pub fn check(&self, a: &Args, ceil_mode: usize) -> Result<()> {
        if a.bool_or(ceil_mode, false)? {
            return Err(a
                .err("ceil_mode=True is not supported")
                .with_kind(ErrorKind::Unsupported));
        }
        let (kernel, pad) = (self.kernel, self.pad);
        if pad[0] * 2 > kernel[0] || pad[1] * 2 > kernel[1] {
            return Err(a
                .err(format!(
                    "padding {pad:?} must be at most half of kernel_size {kernel:?}"
                ))
                .with_kind(ErrorKind::Shape));
        }
        Ok(())
    }

    /// The window, with `dilation`, over images of `shape` (`[n, c, h, w]`, or `[c, h, w]`
    /// for one image); see [`Geometry::new`].
    pub fn geometry(&self, a: &Args, shape: &[usize], dilation: [usize; 2]) -> Result<Geometry> {
        let images = if shape.len() == 3 {
            [&[1], shape].concat()
        } else {
            shape.to_vec()
        };
        Geometry::new(a, &images, self.kernel, self.stride, self.pad, dilation)
    }
}

impl Geometry {
    /// The window over `shape` (`[n, c, h, w]`); an error naming `a`'s operator when the
    /// window (dilated) does not fit in the padded image.
    pub fn new(
        a: &Args,
        shape: &[usize],
        kernel: [usize; 2],
        stride: [usize; 2],
        pad: [usize; 2],
        dilation: [usize; 2],
    ) -> Result<Geometry> {
        let [n, c, h, w] = shape[..] else {
            return Err(a
                .err(format!("expected a 4-D input, got shape {shape:?}"))
                .with_kind(ErrorKind::Shape));
        };
        let mut out = [0; 2];
        for (i, size) in [h, w].into_iter().enumerate() {
            let span = dilation[i] * (kernel[i] - 1) + 1;
            let padded = size + 2 * pad[i];
            if kernel[i] == 0 || stride[i] == 0 || span > padded {
                return Err(a
                    .err(format!(
                        "a window of {kernel:?} (dilation {dilation:?}, stride {stride:?}) does not \
                         fit an input of {:?} padded by {pad:?}",
                        &shape[2..]
                    ))
                    .with_kind(ErrorKind::Shape));
            }
            out[i] = (padded - span) / stride[i] + 1;
        }
        Ok(Geometry {
            n,
            c,
            h,
            w,
            kernel,
            stride,
            pad,
            dilation,
            out,
        })
    }

    pub fn taps(&self) -> usize {
        self.kernel[0] * self.kernel[1]
    }

    /// Output pixels `n·oh·ow`.
    pub fn pixels(&self) -> usize {
        self.n * self.out[0] * self.out[1]
    }

    /// The input coordinate read by output coordinate `o` at kernel offset `k` along axis
    /// `i`, if it is inside the image.
    fn source(&self, i: usize, o: usize, k: usize) -> Option<usize> {
        let x = (o * self.stride[i] + k * self.dilation[i]).checked_sub(self.pad[i])?;
        (x < [self.h, self.w][i]).then_some(x)
    }

    /// For each output pixel and tap (`[pixels, taps]`, row-major): the input row
    /// (`(n·h + y)·w + x`, 0 for a padding tap) and the tap's position in its image plane
    /// (`y·w + x`, −1 for a padding tap).
    pub fn forward(&self) -> (Vec<i32>, Vec<i32>) {
        let (mut rows, mut pos) = (Vec::new(), Vec::new());
        for n in 0..self.n {
            for oy in 0..self.out[0] {
                for ox in 0..self.out[1] {
                    for ky in 0..self.kernel[0] {
                        for kx in 0..self.kernel[1] {
                            match (self.source(0, oy, ky), self.source(1, ox, kx)) {
                                (Some(y), Some(x)) => {
                                    rows.push(((n * self.h + y) * self.w + x) as i32);
                                    pos.push((y * self.w + x) as i32);
                                }
                                _ => {
                                    rows.push(0);
                                    pos.push(-1);
                                }
                            }
                        }
                    }
                }
            }
        }
        (rows, pos)
    }

    /// The output coordinate that reads input coordinate `x` at kernel offset `k` along
    /// axis `i`, if there is one.
    fn reader(&self, i: usize, x: usize, k: usize) -> Option<usize> {
        let a = (x + self.pad[i]).checked_sub(k * self.dilation[i])?;
        let o = a / self.stride[i];
        (a % self.stride[i] == 0 && o < self.out[i]).then_some(o)
    }

    /// For each *input* pixel and tap (`[n·h·w, taps]`): the output pixel that reads it at
    /// that tap (`(n·oh + oy)·ow + ox`, 0 if none) and whether there is one (1 or 0).
    pub fn backward(&self) -> (Vec<i32>, Vec<i32>) {
        let (mut pixels, mut ok) = (Vec::new(), Vec::new());
        for n in 0..self.n {
            for y in 0..self.h {
                for x in 0..self.w {
                    for ky in 0..self.kernel[0] {
                        for kx in 0..self.kernel[1] {
                            match (self.reader(0, y, ky), self.reader(1, x, kx)) {
                                (Some(oy), Some(ox)) => {
                                    pixels.push(((n * self.out[0] + oy) * self.out[1] + ox) as i32);
                                    ok.push(1);
                                }
                                _ => {
                                    pixels.push(0);
                                    ok.push(0);
                                }
                            }
                        }
                    }
                }
            }
        }
        (pixels, ok)
    }
}

/// A `[rows, taps]` i32 prefetch operand.
pub fn table(values: &[i32], taps: usize) -> HostArray {
    let v: Vec<f64> = values.iter().map(|&x| x as f64).collect();
    HostArray::from_f64(DType::I32, &[values.len() / taps.max(1), taps], &v)
}

/// `x` (`[n, c, h, w]`) as channels-last rows `[n·h·w, c]`.
pub fn to_rows(x: &HostArray) -> Result<HostArray> {
    let s = x.shape().to_vec();
    let t = crate::copy::permute(x, &[0, 2, 3, 1])?;
    Ok(t.reshape(&[s[0] * s[2] * s[3], s[1]]).expect("same size"))
}

/// Channels-last rows `[n·h·w, c]` back as `[n, c, h, w]`.
pub fn from_rows(rows: HostArray, n: usize, h: usize, w: usize) -> Result<HostArray> {
    let c = rows.shape()[1];
    let t = rows.reshape(&[n, h, w, c]).expect("same size");
    crate::copy::permute(&t, &[0, 3, 1, 2])
}

/// im2col: the `[pixels, taps·c]` matrix of `rows` (`[n·h·w, c]`, channels-last) under `g`.
pub fn im2col(rows: &HostArray, g: &Geometry) -> Result<HostArray> {
    let (r, ok) = g.forward();
    let ok: Vec<i32> = ok.iter().map(|&p| i32::from(p >= 0)).collect();
    let t = g.taps();
    let out = crate::launch::one(
        &gather_kernel(rows.dtype())?,
        &[&table(&r, t), &table(&ok, t), rows],
    )?;
    Ok(out.reshape(&[g.pixels(), t * g.c]).expect("same size"))
}

/// col2im: the channels-last input rows `[n·h·w, c]` whose im2col under `g` is adjoint to
/// `cols` (`[pixels, taps·c]`): each input row sums the columns that read it.
pub fn col2im(cols: &HostArray, g: &Geometry) -> Result<HostArray> {
    let t = g.taps();
    let (p, ok) = g.backward();
    let rows: Vec<i32> = p
        .iter()
        .enumerate()
        .map(|(i, &p)| p * t as i32 + (i % t) as i32)
        .collect();
    let x = cols
        .clone()
        .reshape(&[g.pixels() * t, g.c])
        .expect("same size");
    crate::launch::one(
        &sum_kernel(cols.dtype())?,
        &[&table(&rows, t), &table(&ok, t), &x],
    )
}
