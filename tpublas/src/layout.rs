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

/// `shape` as `(rows, n)`: everything but the last dim, and the last dim.
pub fn rows_of(shape: &[usize]) -> (usize, usize) {
    let n = *shape.last().expect("rank >= 1");
    (shape.iter().product::<usize>() / n.max(1), n)
}
