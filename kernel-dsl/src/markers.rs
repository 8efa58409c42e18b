//! The parameter types of a `#[tpu_kernel]` function, which give each ref its role.
//!
//! They carry no data: the macro reads them to declare operands in order. They exist as
//! types so that the user's function still type-checks when the macro reports an error.

/// A kernel input (read-only).
pub struct In;
/// A kernel output.
pub struct Out;
/// Kernel-private scratch memory, persistent across the grid steps of one worker.
pub struct Scratch;
/// A scalar-prefetch array, readable by index maps and the body.
pub struct Prefetch;
