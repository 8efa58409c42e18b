//! The one error type of kernel construction and verification, and the kinds of failure
//! every tpukit error type carries.

use crate::Loc;
use std::fmt;

/// What kind of failure an error reports, so that callers tell failures apart without reading
/// messages: the Python package raises one exception class per kind. Every tpukit error type
/// (this crate's [`Error`], the runtime's and tpuBLAS's) carries one.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A malformed kernel or call: a verification failure, an unknown name, a bad argument
    /// value. What no other kind describes.
    #[default]
    Invalid,
    /// The input uses an op or feature tpukit does not support (an op without an import or
    /// lowering rule, a memory space, a dynamic shape); the message names it.
    Unsupported,
    /// Shapes do not fit: ranks, extents, broadcasting, symbols bound twice or not at all.
    Shape,
    /// A dtype is wrong where it is used, or not one the operation serves.
    DType,
    /// An access outside an array or a block while the kernel runs: an index map, a dynamic
    /// slice, a gather index.
    Bounds,
    /// Memory the call needs could not be had: a result, block, staging or scratch buffer
    /// larger than the host can allocate (an allocation failure is this error, never an
    /// abort).
    Memory,
    /// A bug in tpukit itself (an invariant that does not hold, a compiler failure on a
    /// verified kernel, a panic caught at a boundary), never the caller's input.
    Internal,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 7] = [
        ErrorKind::Invalid,
        ErrorKind::Unsupported,
        ErrorKind::Shape,
        ErrorKind::DType,
        ErrorKind::Bounds,
        ErrorKind::Memory,
        ErrorKind::Internal,
    ];

    /// The kind's stable lower-case name (`"shape"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Invalid => "invalid",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Shape => "shape",
            ErrorKind::DType => "dtype",
            ErrorKind::Bounds => "bounds",
            ErrorKind::Memory => "memory",
            ErrorKind::Internal => "internal",
        }
    }
}

/// What went wrong, naming the kernel, the op and the user's source line where known.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    /// What kind of failure this is.
    pub kind: ErrorKind,
    /// The kernel being built or verified, once known (set by [`Error::in_kernel`]).
    pub kernel: Option<String>,
    /// The op that failed, if the error is about one.
    pub op: Option<String>,
    /// The user's source line of that op, if it has one.
    pub loc: Option<Loc>,
    /// What went wrong, without the kernel, op and location (which `Display` prefixes).
    pub message: String,
}

/// The result of building and verifying kernels.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`ErrorKind::Invalid`] error with no kernel, op or location yet.
    pub fn new(message: impl Into<String>) -> Error {
        Error {
            kind: ErrorKind::Invalid,
            kernel: None,
            op: None,
            loc: None,
            message: message.into(),
        }
    }

    /// An [`ErrorKind::Invalid`] error about the op named `op`.
    pub fn op(op: &str, message: impl Into<String>) -> Error {
        Error {
            op: Some(op.to_string()),
            ..Error::new(message)
        }
    }

    /// An [`ErrorKind::Unsupported`] error: `message` names what is not supported, and is
    /// shown after `unsupported: `.
    pub fn unsupported(message: impl fmt::Display) -> Error {
        Error::new(format!("unsupported: {message}")).with_kind(ErrorKind::Unsupported)
    }

    /// The same error, of kind `kind`.
    pub fn with_kind(mut self, kind: ErrorKind) -> Error {
        self.kind = kind;
        self
    }

    /// The same error, naming `kernel` unless it names one already (the innermost kernel wins).
    pub fn in_kernel(mut self, kernel: &str) -> Error {
        self.kernel.get_or_insert_with(|| kernel.to_string());
        self
    }

    /// The same error, at `loc` unless it has a location already (the innermost op's wins).
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
