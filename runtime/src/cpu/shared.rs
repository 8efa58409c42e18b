//! Outputs shared by the split grid steps: a blocked output whose index map ignores one of the
//! leading axes the runtime splits across workers (see `codegen::split_axes`) is one block for
//! all of that axis' steps.
//!
//! Pallas kernels use such outputs as scratch: splash attention keeps its running max, sum
//! and output accumulator in three of them, written at the first step of each row of blocks
//! before any read. A TPU core holds such a block in its own memory, so the `parallel` axis
//! still splits across cores; here two workers would write the one array at once. So every
//! chunk but the one that runs the last grid step gets private copies of these outputs (made
//! from their contents before the launch), and that last chunk writes the caller's arrays:
//! they end as the sequential run leaves them, since a `parallel` step depends on no earlier
//! one.

use crate::{RuntimeError, alloc};
use tpukit_dsl::{BlockSpec, Kernel, Role, Window};

/// Private copies stop being worth it (and the grid runs in one chunk) past this many bytes
/// of shared outputs: each chunk copies them once.
pub(super) const MAX_SHARED_BYTES: usize = 4 << 20;

/// The shared outputs of one launch: operand index and contents before the launch (in u64
/// words, aligned as an array's vector accesses expect; the last word may be part padding).
pub(super) struct Shared {
    outputs: Vec<(usize, Vec<u64>)>,
}

impl Shared {
    /// The outputs of `kernel` whose blocks stay put across one of the first `lead` grid axes
    /// (their operand indices and byte sizes), given the operands' resolved `dims`.
    pub(super) fn find(kernel: &Kernel, lead: usize, dims: &[i64]) -> Vec<(usize, Option<usize>)> {
        let mut first = 0;
        let mut out = Vec::new();
        for (i, o) in kernel.operands.iter().enumerate() {
            let shape = &dims[first..first + o.shape.len()];
            first += o.shape.len();
            let Window::Blocked(spec) = &o.window else {
                continue;
            };
            if o.role == Role::Output && (0..lead).any(|axis| !reads_axis(spec, axis)) {
                let bytes = tpukit_dsl::buffer_bytes(o.dtype, shape.iter().map(|&d| d as usize));
                out.push((i, bytes));
            }
        }
        out
    }

    /// Snapshots of the outputs `found` (by [`Shared::find`]) as `base` (operand pointers)
    /// holds them now.
    ///
    /// # Safety
    /// Each found operand's pointer in `base` addresses its array, of the size found, and no
    /// worker runs yet.
    pub(super) unsafe fn snapshot(
        found: &[(usize, Option<usize>)],
        base: &[usize],
    ) -> Result<Self, RuntimeError> {
        let mut outputs = Vec::with_capacity(found.len());
        for &(i, bytes) in found {
            let bytes = bytes.expect("sizes checked by the caller");
            let mut copy = alloc::zeroed::<u64>(bytes.div_ceil(8), "a copy of a shared output")?;
            // SAFETY: the caller's contract: `base[i]` holds `bytes` readable bytes, and
            // `copy` at least as many.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    base[i] as *const u8,
                    copy.as_mut_ptr() as *mut u8,
                    bytes,
                )
            };
            outputs.push((i, copy));
        }
        Ok(Self { outputs })
    }

    /// Private copies of the shared outputs for one chunk that does not run the last grid
    /// step, with their pointers put into `ptrs` (operand pointers); the copies must live
    /// while the chunk runs.
    pub(super) fn privatise(&self, ptrs: &mut [usize]) -> Result<Vec<Vec<u64>>, RuntimeError> {
        let mut keep = Vec::with_capacity(self.outputs.len());
        for (i, before) in &self.outputs {
            let mut mem = alloc::zeroed::<u64>(before.len(), "a private shared output")?;
            mem.copy_from_slice(before);
            ptrs[*i] = mem.as_mut_ptr() as usize;
            keep.push(mem);
        }
        Ok(keep)
    }
}

/// Whether `spec`'s index map reads grid axis `axis` (an op of it, or its yield, uses the
/// axis' argument).
pub(crate) fn reads_axis(spec: &BlockSpec, axis: usize) -> bool {
    let body = &spec.index_map.body;
    body.args
        .get(axis)
        .is_some_and(|arg| body.ops.iter().any(|op| op.kind.operands().contains(arg)))
}
