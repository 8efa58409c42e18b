//! `tpu.bitcast` (`pltpu.bitcast`, `lax.bitcast_convert_type`): Mosaic's integers are
//! signless, so a bitcast between int32 and uint32 (or any two dtypes the IR holds alike) is
//! the value itself. A bitcast that changes the bits' meaning (f32 ↔ i32) or the shape has no
//! kernel-IR form yet and is refused by name.

use super::rules::Table;
use super::scope::{Scope, result_type};
use melior::ir::operation::OperationRef;
use tpukit_dsl::{Error, KernelBuilder, Result};

pub(crate) fn bitcast(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let v = s.value(op, 0)?;
    let (from, to) = (b.ty(v).clone(), result_type(op, 0)?);
    if from != to {
        return Err(Error::unsupported(format!(
            "a bitcast from {from} to {to} (only bitcasts between types the IR holds alike, \
             such as int32 and uint32, are imported)"
        )));
    }
    s.define(op, 0, v)
}
