//! Every elementwise operator against an f64 reference written from ATen's definition, on
//! random shapes (ranks 1–3, sizes that do not divide the 4096-element block), f32 and bf16.

#[path = "ops/common/mod.rs"]
mod common;

use common::{random, rng};
use rand::Rng;
use tpukit::HostArray;
use tpukit::dsl::DType;
use tpukit_blas::{Binary, Unary, binary, binary_scalar, clamp, unary, where_};

const SHAPES: [&[usize]; 4] = [&[5000], &[3, 1700], &[2, 7, 301], &[4096]];
const DTYPES: [DType; 2] = [DType::F32, DType::BF16];

/// Asserts `got` has `dtype` and matches `want` within one rounding of an f32-computed
/// result (relative, absolute near zero).
#[track_caller]
fn close(what: &str, got: &HostArray, want: &[f64], dtype: DType) {
    assert_eq!(got.dtype(), dtype, "{what}: dtype");
    common::close(what, got, want, common::tol(dtype));
}

/// `binary(op, x, y, alpha)` on random operands of the given dtypes and shapes, against the
/// f64 reference broadcast to `out`'s shape and rounded once to its dtype.
#[track_caller]
fn check_binary(
    rng: &mut rand::rngs::StdRng,
    op: Binary,
    alpha: f64,
    (dx, sx): (DType, &[usize]),
    (dy, sy): (DType, &[usize]),
    (out, so): (DType, &[usize]),
) {
    let (x, xv) = random(rng, dx, sx, 0.2, 3.0);
    let (y, yv) = random(rng, dy, sy, 0.5, 2.0);
    let got = binary(op, &x, &y, alpha).unwrap();
    assert_eq!(got.shape(), so);
    let want: Vec<f64> = tpukit_blas_ref::broadcast_pairs(sx, sy, so)
        .map(|(i, j)| out.round_f64(reference(op, xv[i], yv[j], alpha)))
        .collect();
    let what = format!("{} {dx}⊕{dy} {sx:?}⊕{sy:?}", op.aten_tensor());
    close(&what, &got, &want, out);
}

