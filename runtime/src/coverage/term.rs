//! The scalar integer values coverage reasons about: grid indices, constants and what
//! `mul`/`div`/`add`/`sub` make of them when the result is again one of those (`i · 1`,
//! `i + 0`, `c₁ / c₂`, …). Anything else is [`Term::Other`].

use tpukit_dsl::{BinaryOp, Extent, GridAxis, Literal, OpKind, Region, ValueId};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Term {
    /// The grid index along an axis.
    Axis(usize),
    Int(i64),
    Other,
}

/// The value `v` of `region` (its top level: an index map, or a kernel body's top level) as
/// a [`Term`]: the region's `args` are the grid indices (an index map's), `program_id` ops
/// the body's, and `fixed` says which axes hold a known index (`(axis, index)` pairs).
pub(crate) fn eval(region: &Region, grid: &[GridAxis], v: ValueId, fixed: &[(usize, i64)]) -> Term {
    let axis = |a: usize| match fixed.iter().find(|(f, _)| *f == a) {
        Some(&(_, c)) => Term::Int(c),
        None => Term::Axis(a),
    };
    if let Some(a) = region.args.iter().position(|&x| x == v) {
        return axis(a);
    }
    let Some(op) = region.ops.iter().find(|op| op.results.contains(&v)) else {
        return Term::Other;
    };
    match &op.kind {
        OpKind::Const {
            value: Literal::Int(c),
        } => Term::Int(*c),
        OpKind::ProgramId { axis: a } => axis(*a),
        OpKind::NumPrograms { axis: a } => match grid.get(*a).map(|g| &g.extent) {
            Some(Extent::Static(n)) => Term::Int(*n as i64),
            _ => Term::Other,
        },
        OpKind::Binary { op, lhs, rhs } => {
            let l = eval(region, grid, *lhs, fixed);
            let r = eval(region, grid, *rhs, fixed);
            combine(*op, l, r)
        }
        _ => Term::Other,
    }
}

fn combine(op: BinaryOp, l: Term, r: Term) -> Term {
    use Term::{Axis, Int, Other};
    match (op, l, r) {
        (BinaryOp::Add, Int(a), Int(b)) => a.checked_add(b).map_or(Other, Int),
        (BinaryOp::Sub, Int(a), Int(b)) => a.checked_sub(b).map_or(Other, Int),
        (BinaryOp::Mul, Int(a), Int(b)) => a.checked_mul(b).map_or(Other, Int),
        // Integer division truncates; by zero it gives 0 (the IR's semantics).
        (BinaryOp::Div, Int(a), Int(b)) => Int(if b == 0 { 0 } else { a / b }),
        (BinaryOp::Add, Axis(i), Int(0))
        | (BinaryOp::Add, Int(0), Axis(i))
        | (BinaryOp::Sub, Axis(i), Int(0))
        | (BinaryOp::Mul, Axis(i), Int(1))
        | (BinaryOp::Mul, Int(1), Axis(i))
        | (BinaryOp::Div, Axis(i), Int(1)) => Axis(i),
        (BinaryOp::Mul, Axis(_), Int(0)) | (BinaryOp::Mul, Int(0), Axis(_)) => Int(0),
        _ => Other,
    }
}
