//! Bound launches (`BoundLaunch`): a kernel bound once to input dtypes and shapes gives what
//! a launch gives, on new memory at every run — outputs the kernel does not write whole start
//! zeroed each time, outputs come back in the shapes they were reshaped to — and refuses
//! what a launch refuses; bound with its outputs' shapes, a run writes into given memory as
//! a launch into it does; a kernel whose grid reads an input's value is not bound; a small
//! launch is brief once its code is compiled.

use rand::{Rng, SeedableRng, rngs::StdRng};
use std::sync::Arc;
use tpukit_dsl::{DType, parse_kernel};
use tpukit_runtime::{BoundLaunch, Device, HostArray, Prepared, launch};

/// `o[i, j]` = the sum over `x`'s column blocks of `x[i, 128·b + j]` (fill 0 past `n`): the
/// output block is revisited along the `arbitrary` axis and read, so it starts zeroed.
const COLUMN_BLOCK_SUMS: &str =
    "kernel @column_block_sums grid(parallel cdiv(m, 8), arbitrary cdiv(n, 128)) {
  input %x: f32[m,n] block[8,128] fill 0.0 map(%0, %1) {
    yield %0, %1
  }
  output %o: f32[m,128] block[8,128] fill 0.0 map(%0, %1) {
    %2 = const 0 : i32[]
    yield %0, %2
  }
body {
  %0 = load %o[ds(0, 8), ds(0, 128)] : f32[8,128]
  %1 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  %2 = add %0, %1 : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %2
  yield
}
";

/// The first `n` row blocks of `x` plus `n`, `n` read from the prefetch operand.
const VALUE_GRID: &str = "kernel @first_blocks grid(arbitrary value(0)) {
  prefetch %n: i32[]
  input %x: f32[m,128] block[8,128] fill 0.0 map(%0) {
    %1 = const 0 : i32[]
    yield %0, %1
  }
  output %o: f32[m,128] block[8,128] fill 0.0 map(%0) {
    %1 = const 0 : i32[]
    yield %0, %1
  }
body {
  %0 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %0
  yield
}
";

fn prepared(text: &str) -> Arc<Prepared> {
    Arc::new(Prepared::new(parse_kernel(text).unwrap()).unwrap())
}

fn random(seed: u64, shape: &[usize]) -> HostArray {
    let mut rng = StdRng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    HostArray::from_f64(DType::F32, shape, &v)
}

fn reference(x: &HostArray, m: usize, n: usize) -> Vec<f64> {
    let xv = x.to_f64_vec();
    let mut o = vec![0.0f64; m * 128];
    for i in 0..m {
        for j in 0..n {
            o[i * 128 + j % 128] += xv[i * n + j];
        }
    }
    o
}

#[test]
fn runs_give_a_launchs_results_on_new_inputs_each_time() {
    let kernel = prepared(COLUMN_BLOCK_SUMS);
    let (m, n) = (21, 300); // neither divides its block
    let bound = BoundLaunch::new(kernel.clone(), &[(DType::F32, &[m, n])])
        .unwrap()
        .expect("no grid values");
    for seed in 0..4 {
        let x = random(seed, &[m, n]);
        // SAFETY: `x` is row-major f32[m, n], alive and unwritten for the call.
        let got = unsafe { bound.run(&[x.data_ptr()]) }.unwrap();
        let want = launch(&*kernel, Device::Cpu, &[&x]).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].shape(), &[m, 128]);
        assert_eq!(got[0], want[0], "seed {seed}: against a launch");
        let (g, r) = (got[0].to_f64_vec(), reference(&x, m, n));
        for (i, (g, r)) in g.iter().zip(&r).enumerate() {
            assert!(
                (g - r).abs() <= 1e-5 * (1.0 + r.abs()),
                "seed {seed} element {i}: {g} vs {r}"
            );
        }
    }
}

