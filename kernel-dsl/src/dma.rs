//! Manual memory movement: where an operand lives ([`Space`]), the places a copy or a
//! semaphore op names ([`Place`]), and the semaphores copies signal.
//!
//! # Semantics
//!
//! An operand in [`Space::Any`] (`memory_space=pl.ANY` in Pallas: the array stays in HBM) is
//! whole, and the body reaches it only by DMA: `dma_start` copies a window of one ref into a
//! window of another and signals a DMA semaphore; `dma_wait` waits for a copy of a given
//! destination window on that semaphore. A semaphore is an i32 counter that starts at zero:
//! a copy adds the number of bytes it moved, a wait subtracts the number of bytes of the
//! window it names (so one wait matches one copy of that size, whichever started first).
//! Regular semaphores are signalled and waited on by amount (`semaphore_signal`,
//! `semaphore_wait`) and read (`semaphore_read`). A copy may also signal a regular
//! semaphore (Pallas's `pltpu.async_copy(src, dst, sem)` with a `SemaphoreType.REGULAR`, which
//! Mosaic allows from TPU v6 on): it adds 1, and the body waits for it with
//! `semaphore_wait(sem, 1)` (a `dma_wait` names DMA semaphores only).
//!
//! A copy's two ends hold the same bytes: the same type, or types one bitcast apart
//! ([`copies_between`]): a ref seen through a bitcast (`x_hbm.bitcast(jnp.int16)`) is copied
//! as Mosaic copies it, its bits reinterpreted, 32-bit rows split into two 16-bit rows (the
//! low half the even row) or row pairs packed back, along the second-minor dimension of
//! the accessed window, as [`crate::OpKind::Bitcast`] does to values.
//!
//! A copy's window in a whole array in HBM ([`Space::Any`], rank 2 or more) may reach past
//! the array's end in its two minor dimensions, up to the TPU's tiled layout of it
//! ([`copy_tile`]: the second-minor dimension in whole tiles of 8 rows of 32-bit data, 16 of
//! 16-bit, 32 of 8-bit; the minor one in whole 128-lane tiles), as `pltpu.emit_pipeline`
//! copies the last, partial block of an array in whole tiles. Those elements are the
//! array's padding on a TPU: a copy reads 0 there (unspecified on a TPU) and its writes there
//! are dropped (never seen on a TPU), as Pallas's TPU interpret mode with
//! `buffer_bounds="padded"` treats them. Past the tiles it is out of bounds, as elsewhere.
//!
//! The copy happens when it starts: `dma_start` reads its source and writes its destination
//! then, with the semantics of a load and a store (edge windows read their fill, stores
//! outside the array are dropped). A program that obeys the rules below sees the same
//! values as on a TPU, where the copy completes some time before its wait returns:
//! - a wait whose semaphore holds less than it waits for never returns on a TPU; here it is an
//!   error naming the op, on every device;
//! - the destination of a copy must not be read, and neither its source nor its destination
//!   written, between the copy's start and its wait; two copies in flight must not write
//!   overlapping elements; every copy must be waited on before the kernel ends. The
//!   interpreter checks these in debug mode (`LaunchOptions { debug: true }`,
//!   `TPUKIT_DEBUG=1`), naming the op.
//!
//! Semaphores may also cross the kernel's boundary (Pallas's `pltpu.SemaphoreType.DMA(())`
//! as an `out_shape`, `pl.BlockSpec(memory_space=pltpu.SEMAPHORE)` as an input), as whole
//! i32 arrays of counts (what JAX passes between calls for them: `int32` of the semaphore
//! array's shape):
//! - a semaphore *output* starts at zero (or at the count of the input it aliases) and its
//!   final count is the result: a copy started on it may still be in flight when the kernel
//!   ends — it is handed to the caller, and a later kernel taking the count as an input
//!   waits for it (a copy is complete when it starts here, so the data is there then);
//! - a semaphore *input* is the kernel's own copy of the caller's count, made at launch:
//!   waits subtract from it, the caller's array never changes;
//! - a kernel with a semaphore input or output runs its grid steps in order on one worker
//!   (semaphores are one core's state).
//!
//! A wait for more than a semaphore input holds fails as any wait does; the debug checks of
//! copies in flight see one kernel only (a copy handed over by an output is not checked
//! against the accesses of the kernel that waits for it).

