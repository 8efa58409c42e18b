//! Reductions, the softmax family and norms against f64 references.

use crate::common::*;
use tpukit::dsl::DType;
use tpukit_blas::{Value, run};

/// `(shape, dims)` cases: trailing dims (no copy), leading and middle dims (moved last by
/// the transpose kernel), all dims, rank 1–4, row lengths that do not divide 512.
const REDUCE_CASES: [(&[usize], &[i64]); 7] = [
    (&[1000], &[0]),
    (&[37, 1300], &[1]),
    (&[37, 130], &[0]),
    (&[3, 5, 600], &[-1]),
    (&[3, 5, 70], &[0, 2]),
    (&[2, 3, 4, 130], &[1]),
    (&[6, 200], &[]),
];

#[test]
fn reductions_match_f64_loops() {
    type F = fn(&[f64]) -> f64;
    let cases: [(&str, F); 3] = [
        ("aten.sum.dim_IntList", |v| v.iter().sum()),
        ("aten.mean.dim", |v| v.iter().sum::<f64>() / v.len() as f64),
        ("aten.amax.default", |v| {
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        }),
    ];
    let mut r = rng(11);
    for (name, f) in cases {
        for dtype in DTYPES {
            for (shape, dims) in REDUCE_CASES {
                for keepdim in [false, true] {
                    let (x, xv) = random(&mut r, dtype, shape, -1.0, 1.0);
                    let args = [x.into(), Value::IntList(dims.to_vec()), keepdim.into()];
                    let got = run(name, &args).unwrap().remove(0);
                    let rank = shape.len() as i64;
                    let mut ds: Vec<usize> = if dims.is_empty() {
                        (0..shape.len()).collect()
                    } else {
                        dims.iter().map(|&d| ((d + rank) % rank) as usize).collect()
                    };
                    ds.sort();
                    let want_shape: Vec<usize> = (0..shape.len())
                        .filter_map(|d| match (ds.contains(&d), keepdim) {
                            (false, _) => Some(shape[d]),
                            (true, true) => Some(1),
                            (true, false) => None,
                        })
                        .collect();
                    assert_eq!(got.shape(), want_shape, "{name} {shape:?} {dims:?}");
                    assert_eq!(got.dtype(), dtype);
                    let gs = groups(shape, &ds);
                    let want: Vec<f64> = gs
                        .iter()
                        .map(|g| f(&g.iter().map(|&i| xv[i]).collect::<Vec<_>>()))
                        .collect();
                    // f32 accumulation of n terms of |x| ≤ 1: error ~ sqrt(n)·2^-24·n at worst.
                    let n = gs[0].len() as f64;
                    let abs = if dtype == DType::F32 {
                        2e-6 * n.sqrt()
                    } else {
                        1e-2
                    };
                    close_abs(
                        &format!("{name} {dtype} {shape:?} {dims:?}"),
                        &got,
                        &want,
                        tol(dtype),
                        abs,
                    );
                }
            }
        }
    }
}

fn softmax_ref(v: &[f64], log: bool) -> Vec<f64> {
    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = v.iter().map(|x| (x - m).exp()).sum();
    v.iter()
        .map(|x| {
            if log {
                x - m - s.ln()
            } else {
                (x - m).exp() / s
            }
        })
        .collect()
}

/// Applies `f` to each line of `xv` along `dim`, writing the results in place.
fn along(shape: &[usize], dim: usize, xv: &[f64], f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let mut out = vec![0.0; xv.len()];
    for g in groups(shape, &[dim]) {
        let line: Vec<f64> = g.iter().map(|&i| xv[i]).collect();
        for (&i, y) in g.iter().zip(f(&line)) {
            out[i] = y;
        }
    }
    out
}

#[test]
fn softmax_and_log_softmax_along_any_dim() {
    let mut r = rng(12);
    let cases: [(&[usize], i64); 6] = [
        (&[700], 0),
        (&[33, 1500], 1),
        (&[5, 4500], 1),
        (&[33, 100], 0),
        (&[2, 9, 300], -1),
        (&[2, 3, 5, 129], 2),
    ];
    for (name, log) in [
        ("aten._softmax.default", false),
        ("aten._log_softmax.default", true),
    ] {
        for dtype in DTYPES {
            for (shape, dim) in cases {
                let (x, xv) = random(&mut r, dtype, shape, -8.0, 8.0);
                let got = run(name, &[x.into(), Value::Int(dim), false.into()])
                    .unwrap()
                    .remove(0);
                let d = ((dim + shape.len() as i64) % shape.len() as i64) as usize;
                let want = along(shape, d, &xv, |l| softmax_ref(l, log));
                let what = format!("{name} {dtype} {shape:?} dim {dim}");
                assert_eq!(got.shape(), shape, "{what}");
                let abs = if log { 1e-5 * 16.0 } else { 1e-6 };
                close_abs(
                    &what,
                    &got,
                    &want,
                    tol(dtype) * 2.0,
                    if dtype == DType::F32 { abs } else { 2e-2 },
                );
            }
        }
    }
}

