//! Materialised axis permutations (`permute`, `transpose.int`; ATen returns views, tpuBLAS
//! returns row-major copies). Two kernels do all of them: the batched transpose
//! `[a, b, c] → [a, c, b]` in `T × T` tiles (`o = x.t()` per tile, overhangs dropped), and,
//! for a permutation that keeps the last axis in place with rows of at least [`ROW`]
//! elements, the row swap `[a, b, c, d] → [a, c, b, d]`, which moves whole rows of `d` in
//! `T × T` windows (`o = x`; attention's `[B, H, L, E] → [B, L, H, E]` is one launch of it).
//! A permutation of rank r runs as at most r − 1 of either: step p brings the axis wanted at
//! position p forward by swapping the group of axes before it with the group from it to
//! the end (to the last axis, kept, for the row swap).

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::promote;
use crate::value::{Args, Value};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{BlockDim, CallSpec, DType, Dim};
use tpukit::prelude::*;

/// Tile extent of the transpose.
pub const T: usize = 128;

#[tpu_kernel]
fn transpose_tiles(x: In, o: Out) {
    o[..] = x[..].t();
}

fn spec(dtype: DType) -> CallSpec {
    let block = [
        BlockDim::Squeezed,
        BlockDim::Blocked(T),
        BlockDim::Blocked(T),
    ];
    let array = |r: &str, c: &str| ArraySpec::new(dtype, [Dim::sym("a"), Dim::sym(r), Dim::sym(c)]);
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("a", 1)),
            GridAxis::parallel(Extent::cdiv("b", T)),
            GridAxis::parallel(Extent::cdiv("c", T)),
        ],
        inputs: vec![array("b", "c").blocked(block, [grid(0), grid(1), grid(2)])],
        outputs: vec![array("c", "b").blocked(block, [grid(0), grid(2), grid(1)])],
        ..Default::default()
    }
}

/// The fewest elements of a kept last axis for which a permutation moves whole rows (the row
/// swap): shorter rows fill too little of its windows, whose columns are `T` wide.
pub const ROW: usize = 16;

#[tpu_kernel]
fn swap_rows(x: In, o: Out) {
    o[..] = x[..];
}

/// `[a, b, c, d] → [a, c, b, d]`: per step, `T` rows of one `(a, b)` pair, `T` columns wide.
fn rows_spec(dtype: DType) -> CallSpec {
    let array = |b: &str, c: &str| {
        ArraySpec::new(
            dtype,
            [Dim::sym("a"), Dim::sym(b), Dim::sym(c), Dim::sym("d")],
        )
    };
    let squeezed = BlockDim::Squeezed;
    let tile = BlockDim::Blocked(T);
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("a", 1)),
            GridAxis::parallel(Extent::cdiv("b", 1)),
            GridAxis::parallel(Extent::cdiv("c", T)),
            GridAxis::parallel(Extent::cdiv("d", T)),
        ],
        inputs: vec![array("b", "c").blocked(
            [squeezed, squeezed, tile, tile],
            [grid(0), grid(1), grid(2), grid(3)],
        )],
        outputs: vec![array("c", "b").blocked(
            [squeezed, tile, squeezed, tile],
            [grid(0), grid(2), grid(1), grid(3)],
        )],
        ..Default::default()
    }
}

/// The transpose kernel.
fn kernel(dtype: DType) -> Result<Prepared> {
    memo(("transpose", dtype), || Ok(transpose_tiles(&spec(dtype))?))
}

/// The row swap kernel.
fn rows_kernel(dtype: DType) -> Result<Prepared> {
    memo(("swap rows", dtype), || Ok(swap_rows(&rows_spec(dtype))?))
}

/// Both kernels [`permute`] launches, the transpose first.
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    Ok(vec![kernel(dtype)?, rows_kernel(dtype)?])
}

/// `x` with axes permuted (`out.shape[i] = x.shape[perm[i]]`) on the device.
pub fn permute(x: &HostArray, perm: &[usize]) -> Result<HostArray> {
    let mut t = x.clone();
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(t);
    }
    let last = perm.len() - 1;
    // Whole rows move when the last axis stays and is long enough: the steps then permute
    // the axes before it, each row an element.
    let rows = perm[last] == last && x.shape()[last] >= ROW;
    let (k, axes) = match rows {
        true => (rows_kernel(x.dtype())?, last),
        false => (kernel(x.dtype())?, perm.len()),
    };
    let mut cur: Vec<usize> = (0..axes).collect();
    let size = |axes: &[usize]| axes.iter().map(|&d| x.shape()[d]).product::<usize>();
    for p in 0..axes {
        let q = cur
            .iter()
            .position(|&d| d == perm[p])
            .expect("a permutation");
        if q == p {
            continue;
        }
        let (a, b, c) = (size(&cur[..p]), size(&cur[p..q]), size(&cur[q..]));
        let shape = match rows {
            true => vec![a, b, c, x.shape()[last]],
            false => vec![a, b, c],
        };
        let x3 = t.reshape(&shape).expect("same size");
        t = crate::launch::one(&k, &[&x3])?;
        let moved: Vec<usize> = cur[q..].iter().chain(&cur[p..q]).copied().collect();
        cur.splice(p.., moved);
    }
    let shape: Vec<usize> = perm.iter().map(|&d| x.shape()[d]).collect();
    Ok(t.reshape(&shape).expect("same size"))
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Permute {
    Permute,
    Transpose,
}

impl Permute {
    pub fn aten(self) -> &'static str {
        match self {
            Permute::Permute => "aten.permute.default",
            Permute::Transpose => "aten.transpose.int",
        }
    }

    /// `permute(x, dims)`, `transpose(x, dim0, dim1)`.
    pub fn run(self, args: &[Value]) -> Result<Vec<HostArray>> {
        let a = Args::new(self.aten(), args);
        let x = a.tensor(0)?;
        promote::check(self.aten(), x)?;
        let rank = x.shape().len();
        let perm: Vec<usize> = match self {
            Permute::Permute => {
                let dims = a.int_list(1)?;
                let perm: Vec<usize> = dims
                    .iter()
                    .map(|&d| a.dim(d, rank))
                    .collect::<Result<_>>()?;
                let mut seen = perm.clone();
                seen.sort();
                if seen != (0..rank).collect::<Vec<_>>() {
                    return Err(a
                        .err(format!("{dims:?} is not a permutation of {rank} dims"))
                        .with_kind(ErrorKind::Shape));
                }
                perm
            }
            Permute::Transpose => {
                let (d0, d1) = (a.dim(a.int(1)?, rank)?, a.dim(a.int(2)?, rank)?);
                let mut p: Vec<usize> = (0..rank).collect();
                p.swap(d0, d1);
                p
            }
        };
        if rank == 0 {
            return Ok(vec![x.clone()]);
        }
        Ok(vec![permute(x, &perm)?])
    }
}
