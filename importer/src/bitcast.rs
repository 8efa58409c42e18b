//! `tpu.bitcast` (`pltpu.bitcast`) and `arith.bitcast` (`lax.bitcast_convert_type`) of values.
//! Mosaic's integers are signless, so a bitcast between types the IR holds alike (int32 and
//! uint32) is the value itself; f32 ↔ i32 is the IR's `bitcast`. A bitcast that changes the
//! shape (a packed dtype, as bf16 → i32 on a value) has no kernel-IR form and is refused by
//! name.

use super::rules::Table;
use super::scope::{Scope, result_type};
use melior::ir::operation::OperationRef;
use tpukit_dsl::{DType, Error, KernelBuilder, Result};

pub(crate) fn bitcast(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let v = s.value(op, 0)?;
    let (from, to) = (b.ty(v).clone(), result_type(op, 0)?);
    if from == to {
        return s.define(op, 0, v);
    }
    let pair = [from.dtype, to.dtype];
    if from.shape == to.shape && matches!(pair, [DType::F32, DType::I32] | [DType::I32, DType::F32])
    {
        let out = b.bitcast(v, to.dtype)?;
        return s.define(op, 0, out);
    }
    Err(Error::unsupported(format!(
        "a bitcast from {from} to {to} (the IR bitcasts f32 and i32 of one shape, and \
         holds int32 and uint32 alike)"
    )))
}
