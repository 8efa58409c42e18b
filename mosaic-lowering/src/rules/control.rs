//! Structured control flow: `scf.for` with an i32 induction variable and carried values (as
//! `lax.fori_loop` lowers), `scf.if` with results.

use crate::{
    emit::{Emitter, Val},
    lowering::{FuncLowering, Terminator},
    types,
};
use melior::ir::Type;
use tpukit_dsl::{Op, OpKind, Result, ValueId};

fn mlir_types<'c>(
    lw: &FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    values: &[ValueId],
) -> Result<Vec<Type<'c>>> {
    values
        .iter()
        .map(|v| em.ty(&types::value(lw.ty(*v))))
        .collect()
}

pub fn for_loop<'c, 'k>(
    lw: &mut FuncLowering<'c, 'k>,
    em: &Emitter<'c>,
    op: &'k Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::For {
        lower,
        upper,
        step,
        ref init,
        ref body,
    } = op.kind
    else {
        unreachable!()
    };
    let carried = mlir_types(lw, em, init)?;
    let mut arg_types = vec![em.ty("i32")?];
    arg_types.extend(&carried);
    let region = lw.nested_region(em, body, &arg_types)?;
    let mut operands = vec![lw.value(lower), lw.value(upper), lw.value(step)];
    operands.extend(init.iter().map(|v| lw.value(*v)));
    em.op_with_regions("scf.for", &operands, &carried, &[], vec![region])
}

/// `scf.while` as `lax.while_loop` lowers: the condition region ends in
/// `scf.condition(%c) %carried…`, the body in `scf.yield`.
pub fn while_loop<'c, 'k>(
    lw: &mut FuncLowering<'c, 'k>,
    em: &Emitter<'c>,
    op: &'k Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::While {
        ref init,
        ref cond,
        ref body,
    } = op.kind
    else {
        unreachable!()
    };
    let carried = mlir_types(lw, em, init)?;
    let before = lw.nested_region_with(em, cond, &carried, Terminator::Condition)?;
    let after = lw.nested_region(em, body, &carried)?;
    let operands: Vec<Val<'c>> = init.iter().map(|v| lw.value(*v)).collect();
    em.op_with_regions("scf.while", &operands, &carried, &[], vec![before, after])
}

pub fn if_else<'c, 'k>(
    lw: &mut FuncLowering<'c, 'k>,
    em: &Emitter<'c>,
    op: &'k Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::If {
        cond,
        ref then_region,
        ref else_region,
    } = op.kind
    else {
        unreachable!()
    };
    let results = mlir_types(lw, em, &op.results)?;
    let then_region = lw.nested_region(em, then_region, &[])?;
    let else_region = lw.nested_region(em, else_region, &[])?;
    em.op_with_regions(
        "scf.if",
        &[lw.value(cond)],
        &results,
        &[],
        vec![then_region, else_region],
    )
}
