//! ATen's type promotion among the float dtypes tpuBLAS serves.

use tpukit::HostArray;
use tpukit::dsl::DType;
use tpukit::dsl::ErrorKind;

/// The result dtype of a binary op on tensors of `a` and `b` (f32 wins; Python scalars never
/// promote, so tensor⊕scalar keeps the tensor's dtype).
pub fn promote(a: DType, b: DType) -> DType {
    if a == DType::F32 || b == DType::F32 {
        DType::F32
    } else {
        a
    }
}

/// `x` converted to `dtype` (exact for bf16 → f32).
pub fn to(x: &HostArray, dtype: DType) -> HostArray {
    if x.dtype() == dtype {
        return x.clone();
    }
    HostArray::from_f64(dtype, x.shape(), &x.to_f64_vec())
}

/// Whether tpuBLAS serves this dtype.
pub fn served(d: DType) -> bool {
    matches!(d, DType::F32 | DType::BF16)
}

/// An error naming `op` unless `x` is a tensor of a dtype tpuBLAS serves.
pub fn check(op: &str, x: &HostArray) -> Result<(), crate::BlasError> {
    if served(x.dtype()) {
        Ok(())
    } else {
        Err(crate::BlasError::new(
            op,
            format!("tpuBLAS serves f32 and bf16 tensors, got {}", x.dtype()),
        )
        .with_kind(ErrorKind::DType))
    }
}
