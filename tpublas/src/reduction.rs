//! Reductions along dimensions (`sum.dim_IntList`, `mean.dim`, `amax`): one row kernel each
//! over `[m, n]` (see [`crate::rows`]), accumulating in f32 scratch across column blocks and
//! writing `[m, 1]` on the last one; and one column kernel each for the leading dimensions
//! (a bias gradient's `g.sum(0)`): `[m, n]` reduced along `m` in `[CM, CN]` windows, grid
//! `(cdiv(n, CN) parallel, cdiv(m, CM) arbitrary)`, into `[1, CN]` f32 scratch. Other
//! dimensions are reduced by first moving them last (a row-major copy, skipped when they
//! already are the trailing dims).

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::rows::{self, BM, BN};
use crate::value::{Args, Value};
use crate::{layout, promote};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{ArraySpec, CallSpec, DType, Dim, Extent, GridAxis, Kernel, grid};
use tpukit::prelude::*;

/// Row sums; overhanging columns read 0.
#[tpu_kernel]
fn row_sum(x: In, o: Out, s: Scratch, out: DType) {
    if program_id(2) == 0 {
        s[..] = 0.0;
    }
    s[..] += x[..].cast(f32).sum_keepdims(-1);
    if program_id(2) == num_programs(2) - 1 {
        o[..] = s[..].cast(out);
    }
}

/// Row means: the sum divided by the run-time row length `dim(x, 1)`.
#[tpu_kernel]
fn row_mean(x: In, o: Out, s: Scratch, out: DType) {
    if program_id(2) == 0 {
        s[..] = 0.0;
    }
    s[..] += x[..].cast(f32).sum_keepdims(-1);
    if program_id(2) == num_programs(2) - 1 {
        o[..] = (s[..] / dim(x, 1).cast(f32)).cast(out);
    }
}

/// Row maxima; overhanging columns read −∞. NaN propagates (`max` is NaN-propagating).
#[tpu_kernel]
fn row_max(x: In, o: Out, s: Scratch, lowest: f32, out: DType) {
    if program_id(2) == 0 {
        s[..] = lowest;
    }
    s[..] = s[..].max(x[..].cast(f32).reduce_max_keepdims(-1));
    if program_id(2) == num_programs(2) - 1 {
        o[..] = s[..].cast(out);
    }
}

/// Column sums; overhanging rows read 0.
#[tpu_kernel]
fn col_sum(x: In, o: Out, s: Scratch, out: DType) {
    if program_id(1) == 0 {
        s[..] = 0.0;
    }
    s[..] += x[..].cast(f32).sum_keepdims(0);
    if program_id(1) == num_programs(1) - 1 {
        o[..] = s[..].cast(out);
    }
}

/// Column means: the sum divided by the run-time column length `dim(x, 0)`.
#[tpu_kernel]
fn col_mean(x: In, o: Out, s: Scratch, out: DType) {
    if program_id(1) == 0 {
        s[..] = 0.0;
    }
    s[..] += x[..].cast(f32).sum_keepdims(0);
    if program_id(1) == num_programs(1) - 1 {
        o[..] = (s[..] / dim(x, 0).cast(f32)).cast(out);
    }
}

/// Column maxima; overhanging rows read −∞. NaN propagates.
#[tpu_kernel]
fn col_max(x: In, o: Out, s: Scratch, lowest: f32, out: DType) {
    if program_id(1) == 0 {
        s[..] = lowest;
    }
    s[..] = s[..].max(x[..].cast(f32).reduce_max_keepdims(0));
    if program_id(1) == num_programs(1) - 1 {
        o[..] = s[..].cast(out);
    }
}

const _: () = assert!(BM == 16 && BN == 512);

/// Rows per window of the column kernels: 32 KiB of f32 per step.
pub const CM: usize = 64;

/// Columns per window of the column kernels: one 128-lane vreg, so that 768 columns are 6
/// blocks (3 per thread on two), not 2 of 512 (the threads splitting 2:1).
pub const CN: usize = 128;

