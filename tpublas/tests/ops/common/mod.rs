//! Shared by the tpuBLAS tests: random tensors, f64 reference helpers written as plain
//! loops, and comparisons with tolerances fit to the dtype.
#![allow(dead_code)]

use rand::{Rng, SeedableRng, rngs::StdRng};
use tpukit::HostArray;
use tpukit::dsl::DType;

pub const DTYPES: [DType; 2] = [DType::F32, DType::BF16];

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A random tensor of `dtype` (values in `lo..hi`, rounded to the dtype) and its exact values.
pub fn random(
    rng: &mut StdRng,
    dtype: DType,
    shape: &[usize],
    lo: f64,
    hi: f64,
) -> (HostArray, Vec<f64>) {
    let n = shape.iter().product();
    let data: Vec<f64> = (0..n)
        .map(|_| dtype.round_f64(rng.random_range(lo..hi)))
        .collect();
    let a = HostArray::from_f64(dtype, shape, &data);
    let exact = a.to_f64_vec();
    (a, exact)
}

/// Relative error of one f32-computed result rounded once to `dtype`.
pub fn tol(dtype: DType) -> f64 {
    if dtype == DType::F32 { 4e-6 } else { 1.6e-2 }
}

/// Asserts `got` (of `dtype`) matches `want` within `rel · |want| + abs` elementwise (NaN
/// matches NaN).
#[track_caller]
pub fn close_abs(what: &str, got: &HostArray, want: &[f64], rel: f64, abs: f64) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "{what}: lengths differ");
    for (i, (g, w)) in g.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rel * w.abs() + abs;
        assert!(
            ok,
            "{what}: element {i}: got {g}, want {w} (rel {rel}, abs {abs})"
        );
    }
}

/// [`close_abs`] with `abs = rel` (relative, and absolute near 0).
#[track_caller]
pub fn close(what: &str, got: &HostArray, want: &[f64], rel: f64) {
    close_abs(what, got, want, rel, rel);
}

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The coordinates of flat index `i` in `shape`.
pub fn coords(i: usize, shape: &[usize]) -> Vec<usize> {
    let st = strides(shape);
    shape
        .iter()
        .enumerate()
        .map(|(d, &n)| i / st[d] % n.max(1))
        .collect()
}

/// For each combination of the dims not in `dims` (row-major), the flat indices of the
/// elements it groups (in row-major order of `dims`).
pub fn groups(shape: &[usize], dims: &[usize]) -> Vec<Vec<usize>> {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
    let kept_shape: Vec<usize> = kept.iter().map(|&d| shape[d]).collect();
    let ks = strides(&kept_shape);
    let total: usize = shape.iter().product();
    let mut out = vec![Vec::new(); kept_shape.iter().product()];
    for i in 0..total {
        let c = coords(i, shape);
        let g: usize = kept.iter().enumerate().map(|(j, &d)| c[d] * ks[j]).sum();
        out[g].push(i);
    }
    out
}

/// erf by its Taylor series (|x| ≤ 4 here), independent of any libm.
pub fn erf(x: f64) -> f64 {
    let (mut term, mut sum, mut k) = (x, x, 0.0);
    while term.abs() > 1e-17 * sum.abs().max(1e-300) {
        k += 1.0;
        term *= -x * x / k;
        sum += term / (2.0 * k + 1.0);
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}