use crate::{Indexer, Kernel, OperandId, Role, Type};

/// The tile a copy's window may round dimension `d` of operand `o` up to (see the module
/// doc), or `None` where it stays inside the array.
pub fn copy_tile(o: &crate::Operand, d: usize) -> Option<usize> {
    let rank = o.shape.len();
    if o.space != Space::Any || !matches!(o.window, crate::Window::Whole) || rank < 2 {
        return None;
    }
    if d + 1 == rank {
        Some(128)
    } else if d + 2 == rank {
        Some(8 * 4 / o.dtype.size_bytes().max(1))
    } else {
        None
    }
}

/// Whether a copy may move a window of type `src` into one of type `dst`: the same type,
/// or `dst` the bitcast of `src` ([`crate::bitcast_shape`]).
pub fn copies_between(src: &Type, dst: &Type) -> bool {
    src == dst || crate::bitcast_shape(src, dst.dtype).is_some_and(|s| s == dst.shape)
}

/// Where an operand lives, which fixes how the body may reach it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Space {
    /// Kernel memory, reached by loads and stores: VMEM windows and scratch, SMEM prefetch.
    #[default]
    Local,
    /// Left where the caller has it (HBM, `memory_space=pl.ANY`): a whole array the body
    /// reaches only by DMA.
    Any,
    /// An array of semaphores (scratch only; i32 counters, zero when the kernel starts).
    Semaphore(SemaphoreKind),
    /// Scalar memory (`pltpu.SMEM`): a whole input, output or scratch array read and
    /// written one element at a time (and by DMA). Kernel memory as [`Space::Local`] is on
    /// the CPU devices; a TPU keeps it beside its scalar unit.
    Smem,
}

/// What a semaphore counts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SemaphoreKind {
    /// Signalled by copies, with the bytes they moved (`pltpu.SemaphoreType.DMA`).
    Dma,
    /// Signalled and waited on by the body (`pltpu.SemaphoreType.REGULAR`).
    Regular,
}

impl Space {
    /// The word the printer writes after an operand's shape (none for [`Space::Local`]).
    pub fn name(self) -> Option<&'static str> {
        match self {
            Space::Local => None,
            Space::Any => Some("any"),
            Space::Semaphore(SemaphoreKind::Dma) => Some("dma_semaphore"),
            Space::Semaphore(SemaphoreKind::Regular) => Some("semaphore"),
            Space::Smem => Some("smem"),
        }
    }

    /// Whether loads and stores reach it: kernel memory, VMEM or SMEM.
    pub fn is_local(self) -> bool {
        matches!(self, Space::Local | Space::Smem)
    }

    /// Every space with a name, for the parser.
    pub const NAMED: [Space; 4] = [
        Space::Any,
        Space::Semaphore(SemaphoreKind::Dma),
        Space::Semaphore(SemaphoreKind::Regular),
        Space::Smem,
    ];
}

impl Kernel {
    /// The semaphore inputs and outputs (see the module's semantics), in signature order.
    pub fn semaphore_operands(&self) -> Vec<OperandId> {
        self.operands
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                matches!(o.space, Space::Semaphore(_))
                    && matches!(o.role, Role::Input | Role::Output)
            })
            .map(|(i, _)| OperandId(i as u32))
            .collect()
    }
}

/// Elements of one operand's ref: a copy's source or destination (slices and points, as a
/// load's index), or one semaphore (points only).
#[derive(Clone, Debug, PartialEq)]
pub struct Place {
    /// The operand whose ref is named (an input, output or scratch operand).
    pub operand: OperandId,
    /// One indexer per dimension of the ref: slices and points for a copy's window, points
    /// only for a semaphore.
    pub index: Vec<Indexer>,
}
