//! The operations of a kernel body, one enum with a variant per op.
//!
//! Every op reads SSA values defined before it (in its region or an enclosing one) and
//! defines its results; [`crate::verify`] checks the typing rules written on each variant.
//! Elementwise ops take operands of one shape: broadcasting is explicit ([`OpKind::Broadcast`]),
//! which the builder inserts for the user.

pub use crate::op_table::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use crate::{Loc, Place, Type};

/// An SSA value, numbered within its [`Func`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// An operand of the kernel (its position in [`crate::Kernel::operands`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperandId(pub u32);

/// A function: the kernel body or an index map. Value types live in one table per function.
#[derive(Clone, Debug, PartialEq)]
pub struct Func {
    pub types: Vec<Type>,
    pub body: Region,
}

impl Func {
    pub fn ty(&self, v: ValueId) -> &Type {
        &self.types[v.0 as usize]
    }
}

/// A list of ops with block arguments, ending in [`OpKind::Yield`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Region {
    pub args: Vec<ValueId>,
    pub ops: Vec<Op>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub results: Vec<ValueId>,
    pub kind: OpKind,
    pub loc: Option<Loc>,
}

/// A constant's value. Floats keep f64 precision here; the result type says how they round.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Literal {
    Float(f64),
    Int(i64),
    Bool(bool),
}

impl Literal {
    pub fn as_f64(self) -> f64 {
        match self {
            Literal::Float(x) => x,
            Literal::Int(i) => i as f64,
            Literal::Bool(b) => b as u8 as f64,
        }
    }

    pub fn as_i64(self) -> i64 {
        match self {
            Literal::Float(x) => x as i64,
            Literal::Int(i) => i,
            Literal::Bool(b) => b as i64,
        }
    }
}

/// Where one dimension of a ref access starts: a constant or an i32 scalar value.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Start {
    Static(i64),
    Dynamic(ValueId),
}

/// How one dimension of a ref is accessed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Indexer {
    /// Elements `start .. start + size`; the dimension stays in the result (`pl.ds`, `..`).
    Slice { start: Start, size: usize },
    /// The one element at `start`; the dimension is dropped from the result (`ref[i]`).
    Point(Start),
}

/// Which dimensions of a `dot`'s operands are contracted. Rank-3 operands are batched over
/// dimension 0 of both; the contracted dimension is one of the last two.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DotDims {
    pub lhs_contract: usize,
    pub rhs_contract: usize,
}

