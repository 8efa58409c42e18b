//! Row-wise operators against f64 references: softmax family, norms, reductions over any
//! dims, f32 and bf16, row counts that do not divide the 8-row block.

use rand::{Rng, SeedableRng, rngs::StdRng};
use tpukit::HostArray;
use tpukit::dsl::DType;
use tpukit_blas::{Reduction, fused_rms_norm, log_softmax, native_layer_norm, reduce, softmax};

fn random(rng: &mut StdRng, dtype: DType, shape: &[usize]) -> (HostArray, Vec<f64>) {
    let n = shape.iter().product();
    let data: Vec<f64> = (0..n)
        .map(|_| dtype.round_f64(rng.random_range(-3.0..3.0)))
        .collect();
    (HostArray::from_f64(dtype, shape, &data), data)
}

/// f32: a few ULPs plus f32 accumulation over a row; bf16: one rounding of the result.
fn tol(dtype: DType) -> f64 {
    if dtype == DType::F32 { 2e-5 } else { 1.6e-2 }
}

#[track_caller]
fn close(what: &str, got: &HostArray, want: &[f64], dtype: DType) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "{what}: size");
    for (i, (g, w)) in g.iter().zip(want).enumerate() {
        let ok = g == w || (g - w).abs() <= tol(dtype) * (1.0 + w.abs());
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// Applies `f` to every line of `data` (shape `shape`) along `axis`, in place.
fn along(data: &mut [f64], shape: &[usize], axis: usize, f: impl Fn(&mut [f64])) {
    let inner: usize = shape[axis + 1..].iter().product();
    let n = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    for o in 0..outer {
        for i in 0..inner {
            let idx: Vec<usize> = (0..n).map(|k| (o * n + k) * inner + i).collect();
            let mut line: Vec<f64> = idx.iter().map(|&j| data[j]).collect();
            f(&mut line);
            for (&j, v) in idx.iter().zip(line) {
                data[j] = v;
            }
        }
    }
}

#[test]
fn softmax_and_log_softmax_over_any_dim() {
    let mut rng = StdRng::seed_from_u64(1);
    for dtype in [DType::F32, DType::BF16] {
        for (shape, dim) in [
            (vec![37, 300], -1i64),
            (vec![5, 19, 64], 1),
            (vec![3, 4, 50], 0),
        ] {
            let (x, xv) = random(&mut rng, dtype, &shape);
            let axis = if dim < 0 {
                shape.len() - 1
            } else {
                dim as usize
            };
            for log in [false, true] {
                let got = if log {
                    log_softmax(&x, dim)
                } else {
                    softmax(&x, dim)
                }
                .unwrap();
                assert_eq!(got.shape(), &shape[..]);
                let mut want = xv.clone();
                along(&mut want, &shape, axis, |l| {
                    let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let s: f64 = l.iter().map(|v| (v - m).exp()).sum();
                    for v in l.iter_mut() {
                        *v = if log {
                            *v - m - s.ln()
                        } else {
                            (*v - m).exp() / s
                        };
                    }
                });
                let want: Vec<f64> = want.iter().map(|&v| dtype.round_f64(v)).collect();
                close(
                    &format!("softmax log={log} {dtype} {shape:?} dim {dim}"),
                    &got,
                    &want,
                    dtype,
                );
            }
        }
    }
}

#[test]
fn layer_norm_and_rms_norm() {
    let mut rng = StdRng::seed_from_u64(2);
    for dtype in [DType::F32, DType::BF16] {
        let shape = [3, 7, 96];
        let (x, xv) = random(&mut rng, dtype, &shape);
        let (w, wv) = random(&mut rng, DType::F32, &[96]);
        let (b, bv) = random(&mut rng, DType::F32, &[96]);
        let (out, mean, rstd) = native_layer_norm(&x, &[96], Some(&w), Some(&b), 1e-5).unwrap();
        assert_eq!(
            (mean.shape(), rstd.shape()),
            (&[3, 7, 1][..], &[3, 7, 1][..])
        );
        let (mut want, mut means, mut rstds) = (vec![], vec![], vec![]);
        for row in xv.chunks(96) {
            let m = row.iter().sum::<f64>() / 96.0;
            let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / 96.0;
            let r = 1.0 / (var + 1e-5).sqrt();
            means.push(m);
            rstds.push(r);
            want.extend(
                row.iter()
                    .enumerate()
                    .map(|(j, v)| dtype.round_f64((v - m) * r * wv[j] + bv[j])),
            );
        }
        close(&format!("layer_norm {dtype}"), &out, &want, dtype);
        close("layer_norm mean", &mean, &means, DType::F32);
        close("layer_norm rstd", &rstd, &rstds, DType::F32);
        let (out, rstd) = fused_rms_norm(&x, &[96], Some(&w), 1e-6).unwrap();
        let (mut want, mut rstds) = (vec![], vec![]);
        for row in xv.chunks(96) {
            let r = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / 96.0 + 1e-6).sqrt();
            rstds.push(r);
            want.extend(
                row.iter()
                    .enumerate()
                    .map(|(j, v)| dtype.round_f64(v * r * wv[j])),
            );
        }
        close(&format!("rms_norm {dtype}"), &out, &want, dtype);
        close("rms_norm rstd", &rstd, &rstds, DType::F32);
        // No weight and bias: the identity affine.
        let (out, _, _) = native_layer_norm(&x, &[7, 96], None, None, 1e-5).unwrap();
        assert_eq!(out.shape(), &shape[..]);
    }
}

