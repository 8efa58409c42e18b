//! Grid queries. A static grid's counts are constants once shapes are specialised (Pallas
//! folds `pl.num_programs` the same way for a static grid); an axis sized at run time is
//! read with `tpu.iteration_bound`, as Pallas does.

use crate::{
    Shapes,
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
    Ok(vec![extent(em, lw.shapes, axis)?])
}

/// The i32 iteration count of grid axis `axis`: a constant, or `tpu.iteration_bound` for an
/// axis sized at run time ([`tpukit_dsl::Extent::Value`]).
pub fn extent<'c>(em: &Emitter<'c>, shapes: &Shapes, axis: usize) -> Result<Val<'c>> {
    match shapes.grid[axis] {
        Some(n) => em.i32(n as i64),
        None => em.op1(
            "tpu.iteration_bound",
            &[],
            em.ty("i32")?,
            &[("dim", em.attr(&format!("{axis} : i32"))?)],
        ),
    }
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