impl DotDims {
    /// `(m, k) · (k, n)`, or batched `(b, m, k) · (b, k, n)`.
    pub fn matmul(rank: usize) -> DotDims {
        DotDims {
            lhs_contract: rank - 1,
            rhs_contract: rank - 2,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// A splat constant of the result type.
    Const {
        value: Literal,
    },
    /// The index of this grid step along `axis` (i32).
    ProgramId {
        axis: usize,
    },
    /// The grid's extent along `axis` (i32).
    NumPrograms {
        axis: usize,
    },
    /// The runtime global extent of an operand's dimension (i32), as bound at launch.
    ArrayDim {
        operand: OperandId,
        axis: usize,
    },
    /// Reads a window of a ref. The result shape is the sizes of the `Slice` indexers.
    /// Elements outside the operand's array read its fill value; a masked-off element
    /// (`mask` false) reads `other`. A slice outside the ref's (block) shape is an error,
    /// except a scalar read of a prefetch operand (SMEM) outside its array, which TPUs and
    /// Pallas tolerate (the sparse docs' block-sparse matmul reads one past its index
    /// array): its value is unspecified — on a TPU whatever SMEM holds there (the Mosaic
    /// lowering reads it as Pallas does), 0 on the CPU devices — and debug mode reports it.
    Load {
        operand: OperandId,
        index: Vec<Indexer>,
        mask: Option<ValueId>,
        other: Option<ValueId>,
    },
    /// Writes `value` (shaped like a load of `index`) into a ref. Elements outside the
    /// operand's array, or masked off, are not written.
    Store {
        operand: OperandId,
        index: Vec<Indexer>,
        value: ValueId,
        mask: Option<ValueId>,
    },
    Unary {
        op: UnaryOp,
        x: ValueId,
    },
    Binary {
        op: BinaryOp,
        lhs: ValueId,
        rhs: ValueId,
    },
    /// Elementwise comparison; the result is bool. Comparisons with NaN are false except `Ne`.
    Compare {
        op: CmpOp,
        lhs: ValueId,
        rhs: ValueId,
    },
    /// `cond ? on_true : on_false`, elementwise; `cond` is bool of the same shape.
    Select {
        cond: ValueId,
        on_true: ValueId,
        on_false: ValueId,
    },
    /// Converts to the result's dtype (see `DType::round_f64` and `cast_f64_to_int`).
    Cast {
        x: ValueId,
    },
    /// Numpy-style broadcast to the result shape (dimensions aligned at the right).
    Broadcast {
        x: ValueId,
    },
    /// Same elements in row-major order, new shape.
    Reshape {
        x: ValueId,
    },
    /// `result.shape[i] = x.shape[perm[i]]`.
    Transpose {
        x: ValueId,
        perm: Vec<usize>,
    },
    /// `result[idx] = idx[dim]` (integer result).
    Iota {
        dim: usize,
    },
    /// Reduces the listed axes away. Floats accumulate in f32 whatever their storage type.
    Reduce {
        op: ReduceOp,
        x: ValueId,
        axes: Vec<usize>,
    },
    /// Matrix product accumulated in f32 (floats) or i32 (integers), converted to the
    /// result dtype at the end.
    Dot {
        lhs: ValueId,
        rhs: ValueId,
        dims: DotDims,
    },
    /// `for iv in (lower..upper).step_by(step)`; the body's args are `[iv, carried…]`, its
    /// yield gives the next carried values; the results are the last carried values.
    /// Bounds and step are i32 scalars; `step` must be positive.
    For {
        lower: ValueId,
        upper: ValueId,
        step: ValueId,
        init: Vec<ValueId>,
        body: Region,
    },
    /// Runs one region; both yield values of the result types.
    If {
        cond: ValueId,
        then_region: Region,
        else_region: Region,
    },
    /// Ends a region, giving its values to the enclosing op (or, in an index map, the block
    /// indices).
    Yield {
        values: Vec<ValueId>,
    },
    /// Copies `src` into `dst` (same dtype and shape) and adds the bytes moved to the DMA
    /// semaphore `sem` (see [`crate::dma`] for when the copy happens and what is checked).
    DmaStart {
        src: Place,
        dst: Place,
        sem: Place,
    },
    /// Subtracts the bytes of `dst` from the DMA semaphore `sem`, once a copy of that size
    /// has signalled it; an error if it holds less. `src` names the copy's source, as
    /// Mosaic's wait does (it must have `dst`'s type).
    DmaWait {
        sem: Place,
        src: Place,
        dst: Place,
    },
    /// Adds `amount` (an i32 scalar) to a regular semaphore.
    SemaphoreSignal {
        sem: Place,
        amount: ValueId,
    },
    /// Subtracts `amount` from a regular semaphore; an error if it holds less.
    SemaphoreWait {
        sem: Place,
        amount: ValueId,
    },
    /// A semaphore's current count (i32).
    SemaphoreRead {
        sem: Place,
    },
    /// `while cond(carried) { carried = body(carried) }` (`lax.while_loop`): both regions
    /// take the carried values as arguments; `cond` yields one bool scalar, `body` the next
    /// carried values; the results are the carried values when `cond` first yields false.
    /// A loop whose condition never fails does not end (as on a TPU).
    While {
        init: Vec<ValueId>,
        cond: Region,
        body: Region,
    },
}

impl OpKind {
    /// The op's name as printed and as named in errors.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Const { .. } => "const",
            OpKind::ProgramId { .. } => "program_id",
            OpKind::NumPrograms { .. } => "num_programs",
            OpKind::ArrayDim { .. } => "array_dim",
            OpKind::Load { .. } => "load",
            OpKind::Store { .. } => "store",
            OpKind::Unary { op, .. } => op.name(),
            OpKind::Binary { op, .. } => op.name(),
            OpKind::Compare { op, .. } => op.name(),
            OpKind::Select { .. } => "select",
            OpKind::Cast { .. } => "cast",
            OpKind::Broadcast { .. } => "broadcast",
            OpKind::Reshape { .. } => "reshape",
            OpKind::Transpose { .. } => "transpose",
            OpKind::Iota { .. } => "iota",
            OpKind::Reduce { op, .. } => op.name(),
            OpKind::Dot { .. } => "dot",
            OpKind::For { .. } => "for",
            OpKind::If { .. } => "if",
            OpKind::Yield { .. } => "yield",
            OpKind::DmaStart { .. } => "dma_start",
            OpKind::DmaWait { .. } => "dma_wait",
            OpKind::SemaphoreSignal { .. } => "semaphore_signal",
            OpKind::SemaphoreWait { .. } => "semaphore_wait",
            OpKind::SemaphoreRead { .. } => "semaphore_read",
            OpKind::While { .. } => "while",
        }
    }

