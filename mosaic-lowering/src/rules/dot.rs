//! `dot`: `tpu.matmul` with explicit dot dimension numbers and a zero f32 (i32) accumulator,
//! as Pallas lowers `jnp.dot(…, preferred_element_type=jnp.float32)`.

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
    rules::elementwise::{convert, splat},
    types,
};
use tpukit_dsl::{DType, Error, Literal, Op, OpKind, Result, Type};

pub fn dot<'c>(lw: &mut FuncLowering<'c, '_>, em: &Emitter<'c>, op: &Op) -> Result<Vec<Val<'c>>> {
    let OpKind::Dot { lhs, rhs, dims } = op.kind else {
        unreachable!()
    };
    let (lt, to) = (lw.ty(lhs), lw.ty(op.results[0]));
    refuse_wide_ints(lt.dtype)?;
    let rank = lt.rank();
    let acc_dtype = if lt.dtype.is_float() {
        DType::F32
    } else {
        DType::I32
    };
    let acc_ty = Type::new(acc_dtype, to.shape.clone());
    let acc = splat(em, Literal::Int(0), &acc_ty)?;
    // The non-contracting dimension of each operand (one of the last two).
    let free = |contract: usize| {
        if contract == rank - 1 {
            rank - 2
        } else {
            rank - 1
        }
    };
    let (lc, rc) = (dims.lhs_contract, dims.rhs_contract);
    let (lf, rf) = (free(lc), free(rc));
    let numbers = if rank == 3 {
        format!(
            "#tpu.dot_dimension_numbers<[{lc}], [{rc}], [{lf}], [{rf}], [0, 0, 0, {lf}, 1, {rf}], [0], [0]>"
        )
    } else {
        format!(
            "#tpu.dot_dimension_numbers<[{lc}], [{rc}], [{lf}], [{rf}], [0, {lf}, 1, {rf}], [], []>"
        )
    };
    // The current tpu dialect requires `transpose_lhs_hint` (jaxlib parses the readable module
    // only with it); serialization for an older version rewrites it (`serde::downgrade`).
    let attributes = [
        ("dimension_numbers", em.attr(&numbers)?),
        ("transpose_lhs_hint", em.attr("false")?),
    ];
    let product = em.op1(
        "tpu.matmul",
        &[lw.value(lhs), lw.value(rhs), acc],
        em.ty(&types::value(&acc_ty))?,
        &attributes,
    )?;
    Ok(vec![convert(em, product, &acc_ty, to.dtype)?])
}

/// TPU matrix units multiply floats and i8 only: libtpu fails a `tpu.matmul` of i16 or i32
/// operands ("Bad lhs/rhs type", v5e and v6e), so lowering one is refused, with what to use.
fn refuse_wide_ints(dtype: DType) -> Result<()> {
    if matches!(dtype, DType::I16 | DType::I32) {
        return Err(Error::unsupported(format!(
            "a matmul of {dtype} operands: TPU matrix units multiply bf16, f32 and i8 (v5e, \
             v6e); cast the operands to f32 (exact while the sums stay below 2^24) or i8"
        )));
    }
    Ok(())
}
