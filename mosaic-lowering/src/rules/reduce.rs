//! Reductions: `vector.multi_reduction`, accumulating floats in f32 (narrow floats widen
//! first and round once at the end, as `jnp.sum` does for bf16).

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
    rules::elementwise::{convert, splat},
    types,
};
use tpukit_dsl::{DType, Literal, Op, OpKind, ReduceOp, Result, Type};

pub fn reduce<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::Reduce { op: r, x, ref axes } = op.kind else {
        unreachable!()
    };
    let (from, to) = (lw.ty(x), lw.ty(op.results[0]));
    let acc_dtype = if from.dtype.is_float() {
        DType::F32
    } else {
        DType::I32
    };
    let source = convert(em, lw.value(x), from, acc_dtype)?;
    let acc_ty = Type::new(acc_dtype, to.shape.clone());
    let float = acc_dtype == DType::F32;
    let (kind, init) = match (r, float) {
        (ReduceOp::Sum, true) => ("add", Literal::Float(0.0)),
        (ReduceOp::Max, true) => ("maximumf", Literal::Float(f64::NEG_INFINITY)),
        (ReduceOp::Min, true) => ("minimumf", Literal::Float(f64::INFINITY)),
        (ReduceOp::Sum, false) => ("add", Literal::Int(0)),
        (ReduceOp::Max, false) => ("maxsi", Literal::Int(i32::MIN as i64)),
        (ReduceOp::Min, false) => ("minsi", Literal::Int(i32::MAX as i64)),
    };
    let init = splat(em, init, &acc_ty)?;
    let dims: Vec<String> = axes.iter().map(|a| a.to_string()).collect();
    let reduced = em.op1(
        "vector.multi_reduction",
        &[source, init],
        em.ty(&types::value(&acc_ty))?,
        &[
            ("kind", em.attr(&format!("#vector.kind<{kind}>"))?),
            (
                "reduction_dims",
                em.attr(&format!("array<i64: {}>", dims.join(", ")))?,
            ),
        ],
    )?;
    Ok(vec![convert(em, reduced, &acc_ty, to.dtype)?])
}