    /// The regions nested in this op.
    pub fn regions(&self) -> Vec<&Region> {
        match self {
            OpKind::For { body, .. } => vec![body],
            OpKind::While { cond, body, .. } => vec![cond, body],
            OpKind::If {
                then_region,
                else_region,
                ..
            } => vec![then_region, else_region],
            _ => Vec::new(),
        }
    }

    /// The SSA values this op reads (not counting values used inside its regions).
    pub fn operands(&self) -> Vec<ValueId> {
        let starts = |index: &[Indexer]| -> Vec<ValueId> {
            index
                .iter()
                .filter_map(|ix| match ix {
                    Indexer::Slice {
                        start: Start::Dynamic(v),
                        ..
                    }
                    | Indexer::Point(Start::Dynamic(v)) => Some(*v),
                    _ => None,
                })
                .collect()
        };
        match self {
            OpKind::Const { .. }
            | OpKind::ProgramId { .. }
            | OpKind::NumPrograms { .. }
            | OpKind::ArrayDim { .. }
            | OpKind::Iota { .. } => Vec::new(),
            OpKind::Load {
                index, mask, other, ..
            } => {
                let mut v = starts(index);
                v.extend(mask.iter().chain(other.iter()));
                v
            }
            OpKind::Store {
                index, value, mask, ..
            } => {
                let mut v = starts(index);
                v.push(*value);
                v.extend(mask.iter());
                v
            }
            OpKind::Unary { x, .. }
            | OpKind::Cast { x }
            | OpKind::Broadcast { x }
            | OpKind::Reshape { x }
            | OpKind::Transpose { x, .. }
            | OpKind::Reduce { x, .. } => vec![*x],
            OpKind::Binary { lhs, rhs, .. }
            | OpKind::Compare { lhs, rhs, .. }
            | OpKind::Dot { lhs, rhs, .. } => vec![*lhs, *rhs],
            OpKind::Select {
                cond,
                on_true,
                on_false,
            } => vec![*cond, *on_true, *on_false],
            OpKind::For {
                lower,
                upper,
                step,
                init,
                ..
            } => {
                let mut v = vec![*lower, *upper, *step];
                v.extend(init);
                v
            }
            OpKind::If { cond, .. } => vec![*cond],
            OpKind::Yield { values } => values.clone(),
            OpKind::DmaStart { src, dst, sem } => [src, dst, sem]
                .into_iter()
                .flat_map(|p| starts(&p.index))
                .collect(),
            OpKind::DmaWait { sem, src, dst } => [sem, src, dst]
                .into_iter()
                .flat_map(|p| starts(&p.index))
                .collect(),
            OpKind::SemaphoreSignal { sem, amount } | OpKind::SemaphoreWait { sem, amount } => {
                let mut v = starts(&sem.index);
                v.push(*amount);
                v
            }
            OpKind::SemaphoreRead { sem } => starts(&sem.index),
            OpKind::While { init, .. } => init.clone(),
        }
    }
}
