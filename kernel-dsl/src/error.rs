//! The one error type of kernel construction and verification.

use crate::Loc;
use std::fmt;

/// What went wrong, naming the kernel, the op and the user's source line where known.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    pub kernel: Option<String>,
    pub op: Option<String>,
    pub loc: Option<Loc>,
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(message: impl Into<String>) -> Error {
        Error {
            kernel: None,
            op: None,
            loc: None,
            message: message.into(),
        }
    }

    pub fn op(op: &str, message: impl Into<String>) -> Error {
        Error {
            op: Some(op.to_string()),
            ..Error::new(message)
        }
    }

    pub fn in_kernel(mut self, kernel: &str) -> Error {
        self.kernel.get_or_insert_with(|| kernel.to_string());
        self
    }

    pub fn at(mut self, loc: Option<&Loc>) -> Error {
        if self.loc.is_none() {
            self.loc = loc.cloned();
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(k) = &self.kernel {
            write!(f, "kernel `{k}`: ")?;
        }
        if let Some(op) = &self.op {
            write!(f, "op `{op}`: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(loc) = &self.loc {
            write!(f, " (at {loc})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Returns early with an [`Error`] naming `op`.
#[macro_export]
#[doc(hidden)]
macro_rules! bail_op {
    ($op:expr, $($fmt:tt)*) => {
        return Err($crate::Error::op($op, format!($($fmt)*)))
    };
}
