//! `dense` constants. libtpu's Mosaic takes only splat vector constants ("Not implemented"
//! for `arith.constant dense<[…]>`, as Pallas never emits one), so a table is built from
//! splats: the most frequent value everywhere, then, for each other value, an
//! `arith.select` where the row-major position (from `tpu.iota`) is one of that value's.
//! That is two ops per element, so tables up to [`MAX_ELEMENTS`] lower; a larger one is an
//! error naming the op (pass it to the kernel as an input instead).

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
    rules::elementwise::{cmpi, select_values, splat},
    rules::shape::iota_positions,
    types,
};
use tpukit_dsl::{DType, Error, ErrorKind, Literal, Op, OpKind, Result, Type};

/// The largest constant lowered (elements): a 1024-entry table is about 2000 vector ops.
pub const MAX_ELEMENTS: usize = 1024;

pub fn dense<'c>(lw: &mut FuncLowering<'c, '_>, em: &Emitter<'c>, op: &Op) -> Result<Vec<Val<'c>>> {
    let OpKind::Dense { ref values } = op.kind else {
        unreachable!()
    };
    let ty = lw.ty(op.results[0]).clone();
    if values.len() > MAX_ELEMENTS {
        return Err(Error::op(
            "dense",
            format!(
                "unsupported: a constant of {} elements ({ty}) does not lower to Mosaic, \
                 which takes splat constants only (tables up to {MAX_ELEMENTS} elements are \
                 built from splats; pass a larger one to the kernel as an input)",
                values.len()
            ),
        )
        .with_kind(ErrorKind::Unsupported));
    }
    let groups = groups(values, ty.dtype);
    let positions = flat_positions(em, &ty.shape)?;
    if ty.dtype == DType::Bool && groups.len() == 2 {
        // No i1 splats or selects (their layouts do not relayout): the minority's
        // positions compared directly, `eq`-or'd where they are true, `ne`-and'ed where
        // they are false.
        let (value, at) = &groups[1];
        let truth = value.as_i64() != 0;
        let (pred, join) = if truth {
            ("eq", "arith.ori")
        } else {
            ("ne", "arith.andi")
        };
        return Ok(vec![positions_mask(em, positions, at, &ty, pred, join)?]);
    }
    let mut acc = splat(em, groups[0].0, &ty)?;
    for (value, at) in &groups[1..] {
        let mask = positions_mask(em, positions, at, &ty, "eq", "arith.ori")?;
        let v = splat(em, *value, &ty)?;
        acc = select_values(em, mask, v, acc, &ty)?;
    }
    Ok(vec![acc])
}

/// The bool vector shaped like `ty` of `positions pred k` for each `k` in `at` (not empty),
/// combined by `join`.
fn positions_mask<'c>(
    em: &Emitter<'c>,
    positions: Val<'c>,
    at: &[usize],
    ty: &Type,
    pred: &str,
    join: &str,
) -> Result<Val<'c>> {
    let pos_ty = ty.with_dtype(DType::I32);
    let bools = em.ty(&types::value(&ty.with_dtype(DType::Bool)))?;
    let mut mask: Option<Val<'c>> = None;
    for &k in at {
        let here = splat(em, Literal::Int(k as i64), &pos_ty)?;
        let hit = cmpi(em, pred, positions, here, &pos_ty)?;
        mask = Some(match mask {
            None => hit,
            Some(m) => em.op1(join, &[m, hit], bools, &[])?,
        });
    }
    Ok(mask.expect("a group has a position"))
}

/// The distinct values (as the dtype holds them, bit for bit) with their positions, the
/// most frequent first.
fn groups(values: &[Literal], dtype: DType) -> Vec<(Literal, Vec<usize>)> {
    let mut out: Vec<(Literal, u64, Vec<usize>)> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let key = match dtype {
            DType::Bool => v.as_i64() as u64 & 1,
            d => tpukit_dsl::bits_of(d, d.round_f64(v.as_f64())),
        };
        match out.iter_mut().find(|(_, k, _)| *k == key) {
            Some((_, _, at)) => at.push(i),
            None => out.push((*v, key, vec![i])),
        }
    }
    out.sort_by_key(|(_, _, at)| std::cmp::Reverse(at.len()));
    out.into_iter().map(|(v, _, at)| (v, at)).collect()
}

/// The row-major position of each element of a vector of `shape` (i32).
fn flat_positions<'c>(em: &Emitter<'c>, shape: &[usize]) -> Result<Val<'c>> {
    let ty = Type::new(DType::I32, shape.to_vec());
    let vty = em.ty(&types::value(&ty))?;
    let mut flat: Option<Val<'c>> = None;
    let mut stride = 1usize;
    for d in (0..shape.len()).rev() {
        if shape[d] > 1 {
            let mut along = iota_positions(em, shape, d)?;
            if stride > 1 {
                let s = splat(em, Literal::Int(stride as i64), &ty)?;
                along = em.op1("arith.muli", &[along, s], vty, &[])?;
            }
            flat = Some(match flat {
                None => along,
                Some(f) => em.op1("arith.addi", &[f, along], vty, &[])?,
            });
        }
        stride *= shape[d];
    }
    match flat {
        Some(f) => Ok(f),
        None => splat(em, Literal::Int(0), &ty),
    }
}
