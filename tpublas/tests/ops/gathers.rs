//! `index_select`, `embedding`, `permute`, `transpose` against index arithmetic.

use crate::common::*;
use tpukit::HostArray;
use tpukit::dsl::DType;
use tpukit_blas::{Value, run};

fn indices(r: &mut rand::rngs::StdRng, k: usize, v: usize) -> (HostArray, Vec<usize>) {
    use rand::Rng;
    let iv: Vec<usize> = (0..k).map(|_| r.random_range(0..v)).collect();
    let f: Vec<f64> = iv.iter().map(|&i| i as f64).collect();
    (HostArray::from_f64(DType::I32, &[k], &f), iv)
}

#[test]
fn index_select_along_every_dim() {
    let mut r = rng(31);
    for dtype in DTYPES {
        for shape in [&[50usize][..], &[30, 700], &[4, 9, 130], &[2, 3, 5, 600]] {
            for d in 0..shape.len() {
                let (x, xv) = random(&mut r, dtype, shape, -5.0, 5.0);
                let (idx, iv) = indices(&mut r, 7, shape[d]);
                let got = run(
                    "aten.index_select.default",
                    &[x.into(), Value::Int(d as i64), idx.into()],
                )
                .unwrap()
                .remove(0);
                let mut out_shape = shape.to_vec();
                out_shape[d] = 7;
                assert_eq!(got.shape(), out_shape);
                let st = strides(shape);
                let want: Vec<f64> = (0..out_shape.iter().product())
                    .map(|e| {
                        let mut c = coords(e, &out_shape);
                        c[d] = iv[c[d]];
                        xv[c.iter().zip(&st).map(|(a, b)| a * b).sum::<usize>()]
                    })
                    .collect();
                close(
                    &format!("index_select {dtype} {shape:?} dim {d}"),
                    &got,
                    &want,
                    0.0,
                );
            }
        }
    }
}

#[test]
fn embedding_keeps_the_index_shape() {
    let mut r = rng(32);
    let (v, dd) = (100, 300);
    let (w, wv) = random(&mut r, DType::BF16, &[v, dd], -1.0, 1.0);
    let (idx, iv) = indices(&mut r, 12, v);
    let idx = idx.reshape(&[3, 4]).unwrap();
    let got = run("aten.embedding.default", &[w.into(), idx.into()])
        .unwrap()
        .remove(0);
    assert_eq!(got.shape(), [3, 4, dd]);
    let want: Vec<f64> = iv
        .iter()
        .flat_map(|&i| wv[i * dd..][..dd].to_vec())
        .collect();
    close("embedding", &got, &want, 0.0);
}

#[test]
fn permute_and_transpose_copies() {
    let mut r = rng(33);
    // The last five keep the last axis: whole rows move (the row swap, windows overhanging
    // in rows and columns, one step or two), but for rows shorter than `copy::ROW`.
    let cases: [(&[usize], &[i64]); 10] = [
        (&[130, 300], &[1, 0]),
        (&[3, 129, 70], &[0, 2, 1]),
        (&[3, 129, 70], &[2, 0, 1]),
        (&[2, 3, 4, 5], &[3, 1, 0, 2]),
        (&[7, 1, 260], &[2, 1, 0]),
        (&[2, 3, 130, 40], &[0, 2, 1, 3]),
        (&[3, 5, 7, 140], &[2, 0, 1, 3]),
        (&[4, 6, 16], &[1, 0, 2]),
        (&[2, 4, 128, 128], &[1, 2, 0, 3]),
        (&[3, 4, 5, 6], &[1, 0, 2, 3]),
    ];
    for dtype in DTYPES {
        for (shape, perm) in cases {
            let (x, xv) = random(&mut r, dtype, shape, -5.0, 5.0);
            let got = run(
                "aten.permute.default",
                &[x.clone().into(), Value::IntList(perm.to_vec())],
            )
            .unwrap()
            .remove(0);
            let p: Vec<usize> = perm.iter().map(|&d| d as usize).collect();
            let out_shape: Vec<usize> = p.iter().map(|&d| shape[d]).collect();
            assert_eq!(got.shape(), out_shape);
            let st = strides(shape);
            let want: Vec<f64> = (0..xv.len())
                .map(|e| {
                    let c = coords(e, &out_shape);
                    xv[p.iter()
                        .enumerate()
                        .map(|(i, &d)| c[i] * st[d])
                        .sum::<usize>()]
                })
                .collect();
            close(
                &format!("permute {dtype} {shape:?} {perm:?}"),
                &got,
                &want,
                0.0,
            );
        }
        let (x, xv) = random(&mut r, dtype, &[5, 140, 3], -5.0, 5.0);
        let got = run(
            "aten.transpose.int",
            &[x.into(), Value::Int(0), Value::Int(-2)],
        )
        .unwrap()
        .remove(0);
        assert_eq!(got.shape(), [140, 5, 3]);
        let want: Vec<f64> = (0..xv.len())
            .map(|e| {
                let c = coords(e, &[140, 5, 3]);
                xv[c[1] * 420 + c[0] * 3 + c[2]]
            })
            .collect();
        close(&format!("transpose {dtype}"), &got, &want, 0.0);
    }
}

#[test]
fn cat_along_every_dim_promoting_dtypes() {
    let mut r = rng(34);
    let bases: [&[usize]; 3] = [&[40], &[3, 130], &[2, 5, 200]];
    for base in bases {
        for d in 0..base.len() {
            for (d0, d1) in [
                (DType::F32, DType::F32),
                (DType::BF16, DType::BF16),
                (DType::BF16, DType::F32),
            ] {
                let sizes = [base[d], 1, base[d] + 3];
                let dtypes = [d0, d1, d0];
                let mut parts = Vec::new();
                let mut values = Vec::new();
                for (&size, &dt) in sizes.iter().zip(&dtypes) {
                    let mut s = base.to_vec();
                    s[d] = size;
                    let (x, xv) = random(&mut r, dt, &s, -5.0, 5.0);
                    parts.push((s, xv));
                    values.push(Value::Tensor(x));
                }
                values.insert(1, Value::Tensor(HostArray::zeros(DType::F32, &[0])));
                values.push(Value::Int(d as i64 - base.len() as i64));
                let got = run("aten.cat.default", &values).unwrap().remove(0);
                let out = if d0 == DType::F32 || d1 == DType::F32 {
                    DType::F32
                } else {
                    DType::BF16
                };
                assert_eq!(got.dtype(), out);
                let total: usize = sizes.iter().sum();
                let mut out_shape = base.to_vec();
                out_shape[d] = total;
                assert_eq!(got.shape(), out_shape);
                let want: Vec<f64> = (0..out_shape.iter().product())
                    .map(|e| {
                        let mut c = coords(e, &out_shape);
                        let mut t = 0;
                        while c[d] >= parts[t].0[d] {
                            c[d] -= parts[t].0[d];
                            t += 1;
                        }
                        let st = strides(&parts[t].0);
                        parts[t].1[c.iter().zip(&st).map(|(a, b)| a * b).sum::<usize>()]
                    })
                    .collect();
                close(&format!("cat {base:?} dim {d} {d0}/{d1}"), &got, &want, 0.0);
            }
        }
    }
    let e = run(
        "aten.cat.default",
        &[
            HostArray::zeros(DType::F32, &[2, 3]).into(),
            HostArray::zeros(DType::F32, &[2, 4]).into(),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("aten.cat.default") && e.contains("differ outside dim 0"),
        "{e}"
    );
}