#[test]
fn softmax_handles_infinities_like_aten() {
    // A row whose first column block is all −∞ but later blocks are finite; a row of −∞.
    let n = 5000;
    let mut xv = vec![0.0; 2 * n];
    for (i, v) in xv.iter_mut().enumerate() {
        *v = if i < 4200 || i >= n {
            f64::NEG_INFINITY
        } else {
            (i % 7) as f64
        };
    }
    let x = tpukit::HostArray::from_f64(DType::F32, &[2, n], &xv);
    let got = run(
        "aten._softmax.default",
        &[x.into(), Value::Int(1), false.into()],
    )
    .unwrap()
    .remove(0);
    let mut want = softmax_ref(&xv[..n], false);
    want.extend(vec![f64::NAN; n]);
    close("softmax with −∞", &got, &want, 4e-6);
}

#[test]
fn half_to_float_gives_f32() {
    let (x, xv) = random(&mut rng(13), DType::BF16, &[4, 300], -3.0, 3.0);
    let got = run(
        "aten._softmax.default",
        &[x.into(), Value::Int(1), true.into()],
    )
    .unwrap()
    .remove(0);
    assert_eq!(got.dtype(), DType::F32);
    close(
        "half_to_float",
        &got,
        &along(&[4, 300], 1, &xv, |l| softmax_ref(l, false)),
        4e-6,
    );
}

#[test]
fn softmax_backward_data() {
    let mut r = rng(14);
    for dtype in DTYPES {
        for (shape, dim) in [
            (&[17usize, 1200][..], 1i64),
            (&[3, 4500][..], 1),
            (&[40, 3, 9][..], 0),
        ] {
            let (g, gv) = random(&mut r, dtype, shape, -1.0, 1.0);
            let (y, yv) = random(&mut r, dtype, shape, 0.0, 0.01);
            let args = [
                g.into(),
                y.into(),
                Value::Int(dim),
                Value::Str(dtype.name().into()),
            ];
            let got = run("aten._softmax_backward_data.default", &args)
                .unwrap()
                .remove(0);
            let d = dim as usize;
            let mut want = vec![0.0; gv.len()];
            for grp in groups(shape, &[d]) {
                let dot: f64 = grp.iter().map(|&i| gv[i] * yv[i]).sum();
                for &i in &grp {
                    want[i] = yv[i] * (gv[i] - dot);
                }
            }
            close(
                &format!("softmax backward {dtype} {shape:?}"),
                &got,
                &want,
                tol(dtype) * 2.0,
            );
        }
    }
}

