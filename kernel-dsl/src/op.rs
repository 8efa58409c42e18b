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
    /// The type of every value of the function, indexed by [`ValueId`].
    pub types: Vec<Type>,
    /// The body: for the kernel, run once per grid step; for an index map, its args are the grid
    /// indices and its yield the block indices.
    pub body: Region,
}

impl Func {
    /// The type of `v`. Panics if `v` is not a value of this function.
    pub fn ty(&self, v: ValueId) -> &Type {
        &self.types[v.0 as usize]
    }
}

/// A list of ops with block arguments, ending in [`OpKind::Yield`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Region {
    /// The region's arguments (a loop's induction variable and carried values; an index map's
    /// grid indices).
    pub args: Vec<ValueId>,
    /// The ops, in execution order; the last one is a [`OpKind::Yield`].
    pub ops: Vec<Op>,
}

impl Region {
    /// Whether an op of this region, at any depth, is one `wanted` accepts.
    pub fn has_op(&self, wanted: &dyn Fn(&OpKind) -> bool) -> bool {
        self.ops
            .iter()
            .any(|op| wanted(&op.kind) || op.kind.regions().iter().any(|r| r.has_op(wanted)))
    }

    /// Whether a DMA or semaphore op ([`OpKind::is_dma`]) is in this region, at any depth.
    pub fn has_dma(&self) -> bool {
        self.has_op(&OpKind::is_dma)
    }

    /// The value of `v` if a `const` op of this region defines it as a bool (the condition
    /// of an `if` on a kernel's compile-time flag).
    pub fn bool_constant(&self, v: ValueId) -> Option<bool> {
        self.ops.iter().find_map(|op| match op.kind {
            OpKind::Const {
                value: Literal::Bool(b),
            } if op.results == [v] => Some(b),
            _ => None,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
/// One operation: what it does, the values it defines and where the user wrote it.
pub struct Op {
    /// The values the op defines (most ops one; stores and yields none; loops and ifs one per
    /// carried or yielded value).
    pub results: Vec<ValueId>,
    /// What the op does, with its operands.
    pub kind: OpKind,
    /// The user's source line, for errors (never part of the structural hash).
    pub loc: Option<Loc>,
}

/// A constant's value. Floats keep f64 precision here; the result type says how they round.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Literal {
    /// A float (any float dtype).
    Float(f64),
    /// An integer.
    Int(i64),
    /// A truth value.
    Bool(bool),
}

impl Literal {
    /// The value as an f64 (`true` is 1).
    pub fn as_f64(self) -> f64 {
        match self {
            Literal::Float(x) => x,
            Literal::Int(i) => i as f64,
            Literal::Bool(b) => b as u8 as f64,
        }
    }

    /// The value as an i64 (floats truncate toward zero, saturating, NaN is 0; `true` is 1).
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
    /// A constant index.
    Static(i64),
    /// An index computed by the body (an i32 scalar).
    Dynamic(ValueId),
}

/// How one dimension of a ref is accessed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Indexer {
    /// Elements `start, start + stride, …`, `size` of them; the dimension stays in the
    /// result (`pl.ds`, `..`; `pl.ds(start, size, stride)`). Only loads read with a stride
    /// other than 1; the access spans `start .. start + stride · (size - 1) + 1`.
    Slice {
        /// Where the slice starts.
        start: Start,
        /// How many elements it takes (static: value shapes are static).
        size: usize,
        /// The distance between the elements taken (at least 1).
        stride: usize,
    },
    /// The one element at `start`; the dimension is dropped from the result (`ref[i]`).
    Point(Start),
}

/// Which dimensions of a `dot`'s operands are contracted. Rank-3 operands are batched over
/// dimension 0 of both; the contracted dimension is one of the last two.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DotDims {
    /// The contracted dimension of the left operand.
    pub lhs_contract: usize,
    /// The contracted dimension of the right operand.
    pub rhs_contract: usize,
}

impl Indexer {
    /// A slice of `size` consecutive elements from `start`.
    pub fn slice(start: Start, size: usize) -> Indexer {
        Indexer::Slice {
            start,
            size,
            stride: 1,
        }
    }

