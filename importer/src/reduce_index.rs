//! `tpu.reduce_index` (`jnp.argmax`/`argmin` in a kernel body): the index of the first
//! largest (smallest) element along one axis, as i32, built from the IR's reductions: the
//! extreme value, the positions equal to it, the least such position. A NaN counts as the
//! extreme, as in JAX (the maximum and minimum propagate NaN, and `x != x` marks it), so the
//! first NaN's index is the answer where there is one.

use super::rules::Table;
use super::scope::{Scope, attr};
use super::text;
use melior::ir::operation::OperationRef;
use tpukit_dsl::{BinaryOp, CmpOp, DType, Error, KernelBuilder, ReduceOp, Result};

pub(crate) fn reduce_index(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let x = s.value(op, 0)?;
    let t = b.ty(x).clone();
    let axis = text::int(&attr(op, "axis")?)?;
    if axis < 0 || axis as usize >= t.rank() {
        return Err(Error::new(format!(
            "axis {axis} of a rank-{} value",
            t.rank()
        )));
    }
    let kind = attr(op, "kind")?;
    let extreme = match text::enum_case(&kind)? {
        "arg_max" => ReduceOp::Max,
        "arg_min" => ReduceOp::Min,
        other => return Err(Error::unsupported(format!("reduce_index kind `{other}`"))),
    };
    let m = b.reduce_keepdims(extreme, x, &[axis])?;
    let mut hit = b.compare(CmpOp::Eq, x, m)?;
    if t.dtype.is_float() {
        let nan = b.compare(CmpOp::Ne, x, x)?;
        hit = b.binary(BinaryOp::Or, hit, nan)?;
    }
    let n = t.shape[axis as usize] as i64;
    let positions = b.iota(DType::I32, &t.shape, axis as usize)?;
    let candidates = b.select(hit, positions, n)?;
    let v = b.reduce(ReduceOp::Min, candidates, &[axis])?;
    s.define(op, 0, v)
}