#[test]
fn layer_norm_returns_out_mean_rstd() {
    let mut r = rng(15);
    let cases: [(&[usize], &[usize]); 5] = [
        (&[600], &[600]),
        (&[37, 1300], &[1300]),
        (&[5, 4500], &[4500]),
        (&[2, 5, 300], &[300]),
        (&[2, 3, 4, 50], &[4, 50]),
    ];
    for dtype in DTYPES {
        for (shape, norm) in cases {
            for affine in [false, true] {
                let n: usize = norm.iter().product();
                // A large common offset: one-pass E[x²] − E[x]² would lose the variance.
                let (x, xv) = random(&mut r, dtype, shape, 99.0, 101.0);
                let (w, wv) = random(&mut r, dtype, norm, 0.5, 1.5);
                let (b, bv) = random(&mut r, dtype, norm, -1.0, 1.0);
                let (wa, ba) = if affine {
                    (w.into(), b.into())
                } else {
                    (Value::None, Value::None)
                };
                let norm_list = Value::IntList(norm.iter().map(|&d| d as i64).collect());
                let outs = run(
                    "aten.native_layer_norm.default",
                    &[x.into(), norm_list, wa, ba, 1e-5.into()],
                )
                .unwrap();
                let (mut want, mut means, mut rstds) = (vec![], vec![], vec![]);
                for row in xv.chunks(n) {
                    let mu = row.iter().sum::<f64>() / n as f64;
                    let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / n as f64;
                    let rstd = 1.0 / (var + 1e-5).sqrt();
                    for (j, v) in row.iter().enumerate() {
                        let (wj, bj) = if affine { (wv[j], bv[j]) } else { (1.0, 0.0) };
                        want.push((v - mu) * rstd * wj + bj);
                    }
                    means.push(mu);
                    rstds.push(rstd);
                }
                let what = format!("layer_norm {dtype} {shape:?} {norm:?} affine {affine}");
                let stat_shape: Vec<usize> = shape
                    .iter()
                    .enumerate()
                    .map(|(d, &s)| if d + norm.len() >= shape.len() { 1 } else { s })
                    .collect();
                assert_eq!(outs[1].shape(), stat_shape, "{what}");
                // Inputs near 100 in bf16 are coarse: deviations are multiples of 0.5, so
                // the normalised values have bf16's relative error; f32 loses ~1e-5 to
                // x − mean.
                let rel = if dtype == DType::F32 { 3e-5 } else { 2e-2 };
                close(&format!("{what} out"), &outs[0], &want, rel);
                close(&format!("{what} mean"), &outs[1], &means, tol(dtype));
                close(&format!("{what} rstd"), &outs[2], &rstds, rel);
            }
        }
    }
}

#[test]
fn rms_norm_returns_out_rstd() {
    let mut r = rng(16);
    for dtype in DTYPES {
        for (shape, n) in [
            (&[3usize, 1100][..], 1100usize),
            (&[3, 4500][..], 4500),
            (&[2, 2, 77][..], 77),
        ] {
            let (x, xv) = random(&mut r, dtype, shape, -2.0, 2.0);
            let (w, wv) = random(&mut r, dtype, &[n], 0.5, 1.5);
            let args = [
                x.into(),
                Value::IntList(vec![n as i64]),
                w.into(),
                1e-6.into(),
            ];
            let outs = run("aten._fused_rms_norm.default", &args).unwrap();
            let (mut want, mut rstds) = (vec![], vec![]);
            for row in xv.chunks(n) {
                let rstd = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / n as f64 + 1e-6).sqrt();
                want.extend(row.iter().zip(&wv).map(|(v, w)| v * rstd * w));
                rstds.push(rstd);
            }
            close(
                &format!("rms_norm {dtype} {shape:?}"),
                &outs[0],
                &want,
                tol(dtype) * 2.0,
            );
            // rstd is f32 whatever the input (ATen's opmath type).
            assert_eq!(outs[1].dtype(), DType::F32);
            close(
                &format!("rms_norm rstd {dtype} {shape:?}"),
                &outs[1],
                &rstds,
                tol(DType::F32) * 2.0,
            );
        }
    }
}

#[test]
fn cumsum_along_any_dim() {
    let mut r = rng(17);
    let cases: [(&[usize], i64); 4] = [
        (&[1300], 0),
        (&[5, 1100], 1),
        (&[40, 3], 0),
        (&[2, 3, 700], -1),
    ];
    for dtype in DTYPES {
        for (shape, dim) in cases {
            let (x, xv) = random(&mut r, dtype, shape, -1.0, 1.0);
            let got = run("aten.cumsum.default", &[x.into(), Value::Int(dim)])
                .unwrap()
                .remove(0);
            let d = ((dim + shape.len() as i64) % shape.len() as i64) as usize;
            let want = along(shape, d, &xv, |l| {
                l.iter()
                    .scan(0.0, |s, v| {
                        *s += v;
                        Some(*s)
                    })
                    .collect()
            });
            let n = shape[d] as f64;
            let abs = if dtype == DType::F32 {
                2e-6 * n.sqrt()
            } else {
                1e-2 * n.sqrt() / 4.0
            };
            close_abs(
                &format!("cumsum {dtype} {shape:?} dim {dim}"),
                &got,
                &want,
                tol(dtype),
                abs,
            );
        }
    }
}

