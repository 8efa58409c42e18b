//! `stablehlo.reduce_precision` (`lax.reduce_precision`): rounding to a float format with
//! fewer exponent and mantissa bits, then back. With f32's 8 exponent bits nothing leaves the
//! exponent range, so `mantissa_bits = 7` is a cast to bf16 and back (round to nearest even,
//! subnormals on bf16's grid, as XLA rounds the bit pattern) and 23 or more is the value
//! itself. Formats with fewer exponent bits (XLA flushes what falls below their range) and
//! other mantissa widths are refused by name.

use super::rules::Table;
use super::scope::{Scope, attr};
use super::text;
use melior::ir::operation::OperationRef;
use tpukit_dsl::{DType, Error, KernelBuilder, Result};

pub(crate) fn reduce_precision(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let x = s.value(op, 0)?;
    let bits = |name| -> Result<i64> { text::int(&attr(op, name)?) };
    let (e, m) = (bits("exponent_bits")?, bits("mantissa_bits")?);
    let from = b.ty(x).dtype;
    let kept = match from {
        DType::F32 => 23,
        DType::BF16 => 7,
        _ => 0,
    };
    if e >= 8 && m >= kept && kept > 0 {
        // As wide as the value already: nothing to round.
        return s.define(op, 0, x);
    }
    if (e, m, from) != (8, 7, DType::F32) {
        return Err(Error::unsupported(format!(
            "a reduce_precision of {from} to {e} exponent and {m} mantissa bits (f32 to \
             bf16's 8 and 7 is imported)"
        )));
    }
    let narrow = b.cast(x, DType::BF16)?;
    let v = b.cast(narrow, from)?;
    s.define(op, 0, v)
}
