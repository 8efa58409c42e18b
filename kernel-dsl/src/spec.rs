//! The call-site description of a kernel launch shape, as `pl.pallas_call` takes it: the grid,
//! and for each operand its dtype, global shape and block spec with an index map.
//!
//! A kernel body (written with `#[tpu_kernel]`, or traced from Python) plus a [`CallSpec`]
//! makes one [`crate::Kernel`].

use crate::{BlockDim, CmpOp, DType, Dim, GridAxis, Initial, Literal, SemaphoreKind, Space};
use std::ops;

#[derive(Clone, Debug, Default, PartialEq)]
/// How a kernel body is launched, as `pl.pallas_call`'s arguments say it: the grid and every
/// operand's spec, by role, in signature order (prefetch, inputs, outputs, scratch).
pub struct CallSpec {
    /// The grid, outermost axis first (empty: one step).
    pub grid: Vec<GridAxis>,
    /// Scalar-prefetch operands (`num_scalar_prefetch`): whole small integer arrays that index
    /// maps may read.
    pub prefetch: Vec<ArraySpec>,
    /// The arrays the body reads (`in_specs`).
    pub inputs: Vec<ArraySpec>,
    /// The arrays the body writes (`out_specs`/`out_shape`).
    pub outputs: Vec<ArraySpec>,
    /// Kernel-private buffers (`scratch_shapes`): static shapes, no window.
    pub scratch: Vec<ArraySpec>,
}

/// One operand: dtype, global shape and, for windowed operands, the block spec.
#[derive(Clone, Debug, PartialEq)]
pub struct ArraySpec {
    /// The element type.
    pub dtype: DType,
    /// The global shape: static extents or symbols bound at launch.
    pub shape: Vec<Dim>,
    /// The window the body sees at each grid step; `None` for the whole array.
    pub block: Option<Blocking>,
    /// Where the operand lives (default: kernel memory).
    pub space: Space,
    /// What an output holds before the body writes it (default: the caller's buffer).
    pub initial: Initial,
}

#[derive(Clone, Debug, PartialEq)]
/// A moving window (`pl.BlockSpec`): the block, the index map placing it, and what loads
/// read where it overhangs the array.
pub struct Blocking {
    /// The block's extent per array dimension (a squeezed one drops out of the ref's shape).
    pub block: Vec<BlockDim>,
    /// One block index per array dimension, as a function of the grid indices.
    pub index_map: Vec<IndexExpr>,
    /// What loads read outside the array; `None` reads zero.
    pub fill: Option<Literal>,
}

impl ArraySpec {
    /// A whole-array operand (the default when `pallas_call` gets no `BlockSpec`).
    pub fn new<D: Into<Dim>>(dtype: DType, shape: impl IntoIterator<Item = D>) -> ArraySpec {
        ArraySpec {
            dtype,
            shape: shape.into_iter().map(Into::into).collect(),
            block: None,
            space: Space::Local,
            initial: Initial::Caller,
        }
    }

    /// An output whose contents are undefined until the body writes them (see
    /// [`Initial::Undefined`]).
    pub fn undefined(mut self) -> ArraySpec {
        self.initial = Initial::Undefined;
        self
    }

    /// A whole array left in HBM (`memory_space=pl.ANY`), reached by DMA only.
    pub fn any(mut self) -> ArraySpec {
        self.space = Space::Any;
        self
    }

    /// A whole array in SMEM (`pltpu.SMEM`), read and written one element at a time.
    pub fn smem(mut self) -> ArraySpec {
        self.space = Space::Smem;
        self
    }

    /// A scratch array of semaphores (`pltpu.SemaphoreType.DMA((n,))`); `shape` may be empty.
    pub fn semaphores(kind: SemaphoreKind, shape: impl IntoIterator<Item = usize>) -> ArraySpec {
        ArraySpec {
            space: Space::Semaphore(kind),
            ..ArraySpec::new(DType::I32, shape)
        }
    }

    /// Windows of `block` elements placed by `index_map` (block indices, one per dimension).
    pub fn blocked<B: Into<BlockDim>>(
        mut self,
        block: impl IntoIterator<Item = B>,
        index_map: impl IntoIterator<Item = IndexExpr>,
    ) -> ArraySpec {
        self.block = Some(Blocking {
            block: block.into_iter().map(Into::into).collect(),
            index_map: index_map.into_iter().collect(),
            fill: None,
        });
        self
    }

    /// What loads read where a window overhangs the array (default: zero).
    pub fn fill(mut self, value: impl Into<Literal>) -> ArraySpec {
        if let Some(b) = &mut self.block {
            b.fill = Some(value.into());
        }
        self
    }
}

impl From<usize> for BlockDim {
    fn from(n: usize) -> BlockDim {
        BlockDim::Blocked(n)
    }
}

impl From<f64> for Literal {
    fn from(x: f64) -> Literal {
        Literal::Float(x)
    }
}

impl From<f32> for Literal {
    fn from(x: f32) -> Literal {
        Literal::Float(x as f64)
    }
}

impl From<i64> for Literal {
    fn from(x: i64) -> Literal {
        Literal::Int(x)
    }
}

impl From<i32> for Literal {
    fn from(x: i32) -> Literal {
        Literal::Int(x as i64)
    }
}

impl From<bool> for Literal {
    fn from(x: bool) -> Literal {
        Literal::Bool(x)
    }
}

