//! Materialised axis permutations (`permute`, `transpose.int`; ATen returns views, tpuBLAS
//! returns row-major copies). One kernel does all of them: the batched transpose
//! `[a, b, c] → [a, c, b]` in `T × T` tiles (`o = x.t()` per tile, overhangs dropped). A
//! permutation of rank r runs as at most r − 1 of them: step p brings the axis wanted at
//! position p forward by swapping the group of axes before it with the group from it to
//! the end.

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

pub fn kernel(dtype: DType) -> Result<Prepared> {
    memo(("transpose", dtype), || Ok(transpose_tiles(&spec(dtype))?))
}

/// `x` with axes permuted (`out.shape[i] = x.shape[perm[i]]`) on the device.
pub fn permute(x: &HostArray, perm: &[usize]) -> Result<HostArray> {
    let mut cur: Vec<usize> = (0..perm.len()).collect();
    let mut t = x.clone();
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(t);
    }
    let k = kernel(x.dtype())?;
    let size = |axes: &[usize]| axes.iter().map(|&d| x.shape()[d]).product::<usize>();
    for p in 0..perm.len() {
        let q = cur
            .iter()
            .position(|&d| d == perm[p])
            .expect("a permutation");
        if q == p {
            continue;
        }
        let (a, b, c) = (size(&cur[..p]), size(&cur[p..q]), size(&cur[q..]));
        let x3 = t.reshape(&[a, b, c]).expect("same size");
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
