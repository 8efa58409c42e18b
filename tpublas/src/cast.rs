//! Copies and dtype conversions (`clone`, `_to_copy`): one 1-D kernel over the flattened
//! tensor, `o = x` rounded to the result dtype (f32 ↔ bf16 round to nearest even, as ATen).
//! `copy_` is `_to_copy` to the destination's dtype, written into it by `tpublas.mode()`.
//!
//! int32 tensors are copied as they are (`clone`, `_to_copy` to int32).
//!
//! Results are row-major whatever the input's strides (`clone(memory_format=preserve)` of a
//! permuted tensor is a row-major copy of its elements); `memory_format`, `layout`, `device`
//! and `pin_memory` are accepted only as their CPU, strided, contiguous values by the Python
//! layer.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::layout::{self, elementwise, flat};
use crate::promote;
use crate::value::{Args, Value};
use tpukit::dsl::DType;
use tpukit::prelude::*;

#[tpu_kernel]
fn convert(x: In, o: Out, out: DType) {
    o[..] = x[..].cast(out);
}

/// The copy kernel from `dtype` to `out`.
pub fn kernel(dtype: DType, out: DType) -> Result<Prepared> {
    memo(("convert", dtype, out), || {
        Ok(convert(&elementwise(vec![flat(dtype)], out), out)?)
    })
}

/// Every kernel for inputs of `dtype`: the copy, and the conversion to the other float dtype
/// (with f32, also the int32 copy: `clone` of int32 tensors).
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let other = if dtype == DType::F32 {
        DType::BF16
    } else {
        DType::F32
    };
    let mut k = vec![kernel(dtype, dtype)?, kernel(dtype, other)?];
    if dtype == DType::F32 {
        k.push(kernel(DType::I32, DType::I32)?);
    }
    Ok(k)
}

/// `x` as a new row-major tensor of `out`.
pub fn copy(x: &HostArray, out: DType) -> Result<HostArray> {
    let flat = layout::flatten(x);
    let o = crate::launch::one(&kernel(x.dtype(), out)?, &[&flat])?;
    Ok(layout::unflatten(o, x.shape()))
}

/// `x` as `dtype`: itself where it is of `dtype`, else converted by the copy kernel — an
/// operator's conversion of a tensor argument (a bf16 weight read as f32), made on the
/// device, so that a plan of the call replays it on the next call's tensor (a conversion
/// on the host would make a constant of this call's values, and no plan).
pub fn to(x: &HostArray, dtype: DType) -> Result<HostArray> {
    match x.dtype() == dtype {
        true => Ok(x.clone()),
        false => copy(x, dtype),
    }
}

/// `clone(self, *, memory_format)` and `_to_copy(self, *, dtype, …)`.
pub fn run(name: &str, args: &[Value], dtype_arg: Option<usize>) -> Result<Vec<HostArray>> {
    let a = Args::new(name, args);
    let x = a.tensor(0)?;
    let out = match dtype_arg {
        Some(i) => a.opt_dtype(i)?.unwrap_or(x.dtype()),
        None => x.dtype(),
    };
    if !(x.dtype() == DType::I32 && out == DType::I32) {
        promote::check(name, x)?;
    }
    Ok(vec![copy(x, out)?])
}