fn erf(x: f64) -> f64 {
    // Abramowitz–Stegun 7.1.26 is too coarse; integrate instead (Simpson, 2000 steps).
    let n = 2000;
    let h = x / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(x);
    for i in 1..n {
        s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn unary_operators() {
    type F = fn(f64) -> f64;
    let cases: [(Unary, F, f64, f64); 12] = [
        (Unary::Neg, |x| -x, -3.0, 3.0),
        (Unary::Abs, f64::abs, -3.0, 3.0),
        (Unary::Exp, f64::exp, -5.0, 5.0),
        (Unary::Log, f64::ln, 0.01, 50.0),
        (Unary::Sqrt, f64::sqrt, 0.0, 50.0),
        (Unary::Rsqrt, |x| 1.0 / x.sqrt(), 0.01, 50.0),
        (Unary::Tanh, f64::tanh, -4.0, 4.0),
        (Unary::Sigmoid, |x| 1.0 / (1.0 + (-x).exp()), -8.0, 8.0),
        (Unary::Relu, |x| x.max(0.0), -3.0, 3.0),
        (
            Unary::Gelu,
            |x| 0.5 * x * (1.0 + erf(x / 2f64.sqrt())),
            -4.0,
            4.0,
        ),
        (
            Unary::GeluTanh,
            |x| {
                0.5 * x
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
            },
            -4.0,
            4.0,
        ),
        (Unary::Silu, |x| x / (1.0 + (-x).exp()), -6.0, 6.0),
    ];
    let mut rng = rng(1);
    for (op, f, lo, hi) in cases {
        for dtype in DTYPES {
            for shape in SHAPES {
                let (x, xv) = random(&mut rng, dtype, shape, lo, hi);
                let got = unary(op, &x).unwrap();
                assert_eq!(got.shape(), shape);
                let want: Vec<f64> = xv.iter().map(|&v| dtype.round_f64(f(v))).collect();
                close(
                    &format!("{} {dtype} {shape:?}", op.aten()),
                    &got,
                    &want,
                    dtype,
                );
            }
        }
    }
}

fn reference(op: Binary, x: f64, y: f64, alpha: f64) -> f64 {
    match op {
        Binary::Add => x + alpha * y,
        Binary::Sub => x - alpha * y,
        Binary::Mul => x * y,
        Binary::Div => x / y,
        Binary::Maximum => x.max(y),
        Binary::Minimum => x.min(y),
        Binary::Pow => x.powf(y),
    }
}

#[test]
fn binary_operators_broadcast_and_promote() {
    let mut rng = rng(2);
    // (x shape, y shape, broadcast shape)
    let shapes: [(&[usize], &[usize], &[usize]); 4] = [
        (&[3, 1700], &[3, 1700], &[3, 1700]),
        (&[5, 999], &[999], &[5, 999]),
        (&[6, 1], &[1, 700], &[6, 700]),
        (&[2, 3, 1], &[3, 129], &[2, 3, 129]),
    ];
    for op in Binary::ALL {
        let alpha = if matches!(op, Binary::Add | Binary::Sub) {
            0.75
        } else {
            1.0
        };
        for (dx, dy) in [
            (DType::F32, DType::F32),
            (DType::BF16, DType::BF16),
            (DType::BF16, DType::F32),
        ] {
            for (sx, sy, so) in shapes {
                let out = if dx == DType::F32 || dy == DType::F32 {
                    DType::F32
                } else {
                    DType::BF16
                };
                check_binary(&mut rng, op, alpha, (dx, sx), (dy, sy), (out, so));
            }
        }
    }
}

#[test]
fn scalar_operators_keep_the_tensor_dtype() {
    let mut rng = rng(3);
    for op in [
        Binary::Add,
        Binary::Sub,
        Binary::Mul,
        Binary::Div,
        Binary::Pow,
    ] {
        let alpha = if matches!(op, Binary::Add | Binary::Sub) {
            -2.0
        } else {
            1.0
        };
        for dtype in DTYPES {
            let (x, xv) = random(&mut rng, dtype, &[3, 2000], 0.2, 3.0);
            for s in [0.5, 1.75, -1.25] {
                let got = binary_scalar(op, &x, s, alpha).unwrap();
                let want: Vec<f64> = xv
                    .iter()
                    .map(|&v| dtype.round_f64(reference(op, v, s, alpha)))
                    .collect();
                close(&format!("{:?} {dtype} scalar {s}", op), &got, &want, dtype);
            }
        }
    }
}

#[test]
fn where_and_clamp() {
    let mut rng = rng(4);
    for dtype in DTYPES {
        let (x, xv) = random(&mut rng, dtype, &[7, 1001], -3.0, 3.0);
        let (y, yv) = random(&mut rng, dtype, &[1001], -3.0, 3.0);
        let cv: Vec<f64> = (0..7).map(|_| rng.random_range(0..2) as f64).collect();
        let c = HostArray::from_f64(DType::Bool, &[7, 1], &cv);
        let got = where_(&c, &x, &y).unwrap();
        let want: Vec<f64> = (0..7 * 1001)
            .map(|k| {
                if cv[k / 1001] != 0.0 {
                    xv[k]
                } else {
                    yv[k % 1001]
                }
            })
            .collect();
        close(&format!("where {dtype}"), &got, &want, dtype);
        let got = clamp(&x, Some(-1.0), Some(0.5)).unwrap();
        let want: Vec<f64> = xv.iter().map(|v| v.clamp(-1.0, 0.5)).collect();
        close(&format!("clamp {dtype}"), &got, &want, dtype);
        let got = clamp(&x, None, Some(0.0)).unwrap();
        let want: Vec<f64> = xv.iter().map(|v| v.min(0.0)).collect();
        close(&format!("clamp(max) {dtype}"), &got, &want, dtype);
    }
}

#[test]
fn bad_arguments_are_named_errors() {
    let x = HostArray::zeros(DType::F32, &[3, 4]);
    let y = HostArray::zeros(DType::F32, &[5]);
    let e = binary(Binary::Add, &x, &y, 1.0).unwrap_err().to_string();
    assert!(
        e.contains("aten.add.Tensor") && e.contains("do not broadcast"),
        "{e}"
    );
    let i = HostArray::zeros(DType::I32, &[4]);
    let e = unary(Unary::Exp, &i).unwrap_err().to_string();
    assert!(e.contains("aten.exp.default") && e.contains("i32"), "{e}");
    let e = binary(Binary::Mul, &x, &x, 2.0).unwrap_err().to_string();
    assert!(e.contains("alpha"), "{e}");
    let e = where_(&x, &x, &x).unwrap_err().to_string();
    assert!(e.contains("must be bool"), "{e}");
}

/// Index pairs of a broadcast, for the references.
mod tpukit_blas_ref {
    pub fn broadcast_pairs<'a>(
        sx: &'a [usize],
        sy: &'a [usize],
        so: &'a [usize],
    ) -> impl Iterator<Item = (usize, usize)> + 'a {
        let total: usize = so.iter().product();
        (0..total).map(move |flat| {
            let mut rest = flat;
            let mut idx = vec![0; so.len()];
            for d in (0..so.len()).rev() {
                idx[d] = rest % so[d];
                rest /= so[d];
            }
            (offset(sx, so, &idx), offset(sy, so, &idx))
        })
    }

    fn offset(s: &[usize], so: &[usize], idx: &[usize]) -> usize {
        let lead = so.len() - s.len();
        s.iter().enumerate().fold(0, |off, (d, &n)| {
            off * n + if n == 1 { 0 } else { idx[lead + d] }
        })
    }
}

/// The broadcasts that run natively (row, column, scalar-like, 0-d) against the reference,
/// and a 0-d f32 tensor not promoting a bf16 tensor (ATen's rule for dimensioned operands).
#[test]
fn canonical_broadcasts_run_natively() {
    let mut rng = rng(5);
    let shapes: [(&[usize], &[usize]); 6] = [
        (&[4, 7, 600], &[600]),
        (&[4, 7, 600], &[1, 7, 600]),
        (&[4, 7, 600], &[4, 7, 1]),
        (&[33, 1030], &[33, 1]),
        (&[5, 300], &[1, 1]),
        (&[5, 300], &[]),
    ];
    for op in Binary::ALL {
        let alpha = if matches!(op, Binary::Add | Binary::Sub) {
            1.5
        } else {
            1.0
        };
        for (dx, dy) in [
            (DType::F32, DType::F32),
            (DType::BF16, DType::BF16),
            (DType::BF16, DType::F32),
        ] {
            for (sx, sy) in shapes {
                let out = if sy.is_empty() {
                    dx
                } else if dx == DType::F32 || dy == DType::F32 {
                    DType::F32
                } else {
                    DType::BF16
                };
                check_binary(&mut rng, op, alpha, (dx, sx), (dy, sy), (out, sx));
            }
        }
    }
}
