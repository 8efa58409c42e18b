//! What the code generator needs to know about a function before emitting it: how often each
//! value is used, whether a use sits inside a loop its definition is outside of, and which
//! values are views of a `load`.

use tpukit_dsl::{Func, OpKind, OperandId, Region, ValueId};

pub(super) struct Uses {
    count: Vec<u32>,
    /// Loop depth of each value's definition.
    def_depth: Vec<u32>,
    /// Deepest loop depth at which each value is used.
    use_depth: Vec<u32>,
    /// Whether each value is a view of a `load` (see [`Uses::view`]).
    view: Vec<bool>,
}

impl Uses {
    pub fn of(f: &Func) -> Uses {
        let n = f.types.len();
        let mut u = Uses {
            count: vec![0; n],
            def_depth: vec![0; n],
            use_depth: vec![0; n],
            view: vec![false; n],
        };
        u.region(f, &f.body, 0);
        u
    }

    fn region(&mut self, f: &Func, r: &Region, depth: u32) {
        for a in &r.args {
            self.def_depth[a.0 as usize] = depth;
        }
        for op in &r.ops {
            for v in op.kind.operands() {
                let i = v.0 as usize;
                self.count[i] += 1;
                self.use_depth[i] = self.use_depth[i].max(depth);
            }
            for res in &op.results {
                self.def_depth[res.0 as usize] = depth;
            }
            let view = match op.kind {
                OpKind::Load { .. } => true,
                OpKind::Reshape { x } => {
                    self.view[x.0 as usize] && squeezed(f, x) == squeezed(f, op.results[0])
                }
                _ => false,
            };
            if view {
                self.view[op.results[0].0 as usize] = true;
            }
            let inner = depth + matches!(op.kind, OpKind::For { .. } | OpKind::While { .. }) as u32;
            for sub in op.kind.regions() {
                self.region(f, sub, inner);
            }
        }
    }

    /// How many ops use `v`.
    pub fn count(&self, v: ValueId) -> u32 {
        self.count[v.0 as usize]
    }

    /// Whether recomputing `v` at each use could cost more than storing it once: it is used
    /// more than once, or inside a loop that its definition is outside of.
    pub fn reused(&self, v: ValueId) -> bool {
        let i = v.0 as usize;
        self.count[i] > 1 || self.use_depth[i] > self.def_depth[i]
    }

    /// Whether `v` is a `load`'s result, or a reshape of a view that only adds or drops unit
    /// dimensions (`ref[0, :, :]` read as a matrix): each element is one read of the ref's
    /// memory, as cheap as a read of a buffer holding it, so it is never worth materialising.
    pub fn view(&self, v: ValueId) -> bool {
        self.view[v.0 as usize]
    }
}

/// `v`'s shape without its unit dimensions.
fn squeezed(f: &Func, v: ValueId) -> Vec<usize> {
    f.ty(v).shape.iter().copied().filter(|&n| n != 1).collect()
}

/// The operands some `store` or copy in `r` (at any depth) writes.
pub(super) fn stored_operands(r: &Region, out: &mut Vec<OperandId>) {
    for op in &r.ops {
        let written = match &op.kind {
            OpKind::Store { operand, .. } => Some(operand),
            OpKind::DmaStart { dst, .. } => Some(&dst.operand),
            _ => None,
        };
        if let Some(operand) = written
            && !out.contains(operand)
        {
            out.push(*operand);
        }
        for sub in op.kind.regions() {
            stored_operands(sub, out);
        }
    }
}
