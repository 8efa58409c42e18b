//! `gather`: Mosaic's `tpu.dynamic_gather` along the one axis (as Pallas lowers
//! `jnp.take_along_axis`). libtpu gathers only values as wide as the i32 indices ("Gather
//! indices and result have different bitwidths"), so narrower dtypes are widened to a 32-bit
//! type first (floats to f32, integers and bool to i32; exact) and converted back after.

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
    rules::elementwise::convert,
    types,
};
use tpukit_dsl::{DType, Op, OpKind, Result};

pub fn gather<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::Gather { x, indices, axis } = op.kind else {
        unreachable!()
    };
    let (from, to) = (lw.ty(x).clone(), lw.ty(op.results[0]).clone());
    let wide = match from.dtype {
        DType::F32 | DType::I32 => from.dtype,
        d if d.is_float() => DType::F32,
        _ => DType::I32,
    };
    let v = convert(em, lw.value(x), &from, wide)?;
    let out = to.with_dtype(wide);
    let gathered = em.op1(
        "tpu.dynamic_gather",
        &[v, lw.value(indices)],
        em.ty(&types::value(&out))?,
        &[("dimensions", em.attr(&format!("array<i32: {axis}>"))?)],
    )?;
    Ok(vec![convert(em, gathered, &out, to.dtype)?])
}