/// An index-map expression over the grid indices and prefetched scalars, built with
/// ordinary operators: `grid(0) * 2 + 1`, `prefetch(0, [grid(0)])`,
/// `grid(1).le(grid(0)).select(grid(1), grid(0))`. Every expression is an i32; a comparison
/// is 1 when it holds and 0 otherwise (so `and`/`or` combine comparisons).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IndexExpr {
    /// The index of the current grid step along this axis.
    Grid(usize),
    /// The number of grid steps along this axis (`pl.num_programs`; of an axis sized at
    /// launch, its value then).
    NumPrograms(usize),
    /// A constant.
    Const(i64),
    /// An arithmetic or bitwise operation on two expressions.
    Binary(IndexBinOp, Box<IndexExpr>, Box<IndexExpr>),
    /// 1 if the comparison holds, else 0.
    Compare(CmpOp, Box<IndexExpr>, Box<IndexExpr>),
    /// `on_true` where `cond` is nonzero, else `on_false` (causal block skipping clamps a
    /// block index this way).
    Select {
        /// The condition (nonzero: true).
        cond: Box<IndexExpr>,
        /// The value where the condition holds.
        on_true: Box<IndexExpr>,
        /// The value elsewhere.
        on_false: Box<IndexExpr>,
    },
    /// Element `index` of the `operand`-th prefetch array.
    Prefetch {
        /// Which prefetch array (its position among the prefetch operands).
        operand: usize,
        /// The element's index, one expression per dimension of that array.
        index: Vec<IndexExpr>,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
/// The binary operations of index-map expressions, all on i32.
pub enum IndexBinOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`, rounded toward zero (0 when `b` is 0).
    Div,
    /// `a % b`, with the sign of `a` (`a` when `b` is 0).
    Rem,
    /// The larger of `a` and `b`.
    Max,
    /// The smaller of `a` and `b`.
    Min,
    /// Bitwise, on i32 (on 0/1 comparisons: logical).
    And,
    /// Bitwise or.
    Or,
    /// Bitwise exclusive or.
    Xor,
}

/// The index of the current grid step along `axis`.
pub fn grid(axis: usize) -> IndexExpr {
    IndexExpr::Grid(axis)
}

/// Element `index` of the `operand`-th scalar-prefetch array.
pub fn prefetch(operand: usize, index: impl IntoIterator<Item = IndexExpr>) -> IndexExpr {
    IndexExpr::Prefetch {
        operand,
        index: index.into_iter().collect(),
    }
}

impl IndexExpr {
    /// 1 if `self op rhs` holds, else 0.
    pub fn compare(self, op: CmpOp, rhs: impl Into<IndexExpr>) -> IndexExpr {
        IndexExpr::Compare(op, Box::new(self), Box::new(rhs.into()))
    }

    /// `on_true` where `self` is nonzero, else `on_false`.
    pub fn select(
        self,
        on_true: impl Into<IndexExpr>,
        on_false: impl Into<IndexExpr>,
    ) -> IndexExpr {
        IndexExpr::Select {
            cond: Box::new(self),
            on_true: Box::new(on_true.into()),
            on_false: Box::new(on_false.into()),
        }
    }

    /// The larger of `self` and `rhs`.
    pub fn max(self, rhs: impl Into<IndexExpr>) -> IndexExpr {
        IndexExpr::Binary(IndexBinOp::Max, Box::new(self), Box::new(rhs.into()))
    }

    /// The smaller of `self` and `rhs`.
    pub fn min(self, rhs: impl Into<IndexExpr>) -> IndexExpr {
        IndexExpr::Binary(IndexBinOp::Min, Box::new(self), Box::new(rhs.into()))
    }

    /// Whether the expression reads the grid index of an axis for which `varies` holds
    /// (directly, or in a prefetch element's index). Extents and prefetch arrays are fixed
    /// for a whole call, so an expression reading no such axis is the same at every step.
    pub fn reads_grid(&self, varies: &dyn Fn(usize) -> bool) -> bool {
        match self {
            IndexExpr::Grid(axis) => varies(*axis),
            IndexExpr::NumPrograms(_) | IndexExpr::Const(_) => false,
            IndexExpr::Binary(_, a, b) | IndexExpr::Compare(_, a, b) => {
                a.reads_grid(varies) || b.reads_grid(varies)
            }
            IndexExpr::Select {
                cond,
                on_true,
                on_false,
            } => [cond, on_true, on_false]
                .iter()
                .any(|e| e.reads_grid(varies)),
            IndexExpr::Prefetch { index, .. } => index.iter().any(|e| e.reads_grid(varies)),
        }
    }
}

impl From<i64> for IndexExpr {
    fn from(x: i64) -> IndexExpr {
        IndexExpr::Const(x)
    }
}

impl From<i32> for IndexExpr {
    fn from(x: i32) -> IndexExpr {
        IndexExpr::Const(x as i64)
    }
}

macro_rules! index_ops {
    ($($trait:ident $method:ident $op:ident),*) => {$(
        impl<R: Into<IndexExpr>> ops::$trait<R> for IndexExpr {
            type Output = IndexExpr;
            fn $method(self, rhs: R) -> IndexExpr {
                IndexExpr::Binary(IndexBinOp::$op, Box::new(self), Box::new(rhs.into()))
            }
        }
    )*};
}
index_ops!(
    Add add Add, Sub sub Sub, Mul mul Mul, Div div Div, Rem rem Rem,
    BitAnd bitand And, BitOr bitor Or, BitXor bitxor Xor
);
