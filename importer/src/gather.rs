//! `tpu.dynamic_gather` (`jnp.take_along_axis` in a kernel): the IR's `gather` along the
//! op's one dimension.

use super::rules::Table;
use super::scope::{Scope, attr};
use melior::ir::operation::OperationRef;
use tpukit_dsl::{Error, KernelBuilder, Result};

pub(crate) fn dynamic_gather(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let dims = attr(op, "dimensions")?;
    let axes: Vec<usize> = dims
        .trim_start_matches("array<i32")
        .trim_end_matches('>')
        .split([':', ','])
        .filter_map(|d| d.trim().parse().ok())
        .collect();
    let [axis] = axes[..] else {
        return Err(Error::unsupported(format!(
            "a gather along dimensions `{dims}` (one dimension is imported)"
        )));
    };
    let (x, indices) = (s.value(op, 0)?, s.value(op, 1)?);
    let r = b.gather(x, indices, axis)?;
    s.define(op, 0, r)
}