    /// How many elements of the dimension the access spans: one for a point, from the first
    /// to the last element taken for a slice.
    pub fn span(&self) -> usize {
        match *self {
            Indexer::Slice { size, stride, .. } => stride * size.saturating_sub(1) + 1.min(size),
            Indexer::Point(_) => 1,
        }
    }

    /// The slice's stride (1 for a point).
    pub fn stride(&self) -> usize {
        match *self {
            Indexer::Slice { stride, .. } => stride,
            Indexer::Point(_) => 1,
        }
    }
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
/// What an op does. Operands are SSA values of the enclosing [`Func`]; the typing rule of each
/// variant is what [`crate::verify`] checks.
pub enum OpKind {
    /// A splat constant of the result type.
    Const {
        /// The value of every element.
        value: Literal,
    },
    /// A constant with one value per element of the result, in row-major order (a
    /// `jnp.array([...])` or `np.arange` constant; a splat is a [`OpKind::Const`]).
    Dense {
        /// The elements' values (as many as the result has elements), each rounded or
        /// wrapped to the result's dtype.
        values: Vec<Literal>,
    },
    /// The index of this grid step along `axis` (i32).
    ProgramId {
        /// The grid axis.
        axis: usize,
    },
    /// The grid's extent along `axis` (i32).
    NumPrograms {
        /// The grid axis.
        axis: usize,
    },
    /// The runtime global extent of an operand's dimension (i32), as bound at launch.
    ArrayDim {
        /// The operand whose shape is read.
        operand: OperandId,
        /// The dimension of its global shape.
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
        /// The operand whose ref is read.
        operand: OperandId,
        /// One indexer per dimension of the ref.
        index: Vec<Indexer>,
        /// A bool value shaped like the result: where it is false, `other` is read instead.
        mask: Option<ValueId>,
        /// What masked-off elements read (shaped like the result); with a mask only.
        other: Option<ValueId>,
    },
    /// Writes `value` (shaped like a load of `index`) into a ref. Elements outside the
    /// operand's array, or masked off, are not written.
    Store {
        /// The operand whose ref is written.
        operand: OperandId,
        /// One indexer per dimension of the ref.
        index: Vec<Indexer>,
        /// The values written, of the operand's dtype.
        value: ValueId,
        /// A bool value shaped like `value`: only where it is true are elements written.
        mask: Option<ValueId>,
    },
    /// An elementwise op of one operand; the result has its type.
    Unary {
        /// Which op.
        op: UnaryOp,
        /// The operand.
        x: ValueId,
    },
    /// An elementwise op of two operands of one type; the result has that type.
    Binary {
        /// Which op.
        op: BinaryOp,
        /// The left operand.
        lhs: ValueId,
        /// The right operand.
        rhs: ValueId,
    },
    /// Elementwise comparison; the result is bool. Comparisons with NaN are false except `Ne`.
    Compare {
        /// Which comparison.
        op: CmpOp,
        /// The left operand.
        lhs: ValueId,
        /// The right operand, of the left one's type.
        rhs: ValueId,
    },
    /// `cond ? on_true : on_false`, elementwise; `cond` is bool of the same shape.
    Select {
        /// Where to take `on_true`.
        cond: ValueId,
        /// The values where `cond` holds (of the result type).
        on_true: ValueId,
        /// The values elsewhere (of the result type).
        on_false: ValueId,
    },
    /// Converts to the result's dtype (see `DType::round_f64` and `cast_f64_to_int`).
    Cast {
        /// The value converted.
        x: ValueId,
    },
    /// Reinterprets the bits of `x` as the result's dtype (`pltpu.bitcast`,
    /// `lax.bitcast_convert_type`; neither dtype bool). Of equal widths the shape stays;
    /// otherwise the second-minor dimension scales by the width ratio and element
    /// `[.., i, j]` of the wider side holds elements `[.., i * p + k, j]` (`k < p`, the
    /// ratio) of the narrower side, element `k` in bits `k * w ..` (`w` its width): little
    /// endian along the sublanes, as Mosaic's `tpu.bitcast` packs them.
    Bitcast {
        /// The value reinterpreted.
        x: ValueId,
    },
    /// `result[i] = x[i with i[axis] replaced by indices[i]]` (`jnp.take_along_axis`, Mosaic's
    /// `tpu.dynamic_gather`): `indices` is i32 of the result's shape, `x` has the result's
    /// dtype and rank and its extents except along `axis`. An index outside
    /// `0..x.shape[axis]` reads an unspecified value: on a TPU whatever the hardware
    /// gathers, 0 (`false`) on the CPU devices.
    Gather {
        /// The value gathered from.
        x: ValueId,
        /// Where along `axis` each result element reads (i32).
        indices: ValueId,
        /// The axis indexed.
        axis: usize,
    },
    /// `result[i] = x[i with i[axis] replaced by (i[axis] - s) mod n]`, `n` the extent of
    /// `axis` and `s = shift + i[e] · k` for a `stride` `(k, e)`, else `shift` (`jnp.roll`,
    /// `pltpu.roll(..., stride=k, stride_axis=e)`, Mosaic's `tpu.dynamic_rotate`): element `i`
    /// moves to `i + s`, the modulo Euclidean, so a negative shift rolls the other way.
    /// `shift` is an i32 scalar, `x` has the result's type, `k ≥ 0` and `e ≠ axis`.
    Roll {
        /// The value rolled.
        x: ValueId,
        /// By how many elements (i32 scalar).
        shift: ValueId,
        /// The axis rolled.
        axis: usize,
        /// `(k, e)`: slice `j` along axis `e` rolled `j · k` further.
        stride: Option<(i64, usize)>,
    },
    /// Numpy-style broadcast to the result shape (dimensions aligned at the right).
    Broadcast {
        /// The value broadcast.
        x: ValueId,
    },
    /// Same elements in row-major order, new shape.
    Reshape {
        /// The value reshaped (as many elements as the result).
        x: ValueId,
    },
    /// `result.shape[i] = x.shape[perm[i]]`.
    Transpose {
        /// The value transposed.
        x: ValueId,
        /// A permutation of `x`'s axes.
        perm: Vec<usize>,
    },
    /// `result[idx] = idx[dim]` (integer result).
    Iota {
        /// The axis whose index each element holds.
        dim: usize,
    },
    /// Reduces the listed axes away. Floats accumulate in f32 whatever their storage type.
    Reduce {
        /// How elements combine.
        op: ReduceOp,
        /// The value reduced.
        x: ValueId,
        /// The axes reduced away: sorted, distinct, below `x`'s rank.
        axes: Vec<usize>,
    },
    /// Matrix product accumulated in f32 (floats) or i32 (integers), converted to the
    /// result dtype at the end.
    Dot {
        /// The left matrix (or batch of matrices).
        lhs: ValueId,
        /// The right matrix (or batch), of the left one's dtype.
        rhs: ValueId,
        /// Which dimensions are contracted.
        dims: DotDims,
    },
    /// `for iv in (lower..upper).step_by(step)`; the body's args are `[iv, carried…]`, its
    /// yield gives the next carried values; the results are the last carried values.
    /// Bounds and step are i32 scalars; `step` must be positive.
    For {
        /// The first value of the induction variable.
        lower: ValueId,
        /// The bound the induction variable stays below.
        upper: ValueId,
        /// The increment (positive).
        step: ValueId,
        /// The carried values' initial values.
        init: Vec<ValueId>,
        /// The loop body.
        body: Region,
    },
    /// Runs one region; both yield values of the result types.
    If {
        /// A bool scalar: which region runs.
        cond: ValueId,
        /// Runs where `cond` is true.
        then_region: Region,
        /// Runs where `cond` is false.
        else_region: Region,
    },
    /// Ends a region, giving its values to the enclosing op (or, in an index map, the block
    /// indices).
    Yield {
        /// The values given to the enclosing op.
        values: Vec<ValueId>,
    },
    /// Copies `src` into `dst` (same type, or bitcast) and adds the bytes moved to the DMA
    /// semaphore `sem` (see [`crate::dma`] for when the copy happens and what is checked).
    DmaStart {
        /// The elements read: a window of any operand.
        src: Place,
        /// The elements written: a window of the same type as `src`, or of its bitcast
        /// ([`crate::dma::copies_between`]).
        dst: Place,
        /// The DMA semaphore the copy signals with its size in bytes.
        sem: Place,
    },
    /// Subtracts the bytes of `dst` from the DMA semaphore `sem`, once a copy of that size
    /// has signalled it; an error if it holds less. `src` names the copy's source, as
    /// Mosaic's wait does (it must have `dst`'s type).
    DmaWait {
        /// The DMA semaphore waited on.
        sem: Place,
        /// The awaited copy's source (only its type is used).
        src: Place,
        /// The awaited copy's destination: its size in bytes is what the wait subtracts.
        dst: Place,
    },
    /// Adds `amount` (an i32 scalar) to a regular semaphore.
    SemaphoreSignal {
        /// The regular semaphore signalled.
        sem: Place,
        /// The i32 scalar added.
        amount: ValueId,
    },
    /// Subtracts `amount` from a regular semaphore; an error if it holds less.
    SemaphoreWait {
        /// The regular semaphore waited on.
        sem: Place,
        /// The i32 scalar subtracted once the semaphore holds at least that much.
        amount: ValueId,
    },
    /// Prints `message` on the host's standard output (a line, once per execution: each grid
    /// step that reaches it), each `$i` in it (`i < args.len()`) replaced by the decimal value
    /// of i32 scalar `args[i]` (`pl.debug_print`, Mosaic's `tpu.log`). Steps of `parallel`
    /// axes may print in any order.
    Print {
        /// The text, with `$0`, `$1`, … where the arguments go.
        message: String,
        /// The i32 scalars printed.
        args: Vec<ValueId>,
    },
    /// A semaphore's current count (i32).
    SemaphoreRead {
        /// The semaphore whose count is read.
        sem: Place,
    },
    /// `while cond(carried) { carried = body(carried) }` (`lax.while_loop`): both regions
    /// take the carried values as arguments; `cond` yields one bool scalar, `body` the next
    /// carried values; the results are the carried values when `cond` first yields false.
    /// A loop whose condition never fails does not end (as on a TPU).
    While {
        /// The carried values' first values.
        init: Vec<ValueId>,
        /// Takes the carried values; yields the bool scalar that continues the loop.
        cond: Region,
        /// Takes the carried values; yields the next ones.
        body: Region,
    },
}

impl OpKind {
    /// The op's name as printed and as named in errors.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Const { .. } => "const",
            OpKind::Dense { .. } => "dense",
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
            OpKind::Bitcast { .. } => "bitcast",
            OpKind::Gather { .. } => "gather",
            OpKind::Roll { .. } => "roll",
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
            OpKind::Print { .. } => "print",
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

