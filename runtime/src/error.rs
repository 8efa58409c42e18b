//! Errors of launching and running a kernel: each names the kernel and, where it applies, the
//! operand, the op with its source line, the grid step and the index.

use std::fmt;
use tpukit_dsl::ErrorKind;

#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeError {
    pub kind: ErrorKind,
    pub message: String,
}

impl RuntimeError {
    /// An [`ErrorKind::Invalid`] error of `kernel` (see [`RuntimeError::with_kind`]).
    pub fn new(kernel: &str, message: impl fmt::Display) -> RuntimeError {
        RuntimeError {
            kind: ErrorKind::Invalid,
            message: format!("kernel `{kernel}`: {message}"),
        }
    }

    pub fn with_kind(mut self, kind: ErrorKind) -> RuntimeError {
        self.kind = kind;
        self
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuntimeError {}

impl From<tpukit_dsl::Error> for RuntimeError {
    fn from(e: tpukit_dsl::Error) -> RuntimeError {
        RuntimeError {
            kind: e.kind,
            message: e.to_string(),
        }
    }
}
