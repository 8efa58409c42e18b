//! Comparisons with a number (`eq.Scalar`, `ne.Scalar`, `lt.Scalar`, `le.Scalar`,
//! `gt.Scalar`, `ge.Scalar`): bool tensors, one 1-D kernel each over the flattened tensor,
//! the number a run-time f32 scalar compared in f32 (bf16 widens exactly; a number that is
//! not an f32 compares as its f32 rounding). NaN compares unequal to everything, as in ATen.
//! And `masked_fill` (`where(mask, value, self)`), served by `where.self`'s kernel.

use crate::elementwise::where_;
use crate::launch::{Prepared, memo};
use crate::layout::{self, BLOCK, elementwise, flat};
use crate::promote;
use crate::value::{Args, Value};
use crate::{BlasError, Result};
use tpukit::dsl::{DType, ErrorKind};
use tpukit::prelude::*;

#[tpu_kernel]
fn eq_ts(x: In, s: In, o: Out) {
    o[..] = x[..].cast(f32) == s[..].broadcast_to([4096]);
}

#[tpu_kernel]
fn ne_ts(x: In, s: In, o: Out) {
    o[..] = x[..].cast(f32) != s[..].broadcast_to([4096]);
}

#[tpu_kernel]
fn lt_ts(x: In, s: In, o: Out) {
    o[..] = x[..].cast(f32) < s[..].broadcast_to([4096]);
}

#[tpu_kernel]
fn le_ts(x: In, s: In, o: Out) {
    o[..] = x[..].cast(f32) <= s[..].broadcast_to([4096]);
}

#[tpu_kernel]
fn gt_ts(x: In, s: In, o: Out) {
    o[..] = x[..].cast(f32) > s[..].broadcast_to([4096]);
}

#[tpu_kernel]
fn ge_ts(x: In, s: In, o: Out) {
    o[..] = x[..].cast(f32) >= s[..].broadcast_to([4096]);
}

const _: () = assert!(BLOCK == 4096);

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Compare {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Compare {
    pub fn aten(self) -> &'static str {
        match self {
            Compare::Eq => "aten.eq.Scalar",
            Compare::Ne => "aten.ne.Scalar",
            Compare::Lt => "aten.lt.Scalar",
            Compare::Le => "aten.le.Scalar",
            Compare::Gt => "aten.gt.Scalar",
            Compare::Ge => "aten.ge.Scalar",
        }
    }

    pub fn kernel(self, dtype: DType) -> Result<Prepared> {
        memo(("compare", self, dtype), || {
            let spec = elementwise(vec![flat(dtype), layout::scalar(1)], DType::Bool);
            let build = match self {
                Compare::Eq => eq_ts,
                Compare::Ne => ne_ts,
                Compare::Lt => lt_ts,
                Compare::Le => le_ts,
                Compare::Gt => gt_ts,
                Compare::Ge => ge_ts,
            };
            Ok(build(&spec)?)
        })
    }

    /// `op(self, other)` with a number `other`.
    pub fn run(self, args: &[Value]) -> Result<Vec<HostArray>> {
        let a = Args::new(self.aten(), args);
        let x = a.tensor(0)?;
        promote::check(self.aten(), x)?;
        let s = layout::scalar_operand(a.scalar_or(1, f64::NAN)?, 1);
        let flat = layout::flatten(x);
        let o = crate::launch::one(&self.kernel(x.dtype())?, &[&flat, &s])?;
        Ok(vec![layout::unflatten(o, x.shape())])
    }
}

/// `masked_fill.Scalar(self, mask, value)` and `masked_fill.Tensor` (a one-element value):
/// `where(mask, value, self)`, the mask broadcasting to `self`'s shape (not the other way, as
/// in ATen), the result of `self`'s dtype.
pub fn masked_fill(name: &str, args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(name, args);
    let (x, mask) = (a.tensor(0)?, a.tensor(1)?);
    promote::check(name, x)?;
    let value = match a.values.get(2) {
        Some(Value::Tensor(t)) if t.shape().iter().product::<usize>() == 1 => t.to_f64_vec()[0],
        Some(Value::Tensor(t)) => {
            return Err(a
                .err(format!(
                    "value must be a one-element tensor, got {:?}",
                    t.shape()
                ))
                .with_kind(ErrorKind::Shape));
        }
        _ => a.scalar_or(2, f64::NAN)?,
    };
    let fits = layout::broadcast_shape(x.shape(), mask.shape()).as_deref() == Some(x.shape());
    if !fits {
        return Err(BlasError::new(
            name,
            format!(
                "mask {:?} does not broadcast to {:?}",
                mask.shape(),
                x.shape()
            ),
        )
        .with_kind(ErrorKind::Shape));
    }
    let v = HostArray::from_f64(x.dtype(), &[], &[value]);
    Ok(vec![where_(mask, &v, x)?])
}
