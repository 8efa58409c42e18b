//! Errors: each names the ATen operator and what was wrong with its arguments.

use std::fmt;
use tpukit::dsl::ErrorKind;

/// What tpuBLAS functions return.
pub type Result<T, E = BlasError> = std::result::Result<T, E>;

#[derive(Clone, Debug, PartialEq)]
pub struct BlasError {
    pub kind: ErrorKind,
    pub message: String,
}

impl BlasError {
    /// An [`ErrorKind::Invalid`] error of the operator `op` (see [`BlasError::with_kind`]).
    pub fn new(op: &str, message: impl fmt::Display) -> BlasError {
        BlasError {
            kind: ErrorKind::Invalid,
            message: format!("{op}: {message}"),
        }
    }

    pub fn with_kind(mut self, kind: ErrorKind) -> BlasError {
        self.kind = kind;
        self
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
        BlasError {
            kind: e.kind,
            message: e.message,
        }
    }
}

impl From<tpukit::dsl::Error> for BlasError {
    fn from(e: tpukit::dsl::Error) -> BlasError {
        BlasError {
            kind: e.kind,
            message: e.to_string(),
        }
    }
}

impl From<BlasError> for tpukit::dsl::Error {
    fn from(e: BlasError) -> tpukit::dsl::Error {
        tpukit::dsl::Error::new(e.message).with_kind(e.kind)
    }
}
