//! Structured control flow: `scf.for` with an i32 induction variable and carried values (as
//! `lax.fori_loop` lowers), `scf.if` with results.

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
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
