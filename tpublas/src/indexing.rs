//! Gathers along one dimension (`index_select`, `embedding`) with scalar prefetch. The
//! tensor is viewed as `[outer, v, inner]`, and gathered as the rows of `[outer·v, inner]`:
//! the host expands the i32 indices `[k]` to row numbers `r[o·k + j] = o·v + idx[j]`
//! (prefetched), the input's index map reads `r[g]`, and each grid step `(g, c)` copies one
//! `[BN]` piece of a row. Indices are checked on the host first: ATen raises on an
//! out-of-range index, and the index map would otherwise point past the array.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::value::{Args, Value};
use crate::{BlasError, layout, promote};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{BlockDim, CallSpec, DType};
use tpukit::prelude::*;

/// Elements per window along `inner`. Not 512: Mosaic cannot mask the edge of a 1-D bf16
/// window of 512 ("Not implemented: Sublane broadcast"); 128 compiles (checked on v5e, v6e).
pub const BN: usize = 128;

#[tpu_kernel]
fn gather_rows(rows: Prefetch, x: In, o: Out) {
    o[..] = x[..];
}

/// `[rows, inner]` → `[k, inner]` by the prefetched row numbers `[k]`.
fn spec(dtype: DType) -> CallSpec {
    let block = [BlockDim::Squeezed, BlockDim::Blocked(BN)];
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("k", 1)),
            GridAxis::parallel(Extent::cdiv("inner", BN)),
        ],
        prefetch: vec![ArraySpec::new(DType::I32, ["k"])],
        inputs: vec![
            ArraySpec::new(dtype, ["rows", "inner"])
                .blocked(block, [prefetch(0, [grid(0)]), grid(1)]),
        ],
        outputs: vec![ArraySpec::new(dtype, ["k", "inner"]).blocked(block, [grid(0), grid(1)])],
        ..Default::default()
    }
}

pub fn kernel(dtype: DType) -> Result<Prepared> {
    memo(("gather", dtype), || Ok(gather_rows(&spec(dtype))?))
}

/// `index_select(x, dim, index)` on the host arrays: `x` of any rank, `index` i32 of rank
/// ≤ 1. Returns `x` with `shape[dim] = len(index)`.
fn select(op: &'static str, x: &HostArray, d: usize, index: &HostArray) -> Result<HostArray> {
    promote::check(op, x)?;
    let index = index.owned(); // the typed view needs owned storage (a copy if borrowed)
    let idx = index.as_i32().ok_or_else(|| {
        BlasError::new(op, format!("indices must be i32, got {}", index.dtype()))
            .with_kind(ErrorKind::DType)
    })?;
    let shape = x.shape();
    let v = shape.get(d).copied().unwrap_or(1);
    if let Some(bad) = idx.iter().find(|&&i| i < 0 || i as usize >= v) {
        return Err(
            BlasError::new(op, format!("index {bad} is out of range for size {v}"))
                .with_kind(ErrorKind::Bounds),
        );
    }
    let k = idx.len();
    let mut out_shape = shape.to_vec();
    if out_shape.is_empty() {
        out_shape.push(k);
    } else {
        out_shape[d] = k;
    }
    if layout::check_size(op, &out_shape)? == 0 {
        // Nothing to gather (and the row list below would walk every leading index).
        return Ok(HostArray::zeros(x.dtype(), &out_shape));
    }
    let outer: usize = shape[..d.min(shape.len())].iter().product();
    let inner: usize = shape.get(d + 1..).map_or(1, |s| s.iter().product());
    let x2 = x.clone().reshape(&[outer * v, inner]).expect("same size");
    let rows: Vec<f64> = (0..outer)
        .flat_map(|o| idx.iter().map(move |&i| (o * v) as f64 + i as f64))
        .collect();
    let rows = HostArray::from_f64(DType::I32, &[outer * k], &rows);
    let out = crate::launch::one(&kernel(x.dtype())?, &[&rows, &x2])?;
    Ok(out.reshape(&out_shape).expect("same size"))
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Gather {
    IndexSelect,
    Embedding,
}

impl Gather {
    pub fn aten(self) -> &'static str {
        match self {
            Gather::IndexSelect => "aten.index_select.default",
            Gather::Embedding => "aten.embedding.default",
        }
    }

    /// `index_select(x, dim, index)`; `embedding(weight, indices, …)` → `indices.shape +
    /// [d]` (padding_idx and the other flags only matter to the backward).
    pub fn run(self, args: &[Value]) -> Result<Vec<HostArray>> {
        let a = Args::new(self.aten(), args);
        match self {
            Gather::IndexSelect => {
                let x = a.tensor(0)?;
                let d = a.dim(a.int(1)?, x.shape().len())?;
                let index = a.tensor(2)?;
                if index.shape().len() > 1 {
                    return Err(a.err("index must be a vector").with_kind(ErrorKind::Shape));
                }
                Ok(vec![select(self.aten(), x, d, index)?])
            }
            Gather::Embedding => {
                let (w, indices) = (a.tensor(0)?, a.tensor(1)?);
                if w.shape().len() != 2 {
                    return Err(a
                        .err(format!("weight must be 2-D, got {:?}", w.shape()))
                        .with_kind(ErrorKind::Shape));
                }
                let n = indices.shape().iter().product();
                let flat = indices.clone().reshape(&[n]).expect("same size");
                let rows = select(self.aten(), w, 0, &flat)?;
                let mut shape = indices.shape().to_vec();
                shape.push(w.shape()[1]);
                Ok(vec![rows.reshape(&shape).expect("same size")])
            }
        }
    }
}
