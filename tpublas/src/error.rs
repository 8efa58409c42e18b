//! Errors: each names the ATen operator and what was wrong with its arguments.

use std::fmt;

/// What tpuBLAS functions return.
pub type Result<T, E = BlasError> = std::result::Result<T, E>;

#[derive(Clone, Debug, PartialEq)]
pub struct BlasError {
    pub message: String,
}

impl BlasError {
    pub fn new(op: &str, message: impl fmt::Display) -> BlasError {
        BlasError {
            message: format!("{op}: {message}"),
        }
    }
}

impl fmt::Display for BlasError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BlasError {}

impl From<tpukit::runtime::RuntimeError> for BlasError {
    fn from(e: tpukit::runtime::RuntimeError) -> BlasError {
        BlasError { message: e.message }
    }
}

impl From<tpukit::dsl::Error> for BlasError {
    fn from(e: tpukit::dsl::Error) -> BlasError {
        BlasError {
            message: e.to_string(),
        }
    }
}
