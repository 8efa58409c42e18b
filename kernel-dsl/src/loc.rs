//! Source locations of ops, so every error can point at the user's line.

use std::{fmt, sync::Arc};

/// Where an op came from: a Rust span (through `#[tpu_kernel]`) or a Python line.
///
/// Locations are printed for debugging but never hashed: moving a kernel in its file does not
/// change its identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Loc {
    /// The source file, as the frontend names it.
    pub file: Arc<str>,
    /// The line, as the frontend reports it.
    pub line: u32,
    /// The column, as the frontend reports it.
    pub column: u32,
}

impl Loc {
    /// The location `file:line:column`.
    pub fn new(file: &str, line: u32, column: u32) -> Loc {
        Loc {
            file: file.into(),
            line,
            column,
        }
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}
