//! Scalar memory: prefetch operands the body writes.
//!
//! # Semantics
//!
//! A prefetch operand (`num_scalar_prefetch` in Pallas, SMEM on a TPU) is the kernel's own
//! copy of the caller's array, made once per launch before the first grid step: the body may
//! store into it, each store is seen by every later load (in the same grid step and in later
//! ones), and the caller's array never changes. Pallas TPU kernels keep loop-carried state
//! there (paged attention's double-buffer index and first-step flag).
//!
//! A kernel whose body writes a prefetch operand runs its grid steps one at a time in
//! row-major order, as one TensorCore does, `parallel` axes included (so on a chip with
//! several cores per kernel, which each copy the operands, such a kernel must not depend on
//! a write made on another core: tpukit's v5e and v6e targets have one). Its index maps
//! must not read a prefetch operand the body writes: a TPU's pipeline evaluates the next
//! step's index maps before the current step's body runs, so what they would see is not
//! the program order.

use crate::{Error, Kernel, OpKind, OperandId, Region, Result, Role, Window};

/// The operands some `store` or copy in `r` (at any depth) writes, in first-write order.
pub fn written_operands(r: &Region) -> Vec<OperandId> {
    let mut out = Vec::new();
    collect_written(r, &mut out);
    out
}

fn collect_written(r: &Region, out: &mut Vec<OperandId>) {
    for op in &r.ops {
        let written = match &op.kind {
            OpKind::Store { operand, .. } => Some(*operand),
            OpKind::DmaStart { dst, .. } => Some(dst.operand),
            _ => None,
        };
        if let Some(operand) = written
            && !out.contains(&operand)
        {
            out.push(operand);
        }
        for sub in op.kind.regions() {
            collect_written(sub, out);
        }
    }
}

impl Kernel {
    /// The prefetch operands the body writes (see [`crate::smem`]): when there is one, the
    /// kernel's grid runs in order on one worker, over a private copy of each.
    pub fn written_prefetch(&self) -> Vec<OperandId> {
        written_operands(&self.body.body)
            .into_iter()
            .filter(|&id| self.operand(id).role == Role::Prefetch)
            .collect()
    }
}

/// Refuses an index map that reads a prefetch operand the body writes.
pub(crate) fn check_index_maps(k: &Kernel) -> Result<()> {
    let written = k.written_prefetch();
    if written.is_empty() {
        return Ok(());
    }
    for o in &k.operands {
        let Window::Blocked(spec) = &o.window else {
            continue;
        };
        if let Some(id) = first_load_of(&spec.index_map.body, &written) {
            return Err(Error::new(format!(
                "operand `{}`: its index map reads prefetch operand `{}`, which the body \
                 writes (a TPU evaluates index maps ahead of the body: keep state the index \
                 maps read in a prefetch operand the body does not write)",
                o.name,
                k.operand(id).name
            )));
        }
    }
    Ok(())
}

fn first_load_of(r: &Region, written: &[OperandId]) -> Option<OperandId> {
    r.ops.iter().find_map(|op| match &op.kind {
        OpKind::Load { operand, .. } if written.contains(operand) => Some(*operand),
        kind => kind
            .regions()
            .into_iter()
            .find_map(|sub| first_load_of(sub, written)),
    })
}