#[test]
fn layer_norm_mixed_dtypes_give_f32_statistics() {
    let mut r = rng(18);
    let (x, xv) = random(&mut r, DType::BF16, &[6, 700], -2.0, 2.0);
    let (w, wv) = random(&mut r, DType::F32, &[700], 0.5, 1.5);
    let args = [
        x.into(),
        Value::IntList(vec![700]),
        w.into(),
        Value::None,
        1e-5.into(),
    ];
    let outs = run("aten.native_layer_norm.default", &args).unwrap();
    assert_eq!(
        [outs[0].dtype(), outs[1].dtype(), outs[2].dtype()],
        [DType::BF16, DType::F32, DType::F32]
    );
    let mut want = vec![];
    for row in xv.chunks(700) {
        let mu = row.iter().sum::<f64>() / 700.0;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / 700.0;
        want.extend(
            row.iter()
                .zip(&wv)
                .map(|(v, w)| (v - mu) / (var + 1e-5).sqrt() * w),
        );
    }
    close("mixed layer_norm", &outs[0], &want, tol(DType::BF16));
}

#[test]
fn layer_norm_backward_matches_the_analytic_gradient() {
    let mut r = rng(19);
    for dtype in DTYPES {
        // Rows of several windows (two phases), and rows of one window read once: a whole
        // window, an overhanging one, a short one; in one pass over chunks of rows (6 of 16,
        // 15 of 20: overhanging the chunk, 16 of 16) or, for a prime row count, in two
        // kernels.
        for (shape, norm) in [
            (&[37usize, 4500][..], &[4500usize][..]),
            (&[37, 1100][..], &[1100][..]),
            (&[5, 768][..], &[768][..]),
            (&[19, 1000][..], &[1000][..]),
            (&[2, 3, 4, 50][..], &[4, 50][..]),
            (&[96, 768][..], &[768][..]),
            (&[3, 100, 200][..], &[200][..]),
            (&[256, 128][..], &[128][..]),
            (&[67, 300][..], &[300][..]),
        ] {
            let n: usize = norm.iter().product();
            let (x, xv) = random(&mut r, dtype, shape, -2.0, 2.0);
            let (g, gv) = random(&mut r, dtype, shape, -1.0, 1.0);
            let (w, wv) = random(&mut r, dtype, norm, 0.5, 1.5);
            let norm_list = Value::IntList(norm.iter().map(|&d| d as i64).collect());
            let fwd = run(
                "aten.native_layer_norm.default",
                &[
                    x.clone().into(),
                    norm_list.clone(),
                    w.clone().into(),
                    Value::None,
                    1e-5.into(),
                ],
            )
            .unwrap();
            let (mean, rstd) = (fwd[1].clone(), fwd[2].clone());
            let (mv, rv) = (mean.to_f64_vec(), rstd.to_f64_vec());
            let args = [
                g.into(),
                x.into(),
                norm_list,
                mean.into(),
                rstd.into(),
                w.into(),
                Value::None,
                Value::None,
            ];
            let outs = run("aten.native_layer_norm_backward.default", &args).unwrap();
            let (mut dx, mut dw, mut db) = (vec![], vec![0.0; n], vec![0.0; n]);
            for ((xs, gs), (mu, rs)) in xv.chunks(n).zip(gv.chunks(n)).zip(mv.iter().zip(&rv)) {
                let xhat: Vec<f64> = xs.iter().map(|v| (v - mu) * rs).collect();
                let gw: Vec<f64> = gs.iter().zip(&wv).map(|(g, w)| g * w).collect();
                let a = gw.iter().sum::<f64>() / n as f64;
                let b = gw.iter().zip(&xhat).map(|(g, h)| g * h).sum::<f64>() / n as f64;
                dx.extend(gw.iter().zip(&xhat).map(|(g, h)| rs * (g - a - h * b)));
                for j in 0..n {
                    dw[j] += gs[j] * xhat[j];
                    db[j] += gs[j];
                }
            }
            let what = format!("layer_norm_backward {dtype} {shape:?}");
            let m = (xv.len() / n) as f64;
            let abs = if dtype == DType::F32 {
                2e-5 * m.sqrt()
            } else {
                3e-2 * m.sqrt()
            };
            close_abs(
                &format!("{what} dx"),
                &outs[0],
                &dx,
                tol(dtype) * 4.0,
                if dtype == DType::F32 { 2e-5 } else { 3e-2 },
            );
            assert_eq!(outs[1].shape(), norm);
            close_abs(&format!("{what} dw"), &outs[1], &dw, tol(dtype) * 4.0, abs);
            close_abs(&format!("{what} db"), &outs[2], &db, tol(dtype) * 4.0, abs);
        }
    }
}
