//! `mm`, `bmm`, `addmm` against f64 loops, shapes not dividing the 128 blocks.

use crate::common::*;
use tpukit::dsl::DType;
use tpukit_blas::run;

fn matmul_ref(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut o = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            o[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    o
}

/// f32 accumulation over k terms of |a·b| ≤ 1: a few 1e-6·sqrt(k) absolute.
fn abs_tol(dtype: DType, k: usize) -> f64 {
    if dtype == DType::F32 {
        2e-6 * (k as f64).sqrt()
    } else {
        2e-2
    }
}

#[test]
fn mm_and_bmm() {
    let mut r = rng(21);
    for dtype in DTYPES {
        for (m, k, n) in [(128, 256, 128), (77, 300, 130), (1, 5, 300)] {
            let (a, av) = random(&mut r, dtype, &[m, k], -1.0, 1.0);
            let (b, bv) = random(&mut r, dtype, &[k, n], -1.0, 1.0);
            let got = run("aten.mm.default", &[a.into(), b.into()])
                .unwrap()
                .remove(0);
            assert_eq!(got.shape(), [m, n]);
            let want = matmul_ref(&av, &bv, m, k, n);
            close_abs(
                &format!("mm {dtype} {m}x{k}x{n}"),
                &got,
                &want,
                tol(dtype),
                abs_tol(dtype, k),
            );
        }
        let (bs, m, k, n) = (3, 40, 150, 129);
        let (a, av) = random(&mut r, dtype, &[bs, m, k], -1.0, 1.0);
        let (b, bv) = random(&mut r, dtype, &[bs, k, n], -1.0, 1.0);
        let got = run("aten.bmm.default", &[a.into(), b.into()])
            .unwrap()
            .remove(0);
        assert_eq!(got.shape(), [bs, m, n]);
        let want: Vec<f64> = (0..bs)
            .flat_map(|z| {
                matmul_ref(
                    &av[z * m * k..][..m * k],
                    &bv[z * k * n..][..k * n],
                    m,
                    k,
                    n,
                )
            })
            .collect();
        close_abs(
            &format!("bmm {dtype}"),
            &got,
            &want,
            tol(dtype),
            abs_tol(dtype, k),
        );
    }
}

#[test]
fn addmm_with_row_bias_full_bias_and_scalars() {
    let mut r = rng(22);
    let (m, k, n) = (70, 260, 140);
    for dtype in DTYPES {
        let (a, av) = random(&mut r, dtype, &[m, k], -1.0, 1.0);
        let (b, bv) = random(&mut r, dtype, &[k, n], -1.0, 1.0);
        let ab = matmul_ref(&av, &bv, m, k, n);
        for bias_shape in [&[n][..], &[1, n], &[m, n], &[m, 1]] {
            for (beta, alpha) in [(1.0, 1.0), (0.5, -2.0), (0.0, 1.5)] {
                let (c, cv) = random(&mut r, dtype, bias_shape, -1.0, 1.0);
                let cs = bias_shape.to_vec();
                let args = [
                    c.into(),
                    a.clone().into(),
                    b.clone().into(),
                    beta.into(),
                    alpha.into(),
                ];
                let got = run("aten.addmm.default", &args).unwrap().remove(0);
                let want: Vec<f64> = (0..m * n)
                    .map(|e| {
                        let (i, j) = (e / n, e % n);
                        let ci = match cs.as_slice() {
                            [_] => j,
                            [1, _] => j,
                            [_, 1] => i,
                            _ => e,
                        };
                        let bias = if beta == 0.0 { 0.0 } else { beta * cv[ci] };
                        bias + alpha * ab[e]
                    })
                    .collect();
                close_abs(
                    &format!("addmm {dtype} self {bias_shape:?} beta {beta} alpha {alpha}"),
                    &got,
                    &want,
                    tol(dtype),
                    abs_tol(dtype, k) * 2.0,
                );
            }
        }
    }
}
