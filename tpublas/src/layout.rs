//! How tensors are presented to the 1-D kernels: flattened, row-major, contiguous.

use crate::BlasError;
use tpukit::HostArray;
use tpukit::dsl::{ArraySpec, DType, Dim, ErrorKind, Extent, GridAxis, grid};
use tpukit::prelude::CallSpec;

/// Elements per block of the 1-D elementwise kernels.
pub const BLOCK: usize = 4096;

/// A flattened tensor of `dtype`, `n` (symbolic) elements, in blocks of [`BLOCK`].
pub fn flat(dtype: DType) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::sym("n")]).blocked([BLOCK], [grid(0)])
}

/// A run-time scalar of a kernel whose values have `rank` dims: one f32 (shape `[1]`, or
/// `[1, 1]` for 2-D kernels, so it broadcasts without a rank change), read whole by every
/// step. Operator arguments that are numbers reach kernels this way, never as IR constants.
pub fn scalar(rank: usize) -> ArraySpec {
    ArraySpec::new(DType::F32, vec![1usize; rank])
}

/// The host array for a [`scalar`] operand holding `x` (rounded to f32).
pub fn scalar_operand(x: f64, rank: usize) -> HostArray {
    HostArray::from_f64(DType::F32, &vec![1; rank], &[x])
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

/// How the second operand of a binary pointwise op meets the first (which has the result's
/// shape), after collapsing dims: the canonical broadcasts that run without copying.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Same shape: both flattened to `[n]`.
    Same,
    /// One element: a run-time [`scalar`] (f32).
    Scalar,
    /// `[m, n] ⊕ [1, n]`: `y` is a trailing part of the shape (`[b, s, d] + [d]`).
    Row,
    /// `[m, n] ⊕ [m, 1]`: `y` is a leading part of the shape (`[b, s, d] + [b, s, 1]`).
    Column,
}

/// Rows and columns per window of the 2-D broadcast kernels.
pub const BROADCAST_BLOCK: [usize; 2] = [16, 512];

/// The call spec of a binary kernel with `pattern`: `x` (of `dtype`) is `[n]` or `[m, n]`;
/// a broadcast `y` is an f32 row `[1, n]` or column `[m, 1]` (the host widens it: it is
/// small, and Mosaic cannot broadcast a bf16 row across sublanes), or an f32 [`scalar`].
/// With `alpha`, a run-time scalar follows `y` (except for a scalar `y`: the host folds
/// `alpha` into it).
pub fn binary(pattern: Pattern, dtype: DType, alpha: bool) -> CallSpec {
    let [bm, bn] = BROADCAST_BLOCK;
    let tiles = |d: DType| ArraySpec::new(d, ["m", "n"]).blocked([bm, bn], [grid(0), grid(1)]);
    let with_alpha = |mut inputs: Vec<ArraySpec>, rank: usize| {
        if alpha {
            inputs.push(scalar(rank));
        }
        inputs
    };
    let y = match pattern {
        Pattern::Scalar => return elementwise(vec![flat(dtype), scalar(1)], dtype),
        Pattern::Same => {
            return elementwise(with_alpha(vec![flat(dtype), flat(dtype)], 1), dtype);
        }
        Pattern::Row => ArraySpec::new(DType::F32, [Dim::Static(1), Dim::sym("n")])
            .blocked([1, bn], [0.into(), grid(1)]),
        Pattern::Column => ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(1)])
            .blocked([bm, 1], [grid(0), 0.into()]),
    };
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", bm)),
            GridAxis::parallel(Extent::cdiv("n", bn)),
        ],
        inputs: with_alpha(vec![tiles(dtype), y], 2),
        outputs: vec![tiles(dtype)],
        ..Default::default()
    }
}

