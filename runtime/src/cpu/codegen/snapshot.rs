//! Loads of a ref the kernel also stores to, that need no snapshot.
//!
//! A `load` sees memory as it was at the load. Computed lazily, its elements are read where
//! its (lazy) users are materialised, possibly after a `store` to the same ref; so such loads
//! are copied into a buffer at the load (a snapshot), one pass over the block each. A
//! snapshot changes nothing when no write to the ref can come between the load and the last
//! place its elements are read, which is common: `m = m_ref[...]; ...; m_ref[...] = f(m)`.
//!
//! In one region (not counting nested ones), the load's elements are read by the ops that
//! use it or a value lazily derived from it (an elementwise-style op whose result is not
//! materialised; materialised results are read from their buffer). The load needs no
//! snapshot if none of the ops after it, up to the last of those readers, writes the ref (a
//! `store` to it, a `dot` fused into an accumulation of it, a region op that does either,
//! any DMA or semaphore op), except that the last reader may be a `store` to the same
//! elements (the load's `index`, the same shape up to unit dimensions) of a value, under a
//! mask, both computed from the load pointwise (elementwise ops and unit-dimension reshapes
//! only): each element is then read before it is written, and by nothing else (not so for a
//! lane-uniform load, whose every lane reads lane 0: see `uniform`). Not in debug mode.

use super::Emitter;
use std::collections::{HashMap, HashSet};
use tpukit_dsl::{Func, Op, OpKind, OperandId, Region, ValueId};

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// Finds the loads among `r`'s ops (not those of nested regions) of a stored ref that
    /// need no snapshot, and records them in `unsnapshotted`. Run after
    /// `find_accumulations`.
    pub(super) fn find_unsnapshotted(&mut self, f: &'k Func, r: &'k Region) {
        for op in &r.ops {
            self.unsnapshotted.remove(&(op as *const Op));
        }
        if self.options.debug || !std::ptr::eq(f, &self.kernel.body) {
            return;
        }
        for (i, op) in r.ops.iter().enumerate() {
            if let OpKind::Load { operand, .. } = &op.kind
                && self.stored.contains(operand)
                && !self.fused.contains(&(op as *const Op))
                && !f.ty(op.results[0]).is_scalar()
                && self.snapshot_free(f, r, i, *operand)
            {
                self.unsnapshotted.insert(op as *const Op);
            }
        }
    }

    /// Whether the load at position `at` of `r`, of `operand`, needs no snapshot.
    fn snapshot_free(&self, f: &'k Func, r: &'k Region, at: usize, operand: OperandId) -> bool {
        let load = r.ops[at].results[0];
        // The values whose elements read the load's when computed: the load and its lazy
        // descendants in this region.
        let mut lazy: HashSet<ValueId> = HashSet::from([load]);
        let mut last = at;
        for (i, op) in r.ops.iter().enumerate().skip(at + 1) {
            if !uses(op).iter().any(|v| lazy.contains(v)) {
                continue;
            }
            last = i;
            if self.stays_lazy(f, op) {
                lazy.insert(op.results[0]);
            }
        }
        let def: HashMap<ValueId, &Op> = r.ops[at..=last]
            .iter()
            .flat_map(|op| op.results.iter().map(move |v| (*v, op)))
            .collect();
        // A lane-uniform load is read at lane 0 for every lane (see `uniform`): not pointwise.
        let per_lane = self.rows_shape(f, load).is_none();
        r.ops[at + 1..=last].iter().enumerate().all(|(j, op)| {
            !self.writes(op, operand)
                || (at + 1 + j == last
                    && per_lane
                    && stores_pointwise(f, op, &r.ops[at], &def, &lazy))
        })
    }

    /// Whether `op`'s result may be computed where it is used (see `Emitter::op`): not a
    /// scalar, a reduction, a `dot`, a region's results or an elementwise value that is
    /// materialised (`Uses::materialised`: reused and costly to recompute). Loads count as
    /// lazy (their mask may be), and so do their views, never materialised.
    fn stays_lazy(&self, f: &'k Func, op: &'k Op) -> bool {
        let Some(&v) = op.results.first() else {
            return false;
        };
        if f.ty(v).is_scalar() {
            return false;
        }
        match op.kind {
            OpKind::Reduce { .. }
            | OpKind::Dot { .. }
            | OpKind::For { .. }
            | OpKind::While { .. }
            | OpKind::If { .. } => false,
            OpKind::Unary { .. }
            | OpKind::Binary { .. }
            | OpKind::Compare { .. }
            | OpKind::Select { .. }
            | OpKind::Cast { .. }
            | OpKind::Broadcast { .. }
            | OpKind::Reshape { .. }
            | OpKind::Transpose { .. } => !self.uses.materialised(v),
            _ => true,
        }
    }

    /// Whether `op` may write `operand`'s memory.
    fn writes(&self, op: &Op, operand: OperandId) -> bool {
        match &op.kind {
            OpKind::Store { operand: o, .. } => *o == operand,
            OpKind::Dot { .. } => self
                .accumulations
                .get(&(op as *const Op))
                .is_some_and(|acc| {
                    acc.operand == operand || acc.copy.is_some_and(|c| c.operand == operand)
                }),
            OpKind::DmaStart { .. }
            | OpKind::DmaWait { .. }
            | OpKind::SemaphoreSignal { .. }
            | OpKind::SemaphoreWait { .. }
            | OpKind::SemaphoreRead { .. } => true,
            k => {
                let mut stored = Vec::new();
                for sub in k.regions() {
                    super::analysis::stored_operands(sub, &mut stored);
                }
                stored.contains(&operand) || k.regions().iter().any(|r| r.has_dma())
            }
        }
    }
}