#[test]
fn outputs_come_back_in_the_shapes_they_were_reshaped_to() {
    let kernel = prepared(COLUMN_BLOCK_SUMS);
    let (m, n) = (16, 128);
    let mut bound = BoundLaunch::new(kernel.clone(), &[(DType::F32, &[m, n])])
        .unwrap()
        .unwrap();
    bound.reshape_output(0, &[4, 4, 128]).unwrap();
    let e = bound.reshape_output(0, &[5, 128]).unwrap_err();
    assert!(
        e.to_string().contains("cannot be handed back as [5, 128]"),
        "{e}"
    );
    let x = random(9, &[m, n]);
    // SAFETY: as above.
    let got = unsafe { bound.run(&[x.data_ptr()]) }.unwrap();
    assert_eq!(got[0].shape(), &[4, 4, 128]);
    assert_eq!(got[0].to_f64_vec(), x.to_f64_vec());
}

#[test]
fn runs_into_given_outputs_keep_what_the_kernel_adds_to() {
    // `o` is read and added to: a run into given memory starts from what it holds, as a
    // launch into it does; the output's shape binds nothing the inputs do not, so it must
    // be the one bound.
    let kernel = prepared(COLUMN_BLOCK_SUMS);
    let (m, n) = (13, 260);
    let bound = BoundLaunch::new_into(
        kernel.clone(),
        &[(DType::F32, &[m, n])],
        &[(DType::F32, &[m, 128])],
    )
    .unwrap()
    .expect("no grid values");
    for seed in 0..3 {
        let x = random(seed, &[m, n]);
        let start = random(seed + 10, &[m, 128]);
        let mut got = start.clone().into_owned();
        let mut want = vec![start.clone().into_owned()];
        let out = got.data_ptr_mut();
        // SAFETY: `x` is row-major f32[m, n], `got` row-major f32[m, 128] and unique, both
        // alive and touched by nothing else for the call.
        unsafe { bound.run_into(&[x.data_ptr()], &[out]) }.unwrap();
        tpukit_runtime::launch_into(&*kernel, Device::Cpu, &[&x], &mut want).unwrap();
        assert_eq!(got, want[0], "seed {seed}");
        assert_ne!(got, start);
    }
    let wrong = BoundLaunch::new_into(kernel, &[(DType::F32, &[m, n])], &[(DType::F32, &[m, 64])]);
    assert!(wrong.is_err());
}

#[test]
fn signatures_a_launch_refuses_are_refused() {
    let kernel = prepared(COLUMN_BLOCK_SUMS);
    for inputs in [
        vec![(DType::BF16, &[8usize, 128][..])],
        vec![(DType::F32, &[8, 128, 1][..])],
        vec![],
    ] {
        assert!(
            BoundLaunch::new(kernel.clone(), &inputs).is_err(),
            "{inputs:?}"
        );
    }
}

#[test]
fn a_grid_sized_by_an_input_value_is_not_bound() {
    let kernel = prepared(VALUE_GRID);
    let got = BoundLaunch::new(kernel, &[(DType::I32, &[]), (DType::F32, &[16, 128])]).unwrap();
    assert!(got.is_none());
}

#[test]
fn a_launch_is_brief_once_compiled_and_only_under_the_brief_work() {
    // Column block sums read x once and revisit one output block per row block: ~8 bytes of
    // work per element of x (its bytes and the output's), so 4 KiB of x is brief and 4 MiB
    // is not.
    let kernel = prepared(COLUMN_BLOCK_SUMS);
    for (m, n, brief) in [(8, 128, true), (1024, 1024, false)] {
        assert_eq!(brief, m * n * 8 < tpukit_runtime::cpu::BRIEF_WORK);
        let bound = BoundLaunch::new(kernel.clone(), &[(DType::F32, &[m, n])])
            .unwrap()
            .unwrap();
        assert!(!bound.is_brief(), "({m}, {n}): not compiled yet");
        let x = random(5, &[m, n]);
        // SAFETY: as above.
        unsafe { bound.run(&[x.data_ptr()]) }.unwrap();
        assert_eq!(bound.is_brief(), brief, "({m}, {n})");
    }
}
