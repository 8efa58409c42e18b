//! What the code generator needs to know about a function before emitting it: how often each
//! value is used, whether a use sits inside a loop its definition is outside of, which
//! values are views of a `load`, and which elementwise values are materialised.

use tpukit_dsl::{BinaryOp, DType, Func, Op, OpKind, OperandId, Region, UnaryOp, ValueId};

/// The most element operations a reused elementwise value may take to recompute and still be
/// recomputed at each use rather than materialised: a materialised value costs a pass over
/// its block that stores it (and a load per element at each use), more than a widening cast
/// (`x[...].cast(f32)` of a bf16 block), a column mask (`iota + j·bn < n`) or a shift
/// (`v − mean`) cost to redo.
const RECOMPUTE_BUDGET: u32 = 4;

pub(super) struct Uses {
    count: Vec<u32>,
    /// Loop depth of each value's definition.
    def_depth: Vec<u32>,
    /// Deepest loop depth at which each value is used.
    use_depth: Vec<u32>,
    /// Whether each value is a `load`'s result, or a reshape of one that only adds or drops
    /// unit dimensions (`ref[0, :, :]` read as a matrix): each element is one read of the
    /// ref's memory, as cheap as a read of a buffer holding it, so it is never materialised.
    view: Vec<bool>,
    /// How many distinct ops use each value (`d * d` uses `d` once: the two reads of one
    /// element in one op are one computation once LLVM merges them).
    users: Vec<u32>,
    /// Whether each elementwise-style value is stored in the workspace (see
    /// [`Uses::materialised`]).
    materialised: Vec<bool>,
    /// Element operations to compute one element of each value where it is used (0 for what
    /// is read from a register, a buffer or a view).
    cost: Vec<u32>,
}

impl Uses {
    pub fn of(f: &Func) -> Uses {
        let n = f.types.len();
        let mut u = Uses {
            count: vec![0; n],
            def_depth: vec![0; n],
            use_depth: vec![0; n],
            view: vec![false; n],
            users: vec![0; n],
            materialised: vec![false; n],
            cost: vec![0; n],
        };
        u.region(f, &f.body, 0);
        u.costs(f, &f.body);
        u
    }

    /// Decides, in definition order, which elementwise values are materialised and what the
    /// others cost to recompute (an operand's cost counts once per op however often it is
    /// read there).
    fn costs(&mut self, f: &Func, r: &Region) {
        for op in &r.ops {
            for sub in op.kind.regions() {
                self.costs(f, sub);
            }
            let Some(own) = own_cost(f, op) else {
                continue;
            };
            let v = op.results[0];
            let i = v.0 as usize;
            if f.ty(v).is_scalar() || self.view[i] {
                continue;
            }
            let mut operands = op.kind.operands();
            operands.sort_by_key(|u| u.0);
            operands.dedup();
            let cost = operands
                .iter()
                .fold(own, |c, u| c.saturating_add(self.cost[u.0 as usize]));
            self.materialised[i] = self.reused(v) && cost > RECOMPUTE_BUDGET;
            self.cost[i] = if self.materialised[i] { 0 } else { cost };
        }
    }

    fn region(&mut self, f: &Func, r: &Region, depth: u32) {
        for a in &r.args {
            self.def_depth[a.0 as usize] = depth;
        }
        for op in &r.ops {
            let mut operands = op.kind.operands();
            for v in &operands {
                let i = v.0 as usize;
                self.count[i] += 1;
                self.use_depth[i] = self.use_depth[i].max(depth);
            }
            operands.sort_by_key(|u| u.0);
            operands.dedup();
            for v in operands {
                self.users[v.0 as usize] += 1;
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

    /// Whether `v` is computed more than once if computed where it is used: more than one op
    /// uses it, or one inside a loop that its definition is outside of.
    pub fn reused(&self, v: ValueId) -> bool {
        let i = v.0 as usize;
        self.users[i] > 1 || self.use_depth[i] > self.def_depth[i]
    }

    /// Whether the elementwise-style value `v` (of the kernel body, not a scalar) is stored
    /// in the workspace where it is defined rather than computed where it is used: it is
    /// [`reused`](Uses::reused) and recomputing an element would take more than
    /// [`RECOMPUTE_BUDGET`] operations. Views, constants and iotas are never materialised.
    pub fn materialised(&self, v: ValueId) -> bool {
        self.materialised[v.0 as usize]
    }
}

/// The element operations `op` itself takes per element, if it is an elementwise-style op
/// whose result the code generator may compute where it is used (see `Emitter::op`); more
/// than the budget for ops too costly to ever recompute (transcendentals, divisions,
/// gathers, and transposes and reshapes, which reorder elements: recomputed, each use
/// would read its operand out of order). A result rounded to bf16 or f16 pays for the
/// rounding.
fn own_cost(f: &Func, op: &Op) -> Option<u32> {
    const COSTLY: u32 = RECOMPUTE_BUDGET + 1;
    let narrow = |op: &Op| matches!(f.ty(op.results[0]).dtype, DType::BF16 | DType::F16);
    let arith = |op: &Op| if narrow(op) { 4 } else { 1 };
    Some(match &op.kind {
        OpKind::Const { .. } | OpKind::Iota { .. } | OpKind::Broadcast { .. } => 0,
        OpKind::Compare { .. } | OpKind::Select { .. } => 1,
        OpKind::Cast { .. } => arith(op),
        OpKind::Unary { op: u, .. } => match u {
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Not
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::RoundEven
            | UnaryOp::Round => arith(op),
            _ => COSTLY,
        },
        OpKind::Binary { op: b, .. } => match b {
            BinaryOp::Div | BinaryOp::Rem | BinaryOp::Pow => COSTLY,
            _ => arith(op),
        },
        OpKind::Load { .. }
        | OpKind::Store { .. }
        | OpKind::Reduce { .. }
        | OpKind::Dot { .. }
        | OpKind::For { .. }
        | OpKind::While { .. }
        | OpKind::If { .. }
        | OpKind::Yield { .. } => return None,
        _ if op.results.len() == 1 => COSTLY,
        _ => return None,
    })
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
