//! The interpreter's semantics on one element: what an op computes from constant operands,
//! for analyses that know a value is one constant at every element of some region of a
//! window (`cpu::codegen::clip`) and must agree with the interpreter about what follows.

use super::ops;
use super::tensor::Tensor;
use tpukit_dsl::{BinaryOp, CmpOp, DType, ReduceOp, Type, UnaryOp};

fn scalar(dtype: DType, a: f64) -> Tensor {
    Tensor {
        ty: Type::scalar(dtype),
        data: vec![a],
    }
}

/// `op(a)` on an element of `dtype`.
pub(crate) fn unary(op: UnaryOp, dtype: DType, a: f64) -> f64 {
    ops::unary(op, &scalar(dtype, a)).data[0]
}

/// `op(a, b)` on elements of `dtype`.
pub(crate) fn binary(op: BinaryOp, dtype: DType, a: f64, b: f64) -> f64 {
    ops::binary(op, &scalar(dtype, a), &scalar(dtype, b)).data[0]
}

/// `op(a, b)` on elements of `dtype`: 1.0 where it holds, else 0.0 (a bool element).
pub(crate) fn compare(op: CmpOp, dtype: DType, a: f64, b: f64) -> f64 {
    ops::compare(op, &scalar(dtype, a), &scalar(dtype, b)).data[0]
}

/// An element of `from` converted to `to`.
pub(crate) fn cast(from: DType, to: DType, a: f64) -> f64 {
    ops::cast(&scalar(from, a), Type::scalar(to)).data[0]
}

/// The value a reduction of `dtype` elements starts from and leaves unchanged: 0 for sums,
/// −∞ (+∞) for float maxima (minima), the dtype's least (greatest) value for integer ones.
pub(crate) fn identity(op: ReduceOp, dtype: DType) -> f64 {
    match (op, dtype) {
        (ReduceOp::Sum, _) => 0.0,
        (ReduceOp::Max, DType::I32) => i32::MIN as f64,
        (ReduceOp::Min, DType::I32) => i32::MAX as f64,
        (ReduceOp::Max, DType::I8) => i8::MIN as f64,
        (ReduceOp::Min, DType::I8) => i8::MAX as f64,
        (ReduceOp::Max, DType::I16) => i16::MIN as f64,
        (ReduceOp::Min, DType::I16) => i16::MAX as f64,
        (ReduceOp::Max, _) => f64::NEG_INFINITY,
        (ReduceOp::Min, _) => f64::INFINITY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_as_the_interpreter_computes() {
        assert_eq!(unary(UnaryOp::Exp, DType::F32, f64::NEG_INFINITY), 0.0);
        assert_eq!(binary(BinaryOp::Mul, DType::F32, 0.0, 0.0), 0.0);
        assert!(binary(BinaryOp::Mul, DType::F32, 0.0, f64::INFINITY).is_nan());
        assert_eq!(compare(CmpOp::Lt, DType::I32, 3.0, 2.0), 0.0);
        assert_eq!(cast(DType::F32, DType::BF16, 1.0 + f64::EPSILON), 1.0);
        assert_eq!(binary(BinaryOp::Add, DType::I8, 127.0, 1.0), -128.0);
    }
}
