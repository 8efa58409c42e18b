//! A value while the interpreter runs: its type and its elements in row-major order.

use tpukit_dsl::{DType, Type};

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tensor {
    pub ty: Type,
    pub data: Vec<f64>,
}

impl Tensor {
    pub fn splat(ty: Type, x: f64) -> Tensor {
        let n = ty.num_elements();
        Tensor {
            ty,
            data: vec![x; n],
        }
    }

    pub fn scalar_i32(x: i64) -> Tensor {
        Tensor {
            ty: Type::scalar(DType::I32),
            data: vec![DType::I32.wrap_int(x) as f64],
        }
    }

    pub fn as_i64(&self) -> i64 {
        self.data[0] as i64
    }
}

/// Row-major strides of `shape`.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Steps a row-major multi-index; false after the last one.
pub(crate) fn advance(index: &mut [usize], shape: &[usize]) -> bool {
    for d in (0..index.len()).rev() {
        index[d] += 1;
        if index[d] < shape[d] {
            return true;
        }
        index[d] = 0;
    }
    false
}

/// Calls `f` with every multi-index of `shape` in row-major order.
pub(crate) fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    if shape.contains(&0) {
        return;
    }
    let mut index = vec![0; shape.len()];
    loop {
        f(&index);
        if !advance(&mut index, shape) {
            break;
        }
    }
}
