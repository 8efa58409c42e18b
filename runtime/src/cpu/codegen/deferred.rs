//! Output blocks rewritten whole at every step of the innermost grid axis: only the last
//! such step's store is kept.
//!
//! JAX's matmul (and the Pallas docs' blocked kernels) write `o[...] = acc[...]` at every k
//! step, into an output block whose index map ignores k. On a TPU that block stays in VMEM
//! and is copied to HBM once, when the block index changes; here windows are views into the
//! output array, so each step's store goes to memory (a 256×256 f32 block: 256 KB per step,
//! most of it missing the caches). When the next step is sure to overwrite the whole block
//! before anything reads it, a step's store is dead: so the store runs only at the last
//! step of the innermost axis.
//!
//! Deferred only when nothing can tell: the innermost axis is looped whole by each worker
//! (not split across them), the output's index map does not read it (the next step of
//! that axis has the same window), the body's one store to the output is unmasked, at its
//! top level (not under control flow) and covers the whole block, nothing in the kernel
//! loads the output, and the kernel has no DMA or semaphore ops and writes no prefetch
//! operand. Not in debug mode.

use super::Emitter;
use crate::cpu::shared::reads_axis;
use tpukit_dsl::{Indexer, Kernel, OpKind, OperandId, Region, Role, Start, Window};

impl Emitter<'_, '_> {
    /// The outputs whose stores run only at the last step of the innermost grid axis.
    pub(super) fn deferred_outputs(&self) -> Vec<OperandId> {
        let k = self.kernel;
        let Some(last) = k.grid.len().checked_sub(1) else {
            return Vec::new();
        };
        // A written prefetch operand may move a window between steps (`tpukit_dsl::smem`).
        if self.options.debug
            || last < super::split_axes(k)
            || k.body.body.has_dma()
            || !k.written_prefetch().is_empty()
        {
            return Vec::new();
        }
        (0..k.operands.len())
            .map(|i| OperandId(i as u32))
            .filter(|&id| deferrable(k, id, last))
            .collect()
    }
}

/// Whether output `id`'s one store can wait for the last step of grid axis `last`.
fn deferrable(k: &Kernel, id: OperandId, last: usize) -> bool {
    let o = k.operand(id);
    let Window::Blocked(spec) = &o.window else {
        return false;
    };
    if o.role != Role::Output || reads_axis(spec, last) || touched(&k.body.body, id) != 1 {
        return false;
    }
    let block: Vec<usize> = spec
        .block
        .iter()
        .filter(|b| b.kept())
        .map(|b| b.size())
        .collect();
    k.body.body.ops.iter().any(|op| match &op.kind {
        OpKind::Store {
            operand,
            index,
            mask: None,
            ..
        } if *operand == id => whole(index, &block),
        _ => false,
    })
}

/// Whether `index` takes every element of a ref of shape `block`.
fn whole(index: &[Indexer], block: &[usize]) -> bool {
    index.len() == block.len()
        && index.iter().zip(block).all(|(ix, &n)| {
            matches!(ix, Indexer::Slice { start: Start::Static(0), size, stride: 1 } if *size == n)
        })
}

/// How many loads and stores of operand `id` `r` holds (nested regions included).
fn touched(r: &Region, id: OperandId) -> usize {
    r.ops
        .iter()
        .map(|op| {
            let here = match &op.kind {
                OpKind::Load { operand, .. } | OpKind::Store { operand, .. } => {
                    usize::from(*operand == id)
                }
                _ => 0,
            };
            here + op
                .kind
                .regions()
                .iter()
                .map(|s| touched(s, id))
                .sum::<usize>()
        })
        .sum()
}
