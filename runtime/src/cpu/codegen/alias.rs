//! Alias scopes for workspace buffers: every load and store whose address is based on one
//! workspace buffer is told that it does not alias any other buffer.
//!
//! All buffers live in one workspace (one `noalias` pointer), at constant offsets, and are
//! indexed by loop variables: LLVM cannot prove that `buf_a[i]` and `buf_b[j]` never overlap,
//! so a loop that reads one buffer and writes another (a materialised `max(m, broadcast(r))`,
//! say) keeps its loop-invariant loads inside the loop and stays scalar. Each buffer gets a
//! scope (`!alias.scope`) and every access based on it lists all the other buffers' scopes as
//! `!noalias` (LLVM's scoped no-alias analysis).
//!
//! Sound because buffers are disjoint ranges of the workspace (`alloc` bumps, never reuses)
//! and every access through a buffer stays inside it (loop nests over its static shape). An
//! access is tagged only when its address is a chain of GEPs from a buffer's base; any other
//! address (a phi, a select, an operand's window) keeps no metadata and LLVM's usual, more
//! conservative, answers.

use super::Emitter;
use inkwell::values::{
    BasicMetadataValueEnum, BasicValueEnum, InstructionOpcode, InstructionValue, MetadataValue,
    PointerValue,
};
use std::collections::HashMap;

impl<'ctx> Emitter<'ctx, '_> {
    /// Tags every load and store of the function based on a workspace buffer (see the
    /// module doc). Run once, after the body is emitted.
    pub(super) fn scope_buffers(&self) {
        if self.buffers.len() < 2 {
            return;
        }
        let id: HashMap<PointerValue<'ctx>, usize> = self
            .buffers
            .iter()
            .enumerate()
            .map(|(i, p)| (*p, i))
            .collect();
        let domain = self
            .ctx
            .metadata_node(&[self.ctx.metadata_string("tpukit.workspace").into()]);
        let scopes: Vec<MetadataValue<'ctx>> = (0..self.buffers.len())
            .map(|i| {
                let name = self.ctx.metadata_string(&format!("tpukit.buffer.{i}"));
                self.ctx.metadata_node(&[name.into(), domain.into()])
            })
            .collect();
        let scope_kind = self.ctx.get_kind_id("alias.scope");
        let noalias_kind = self.ctx.get_kind_id("noalias");
        // One (alias.scope, noalias) pair of lists per buffer, made when first needed.
        let mut lists: HashMap<usize, (MetadataValue<'ctx>, MetadataValue<'ctx>)> = HashMap::new();
        for bb in self.func.get_basic_blocks() {
            let mut next = bb.get_first_instruction();
            while let Some(ins) = next {
                next = ins.get_next_instruction();
                let Some(buffer) = address(ins).and_then(|p| based_on(p, &id)) else {
                    continue;
                };
                let (own, others) = *lists.entry(buffer).or_insert_with(|| {
                    let others: Vec<BasicMetadataValueEnum> = (0..scopes.len())
                        .filter(|&j| j != buffer)
                        .map(|j| scopes[j].into())
                        .collect();
                    (
                        self.ctx.metadata_node(&[scopes[buffer].into()]),
                        self.ctx.metadata_node(&others),
                    )
                });
                // Cannot fail: both are loads or stores, which take metadata.
                let _ = ins.set_metadata(own, scope_kind);
                let _ = ins.set_metadata(others, noalias_kind);
            }
        }
    }
}

/// The address a load or store accesses.
fn address(ins: InstructionValue<'_>) -> Option<PointerValue<'_>> {
    let at = match ins.get_opcode() {
        InstructionOpcode::Load => 0,
        InstructionOpcode::Store => 1,
        _ => return None,
    };
    match ins.get_operand(at)?.value()? {
        BasicValueEnum::PointerValue(p) => Some(p),
        _ => None,
    }
}

/// The buffer `p` is based on: `p` is a buffer's base or a chain of GEPs from one.
fn based_on<'ctx>(
    mut p: PointerValue<'ctx>,
    id: &HashMap<PointerValue<'ctx>, usize>,
) -> Option<usize> {
    loop {
        if let Some(&i) = id.get(&p) {
            return Some(i);
        }
        let gep = p.as_instruction()?;
        if gep.get_opcode() != InstructionOpcode::GetElementPtr {
            return None;
        }
        match gep.get_operand(0)?.value()? {
            BasicValueEnum::PointerValue(base) => p = base,
            _ => return None,
        }
    }
}
