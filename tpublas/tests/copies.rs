//! transpose copies and cumsum against plain loops.

use rand::{Rng, SeedableRng, rngs::StdRng};
use tpukit::HostArray;
use tpukit::dsl::DType;
use tpukit_blas::{cumsum, transpose};

fn random(rng: &mut StdRng, dtype: DType, shape: &[usize]) -> (HostArray, Vec<f64>) {
    let n = shape.iter().product();
    let data: Vec<f64> = (0..n)
        .map(|_| dtype.round_f64(rng.random_range(-1.0..1.0)))
        .collect();
    (HostArray::from_f64(dtype, shape, &data), data)
}

#[test]
fn transpose_is_exact() {
    let mut rng = StdRng::seed_from_u64(1);
    for dtype in [DType::F32, DType::BF16] {
        let (x, xv) = random(&mut rng, dtype, &[300, 130]);
        let got = transpose(&x, 0, 1).unwrap();
        assert_eq!(got.shape(), &[130, 300]);
        let want: Vec<f64> = (0..130 * 300)
            .map(|k| xv[(k % 300) * 130 + k / 300])
            .collect();
        assert_eq!(got.to_f64_vec(), want, "{dtype}");
        let (y, yv) = random(&mut rng, dtype, &[2, 3, 4]);
        let got = transpose(&y, 0, -1).unwrap();
        assert_eq!(got.shape(), &[4, 3, 2]);
        assert_eq!(
            got.to_f64_vec()[1],
            yv[12],
            "{dtype}: [0,0,1] of the result is [1,0,0]"
        );
    }
}

#[test]
fn cumsum_over_any_dim() {
    let mut rng = StdRng::seed_from_u64(2);
    for dtype in [DType::F32, DType::BF16] {
        let (x, xv) = random(&mut rng, dtype, &[13, 200]);
        let got = cumsum(&x, -1).unwrap();
        let mut want = Vec::new();
        for row in xv.chunks(200) {
            let mut s = 0.0;
            want.extend(row.iter().map(|v| {
                s += v;
                dtype.round_f64(s)
            }));
        }
        let rel = if dtype == DType::F32 { 1e-5 } else { 1.6e-2 };
        for (i, (g, w)) in got.to_f64_vec().iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= rel * (1.0 + w.abs()),
                "{dtype} element {i}: {g} vs {w}"
            );
        }
        let got0 = cumsum(&x, 0).unwrap();
        let v0 = got0.to_f64_vec();
        let col5: f64 = (0..13).map(|r| xv[r * 200 + 5]).sum();
        assert!(
            (v0[12 * 200 + 5] - col5).abs() <= rel * (1.0 + col5.abs()),
            "{dtype}: column sum"
        );
    }
}
