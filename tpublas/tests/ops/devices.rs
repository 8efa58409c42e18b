//! Every operator's kernel on the interpreter (exact semantics, bounds-checked) against the
//! compiled CPU backend, at one shape its blocks do not divide.

use crate::common::*;
use rand::seq::SliceRandom;
use tpukit::dsl::{DType, Role};
use tpukit::{Device, HostArray, launch_into};

/// A problem shape per operator-shape kind (every extent off the block sizes).
fn shape_for(names: &[&str]) -> Vec<usize> {
    match names {
        ["n"] => vec![5000],
        ["m", "n"] => vec![19, 1100],
        ["m", "k", "n"] => vec![70, 150, 130],
        ["b", "m", "k", "n"] => vec![2, 20, 140, 30],
        ["rows", "inner", "k"] => vec![30, 600, 5],
        ["a", "b", "c"] => vec![2, 130, 70],
        ["rows", "inner", "total"] => vec![5, 300, 9],
        other => panic!("no test shape for {other:?}"),
    }
}

#[test]
fn interpreter_and_cpu_agree_on_every_operator() {
    let mut r = rng(41);
    for op in tpukit_blas::ops() {
        for dtype in DTYPES {
            let shape = shape_for(op.shape);
            let inst = op.instantiate(&shape, dtype).unwrap();
            let mut inputs: Vec<HostArray> = Vec::new();
            for (_, o) in inst.kernel.operands_with_role(Role::Prefetch) {
                let s: Vec<usize> = o
                    .shape
                    .iter()
                    .map(|d| d.resolve(&inst.bindings).unwrap())
                    .collect();
                // Prefetched operands are row numbers below `rows`, distinct (a scatter
                // writing one row twice would race).
                let mut rows: Vec<f64> = (0..inst.bindings["rows"]).map(|i| i as f64).collect();
                rows.shuffle(&mut r);
                inputs.push(HostArray::from_f64(DType::I32, &s, &rows[..s[0]]));
            }
            for (_, o) in inst.kernel.operands_with_role(Role::Input) {
                let s: Vec<usize> = o
                    .shape
                    .iter()
                    .map(|d| d.resolve(&inst.bindings).unwrap())
                    .collect();
                let x = match o.dtype {
                    DType::Bool => HostArray::from_f64(
                        DType::Bool,
                        &s,
                        &random(&mut r, DType::F32, &s, -1.0, 1.0)
                            .1
                            .iter()
                            .map(|&v| (v > 0.0) as u8 as f64)
                            .collect::<Vec<_>>(),
                    ),
                    DType::I32 => random(&mut r, DType::I32, &s, 0.0, 3.0).0,
                    d => random(&mut r, d, &s, 0.1, 2.0).0,
                };
                inputs.push(x);
            }
            let refs: Vec<&HostArray> = inputs.iter().collect();
            // Outputs are allocated from the bindings: some symbols (a scatter's `total`)
            // appear only in outputs.
            let outputs: Vec<HostArray> = inst
                .kernel
                .operands_with_role(Role::Output)
                .map(|(_, o)| {
                    let s: Vec<usize> = o
                        .shape
                        .iter()
                        .map(|d| d.resolve(&inst.bindings).unwrap())
                        .collect();
                    HostArray::zeros(o.dtype, &s)
                })
                .collect();
            let (mut a, mut b) = (outputs.clone(), outputs);
            launch_into(&inst.kernel, Device::Interpret, &refs, &mut a).unwrap();
            launch_into(&inst.kernel, Device::Cpu, &refs, &mut b).unwrap();
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                let xv = x.to_f64_vec();
                close(
                    &format!("{} {dtype} output {i}", op.name),
                    y,
                    &xv,
                    tol(dtype),
                );
            }
        }
    }
}
