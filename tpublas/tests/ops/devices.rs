//! Every kernel every operator declares, on the interpreter (exact semantics,
//! bounds-checked) against the compiled CPU backend, at sample extents its blocks do not
//! divide.

use crate::common::*;
use rand::seq::SliceRandom;
use tpukit::dsl::{DType, Fit, Kernel, Role};
use tpukit::{Device, HostArray, Launchable as _, launch_into};

/// Every declared kernel of every operator, at sample extents off its blocks.
#[test]
fn interpreter_and_cpu_agree_on_every_kernel() {
    let mut r = rng(41);
    let mut seen = std::collections::HashSet::new();
    for op in tpukit_blas::ops() {
        for dtype in DTYPES {
            for kernel in op.kernels(dtype).unwrap() {
                if seen.insert(kernel.hash()) {
                    agree(&mut r, &op.name(), kernel.kernel(), dtype);
                }
            }
        }
    }
}

fn agree(r: &mut rand::rngs::StdRng, op: &str, kernel: &Kernel, dtype: DType) {
    let bindings = kernel.sample_bindings(Fit::Edge);
    let shape = |o: &tpukit::dsl::Operand| -> Vec<usize> {
        o.shape
            .iter()
            .map(|d| d.resolve(&bindings).unwrap())
            .collect()
    };
    let flash = kernel.name.starts_with("flash_");
    let mut inputs: Vec<HostArray> = Vec::new();
    for (_, o) in kernel.operands_with_role(Role::Prefetch) {
        // Prefetched operands are row numbers, distinct (a scatter writing one row twice
        // would race) and in range (sample extents of unblocked symbols are equal); a 2-D
        // table (window taps: `[pixels, taps]`) repeats them along its rows.
        let s = shape(o);
        let n: usize = s.iter().product();
        let mut rows: Vec<f64> = (0..n).map(|i| (i % s[0]) as f64).collect();
        rows.shuffle(r);
        inputs.push(HostArray::from_f64(DType::I32, &s, &rows));
    }
    for (_, o) in kernel.operands_with_role(Role::Input) {
        let s = shape(o);
        let x = match o.dtype {
            DType::Bool => {
                let v = random(r, DType::F32, &s, -1.0, 1.0).1;
                let b: Vec<f64> = v.iter().map(|&v| (v > 0.0) as u8 as f64).collect();
                HostArray::from_f64(DType::Bool, &s, &b)
            }
            DType::I32 => random(r, DType::I32, &s, 0.0, 3.0).0,
            // Flash attention's scores go through `exp` (see the note after `agree`): kept near 1.
            d if flash => random(r, d, &s, -0.1, 0.1).0,
            d => random(r, d, &s, 0.1, 2.0).0,
        };
        inputs.push(x);
    }
    let refs: Vec<&HostArray> = inputs.iter().collect();
    // Outputs are allocated from the bindings: some symbols (a scatter's `total`) appear only
    // in outputs.
    let outputs: Vec<HostArray> = kernel
        .operands_with_role(Role::Output)
        .map(|(_, o)| HostArray::zeros(o.dtype, &shape(o)))
        .collect();
    let (mut a, mut b) = (outputs.clone(), outputs);
    launch_into(kernel, Device::Interpret, &refs, &mut a).unwrap();
    launch_into(kernel, Device::Cpu, &refs, &mut b).unwrap();
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let what = format!("{op} `{}` {dtype} output {i}", kernel.name);
        let want = x.to_f64_vec();
        if flash && y.dtype() == DType::F32 {
            let largest = want.iter().fold(0f64, |m, w| m.max(w.abs()));
            close_abs(&what, y, &want, 1e-5, 1e-5 * largest);
        } else {
            close(&what, y, &want, tol(y.dtype()));
        }
    }
}

// Flash attention (`flash`): inputs drawn from ±0.1, f32 results compared within 10⁻⁵ of
// the largest element. Its scores (dots of up to 128 products, summed in another order by
// each device) go through `exp`, and the backward's sample `logsumexp` is no row's: with the
// other kernels' inputs (0.1–2: scores in the hundreds) `p` overflows, and `ds = p·(dp − D)`
// cancels. Its accuracy is tested against ATen in float64 on real softmaxes
// (`python/tests/test_tpublas_training_ops.py::test_fused_cpu_flash_attention`).
