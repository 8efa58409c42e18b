//! What the code generator needs to know about a function before emitting it: how often each
//! value is used, whether a use sits inside a loop its definition is outside of, and which
//! values are views of a `load`, or cheaper to recompute at each use than to store.

use tpukit_dsl::{BinaryOp, DType, Func, OpKind, OperandId, Region, UnaryOp, ValueId};

pub(super) struct Uses {
    count: Vec<u32>,
    /// Loop depth of each value's definition.
    def_depth: Vec<u32>,
    /// Deepest loop depth at which each value is used.
    use_depth: Vec<u32>,
    /// Whether each value is a view of a `load` (see [`Uses::view`]).
    view: Vec<bool>,
    /// Whether each value is one cheap op on stored values (see [`Uses::recomputed`]).
    recomputed: Vec<bool>,
    /// What kind of op defines each value.
    def: Vec<Def>,
}

/// What kind of op defines a value, as far as `Uses::stored` asks.
#[derive(Copy, Clone)]
enum Def {
    /// A constant, an `iota`, or an op the code generator always materialises: a reduction,
    /// a `dot`, a region op.
    Stored,
    /// An elementwise op, cast or select: materialised when reused.
    Elementwise,
    /// Anything else, and region arguments.
    Other,
}

impl Uses {
    pub fn of(f: &Func) -> Uses {
        let n = f.types.len();
        let mut u = Uses {
            count: vec![0; n],
            def_depth: vec![0; n],
            use_depth: vec![0; n],
            view: vec![false; n],
            recomputed: vec![false; n],
            def: vec![Def::Other; n],
        };
        u.region(f, &f.body, 0);
        u.find_recomputed(f, &f.body);
        u
    }

    /// Marks the values of `r` (at any depth, in definition order) that [`Uses::recomputed`]
    /// holds for.
    fn find_recomputed(&mut self, f: &Func, r: &Region) {
        for op in &r.ops {
            for sub in op.kind.regions() {
                self.find_recomputed(f, sub);
            }
            let [v] = op.results[..] else {
                continue;
            };
            let cheap_op = match op.kind {
                OpKind::Binary { op, .. } => matches!(
                    op,
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min
                ),
                OpKind::Unary { op, .. } => matches!(op, UnaryOp::Neg | UnaryOp::Abs),
                _ => false,
            };
            let ty = f.ty(v);
            self.recomputed[v.0 as usize] = cheap_op
                && matches!(ty.dtype, DType::F32 | DType::I32)
                && !ty.is_scalar()
                && op.kind.operands().iter().all(|&x| self.stored(f, x));
        }
    }

    /// Whether reading an element of `x` is one read of memory or a register: `x` is a
    /// scalar, a constant, an `iota`, a view, or a value the code generator always
    /// materialises (a reduction, a `dot`, a region's result) or materialises because it is
    /// reused.
    fn stored(&self, f: &Func, x: ValueId) -> bool {
        let i = x.0 as usize;
        if f.ty(x).is_scalar() || self.view[i] {
            return true;
        }
        match self.def[i] {
            Def::Stored => true,
            Def::Elementwise => self.reused(x) && !self.recomputed[i],
            Def::Other => false,
        }
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
            let def = match op.kind {
                OpKind::Const { .. }
                | OpKind::Iota { .. }
                | OpKind::Reduce { .. }
                | OpKind::Dot { .. }
                | OpKind::For { .. }
                | OpKind::While { .. }
                | OpKind::If { .. } => Def::Stored,
                OpKind::Unary { .. }
                | OpKind::Binary { .. }
                | OpKind::Compare { .. }
                | OpKind::Select { .. }
                | OpKind::Cast { .. } => Def::Elementwise,
                _ => Def::Other,
            };
            for res in &op.results {
                self.def_depth[res.0 as usize] = depth;
                self.def[res.0 as usize] = def;
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

    /// Whether `v` is better computed at each use even though [`Uses::reused`]: one add,
    /// subtract, multiply, max, min, negation or absolute value (f32 or i32) whose operands
    /// are each read as they are stored (see `stored`), as flash attention's `s * sm_scale` of
    /// a product read by a row max and an `exp`. Recomputing costs one instruction per
    /// element at each use; storing costs a pass over the value's memory.
    pub fn recomputed(&self, v: ValueId) -> bool {
        self.recomputed[v.0 as usize]
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
