//! `embedding_dense_backward`: the embedding table's gradient, `out[v] = Σ_{i: idx_i = v}
//! grad[i]`, as one blocked product `onehot(idx)ᵀ @ grad` whose one-hot blocks are made in
//! the kernel from the indices (`iota == idx`), never stored: grid `(v, d, i)` with an f32
//! scratch accumulator over the `arbitrary` index axis. Overhanging index positions read
//! grad rows of 0, so they add nothing whatever index they read.
//!
//! The host checks every index (`0 ≤ idx < num_weights`, else an [`ErrorKind::Bounds`]
//! error) and maps `padding_idx` to −1, which matches no row: that row's gradient stays 0,
//! as in ATen. `scale_grad_by_freq=True` is not served (a clear error).

use crate::launch::{Prepared, memo};
use crate::promote;
use crate::value::{Args, Value};
use crate::{BlasError, Result};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{CallSpec, DType, Dim, Extent, GridAxis, grid};
use tpukit::prelude::*;

/// Block extent along v, d and i.
const B: usize = 128;

#[tpu_kernel]
fn onehot_product(idx: In, g: In, o: Out, acc: Scratch, out: DType) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
    }
    let rows = iota(i32, [128, 128], 0) + program_id(0) * 128;
    let hot = where_(rows == idx[..], 1.0, 0.0);
    acc[..] += dot(hot, g[..].cast(f32));
    if program_id(2) == num_programs(2) - 1 {
        o[..] = acc[..].cast(out);
    }
}

const _: () = assert!(B == 128);

pub const ATEN: &str = "aten.embedding_dense_backward.default";

/// The kernel for gradients of `dtype`.
pub fn kernel(dtype: DType) -> Result<Prepared> {
    memo(("embedding_dense_backward", dtype), || {
        let spec = CallSpec {
            grid: vec![
                GridAxis::parallel(Extent::cdiv("v", B)),
                GridAxis::parallel(Extent::cdiv("d", B)),
                GridAxis::arbitrary(Extent::cdiv("k", B)),
            ],
            inputs: vec![
                ArraySpec::new(DType::I32, [Dim::Static(1), Dim::sym("k")])
                    .blocked([1, B], [0.into(), grid(2)]),
                ArraySpec::new(dtype, ["k", "d"]).blocked([B, B], [grid(2), grid(1)]),
            ],
            outputs: vec![ArraySpec::new(dtype, ["v", "d"]).blocked([B, B], [grid(0), grid(1)])],
            scratch: vec![ArraySpec::new(DType::F32, [B, B])],
            ..Default::default()
        };
        Ok(onehot_product(&spec, dtype)?)
    })
}

/// `embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
/// scale_grad_by_freq)` → `[num_weights, d]`.
pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN, args);
    let (g, indices) = (a.tensor(0)?, a.tensor(1)?);
    promote::check(ATEN, g)?;
    let v = usize::try_from(a.int(2)?).map_err(|_| a.err("num_weights must be ≥ 0"))?;
    let padding = a.int(3)?;
    if a.bool_or(4, false)? {
        return Err(a
            .err("scale_grad_by_freq=True is not served")
            .with_kind(ErrorKind::Unsupported));
    }
    let k: usize = indices.shape().iter().product();
    let d = g.shape().last().copied().unwrap_or(1);
    if g.shape().iter().product::<usize>() != k * d || indices.dtype() != DType::I32 {
        return Err(a
            .err(format!(
                "grad_output {:?} must be indices {:?} + [d], indices integers",
                g.shape(),
                indices.shape()
            ))
            .with_kind(ErrorKind::Shape));
    }
    let mut row = Vec::with_capacity(k);
    for i in indices.to_f64_vec() {
        let i = i as i64;
        if i < 0 || i as usize >= v {
            return Err(a
                .err(format!("index {i} is out of range for {v} embeddings"))
                .with_kind(ErrorKind::Bounds));
        }
        row.push(if i == padding { -1.0 } else { i as f64 });
    }
    let idx = HostArray::from_f64(DType::I32, &[1, k], &row);
    let g2 = g.clone().reshape(&[k, d]).expect("same size");
    let mut out = HostArray::try_zeros(g.dtype(), &[v, d], "the gradient")
        .map_err(|e| BlasError::new(ATEN, e.message).with_kind(e.kind))?;
    if k > 0 && v > 0 && d > 0 {
        crate::launch::into(
            &kernel(g.dtype())?,
            &[&idx, &g2],
            std::slice::from_mut(&mut out),
        )?;
    }
    Ok(vec![out])
}
