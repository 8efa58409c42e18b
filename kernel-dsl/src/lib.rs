//! tpukit's kernel IR: the Pallas execution model, made total.
//!
//! Every frontend (`#[tpu_kernel]`, the Python decorators, the Mosaic importer) produces a
//! [`Kernel`]; every backend (the interpreter, the compiled CPU backend, the Mosaic lowering)
//! consumes one. This crate owns the IR types, the [`KernelBuilder`], the [`verify`]er, the
//! printer, its inverse ([`parse_kernel`]) and the structural hash.
//!
//! # Semantics
//!
//! A kernel runs its body once per point of its **grid** (row-major order; steps along
//! `parallel` axes may run in any order or concurrently, steps along `arbitrary` axes run in
//! increasing order for fixed outer indices). An axis's extent is a number, `cdiv(sym, b)`
//! of a symbol bound at launch, or `value(i)`: the value of operand `i`, a leading
//! one-element i32 scalar-prefetch operand that nothing reads (a negative value fails the
//! launch).
//!
//! Each **operand** is an array in memory with a global shape (static extents or symbols bound
//! at launch) and a dtype. The body reads and writes operands through **refs**:
//! - a blocked operand's ref is the *window* placed by its index map at this grid step:
//!   dimension `d` starts at element `index_map(g)[d] * block[d]`. The start must lie inside
//!   the array — an index map that points past the end is an error, reported with the kernel,
//!   the operand and the grid point — but the window may overhang the end (an *edge block*):
//!   an input's loads there read the operand's `fill` value; an output's part past the end is
//!   kernel memory that is never written to the array: it holds what the body stores there
//!   while the window stays at one block over consecutive grid steps (as a TPU's VMEM block
//!   buffer does), and reads the `fill` value after the window arrives at a block (undefined
//!   on a TPU). So no kernel needs its shapes to divide the block.
//! - a whole operand's ref is the whole array (prefetch operands, scratch, small arrays).
//!
//! Windows are views: a load sees the operand's current contents (outputs start as the
//! caller's buffer, zero-filled when the runtime allocates it), a store is visible to later
//! loads of the same element. Inputs are read-only. Prefetch operands are the kernel's own
//! copies of the caller's arrays, made at launch: the body may write them (scalar memory that
//! persists across grid steps, [`smem`] defines it), the caller's arrays stay unchanged.
//! Scratch persists across the grid steps one worker runs; its contents are undefined until
//! written.
//!
//! An operand may also live outside kernel memory ([`Space`]): an input or output left in HBM
//! (`memory_space=pl.ANY`) is reached only by copies (`dma_start`/`dma_wait`), and semaphore
//! scratch only by the semaphore ops; [`dma`] defines them.
//!
//! Accesses name elements of the ref with [`Indexer`]s; an access outside the *ref's* shape is
//! an error (static ones at build time, dynamic ones when the kernel runs). Arithmetic follows
//! the dtype: floats are rounded to their type after each op but computed in f32 (bf16 and f16
//! widen, as TPU VPUs do), reductions and `dot` accumulate in f32, integers wrap, float →
//! int casts truncate and saturate. `max`/`min` propagate NaN.

// Every frontend and backend is written against this crate: its public items are its contract.
#![deny(missing_docs)]

mod bitcast;
mod builder;
pub mod dma;
mod dtype;
mod error;
mod hash;
mod kernel;
mod limits;
mod loc;
pub mod markers;
mod narrow;
mod op;
mod op_table;
mod parse;
mod print;
mod sample;
mod shape;
pub mod smem;
mod spec;
mod types;
mod verify;

pub use bitcast::{bitcast_shape, bits_of, from_bits};
pub use builder::{Arg, Ix, KernelBuilder, Ref, broadcast_shapes};
pub use dma::{Place, SemaphoreKind, Space};
pub use dtype::DType;
pub use error::{Error, ErrorKind, Result};
pub use hash::KernelHash;
pub use kernel::{
    BlockDim, BlockSpec, GridAxis, Initial, Kernel, Operand, Role, Semantics, Window,
};
pub use limits::{MAX_BUFFER_BYTES, buffer_bytes};
pub use loc::Loc;
pub use narrow::{bf16_from_f64, f16_from_f64};
pub use op::{
    BinaryOp, CmpOp, DotDims, Func, Indexer, Literal, Op, OpKind, OperandId, ReduceOp, Region,
    Start, UnaryOp, ValueId, format_message,
};
pub use op_table::{OpInfo, Typing};
pub use parse::{KernelFile, parse_kernel, parse_kernel_in};
pub use print::{PrintOptions, print_kernel};
pub use sample::Fit;
pub use shape::{Bindings, Dim, Extent, value_key};
pub use spec::{ArraySpec, Blocking, CallSpec, IndexBinOp, IndexExpr, grid, prefetch};
pub use types::Type;
pub use verify::verify;

/// bf16 and f16 host types, re-exported so users need no `half` dependency of their own.
pub use half::{bf16, f16};
