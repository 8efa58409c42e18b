//! Outputs XLA runs in place: a custom call that declares `output_operand_aliases` gets, for
//! an aliased output, the very buffer of its input (which already holds the output's initial
//! contents). The kernel must still read the input as it was before any write (as a TPU
//! reads its VMEM copy of the block), and tpukit's compiled kernels take their arrays as
//! non-overlapping; so each input whose memory an output shares is read from a snapshot
//! taken before the launch. The snapshot lives only for the call: XLA allocates nothing
//! for it (no temporary buffer in the program's memory analysis).

use crate::registry::{copy, size_bytes};
use tpukit::HostArray;
use tpukit::runtime::RawArray;

/// Whether `output` is the memory of `input` (the same start: XLA aliases whole buffers).
pub fn shares(output: &RawArray, input: &RawArray) -> bool {
    !output.data.is_null() && output.data == input.data
}

/// `inputs`, each one whose memory some output in `outputs` shares replaced by a snapshot of
/// its contents (returned with them: keep them alive while the arrays are used).
///
/// # Safety
/// Each array's `data` addresses `product(shape) * dtype.size_bytes()` readable bytes.
pub unsafe fn detach<'a>(
    inputs: &[RawArray<'a>],
    outputs: &[RawArray],
) -> (Vec<RawArray<'a>>, Vec<HostArray>) {
    let mut snapshots = Vec::new();
    let detached = inputs
        .iter()
        .map(|input| {
            if size_bytes(input) == 0 || !outputs.iter().any(|o| shares(o, input)) {
                return RawArray { ..*input };
            }
            // SAFETY: the caller's contract for `input`.
            let snapshot = unsafe { copy(input) };
            // The snapshot's elements stay where they are when it moves into `snapshots`.
            let data = snapshot.data_ptr().cast_mut();
            snapshots.push(snapshot);
            RawArray { data, ..*input }
        })
        .collect();
    (detached, snapshots)
}
