//! mm / bmm / addmm / embedding / index_select against f64 references, on shapes the 128
//! blocks do not divide, f32 and bf16.

use rand::{Rng, SeedableRng, rngs::StdRng};
use tpukit::HostArray;
use tpukit::dsl::DType;
use tpukit_blas::{addmm, bmm, embedding, index_select, mm};

fn random(rng: &mut StdRng, dtype: DType, shape: &[usize]) -> (HostArray, Vec<f64>) {
    let n = shape.iter().product();
    let data: Vec<f64> = (0..n)
        .map(|_| dtype.round_f64(rng.random_range(-1.0..1.0)))
        .collect();
    (HostArray::from_f64(dtype, shape, &data), data)
}

fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    c
}

/// f32 accumulation over k terms of magnitude <= 1, then one rounding to the dtype.
#[track_caller]
fn close(what: &str, got: &HostArray, want: &[f64], dtype: DType) {
    let rel = if dtype == DType::F32 { 2e-5 } else { 1.6e-2 };
    for (i, (g, w)) in got.to_f64_vec().iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * (1.0 + w.abs()),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn mm_bmm_addmm() {
    let mut rng = StdRng::seed_from_u64(1);
    for dtype in [DType::F32, DType::BF16] {
        let (m, k, n) = (150, 300, 77);
        let (a, av) = random(&mut rng, dtype, &[m, k]);
        let (b, bv) = random(&mut rng, dtype, &[k, n]);
        let want = matmul(&av, &bv, m, k, n);
        let got = mm(&a, &b).unwrap();
        assert_eq!((got.dtype(), got.shape()), (dtype, &[m, n][..]));
        close(&format!("mm {dtype}"), &got, &want, dtype);

        let (bias, biasv) = random(&mut rng, dtype, &[n]);
        let got = addmm(&bias, &a, &b, 0.5, 2.0).unwrap();
        let want_addmm: Vec<f64> = want
            .iter()
            .enumerate()
            .map(|(i, c)| 0.5 * biasv[i % n] + 2.0 * c)
            .collect();
        // bf16: the product is rounded before it is scaled and added (two roundings).
        close(&format!("addmm {dtype}"), &got, &want_addmm, dtype);

        let batch = 3;
        let (a, av) = random(&mut rng, dtype, &[batch, 40, 130]);
        let (b, bv) = random(&mut rng, dtype, &[batch, 130, 20]);
        let got = bmm(&a, &b).unwrap();
        let want: Vec<f64> = (0..batch)
            .flat_map(|i| {
                matmul(
                    &av[i * 40 * 130..][..40 * 130],
                    &bv[i * 130 * 20..][..130 * 20],
                    40,
                    130,
                    20,
                )
            })
            .collect();
        close(&format!("bmm {dtype}"), &got, &want, dtype);
    }
}

#[test]
fn embedding_and_index_select() {
    let mut rng = StdRng::seed_from_u64(2);
    for dtype in [DType::F32, DType::BF16] {
        let (w, wv) = random(&mut rng, dtype, &[50, 200]);
        let idx: Vec<f64> = (0..12).map(|_| rng.random_range(0..50) as f64).collect();
        let indices = HostArray::from_f64(DType::I32, &[3, 4], &idx);
        let got = embedding(&w, &indices).unwrap();
        assert_eq!(got.shape(), &[3, 4, 200]);
        let want: Vec<f64> = idx
            .iter()
            .flat_map(|&r| wv[r as usize * 200..][..200].to_vec())
            .collect();
        assert_eq!(got.to_f64_vec(), want, "embedding {dtype} is exact");
        let flat = HostArray::from_f64(DType::I32, &[12], &idx);
        assert_eq!(index_select(&w, 0, &flat).unwrap().to_f64_vec(), want);
    }
    let w = HostArray::zeros(DType::F32, &[5, 8]);
    let bad = HostArray::from_f64(DType::I32, &[1], &[7.0]);
    let e = embedding(&w, &bad).unwrap_err().to_string();
    assert!(
        e.contains("index map"),
        "an index past the table is an error, not a read: {e}"
    );
}

#[test]
fn bad_shapes_are_named_errors() {
    let a = HostArray::zeros(DType::F32, &[3, 4]);
    let e = mm(&a, &a).unwrap_err().to_string();
    assert!(
        e.contains("aten.mm.default") && e.contains("do not multiply"),
        "{e}"
    );
    let b = HostArray::zeros(DType::BF16, &[4, 3]);
    let e = mm(&a, &b).unwrap_err().to_string();
    assert!(e.contains("dtypes differ"), "{e}");
}
