//! `mm`, `bmm`, `addmm` against f64 loops, shapes not dividing the 128 blocks.

use crate::common::*;
use tpukit::dsl::DType;
use tpukit_blas::{Value, run};

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
    // Blocks of 128 rows, and of 64 (an output of at most 128 × 128 in two halves).
    for (dtype, (m, k, n)) in DTYPES
        .into_iter()
        .flat_map(|d| [(70, 260, 140), (100, 260, 120)].map(|s| (d, s)))
    {
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

/// `x` (rank ≥ 2) as its last two axes' transpose lies: `x.mT`, row-major.
fn stored_transposed(x: &tpukit::HostArray) -> tpukit::HostArray {
    let r = x.shape().len();
    let mut axes: Vec<usize> = (0..r).collect();
    axes.swap(r - 2, r - 1);
    x.permuted(&axes)
}

/// Operands given as transposed views (`Value::Transposed`: `w.t()` as it lies) are read in
/// place by kernels of their own, and give what the row-major operands give, bit for bit
/// (the same sums in the same order).
#[test]
fn operands_given_transposed() {
    let mut r = rng(23);
    // The second shape's row-major A is read in blocks of 64 rows (an output of at most
    // 128 × 128), a transposed A in blocks of 128: the same sums still.
    for (dtype, (m, k, n)) in DTYPES
        .into_iter()
        .flat_map(|d| [(77, 300, 130), (77, 300, 120)].map(|s| (d, s)))
    {
        let (a, _) = random(&mut r, dtype, &[m, k], -1.0, 1.0);
        let (b, _) = random(&mut r, dtype, &[k, n], -1.0, 1.0);
        let (c, _) = random(&mut r, dtype, &[n], -1.0, 1.0);
        let (ba, _) = random(&mut r, dtype, &[3, 40, 150], -1.0, 1.0);
        let (bb, _) = random(&mut r, dtype, &[3, 150, 129], -1.0, 1.0);
        let cases: [(&str, Vec<Value>, [usize; 2]); 3] = [
            (
                "aten.mm.default",
                vec![a.clone().into(), b.clone().into()],
                [0, 1],
            ),
            ("aten.bmm.default", vec![ba.into(), bb.into()], [0, 1]),
            (
                "aten.addmm.default",
                vec![c.into(), a.into(), b.into(), 0.5.into(), 2.0.into()],
                [1, 2],
            ),
        ];
        for (op, args, operands) in cases {
            let want = run(op, &args).unwrap().remove(0);
            for mask in 1..4 {
                let mut given = args.clone();
                for (bit, &i) in operands.iter().enumerate() {
                    if mask & (1 << bit) != 0 {
                        let Value::Tensor(x) = &args[i] else {
                            unreachable!()
                        };
                        given[i] = Value::Transposed(stored_transposed(x));
                    }
                }
                let got = run(op, &given).unwrap().remove(0);
                assert_eq!(got.shape(), want.shape(), "{op} {dtype} {mask}");
                assert_eq!(
                    got.to_f64_vec(),
                    want.to_f64_vec(),
                    "{op} {dtype}: operands {mask:02b} transposed"
                );
            }
        }
    }
    // Only products read a transposed view; elsewhere it is refused by name.
    let (x, _) = random(&mut r, DType::F32, &[4, 5], -1.0, 1.0);
    let e = run("aten.add.Tensor", &[Value::Transposed(x.clone()), x.into()]).unwrap_err();
    assert!(e.to_string().contains("transposed view"), "{e}");
}
