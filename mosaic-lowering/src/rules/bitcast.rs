//! `bitcast`: `tpu.bitcast` on vectors (which also packs and unpacks between widths along
//! the second-minor dimension, the IR's rule), `arith.bitcast` on scalars (equal widths only).

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
    types,
};
use tpukit_dsl::{Op, OpKind, Result};

pub fn bitcast<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::Bitcast { x } = op.kind else {
        unreachable!()
    };
    let to = lw.ty(op.results[0]);
    let name = if to.is_scalar() {
        "arith.bitcast"
    } else {
        "tpu.bitcast"
    };
    let target = em.ty(&types::value(to))?;
    Ok(vec![em.op1(name, &[lw.value(x)], target, &[])?])
}
