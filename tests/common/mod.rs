//! Shared helpers for the cross-crate tests: random arrays, 2-D block specs, and comparisons
//! with tolerances that fit the dtype.
#![allow(dead_code)]

use rand::{Rng, SeedableRng, rngs::StdRng};
use tpukit::prelude::*;

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A random array of `dtype` (values in `lo..hi`, rounded to the dtype) and its exact values.
pub fn random(
    rng: &mut StdRng,
    dtype: DType,
    shape: &[usize],
    lo: f64,
    hi: f64,
) -> (HostArray, Vec<f64>) {
    let n = shape.iter().product();
    let data: Vec<f64> = (0..n)
        .map(|_| {
            let x = rng.random_range(lo..hi);
            if dtype.is_float() {
                dtype.round_f64(x)
            } else {
                x.floor()
            }
        })
        .collect();
    let a = HostArray::from_f64(dtype, shape, &data);
    let exact = a.to_f64_vec();
    (a, exact)
}

/// An `m x n` operand (symbols `m`, `n`) in blocks of `bm x bn` on a 2-D grid.
pub fn tiles(dtype: DType, bm: usize, bn: usize) -> ArraySpec {
    ArraySpec::new(dtype, ["m", "n"]).blocked([bm, bn], [grid(0), grid(1)])
}

pub fn grid2(bm: usize, bn: usize) -> Vec<GridAxis> {
    vec![
        GridAxis::parallel(Extent::cdiv("m", bm)),
        GridAxis::parallel(Extent::cdiv("n", bn)),
    ]
}

/// Relative tolerance for one rounding (plus compute error) in `dtype`.
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 2e-6,
        DType::BF16 => 1.6e-2,
        DType::F16 => 2e-3,
        _ => 0.0,
    }
}

/// Asserts `got` matches `want` elementwise within `rel` relative (and absolute near 0).
#[track_caller]
/// Like [`assert_close`], but each element's tolerance scales with the largest magnitude in
/// `want` rather than its own: what sums whose order may change need, since cancellation
/// leaves a small result with the rounding error of its large terms.
pub fn assert_close_normwise(what: &str, got: &[f64], want: &[f64], rel: f64) {
    let scale = want
        .iter()
        .filter(|w| w.is_finite())
        .fold(0.0_f64, |m, w| m.max(w.abs()));
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rel * (1.0 + scale);
        assert!(
            ok,
            "{what}: element {i}: got {g}, want {w} (rel tol {rel} of {scale})"
        );
    }
}

pub fn assert_close(what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rel * (1.0 + w.abs());
        assert!(ok, "{what}: element {i}: got {g}, want {w} (rel tol {rel})");
    }
}

/// Manual DMA: each step copies its 8 rows of `x` (left in HBM) into a VMEM buffer through
/// one of two DMA semaphores, waits, and writes them doubled plus the count a regular
/// semaphore held (signalled by 2, read, then taken back).
#[tpu_kernel]
pub fn dma_rows(x: In, o: Out, buf: Scratch, sems: Scratch, count: Scratch) {
    let i = program_id(0);
    dma_start(x[(ds(i * 8, 8), ..)], buf[..], sems[i % 2]);
    dma_wait(x[(ds(i * 8, 8), ..)], buf[..], sems[i % 2]);
    semaphore_signal(count[0], 2);
    let n = semaphore_read(count[0]);
    semaphore_wait(count[0], n);
    o[..] = buf[..] * 2.0 + n.cast(f32);
}

/// `dma_rows`'s call: `rows` rows of `x` left in HBM, 8-row output blocks, a VMEM buffer, two
/// DMA semaphores and one regular semaphore.
pub fn dma_rows_spec(rows: usize) -> CallSpec {
    CallSpec {
        grid: vec![GridAxis::arbitrary(rows / 8)],
        inputs: vec![ArraySpec::new(DType::F32, [rows, 128]).any()],
        outputs: vec![
            ArraySpec::new(DType::F32, [rows, 128]).blocked([8, 128], [grid(0), 0.into()]),
        ],
        scratch: vec![
            ArraySpec::new(DType::F32, [8usize, 128]),
            ArraySpec::semaphores(SemaphoreKind::Dma, [2]),
            ArraySpec::semaphores(SemaphoreKind::Regular, [1]),
        ],
        ..Default::default()
    }
}

/// Rolls along the sublanes (by a constant) and the lanes (by a traced shift), and a gather
/// along the lanes at indices read from an input (`roll`, `gather`).
#[tpu_kernel]
pub fn rolls_and_gathers(x: In, idx: In, rows: Out, lanes: Out, picked: Out) {
    let v = x[..];
    rows[..] = roll(v, 3, 0);
    lanes[..] = roll(v, program_id(0) * 7 - 5, 1);
    picked[..] = gather(v, idx[..], 1);
}

/// Its call: 8x128 blocks of two 16x128 arrays (f32 values, i32 indices) on a grid of 2.
pub fn rolls_and_gathers_spec() -> CallSpec {
    let block = |d: DType| {
        ArraySpec::new(d, [16usize, 128])
            .blocked([8, 128], [grid(0), tpukit::dsl::IndexExpr::Const(0)])
    };
    CallSpec {
        grid: vec![GridAxis::parallel(2)],
        inputs: vec![block(DType::F32), block(DType::I32)],
        outputs: vec![block(DType::F32), block(DType::F32), block(DType::F32)],
        ..Default::default()
    }
}

/// Runs the ignored test `child` of the current test binary in a child process whose kernel
/// bundle holds `kernels` compiled for the portable x86-64-v3 target (8-lane AVX2 vectors, no
/// AVX-512), so the child's launches run the code an AVX2-only CPU would; panics with the
/// child's output unless it passed. False (nothing run) on a host that cannot run that code.
pub fn run_in_portable_child(child: &str, kernels: &[tpukit::dsl::Kernel]) -> bool {
    use tpukit::runtime::bundle;
    use tpukit::runtime::cpu::{self, CacheKey, HostTarget};
    let (host, portable) = (HostTarget::detect(), HostTarget::portable());
    if !host.runs_code_for(&portable) {
        return false;
    }
    let options = cpu::options_for(&portable, false);
    let entries: Vec<bundle::BundleEntry> = kernels
        .iter()
        .map(|k| bundle::BundleEntry {
            key: CacheKey::new(k, &portable, options),
            name: k.name.clone(),
            ir_hash: k.structural_hash().to_string(),
            artifact: cpu::compile_artifact(k, &portable, options).unwrap(),
            tpu: None,
        })
        .collect();
    let path = std::env::temp_dir().join(format!("tpukit-{child}-{}.tpkb", std::process::id()));
    bundle::write(&path, &portable, &entries).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", child, "--nocapture"])
        .env_remove("TPUKIT_CACHE_DIR")
        .env_remove("TPUKIT_DEBUG")
        .env("TPUKIT_BUNDLE", &path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child `{child}` failed:\n{}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    true
}
