//! The type of an SSA value: an element type and a static shape (empty for a scalar).

use crate::DType;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Type {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl Type {
    pub fn new(dtype: DType, shape: impl Into<Vec<usize>>) -> Type {
        Type {
            dtype,
            shape: shape.into(),
        }
    }

    pub fn scalar(dtype: DType) -> Type {
        Type {
            dtype,
            shape: Vec::new(),
        }
    }

    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }

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
