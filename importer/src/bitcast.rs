//! `tpu.bitcast` (`pltpu.bitcast`, `lax.bitcast_convert_type` of a vector) and
//! `arith.bitcast` (of a scalar): the IR's `bitcast`, between any two non-bool dtypes of
//! the IR, of equal widths or packing along the second-minor dimension as Mosaic does.
//! Between dtypes the IR holds alike (int32 and uint32) it is the value itself.

use super::rules::Table;
use super::scope::{Scope, result_type};
use melior::ir::operation::OperationRef;
use tpukit_dsl::{Error, KernelBuilder, Result, bitcast_shape};

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
    if bitcast_shape(&from, to.dtype).as_ref() != Some(&to.shape) {
        return Err(Error::unsupported(format!(
            "a bitcast from {from} to {to} (bitcasts between non-bool types are imported, \
             packing along the second-minor dimension between widths)"
        )));
    }
    let r = b.bitcast(v, to.dtype)?;
    s.define(op, 0, r)
}