/// Whether `store` writes exactly the elements `load` reads, each from a value (and under a
/// mask) computed pointwise from the load's element at the same place.
fn stores_pointwise(
    f: &Func,
    store: &Op,
    load: &Op,
    def: &HashMap<ValueId, &Op>,
    lazy: &HashSet<ValueId>,
) -> bool {
    let (
        OpKind::Store {
            operand: so,
            index: si,
            value,
            mask,
        },
        OpKind::Load {
            operand: lo,
            index: li,
            mask: None,
            ..
        },
    ) = (&store.kind, &load.kind)
    else {
        return false;
    };
    let at = load.results[0];
    so == lo
        && si == li
        && pointwise(f, *value, at, def, lazy)
        && mask.is_none_or(|m| pointwise(f, m, at, def, lazy))
}

/// Whether element `i` of `v` reads the lazy values of `lazy` (computed from `load`) only at
/// element `i` (up to unit dimensions).
fn pointwise(
    f: &Func,
    v: ValueId,
    load: ValueId,
    def: &HashMap<ValueId, &Op>,
    lazy: &HashSet<ValueId>,
) -> bool {
    if v == load || !lazy.contains(&v) {
        return true;
    }
    let Some(op) = def.get(&v) else {
        return false;
    };
    let same = |x: &ValueId| squeezed(f, *x) == squeezed(f, v);
    match &op.kind {
        OpKind::Unary { .. }
        | OpKind::Binary { .. }
        | OpKind::Compare { .. }
        | OpKind::Select { .. }
        | OpKind::Cast { .. }
        | OpKind::Reshape { .. } => op
            .kind
            .operands()
            .iter()
            .all(|x| !lazy.contains(x) || (same(x) && pointwise(f, *x, load, def, lazy))),
        _ => false,
    }
}

fn squeezed(f: &Func, v: ValueId) -> Vec<usize> {
    f.ty(v).shape.iter().copied().filter(|&n| n != 1).collect()
}

/// The values `op` reads, including inside its regions.
fn uses(op: &Op) -> Vec<ValueId> {
    let mut v = op.kind.operands();
    for r in op.kind.regions() {
        for inner in &r.ops {
            v.extend(uses(inner));
        }
    }
    v
}
