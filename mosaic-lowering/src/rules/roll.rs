//! `roll`: Mosaic's `tpu.dynamic_rotate` along the rolled axis (as Pallas lowers
//! `pltpu.roll`; a stride as its `stride`, `stride_dimension`, the stride taken modulo the
//! extent), its amount the shift taken modulo the extent first (`(s % n + n) % n`, in
//! `0..n` for any i32 shift, as the IR's roll is Euclidean). libtpu rotates only 32-bit
//! values ("unsupported packed type rotation", for Pallas's own bf16 kernels too), so
//! narrower dtypes are widened to a 32-bit type first (floats to f32, integers and bool to
//! i32; exact) and converted back after. Mosaic rotates whole (8, 128) tiles only and no
//! stride along the lanes: the lowering refuses other rolls by name, as libtpu does
//! Pallas's.

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
    rules::elementwise::convert,
    types,
};
use tpukit_dsl::{DType, Error, Op, OpKind, Result};

pub fn roll<'c>(lw: &mut FuncLowering<'c, '_>, em: &Emitter<'c>, op: &Op) -> Result<Vec<Val<'c>>> {
    let OpKind::Roll {
        x,
        shift,
        axis,
        stride,
    } = op.kind
    else {
        unreachable!()
    };
    let t = lw.ty(x).clone();
    if let Some((_, e)) = stride
        && e + 1 == t.rank()
    {
        return Err(Error::unsupported(format!(
            "a roll of {t} along axis {axis} by a traced shift with a stride along the minor \
             (lane) axis {e}: Mosaic does not rotate so (\"stride dimension is the minor most\", \
             for Pallas's own kernels too; the CPU devices run it, and a constant shift is \
             lowered)"
        )));
    }
    // The (8, 128) tile of the 32-bit value rotated: Mosaic rotates the lanes and the
    // sublanes of whole tiles only.
    let tile = if axis + 1 == t.rank() {
        128
    } else if axis + 2 == t.rank() {
        8
    } else {
        1
    };
    if !t.shape[axis].is_multiple_of(tile) {
        return Err(Error::unsupported(format!(
            "a roll of {t} along axis {axis} by a traced shift: Mosaic rotates whole tiles \
             only, the axis's extent a multiple of {tile} (\"unsupported unaligned shape\", \
             for Pallas's own kernels too; the CPU devices run it, and a constant shift is \
             lowered)"
        )));
    }
    let extent = t.shape[axis].max(1) as i64;
    let i32t = em.ty("i32")?;
    let n = em.i32(extent)?;
    let r = em.op1("arith.remsi", &[lw.value(shift), n], i32t, &[])?;
    let up = em.op1("arith.addi", &[r, n], i32t, &[])?;
    let amount = em.op1("arith.remsi", &[up, n], i32t, &[])?;
    let wide = match t.dtype {
        DType::F32 | DType::I32 => t.dtype,
        d if d.is_float() => DType::F32,
        _ => DType::I32,
    };
    let w = t.with_dtype(wide);
    let v = convert(em, lw.value(x), &t, wide)?;
    let mut attrs = vec![("dimension", em.attr(&format!("{axis} : si32"))?)];
    if let Some((k, e)) = stride {
        let k = k.rem_euclid(extent);
        attrs.push(("stride", em.attr(&format!("{k} : si32"))?));
        attrs.push(("stride_dimension", em.attr(&format!("{e} : si32"))?));
    }
    let rotated = em.op1(
        "tpu.dynamic_rotate",
        &[v, amount],
        em.ty(&types::value(&w))?,
        &attrs,
    )?;
    Ok(vec![convert(em, rotated, &w, t.dtype)?])
}