#[test]
fn reductions_over_dims_with_and_without_keepdim() {
    let mut rng = StdRng::seed_from_u64(3);
    let shape = [4, 9, 33];
    for dtype in [DType::F32, DType::BF16] {
        let (x, xv) = random(&mut rng, dtype, &shape);
        for dims in [vec![-1i64], vec![0], vec![0, 2], vec![]] {
            for keepdim in [false, true] {
                for r in [Reduction::Sum, Reduction::Mean, Reduction::Amax] {
                    let got = reduce(r, &x, &dims, keepdim).unwrap();
                    let axes: Vec<usize> = if dims.is_empty() {
                        vec![0, 1, 2]
                    } else {
                        dims.iter()
                            .map(|&d| if d < 0 { (d + 3) as usize } else { d as usize })
                            .collect()
                    };
                    let out_shape: Vec<usize> = (0..3)
                        .filter_map(|a| match (axes.contains(&a), keepdim) {
                            (true, true) => Some(1),
                            (true, false) => None,
                            (false, _) => Some(shape[a]),
                        })
                        .collect();
                    assert_eq!(got.shape(), &out_shape[..], "{r:?} {dims:?} {keepdim}");
                    let mut acc: std::collections::BTreeMap<Vec<usize>, Vec<f64>> =
                        Default::default();
                    for (flat, &v) in xv.iter().enumerate() {
                        let idx = [flat / (9 * 33), flat / 33 % 9, flat % 33];
                        let key: Vec<usize> = (0..3)
                            .filter(|a| !axes.contains(a))
                            .map(|a| idx[a])
                            .collect();
                        acc.entry(key).or_default().push(v);
                    }
                    let want: Vec<f64> = acc
                        .values()
                        .map(|vs| {
                            let s: f64 = vs.iter().sum();
                            dtype.round_f64(match r {
                                Reduction::Sum => s,
                                Reduction::Mean => s / vs.len() as f64,
                                Reduction::Amax => {
                                    vs.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                                }
                            })
                        })
                        .collect();
                    close(
                        &format!("{r:?} {dtype} dims {dims:?} keepdim {keepdim}"),
                        &got,
                        &want,
                        dtype,
                    );
                }
            }
        }
    }
}

#[test]
fn bad_dims_are_named_errors() {
    let x = HostArray::zeros(DType::F32, &[3, 4]);
    let e = softmax(&x, 2).unwrap_err().to_string();
    assert!(
        e.contains("aten._softmax.default") && e.contains("out of range"),
        "{e}"
    );
    let e = native_layer_norm(&x, &[5], None, None, 1e-5)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a suffix"), "{e}");
}

#[test]
fn backward_operators() {
    use tpukit_blas::{gelu_backward, softmax_backward_data, threshold_backward};
    let mut rng = StdRng::seed_from_u64(4);
    for dtype in [DType::F32, DType::BF16] {
        let shape = [11, 300];
        let (g, gv) = random(&mut rng, dtype, &shape);
        let (x, xv) = random(&mut rng, dtype, &shape);
        let got = threshold_backward(&g, &x, 0.25).unwrap();
        let want: Vec<f64> = gv
            .iter()
            .zip(&xv)
            .map(|(&g, &x)| if x > 0.25 { g } else { 0.0 })
            .collect();
        close(&format!("threshold_backward {dtype}"), &got, &want, dtype);

        let phi = |x: f64| (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
        let cdf = |x: f64| 0.5 * (1.0 + erf(x / 2f64.sqrt()));
        let got = gelu_backward(&g, &x, false).unwrap();
        let want: Vec<f64> = gv
            .iter()
            .zip(&xv)
            .map(|(&g, &x)| dtype.round_f64(g * (cdf(x) + x * phi(x))))
            .collect();
        close(&format!("gelu_backward {dtype}"), &got, &want, dtype);
        let c = (2.0 / std::f64::consts::PI).sqrt();
        let got = gelu_backward(&g, &x, true).unwrap();
        let want: Vec<f64> = gv
            .iter()
            .zip(&xv)
            .map(|(&g, &x)| {
                let t = (c * (x + 0.044715 * x * x * x)).tanh();
                dtype.round_f64(
                    g * (0.5 * (1.0 + t)
                        + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x)),
                )
            })
            .collect();
        close(&format!("gelu_backward tanh {dtype}"), &got, &want, dtype);

        // y = softmax(x) rows; dx = y (g - sum(g y)).
        let mut yv = xv.clone();
        along(&mut yv, &shape, 1, |l| {
            let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = l.iter().map(|v| (v - m).exp()).sum();
            l.iter_mut().for_each(|v| *v = (*v - m).exp() / s);
        });
        let yv: Vec<f64> = yv.iter().map(|&v| dtype.round_f64(v)).collect();
        let y = HostArray::from_f64(dtype, &shape, &yv);
        let got = softmax_backward_data(&g, &y, -1).unwrap();
        let mut want = Vec::new();
        for (gr, yr) in gv.chunks(300).zip(yv.chunks(300)) {
            let dot: f64 = gr.iter().zip(yr).map(|(a, b)| a * b).sum();
            want.extend(
                gr.iter()
                    .zip(yr)
                    .map(|(a, b)| dtype.round_f64(b * (a - dot))),
            );
        }
        close(&format!("softmax_backward {dtype}"), &got, &want, dtype);
    }
}

fn erf(x: f64) -> f64 {
    let n = 2000;
    let h = x / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(x);
    for i in 1..n {
        s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}
