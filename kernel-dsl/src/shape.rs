//! Array extents, which may be symbols bound when a kernel is launched.
//!
//! Block shapes and value shapes are always static; only the global extents of arrays (and
//! so the grid) may be symbolic. One kernel therefore serves every binding of its symbols.

use std::{collections::BTreeMap, fmt};

/// One extent of an operand's global shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// An extent known when the kernel is built.
    Static(usize),
    /// A named extent bound at launch; every operand dim with the same name must agree.
    Sym(String),
}

impl Dim {
    /// The symbolic extent `name`.
    pub fn sym(name: &str) -> Dim {
        Dim::Sym(name.to_string())
    }

    /// The extent, if it is static.
    pub fn as_static(&self) -> Option<usize> {
        match self {
            Dim::Static(n) => Some(*n),
            Dim::Sym(_) => None,
        }
    }

    /// The concrete extent under `bindings`, or `None` for an unbound symbol.
    pub fn resolve(&self, bindings: &Bindings) -> Option<usize> {
        match self {
            Dim::Static(n) => Some(*n),
            Dim::Sym(s) => bindings.get(s).copied(),
        }
    }
}

impl From<usize> for Dim {
    fn from(n: usize) -> Dim {
        Dim::Static(n)
    }
}

impl From<&str> for Dim {
    fn from(s: &str) -> Dim {
        Dim::sym(s)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(n) => write!(f, "{n}"),
            Dim::Sym(s) => f.write_str(s),
        }
    }
}

/// Concrete values of the symbols of a kernel's shapes, for one launch.
pub type Bindings = BTreeMap<String, usize>;

/// The number of iterations of one grid axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    /// A number of iterations known when the kernel is built.
    Static(usize),
    /// `ceil(sym / block)`: the number of blocks of `block` elements that cover a symbolic
    /// extent, the last one possibly partial.
    CeilDiv {
        /// The symbol whose bound value is covered.
        sym: String,
        /// Elements per block.
        block: usize,
    },
    /// The value of a scalar operand, read at launch (a grid sized by a traced value, as
    /// `grid=(n,)` with `n` traced in `pl.pallas_call`): `operand` is the index of a
    /// one-element (0-d or `[1]`) int32 scalar-prefetch operand among the kernel's operands.
    /// Those operands come first and only size the grid: neither the body nor an index map
    /// reads them. A TPU receives them as the custom call's leading operands (Mosaic's
    /// dynamic `iteration_bounds`).
    Value {
        /// Index of the operand (a one-element int32 prefetch operand) holding the extent.
        operand: usize,
    },
}

/// The key under which launch binds the value of operand `operand` (an [`Extent::Value`]):
/// `%N`, which no symbol of a shape spells (symbols are words or quoted names).
pub fn value_key(operand: usize) -> String {
    format!("%{operand}")
}

impl Extent {
    /// `ceil(dim / block)` for a static or symbolic dim.
    pub fn cdiv(dim: impl Into<Dim>, block: usize) -> Extent {
        match dim.into() {
            Dim::Static(n) => Extent::Static(n.div_ceil(block.max(1))),
            Dim::Sym(sym) => Extent::CeilDiv { sym, block },
        }
    }

    /// The concrete number of iterations under `bindings`, or `None` for an unbound symbol.
    pub fn resolve(&self, bindings: &Bindings) -> Option<usize> {
        match self {
            Extent::Static(n) => Some(*n),
            Extent::CeilDiv { sym, block } => bindings.get(sym).map(|n| n.div_ceil(*block)),
            Extent::Value { operand } => bindings.get(&value_key(*operand)).copied(),
        }
    }
}

impl From<usize> for Extent {
    fn from(n: usize) -> Extent {
        Extent::Static(n)
    }
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Extent::Static(n) => write!(f, "{n}"),
            Extent::CeilDiv { sym, block } => write!(f, "cdiv({sym}, {block})"),
            Extent::Value { operand } => write!(f, "value({operand})"),
        }
    }
}
