//! `embedding_dense_backward`: the embedding table's gradient, `out[v] = Σ_{i: idx_i = v}
//! grad[i]`, as a segmented sum over the gradient rows sorted by their index.
//!
//! The host reads the indices (it checks each: `0 ≤ idx < num_weights`, else an
//! [`ErrorKind::Bounds`] error), drops those equal to `padding_idx` (that row's gradient
//! stays 0, as in ATen) and sorts the rest stably by index. Step `s` of the kernel's
//! `arbitrary` axis then reads gradient row `src[s]` (prefetched; it drives the input's
//! index map) and adds it to an f32 accumulator, which the first step of each index's run
//! clears and its last step stores to output row `rows[s]` (the output's index map). An
//! index's steps are consecutive, so its output window is visited by one run of steps and
//! written once, at its end — what a TPU's pipeline requires of a revisited output window.
//! Rows no index names are not visited: the output starts as zeros (`launch::into`).
//!
//! The work is one pass over the gradient, `k · d` additions in `k · ⌈d / BC⌉` steps; the
//! one-hot product this replaced (`onehot(idx)ᵀ @ grad` in 128³ blocks) made
//! `num_weights · k · d` multiply-adds, 1000× more for a 1000-row table. `scale_grad_by_freq
//! =True` is not served (a clear error).

use crate::launch::{Prepared, memo};
use crate::promote;
use crate::value::{Args, Value};
use crate::{BlasError, Result};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{BlockDim, CallSpec, DType, Dim};
use tpukit::prelude::*;

/// Elements per window along a row (1-D bf16 windows of 512 do not compile; see
/// [`crate::indexing::BN`]).
const BC: usize = 128;

#[tpu_kernel]
fn segment_sum(
    rows: Prefetch,
    src: Prefetch,
    first: Prefetch,
    last: Prefetch,
    g: In,
    o: Out,
    acc: Scratch,
    out: DType,
) {
    let s = program_id(1);
    if first[s] > 0 {
        acc[..] = 0.0;
    }
    acc[..] += g[..].cast(f32);
    if last[s] > 0 {
        o[..] = acc[..].cast(out);
    }
}

pub const ATEN: &str = "aten.embedding_dense_backward.default";

/// The kernel for gradients of `dtype`: grid `(d-windows parallel, k steps arbitrary)`.
pub fn kernel(dtype: DType) -> Result<Prepared> {
    memo(("embedding_dense_backward", dtype), || {
        let row = [BlockDim::Squeezed, BlockDim::Blocked(BC)];
        let spec = CallSpec {
            grid: vec![
                GridAxis::parallel(Extent::cdiv("d", BC)),
                GridAxis::arbitrary(Extent::cdiv("k", 1)),
            ],
            prefetch: vec![ArraySpec::new(DType::I32, [Dim::sym("k")]); 4],
            inputs: vec![
                ArraySpec::new(dtype, ["n", "d"]).blocked(row, [prefetch(1, [grid(1)]), grid(0)]),
            ],
            outputs: vec![
                ArraySpec::new(dtype, ["v", "d"]).blocked(row, [prefetch(0, [grid(1)]), grid(0)]),
            ],
            scratch: vec![ArraySpec::new(DType::F32, [BC])],
        };
        Ok(segment_sum(&spec, dtype)?)
    })
}

/// The kernel's prefetched arrays for `indices` (already checked): for each kept gradient
/// row in index order, its index, its own row number, and whether it starts or ends its
/// index's run (1 or 0).
fn segments(indices: &[i64], padding: i64) -> [HostArray; 4] {
    let mut order: Vec<usize> = (0..indices.len())
        .filter(|&i| indices[i] != padding)
        .collect();
    order.sort_by_key(|&i| indices[i]); // stable: rows of one index add up in their order
    let at = |s: usize| indices[order[s]];
    let n = order.len();
    let rows: Vec<f64> = (0..n).map(|s| at(s) as f64).collect();
    let src: Vec<f64> = order.iter().map(|&i| i as f64).collect();
    let first: Vec<f64> = (0..n)
        .map(|s| f64::from(s == 0 || at(s - 1) != at(s)))
        .collect();
    let last: Vec<f64> = (0..n)
        .map(|s| f64::from(s + 1 == n || at(s + 1) != at(s)))
        .collect();
    [rows, src, first, last].map(|v| HostArray::from_f64(DType::I32, &[n], &v))
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
    let idx: Vec<i64> = indices.to_f64_vec().into_iter().map(|i| i as i64).collect();
    if let Some(bad) = idx.iter().find(|&&i| i < 0 || i as usize >= v) {
        return Err(a
            .err(format!("index {bad} is out of range for {v} embeddings"))
            .with_kind(ErrorKind::Bounds));
    }
    let mut out = HostArray::try_zeros(g.dtype(), &[v, d], "the gradient")
        .map_err(|e| BlasError::new(ATEN, e.message).with_kind(e.kind))?;
    let [rows, src, first, last] = segments(&idx, padding);
    if !rows.shape().contains(&0) && d > 0 {
        let g2 = g.clone().reshape(&[k, d]).expect("same size");
        crate::launch::into(
            &kernel(g.dtype())?,
            &[&rows, &src, &first, &last, &g2],
            std::slice::from_mut(&mut out),
        )?;
    }
    Ok(vec![out])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(a: &HostArray) -> Vec<i64> {
        a.to_f64_vec().into_iter().map(|x| x as i64).collect()
    }

    #[test]
    fn segments_sort_stably_drop_padding_and_mark_each_run() {
        let [rows, src, first, last] = segments(&[5, 0, 5, 2, 0, 7], 7);
        assert_eq!(ints(&rows), [0, 0, 2, 5, 5]);
        assert_eq!(ints(&src), [1, 4, 3, 0, 2]);
        assert_eq!(ints(&first), [1, 0, 1, 1, 0]);
        assert_eq!(ints(&last), [0, 1, 1, 0, 1]);
    }

    #[test]
    fn only_padding_leaves_no_steps() {
        let [rows, ..] = segments(&[3, 3], 3);
        assert_eq!(rows.shape(), [0]);
    }
}
