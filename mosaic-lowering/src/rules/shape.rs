//! Broadcasts, reshapes, transposes and iota: `vector` ops and `tpu.iota`.

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
    rules::elementwise::{convert, splat},
    types,
};
use tpukit_dsl::{DType, Literal, Op, OpKind, Result, Type};

/// Numpy broadcasting is `vector.broadcast`'s own rule (trailing dims aligned, 1 stretches).
pub fn broadcast<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::Broadcast { x } = op.kind else {
        unreachable!()
    };
    let to = lw.ty(op.results[0]);
    if lw.ty(x) == to {
        return Ok(vec![lw.value(x)]);
    }
    Ok(vec![em.op1(
        "vector.broadcast",
        &[lw.value(x)],
        em.ty(&types::value(to))?,
        &[],
    )?])
}

pub fn reshape<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::Reshape { x } = op.kind else {
        unreachable!()
    };
    let (from, to) = (lw.ty(x), lw.ty(op.results[0]));
    let element = types::element(to.dtype);
    let v = reshape_value(em, lw.value(x), &from.shape, &to.shape, element)?;
    Ok(vec![v])
}

/// `vector.shape_cast` unless the shapes already agree; scalars go through `vector.extract`
/// and `vector.broadcast`.
pub(crate) fn reshape_value<'c>(
    em: &Emitter<'c>,
    v: Val<'c>,
    from: &[usize],
    to: &[usize],
    element: &str,
) -> Result<Val<'c>> {
    if from == to {
        return Ok(v);
    }
    let target = em.ty(&types::vector(to, element))?;
    if to.is_empty() {
        types::check_scalar_extract(element)?;
        let position = vec!["0"; from.len()].join(", ");
        return em.op1(
            "vector.extract",
            &[v],
            target,
            &[(
                "static_position",
                em.attr(&format!("array<i64: {position}>"))?,
            )],
        );
    }
    if from.is_empty() {
        return em.op1("vector.broadcast", &[v], target, &[]);
    }
    em.op1("vector.shape_cast", &[v], target, &[])
}

pub fn transpose<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::Transpose { x, ref perm } = op.kind else {
        unreachable!()
    };
    let to = lw.ty(op.results[0]);
    let perm: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
    Ok(vec![em.op1(
        "vector.transpose",
        &[lw.value(x)],
        em.ty(&types::value(to))?,
        &[(
            "permutation",
            em.attr(&format!("array<i64: {}>", perm.join(", ")))?,
        )],
    )?])
}

/// `tpu.iota` makes i32 positions; other dtypes convert.
pub fn iota<'c>(lw: &mut FuncLowering<'c, '_>, em: &Emitter<'c>, op: &Op) -> Result<Vec<Val<'c>>> {
    let OpKind::Iota { dim } = op.kind else {
        unreachable!()
    };
    let to = lw.ty(op.results[0]);
    let positions = Type::new(DType::I32, to.shape.clone());
    let v = if to.is_scalar() {
        splat(em, Literal::Int(0), &positions)?
    } else {
        iota_positions(em, &to.shape, dim)?
    };
    Ok(vec![convert(em, v, &positions, to.dtype)?])
}

/// The positions along `dim` of a `sizes` i32 vector: `tpu.iota`.
///
/// Mosaic's iota needs rank 2 or more (`iota rank below 2D unsupported`), so a rank-1 iota is
/// built from a rank-2 one and reshaped with `vector.shape_cast`: `n = r * 128` elements with
/// `r > 1` as `row * 128 + lane` over `r x 128` (the shape a 1-D vector of whole lanes is laid
/// out in), any other `n` — 128 itself, or one that is not a multiple of 128 — as the lane
/// iota of `1 x n`.
pub(crate) fn iota_positions<'c>(em: &Emitter<'c>, sizes: &[usize], dim: usize) -> Result<Val<'c>> {
    let along = |shape: &[usize], d: usize| -> Result<Val<'c>> {
        em.op1(
            "tpu.iota",
            &[],
            em.ty(&types::vector(shape, "i32"))?,
            &[("dimensions", em.attr(&format!("array<i32: {d}>"))?)],
        )
    };
    let flat = match *sizes {
        [n] if n.is_multiple_of(LANES) && n > LANES => {
            let tile = [n / LANES, LANES];
            let tile_ty = types::vector(&tile, "i32");
            let row = along(&tile, 0)?;
            let lanes = em.constant(&format!("dense<{LANES}>"), &tile_ty)?;
            let row = em.op1("arith.muli", &[row, lanes], em.ty(&tile_ty)?, &[])?;
            let lane = along(&tile, 1)?;
            em.op1("arith.addi", &[row, lane], em.ty(&tile_ty)?, &[])?
        }
        [n] => along(&[1, n], 1)?,
        _ => return along(sizes, dim),
    };
    em.op1(
        "vector.shape_cast",
        &[flat],
        em.ty(&types::vector(sizes, "i32"))?,
        &[],
    )
}

/// Lanes of a TPU vector register.
const LANES: usize = 128;