/// The canonical pattern of `x ⊕ y` with `x` of the broadcast shape `out`, and the collapsed
/// `(m, n)`; `None` when `y` is neither `out`, nor a trailing part, nor a leading part of it
/// (after dropping its leading 1s).
pub fn pattern(out: &[usize], y: &[usize]) -> Option<(Pattern, usize, usize)> {
    let total: usize = out.iter().product();
    if y == out {
        return Some((Pattern::Same, 1, total));
    }
    let lead = y.iter().take_while(|&&d| d == 1).count();
    let core = &y[lead..];
    if core.len() > out.len() {
        return None;
    }
    let split = out.len() - core.len();
    if out[split..] == *core {
        let n: usize = core.iter().product();
        // A one-lane row would waste the window; such `y`s are scalars anyway.
        // (Lazily: `n` may be 0.)
        return (n > 1).then(|| (Pattern::Row, total / n, n));
    }
    let head = core.iter().rposition(|&d| d != 1).map_or(0, |p| p + 1);
    let aligned = &core[..head];
    let tail_ones = core[head..].len();
    if core.len() == out.len() && out[..head] == *aligned && tail_ones > 0 {
        let m: usize = aligned.iter().product();
        return Some((Pattern::Column, m, total / m.max(1)));
    }
    None
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

/// The number of elements of a result of `shape` computed by `op`: an
/// [`ErrorKind::Memory`] error if its non-zero extents multiply past what an array may hold
/// (`isize::MAX`, as ATen's "storage size overflowed") — a zero-size tensor may have such
/// extents, and the result of broadcasting two of them may too.
pub fn check_size(op: &str, shape: &[usize]) -> Result<usize, BlasError> {
    let nonzero = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |n, &d| n.checked_mul(d));
    match nonzero {
        Some(n) if n <= isize::MAX as usize => Ok(if shape.contains(&0) { 0 } else { n }),
        _ => Err(BlasError::new(
            op,
            format!("a result of shape {shape:?} has more elements than an array can hold"),
        )
        .with_kind(ErrorKind::Memory)),
    }
}

/// `x` broadcast (numpy/ATen rules) to `shape` (checked by [`check_size`]), materialised by
/// `op`; `None` if it does not broadcast, an [`ErrorKind::Memory`] error if the memory cannot
/// be had.
pub fn expand(op: &str, x: &HostArray, shape: &[usize]) -> Result<Option<HostArray>, BlasError> {
    if x.shape() == shape {
        return Ok(Some(x.clone()));
    }
    let xs = x.shape();
    if xs.len() > shape.len() {
        return Ok(None);
    }
    let lead = shape.len() - xs.len();
    for (d, &n) in xs.iter().enumerate() {
        if n != 1 && n != shape[lead + d] {
            return Ok(None);
        }
    }
    let total = check_size(op, shape)?;
    let mut out = Vec::new();
    out.try_reserve_exact(total).map_err(|_| {
        BlasError::new(
            op,
            format!("cannot allocate a broadcast of shape {shape:?}: {total} elements"),
        )
        .with_kind(ErrorKind::Memory)
    })?;
    let data = x.to_f64_vec();
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
    Ok(Some(HostArray::from_f64(x.dtype(), shape, &out)))
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

/// The broadcast shape of all of `arrays` (an operator's tensor arguments), checked by
/// [`check_size`]; an [`ErrorKind::Shape`] error if they do not broadcast.
pub fn broadcast_all(op: &str, arrays: &[&HostArray]) -> Result<Vec<usize>, BlasError> {
    let mut shape = Vec::new();
    for a in arrays {
        shape = broadcast_shape(&shape, a.shape()).ok_or_else(|| {
            BlasError::new(op, "shapes do not broadcast").with_kind(ErrorKind::Shape)
        })?;
    }
    check_size(op, &shape)?;
    Ok(shape)
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
    // The kept dims' product, not size / n: with an empty reduced dim there are still rows.
    let m: usize = perm[..rank - dims.len()]
        .iter()
        .map(|&d| x.shape()[d])
        .product();
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

#[cfg(test)]
mod tests {
    use super::{Pattern, pattern};

    #[test]
    fn canonical_patterns() {
        assert_eq!(
            pattern(&[4, 7, 600], &[4, 7, 600]),
            Some((Pattern::Same, 1, 16800))
        );
        assert_eq!(pattern(&[4, 7, 600], &[600]), Some((Pattern::Row, 28, 600)));
        assert_eq!(
            pattern(&[4, 7, 600], &[1, 1, 7, 600]),
            Some((Pattern::Row, 4, 4200))
        );
        assert_eq!(
            pattern(&[4, 7, 600], &[4, 7, 1]),
            Some((Pattern::Column, 28, 600))
        );
        assert_eq!(
            pattern(&[4, 7, 600], &[4, 1, 1]),
            Some((Pattern::Column, 4, 4200))
        );
        assert_eq!(pattern(&[4, 7, 600], &[4, 1, 600]), None);
        assert_eq!(pattern(&[4, 7, 600], &[7, 1]), None);
        assert_eq!(pattern(&[5, 300], &[1]), None);
    }
}
