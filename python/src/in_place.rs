//! Outputs XLA runs in place: a custom call that declares `output_operand_aliases` gets, for
//! an aliased output, the very buffer of its input (which already holds the output's initial
//! contents). The kernel must still read the input as it was before any write (as a TPU
//! reads its VMEM copy of the block), and tpukit's compiled kernels take their arrays as
//! non-overlapping; so each input whose memory an output shares is read from a snapshot
//! taken before the launch. The snapshot lives only for the call: XLA allocates nothing
//! for it (no temporary buffer in the program's memory analysis).

use std::alloc::{Layout, alloc, dealloc};
use tpukit::runtime::RawArray;

/// Alignment of a snapshot: at least any element's and a vector load's.
const ALIGN: usize = 64;

/// One snapshot's memory (freed on drop).
pub struct Snapshot {
    ptr: *mut u8,
    layout: Layout,
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        // SAFETY: allocated in `snapshot` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Whether `output` is the memory of `input` (the same start: XLA aliases whole buffers).
pub fn shares(output: &RawArray, input: &RawArray) -> bool {
    !output.data.is_null() && output.data == input.data
}

/// `inputs`, each one whose memory some output in `outputs` shares replaced by a snapshot of
/// its bytes (returned with them: keep them alive while the arrays are used).
///
/// # Safety
/// Each array's `data` addresses `product(shape) * dtype.size_bytes()` readable bytes.
pub unsafe fn detach<'a>(
    inputs: &[RawArray<'a>],
    outputs: &[RawArray],
) -> (Vec<RawArray<'a>>, Vec<Snapshot>) {
    let mut snapshots = Vec::new();
    let detached = inputs
        .iter()
        .map(|input| {
            let bytes = input.shape.iter().product::<usize>() * input.dtype.size_bytes();
            if bytes == 0 || !outputs.iter().any(|o| shares(o, input)) {
                return RawArray { ..*input };
            }
            let layout = Layout::from_size_align(bytes, ALIGN).expect("a buffer's size");
            // SAFETY: `bytes > 0`.
            let ptr = unsafe { alloc(layout) };
            if ptr.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            // SAFETY: the caller's contract for `input`; `ptr` is a fresh `bytes`-byte block.
            unsafe { std::ptr::copy_nonoverlapping(input.data, ptr, bytes) };
            snapshots.push(Snapshot { ptr, layout });
            RawArray {
                data: ptr,
                ..*input
            }
        })
        .collect();
    (detached, snapshots)
}
