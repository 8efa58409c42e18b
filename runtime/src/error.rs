//! Errors of launching and running a kernel: each names the kernel and, where it applies, the
//! operand, the op with its source line, the grid step and the index.

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeError {
    pub message: String,
}

impl RuntimeError {
    pub fn new(kernel: &str, message: impl fmt::Display) -> RuntimeError {
        RuntimeError {
            message: format!("kernel `{kernel}`: {message}"),
        }
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
            message: e.to_string(),
        }
    }
}
