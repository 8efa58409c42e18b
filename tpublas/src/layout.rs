//! How tensors are presented to the 1-D kernels: flattened, row-major, contiguous.

use tpukit::HostArray;
use tpukit::dsl::{ArraySpec, DType, Dim, Extent, GridAxis, grid};
use tpukit::prelude::CallSpec;

/// Elements per block of the 1-D elementwise kernels.
pub const BLOCK: usize = 4096;

/// A flattened tensor of `dtype`, `n` (symbolic) elements, in blocks of [`BLOCK`].
pub fn flat(dtype: DType) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::sym("n")]).blocked([BLOCK], [grid(0)])
}

/// A run-time scalar: one f32, read whole by every step.
pub fn scalar() -> ArraySpec {
    ArraySpec::new(DType::F32, [1usize])
}

/// The call spec of an elementwise kernel over `n` elements.
pub fn elementwise(inputs: Vec<ArraySpec>, out: DType) -> CallSpec {
    CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("n", BLOCK))],
        inputs,
        outputs: vec![flat(out)],
        ..Default::default()
    }
}

/// `x` as a 1-D array of its elements in row-major order.
pub fn flatten(x: &HostArray) -> HostArray {
    let n = x.shape().iter().product::<usize>();
    x.clone().reshape(&[n]).expect("same size")
}

/// `x` (1-D) reshaped to `shape`.
pub fn unflatten(x: HostArray, shape: &[usize]) -> HostArray {
    x.reshape(shape).expect("same size")
}

/// `x` broadcast (numpy/ATen rules) to `shape`, materialised; `None` if it does not broadcast.
pub fn expand(x: &HostArray, shape: &[usize]) -> Option<HostArray> {
    if x.shape() == shape {
        return Some(x.clone());
    }
    let xs = x.shape();
    if xs.len() > shape.len() {
        return None;
    }
    let lead = shape.len() - xs.len();
    for (d, &n) in xs.iter().enumerate() {
        if n != 1 && n != shape[lead + d] {
            return None;
        }
    }
    let data = x.to_f64_vec();
    let total: usize = shape.iter().product();
    let mut out = Vec::with_capacity(total);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..total {
        let mut off = 0;
        for (d, &n) in xs.iter().enumerate() {
            off = off * n + if n == 1 { 0 } else { idx[lead + d] };
        }
        out.push(data[off]);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Some(HostArray::from_f64(x.dtype(), shape, &out))
}

/// The broadcast shape of `a` and `b`, if they broadcast.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let at = |s: &[usize], d: usize| {
        if d + s.len() < rank {
            1
        } else {
            s[d + s.len() - rank]
        }
    };
    (0..rank)
        .map(|d| match (at(a, d), at(b, d)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// The inverse permutation of `perm`.
pub fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

/// `x` as rows for a row kernel over `dims` (sorted, distinct): the other axes first (in
/// order, collapsed into `m`), then `dims` (collapsed into `n`). Returns the `[m, n]` array
/// and the permutation applied (identity when `dims` are already the trailing axes, so no
/// copy is made; otherwise the copy is made on the device by [`crate::copy::permute`]). A
/// 0-d tensor is one row of one element.
pub fn to_rows(x: &HostArray, dims: &[usize]) -> Result<(HostArray, Vec<usize>), crate::BlasError> {
    let rank = x.shape().len();
    let mut perm: Vec<usize> = (0..rank).filter(|d| !dims.contains(d)).collect();
    perm.extend(dims);
    let moved = crate::copy::permute(x, &perm)?;
    let n: usize = dims.iter().map(|&d| x.shape()[d]).product();
    let m: usize = x.shape().iter().product::<usize>() / n.max(1);
    Ok((moved.reshape(&[m, n]).expect("same size"), perm))
}

/// The inverse of [`to_rows`]: `[m, n]` rows back to a tensor of `shape` whose axes were
/// permuted by `perm`.
pub fn from_rows(
    rows: HostArray,
    shape: &[usize],
    perm: &[usize],
) -> Result<HostArray, crate::BlasError> {
    let moved: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let t = rows.reshape(&moved).expect("same size");
    crate::copy::permute(&t, &inverse(perm))
}
