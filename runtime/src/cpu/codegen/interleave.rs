//! Loops whose body carries a chain from one iteration to the next (a reduction's
//! accumulator) run at the chain's latency, not the machine's throughput: a vectorised sum
//! with one vector accumulator waits an `fadd`'s latency per vector, a NaN-propagating
//! maximum (`llvm.maximum`, six instructions on x86) longer. The compiler turns LLVM's loop
//! interleaving off for every loop (it multiplies code size for nothing in elementwise loops),
//! so the loops that carry such a chain ask for it by name: `llvm.loop.interleave.count`
//! metadata on the back edge, which the vectoriser honours even with interleaving off. It
//! then keeps `count` vector accumulators and combines them after the loop (reassociating
//! the sum, which float reductions allow; see `reduce`).

use super::Emitter;
use inkwell::context::AsContextRef;
use inkwell::llvm_sys::core::{
    LLVMConstInt, LLVMGetMDKindIDInContext, LLVMInt32TypeInContext, LLVMMDNodeInContext2,
    LLVMMDStringInContext2, LLVMMetadataAsValue, LLVMSetMetadata, LLVMValueAsMetadata,
};
use inkwell::llvm_sys::debuginfo::{LLVMMetadataReplaceAllUsesWith, LLVMTemporaryMDNode};
use inkwell::values::{AsValueRef, InstructionValue};

/// Accumulators a reduction loop keeps: enough independent chains to cover an `fadd`'s
/// latency (3–4 cycles) at one vector per cycle.
pub(super) const ACCUMULATORS: u32 = 4;

impl<'ctx> Emitter<'ctx, '_> {
    /// How many vector accumulators a reduction loop of `trip` (static) iterations should
    /// keep: [`ACCUMULATORS`] if every one gets at least two vectors' worth of elements,
    /// else 1 (an interleaved vector body the trip count cannot fill would leave the whole
    /// loop to the scalar remainder).
    pub(super) fn accumulators_for(&self, trip: usize) -> u32 {
        let lanes = self.options.vector_lanes.max(1) as usize;
        if trip >= 2 * ACCUMULATORS as usize * lanes {
            ACCUMULATORS
        } else {
            1
        }
    }

    /// Marks the loop whose back edge is `latch` to be interleaved `count` times by LLVM's
    /// loop vectoriser (a distinct, self-referencing loop ID, as LLVM requires).
    pub(super) fn interleave(&self, latch: InstructionValue<'ctx>, count: u32) {
        if count <= 1 {
            return;
        }
        const KEY: &str = "llvm.loop.interleave.count";
        const LOOP: &str = "llvm.loop";
        // SAFETY: every reference is created in (or belongs to) this emitter's context, the
        // lengths passed are those of the slices and strings given, and the temporary node is
        // replaced (and freed) by the node that refers to it before anything else sees it.
        unsafe {
            let ctx = self.ctx.as_ctx_ref();
            let key = LLVMMDStringInContext2(ctx, KEY.as_ptr().cast(), KEY.len());
            let value =
                LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(ctx), count.into(), 0));
            let mut hint = [key, value];
            let hint = LLVMMDNodeInContext2(ctx, hint.as_mut_ptr(), hint.len());
            let temp = LLVMTemporaryMDNode(ctx, std::ptr::null_mut(), 0);
            let mut ops = [temp, hint];
            let id = LLVMMDNodeInContext2(ctx, ops.as_mut_ptr(), ops.len());
            LLVMMetadataReplaceAllUsesWith(temp, id);
            let kind = LLVMGetMDKindIDInContext(ctx, LOOP.as_ptr().cast(), LOOP.len() as u32);
            LLVMSetMetadata(latch.as_value_ref(), kind, LLVMMetadataAsValue(ctx, id));
        }
    }
}