    /// Whether the op starts or waits for a DMA or touches a semaphore: memory may change
    /// under it, or be read, outside the kernel's loads and stores.
    pub fn is_dma(&self) -> bool {
        matches!(
            self,
            OpKind::DmaStart { .. }
                | OpKind::DmaWait { .. }
                | OpKind::SemaphoreSignal { .. }
                | OpKind::SemaphoreWait { .. }
                | OpKind::SemaphoreRead { .. }
        )
    }

    /// [`OpKind::regions`], to change.
    pub fn regions_mut(&mut self) -> Vec<&mut Region> {
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
            | OpKind::Dense { .. }
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
            | OpKind::Bitcast { x }
            | OpKind::Broadcast { x }
            | OpKind::Reshape { x }
            | OpKind::Transpose { x, .. }
            | OpKind::Reduce { x, .. } => vec![*x],
            OpKind::Gather { x, indices, .. } => vec![*x, *indices],
            OpKind::Roll { x, shift, .. } => vec![*x, *shift],
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
            OpKind::Print { args, .. } => args.clone(),
            OpKind::While { init, .. } => init.clone(),
        }
    }
}

/// `message` with each `$i` (`i < args.len()`, the longest such number) replaced by
/// `args[i]`: what [`OpKind::Print`] prints.
pub fn format_message(message: &str, args: &[i64]) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits: String = rest[at + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        match digits.parse::<usize>().ok().filter(|&i| i < args.len()) {
            Some(i) => {
                out.push_str(&args[i].to_string());
                rest = &rest[at + 1 + digits.len()..];
            }
            None => {
                out.push('$');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}
