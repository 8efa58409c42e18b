//! The type of an SSA value: an element type and a static shape (empty for a scalar).

use crate::DType;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
/// The type of an SSA value: every value is a scalar or a static-shaped vector of one dtype.
pub struct Type {
    /// The element type.
    pub dtype: DType,
    /// The static shape, outermost dimension first; empty for a scalar.
    pub shape: Vec<usize>,
}

impl Type {
    /// A value of `dtype` elements in `shape`.
    pub fn new(dtype: DType, shape: impl Into<Vec<usize>>) -> Type {
        Type {
            dtype,
            shape: shape.into(),
        }
    }

    /// A scalar of `dtype` (shape `[]`).
    pub fn scalar(dtype: DType) -> Type {
        Type {
            dtype,
            shape: Vec::new(),
        }
    }

    /// Whether the type is a scalar (rank 0).
    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements (1 for a scalar, 0 if any extent is 0).
    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// The same shape with elements of `dtype` (what a cast produces).
    pub fn with_dtype(&self, dtype: DType) -> Type {
        Type::new(dtype, self.shape.clone())
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}