/// The reductions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reduction {
    Sum,
    Mean,
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

    /// The kernel reducing the rows of an `[m, n]` array of `dtype` into `[m, 1]` of `out`,
    /// in windows of [`BN`] columns.
    pub fn kernel(self, dtype: DType, out: DType) -> Result<Prepared> {
        self.kernel_by(dtype, out, BM, BN)
    }

    /// [`Reduction::kernel`] in windows of `bm` rows and `bn` columns (see [`rows::height`],
    /// [`rows::width`]).
    pub fn kernel_by(self, dtype: DType, out: DType, bm: usize, bn: usize) -> Result<Prepared> {
        memo(("reduction", self, dtype, out, bm, bn), || {
            Ok(self.build(dtype, out, bm, bn)?)
        })
    }

    fn build(self, dtype: DType, out: DType, bm: usize, bn: usize) -> tpukit::dsl::Result<Kernel> {
        let spec = CallSpec {
            grid: rows::phased_grid_of(1, bm, bn),
            inputs: vec![rows::input_of(dtype, self.fill(), bm, bn)],
            outputs: vec![rows::stat_of(out, bm)],
            scratch: vec![rows::acc_of(bm)],
            ..Default::default()
        };
        match self {
            Reduction::Sum => row_sum(&spec, out),
            Reduction::Mean => row_mean(&spec, out),
            Reduction::Amax => row_max(&spec, f32::NEG_INFINITY, out),
        }
    }

    /// The kernel reducing the columns of an `[m, n]` array of `dtype` into `[1, n]` of
    /// `out`, in `[CM, CN]` windows.
    pub fn column_kernel(self, dtype: DType, out: DType) -> Result<Prepared> {
        memo(("column reduction", self, dtype, out), || {
            let input = ArraySpec::new(dtype, ["m", "n"])
                .blocked([CM, CN], [grid(1), grid(0)])
                .fill(self.fill());
            let spec = CallSpec {
                grid: vec![
                    GridAxis::parallel(Extent::cdiv("n", CN)),
                    GridAxis::arbitrary(Extent::cdiv("m", CM)),
                ],
                inputs: vec![input],
                outputs: vec![
                    ArraySpec::new(out, [Dim::Static(1), Dim::sym("n")])
                        .blocked([1, CN], [0.into(), grid(0)]),
                ],
                scratch: vec![ArraySpec::new(DType::F32, [1, CN])],
                ..Default::default()
            };
            Ok(match self {
                Reduction::Sum => col_sum(&spec, out)?,
                Reduction::Mean => col_mean(&spec, out)?,
                Reduction::Amax => col_max(&spec, f32::NEG_INFINITY, out)?,
            })
        })
    }

    /// What overhanging elements read: the reduction's identity.
    fn fill(self) -> f64 {
        if self == Reduction::Amax {
            f64::NEG_INFINITY
        } else {
            0.0
        }
    }

    /// Every kernel for inputs of `dtype`: the row reduction in every window height and
    /// width, the column reduction, and the transpose that moves reduced dims last.
    pub fn kernels(self, dtype: DType) -> Result<Vec<Prepared>> {
        let mut k = Vec::new();
        for bm in [BM, rows::SHORT] {
            for bn in rows::WIDTHS {
                k.push(self.kernel_by(dtype, dtype, bm, bn)?);
            }
        }
        k.push(self.column_kernel(dtype, dtype)?);
        k.extend(crate::copy::kernels(dtype)?);
        if self != Reduction::Amax {
            // `dtype=` the other float dtype: `x` converted first.
            let other = match dtype {
                DType::F32 => DType::BF16,
                _ => DType::F32,
            };
            k.push(crate::cast::kernel(dtype, other)?);
        }
        Ok(k)
    }

    /// `op(x, dim, keepdim, *, dtype)`: ATen's `dim` list (empty or absent: every dim),
    /// negative dims counting from the end. The result keeps `x`'s dtype, or takes `dtype`
    /// (sum and mean; `x` is converted first, as ATen does).
    pub fn run(self, args: &[Value]) -> Result<Vec<HostArray>> {
        let a = Args::new(self.aten(), args);
        let x = a.tensor(0)?;
        promote::check(self.aten(), x)?;
        let converted;
        let x = match a.opt_dtype(3)? {
            Some(_) if self == Reduction::Amax => return Err(a.err("takes no dtype")),
            Some(d) => {
                converted = crate::cast::to(x, d)?;
                &converted
            }
            None => x,
        };
        let rank = x.shape().len();
        let mut dims: Vec<usize> = match a.opt_int_list(1)? {
            Some(d) if !d.is_empty() => d.iter().map(|&d| a.dim(d, rank)).collect::<Result<_>>()?,
            _ => (0..rank).collect(),
        };
        dims.sort();
        if let Some(w) = dims.windows(2).find(|w| w[0] == w[1]) {
            // ATen refuses a dim given twice (`[0, 0]`, `[1, -1]`) rather than reducing once.
            return Err(a.err(format!(
                "dim {} appears multiple times in the list of dims",
                w[0]
            )));
        }
        if rank == 0 {
            // A 0-d tensor takes `dim=0` or `-1` (checked above) and has nothing to move.
            dims.clear();
        }
        let keepdim = a.bool_or(2, false)?;
        if self == Reduction::Amax && dims.iter().any(|&d| x.shape()[d] == 0) {
            return Err(a
                .err("cannot reduce over a zero-size dimension")
                .with_kind(ErrorKind::Shape));
        }
        let reduced: usize = dims.iter().map(|&d| x.shape()[d]).product();
        let kept: usize = x.shape()[dims.len()..].iter().product();
        let leading = dims.len() < rank && dims.iter().enumerate().all(|(i, &d)| i == d);
        let mut out = if leading && reduced > 0 && kept > 0 {
            // The leading dims: reduced where they are, no copy that moves them last.
            let cols = x.clone().reshape(&[reduced, kept]).expect("same size");
            crate::launch::one(&self.column_kernel(x.dtype(), x.dtype())?, &[&cols])?
        } else {
            let (rows_x, _) = layout::to_rows(x, &dims)?;
            let (m, n) = (rows_x.shape()[0], rows_x.shape()[1]);
            let k = self.kernel_by(x.dtype(), x.dtype(), rows::height(m), rows::width(n))?;
            crate::launch::one(&k, &[&rows_x])?
        };
        if reduced == 0 && self == Reduction::Mean {
            // Nothing was summed: the sum is 0, the mean 0/0 = NaN (as in ATen).
            let size = out.shape().iter().product::<usize>();
            out = HostArray::from_f64(x.dtype(), out.shape(), &vec![f64::NAN; size]);
        }
        let shape: Vec<usize> = (0..rank)
            .filter_map(|d| match (dims.contains(&d), keepdim) {
                (false, _) => Some(x.shape()[d]),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        Ok(vec![out.reshape(&shape).expect("same size")])
    }
}
