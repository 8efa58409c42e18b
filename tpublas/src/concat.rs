//! `cat` as row scatters: every input is viewed as rows `[outer·size_t, inner]` (`inner` the
//! product of the dims after `dim`), and one launch per input copies its rows to their places
//! in the output `[outer·total, inner]`: row `o·size_t + r` of input `t` goes to row
//! `o·total + offset_t + r`. The destination rows are prefetched and drive the *output's*
//! index map; all launches write into one output buffer (`launch_into`). With fewer than
//! [`BN`] elements per row (a cat along a trailing dim), `dim` is first moved to the front by
//! [`crate::copy::permute`], so rows stay long, and moved back after.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::value::{Args, Value};
use crate::{copy, layout, promote};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{BlockDim, CallSpec, DType};
use tpukit::prelude::*;

/// Elements per window along a row (1-D bf16 windows of 512 do not compile; see
/// [`crate::indexing::BN`]).
pub const BN: usize = 128;

pub const ATEN: &str = "aten.cat.default";

#[tpu_kernel]
fn scatter_rows(dest: Prefetch, x: In, o: Out) {
    o[..] = x[..];
}

/// `[rows, inner]` → rows `dest[r]` of `[total, inner]`.
fn spec(dtype: DType) -> CallSpec {
    let block = [BlockDim::Squeezed, BlockDim::Blocked(BN)];
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("rows", 1)),
            GridAxis::parallel(Extent::cdiv("inner", BN)),
        ],
        prefetch: vec![ArraySpec::new(DType::I32, ["rows"])],
        inputs: vec![ArraySpec::new(dtype, ["rows", "inner"]).blocked(block, [grid(0), grid(1)])],
        outputs: vec![
            ArraySpec::new(dtype, ["total", "inner"])
                .blocked(block, [prefetch(0, [grid(0)]), grid(1)]),
        ],
        ..Default::default()
    }
}

pub fn kernel(dtype: DType) -> Result<Prepared> {
    memo(("scatter", dtype), || Ok(scatter_rows(&spec(dtype))?))
}

/// Every kernel for inputs of `dtype`: the scatter, the transpose that moves a trailing
/// `dim` to the front, and for f32 results the conversion of bf16 parts.
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let mut k = vec![kernel(dtype)?];
    k.extend(copy::kernels(dtype)?);
    if dtype == DType::F32 {
        k.push(crate::cast::kernel(DType::BF16, DType::F32)?);
    }
    Ok(k)
}

/// Concatenates same-rank tensors of one dtype along `d` (shapes equal elsewhere). One part
/// is copied whole (a cache's first `cat([empty, k])`: through the permutes and the row
/// scatter, a `(2, 4, 64, 32)` key took 0.45 ms, the copy a tenth of it).
pub(crate) fn cat(parts: &[HostArray], d: usize) -> Result<HostArray> {
    if let [only] = parts {
        return crate::cast::copy(only, only.dtype());
    }
    let shape = parts[0].shape().to_vec();
    let inner: usize = shape[d + 1..].iter().product();
    if inner < BN && d > 0 {
        let mut perm: Vec<usize> = vec![d];
        perm.extend((0..shape.len()).filter(|&i| i != d));
        let moved: Vec<HostArray> = parts
            .iter()
            .map(|p| copy::permute(p, &perm))
            .collect::<Result<_>>()?;
        let joined = cat(&moved, 0)?;
        return copy::permute(&joined, &layout::inverse(&perm));
    }
    let outer: usize = shape[..d].iter().product();
    let total: usize = parts.iter().map(|p| p.shape()[d]).sum();
    let mut out_shape = shape.clone();
    out_shape[d] = total;
    let dtype = parts[0].dtype();
    let mut out = vec![HostArray::zeros(dtype, &[outer * total, inner])];
    let k = kernel(dtype)?;
    let mut offset = 0;
    for p in parts {
        let size = p.shape()[d];
        if size > 0 && inner > 0 {
            let dest: Vec<f64> = (0..outer)
                .flat_map(|o| (0..size).map(move |r| (o * total + offset + r) as f64))
                .collect();
            let dest = HostArray::from_f64(DType::I32, &[outer * size], &dest);
            let rows = p
                .clone()
                .reshape(&[outer * size, inner])
                .expect("same size");
            crate::launch::into(&k, &[&dest, &rows], &mut out)?;
        }
        offset += size;
    }
    Ok(out.remove(0).reshape(&out_shape).expect("same size"))
}

/// `cat(tensors, dim=0)`: tensors as consecutive [`Value::Tensor`]s, then optionally the
/// dim as an int. Dtypes promote (bf16 with f32 gives f32); 1-D empty tensors are skipped,
/// as ATen's legacy rule says.
pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN, args);
    let tensors: Vec<&HostArray> = args
        .iter()
        .filter_map(|v| match v {
            Value::Tensor(t) => Some(t),
            _ => None,
        })
        .collect();
    let dim = match args.get(tensors.len()) {
        Some(Value::Int(d)) => *d,
        None | Some(Value::None) => 0,
        Some(other) => return Err(a.err(format!("the dim must be an int, got {other:?}"))),
    };
    let kept: Vec<&HostArray> = tensors
        .iter()
        .copied()
        .filter(|t| t.shape() != [0])
        .collect();
    let Some(first) = kept.first() else {
        return Err(a.err("expected a non-empty list of tensors"));
    };
    for t in &kept {
        promote::check(ATEN, t)?;
    }
    let rank = first.shape().len();
    let d = a.dim(dim, rank)?;
    for t in &kept {
        let s = t.shape();
        let same = s.len() == rank && (0..rank).all(|i| i == d || s[i] == first.shape()[i]);
        if !same {
            return Err(a
                .err(format!(
                    "shapes {:?} and {s:?} differ outside dim {d}",
                    first.shape()
                ))
                .with_kind(ErrorKind::Shape));
        }
    }
    let dtype = kept
        .iter()
        .fold(first.dtype(), |acc, t| promote::promote(acc, t.dtype()));
    // Converted on the device (`cast::to`), so that a plan of the call converts the next
    // call's part too.
    let parts: Vec<HostArray> = kept
        .iter()
        .map(|t| crate::cast::to(t, dtype))
        .collect::<Result<_>>()?;
    Ok(vec![cat(&parts, d)?])
}
