//! Grid queries. The grid is static once shapes are specialised, so counts and extents are
//! constants (Pallas folds `pl.num_programs` the same way for a static grid).

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
};
use tpukit_dsl::{Op, OpKind, Result};

/// `program_id(axis)`: the kernel's i32 grid argument.
pub fn program_id<'c>(
    lw: &mut FuncLowering<'c, '_>,
    _: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::ProgramId { axis } = op.kind else {
        unreachable!()
    };
    Ok(vec![lw.grid[axis]])
}

pub fn num_programs<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::NumPrograms { axis } = op.kind else {
        unreachable!()
    };
    Ok(vec![em.i32(lw.shapes.grid[axis] as i64)?])
}

pub fn array_dim<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::ArrayDim { operand, axis } = op.kind else {
        unreachable!()
    };
    Ok(vec![em.i32(
        lw.shapes.operands[operand.0 as usize][axis] as i64,
    )?])
}
