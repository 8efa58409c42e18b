//! The calling convention between the runtime and compiled kernels.
//!
//! A compiled kernel exports one function:
//!
//! ```text
//! i32 entry(ptr operands, ptr dims, ptr grid, ptr workspace, i64 lo, i64 hi, ptr status,
//!           ptr helpers)
//! ```
//!
//! - `operands`: one data pointer per kernel operand, in kernel order (row-major, contiguous).
//! - `dims`: every operand's extents, concatenated in operand order (i64).
//! - `grid`: the grid's extents (i64). The call runs, in row-major order, the grid points
//!   whose leading axes (every leading `parallel` axis, else the first axis), linearised
//!   row-major, fall in `lo..hi` (all of them for a 0-d grid).
//! - `workspace`: [`Compiled::workspace_bytes`](super::Compiled) bytes, 64-byte aligned, private
//!   to the calling thread: where the kernel keeps the values it materialises.
//! - `status`: [`STATUS_LEN`] i64s; on failure the kernel fills them (see [`field`]) and
//!   returns nonzero.
//! - `helpers`: the runtime functions compiled code calls, in [`helper`] order. Passed in,
//!   not linked by name, so an object needs no symbols from the process that loads it.

/// The entry point's type.
pub(crate) type Entry = unsafe extern "C" fn(
    *const *mut u8,
    *const i64,
    *const i64,
    *mut u8,
    i64,
    i64,
    *mut i64,
    *const usize,
) -> i32;

/// The helper table: index of each runtime function compiled code may call.
pub(crate) mod helper {
    /// [`stage`](crate::cpu::stage::stage): copy a window between its array and its staging
    /// buffer.
    pub const STAGE: u64 = 0;
    /// [`print`](crate::print::print): a `print` op's line.
    pub const PRINT: u64 = 1;
    pub const COUNT: usize = 2;
}

/// The helper table handed to every call, in [`helper`] order.
pub(crate) fn helpers() -> [usize; helper::COUNT] {
    [
        super::stage::stage as *const () as usize,
        crate::print::print as *const () as usize,
    ]
}

/// Length of the status record.
pub(crate) const STATUS_LEN: usize = 20;

/// Status fields: `[code, subject, dim, value, extent, grid point...]`.
pub(crate) mod field {
    pub const CODE: usize = 0;
    /// The operand (for `WINDOW`) or the op's number (otherwise).
    pub const SUBJECT: usize = 1;
    pub const DIM: usize = 2;
    pub const VALUE: usize = 3;
    pub const EXTENT: usize = 4;
    pub const POINT: usize = 5;
    /// At most this many grid coordinates are reported.
    pub const MAX_POINT: usize = 6;
    /// For `ACCESS`: the slice's size, or -1 for a single index.
    pub const SIZE: usize = 11;
    /// For `WINDOW`: the block indices the index map gave.
    pub const BLOCKS: usize = 12;
    pub const MAX_BLOCKS: usize = 8;
}

/// Why a kernel stopped.
pub(crate) mod code {
    /// An index map placed a window's start outside its array.
    pub const WINDOW: i64 = 1;
    /// A dynamic slice or index fell outside the ref.
    pub const ACCESS: i64 = 2;
    /// Debug mode: an element access fell outside its array.
    pub const ELEMENT: i64 = 3;
    /// A `for` loop's step was not positive.
    pub const STEP: i64 = 4;
    /// A semaphore wait found fewer than it takes (value: the count, extent: the amount).
    pub const SEMAPHORE: i64 = 5;
}
