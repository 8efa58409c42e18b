//! tpukit's CPU backend on the benchmark problems, as JSON lines for `benches/compare.py`
//! (which times numpy and XLA CPU in the same run and writes the table in BENCHMARKS.md).
//!
//! `cargo bench --bench cpu` prints one line per case: `{"case", "seconds", "repeats"}`
//! (median wall time of one launch, compiled kernel cached), then one `compile` line per
//! kernel (IR → callable, median of fresh compilations), then the machine's limits.
//! Not a timed test: nothing here asserts a speed.

use std::time::Instant;
use tpukit::prelude::*;
use tpukit::runtime::cpu;

#[tpu_kernel]
fn add(x: In, y: In, o: Out) {
    o[..] = x[..] + y[..];
}

// The kernels compute in their operands' dtype (bf16 rounds after each op, computing in f32
// as a TPU VPU does); reductions and `dot` accumulate in f32.

#[tpu_kernel]
fn softmax(x: In, o: Out) {
    let v = x[..];
    let e = (v - v.reduce_max_keepdims(-1)).exp();
    o[..] = e / e.sum_keepdims(-1);
}

#[tpu_kernel]
fn layer_norm(x: In, w: In, b: In, o: Out, n: usize) {
    let v = x[..];
    let mean = v.sum_keepdims(-1) / (n as f32);
    let d = v - mean;
    let var = (d * d).sum_keepdims(-1) / (n as f32);
    o[..] = d * (var + 1e-5).rsqrt() * w[..] + b[..];
}

/// f32 output whatever the input dtype (`preferred_element_type=f32` in JAX).
#[tpu_kernel]
fn matmul(a: In, b: In, o: Out) {
    if program_id(2) == 0 {
        o[..] = 0.0;
    }
    o[..] += dot(a[..], b[..]);
}

fn tiles(dtype: DType, bm: usize, bn: usize) -> ArraySpec {
    ArraySpec::new(dtype, ["m", "n"]).blocked([bm, bn], [grid(0), grid(1)])
}

fn add_kernel(bm: usize, bn: usize) -> Kernel {
    add(&CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", bm)),
            GridAxis::parallel(Extent::cdiv("n", bn)),
        ],
        inputs: vec![tiles(DType::F32, bm, bn); 2],
        outputs: vec![tiles(DType::F32, bm, bn)],
        ..Default::default()
    })
    .expect("add builds")
}

fn rows(dtype: DType, n: usize, bm: usize) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::sym("m"), Dim::Static(n)]).blocked([bm, n], [grid(0), 0.into()])
}

fn row_spec(dtype: DType, n: usize, extra: Vec<ArraySpec>) -> CallSpec {
    let mut inputs = vec![rows(dtype, n, 16)];
    inputs.extend(extra);
    CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", 16))],
        inputs,
        outputs: vec![rows(dtype, n, 16)],
        ..Default::default()
    }
}

fn matmul_kernel(dtype: DType, b: usize) -> Kernel {
    let array = |r: &str, c: &str| ArraySpec::new(dtype, [Dim::sym(r), Dim::sym(c)]);
    let out = ArraySpec::new(DType::F32, ["m", "n"]);
    matmul(&CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", b)),
            GridAxis::parallel(Extent::cdiv("n", b)),
            GridAxis::arbitrary(Extent::cdiv("k", b)),
        ],
        inputs: vec![
            array("m", "k").blocked([b, b], [grid(0), grid(2)]),
            array("k", "n").blocked([b, b], [grid(2), grid(1)]),
        ],
        outputs: vec![out.blocked([b, b], [grid(0), grid(1)])],
        ..Default::default()
    })
    .expect("matmul builds")
}

fn random(dtype: DType, shape: &[usize], seed: u64) -> HostArray {
    let mut s = seed;
    let data: Vec<f64> = (0..shape.iter().product())
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f64 / (1u64 << 24) as f64) * 2.0 - 1.0
        })
        .collect();
    HostArray::from_f64(dtype, shape, &data)
}

/// Median seconds of one call of `f`, over at least `min_repeats` calls and ~`budget` s.
fn median_seconds(mut f: impl FnMut(), min_repeats: usize, budget: f64) -> (f64, usize) {
    f();
    f();
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < min_repeats || start.elapsed().as_secs_f64() < budget {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64());
        if times.len() >= 2000 {
            break;
        }
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times.len())
}

fn case(name: &str, kernel: &Kernel, inputs: &[&HostArray], outputs: &mut [HostArray]) {
    let (s, n) = median_seconds(
        || launch_into(kernel, Device::Cpu, inputs, outputs).expect("runs"),
        15,
        1.5,
    );
    println!(r#"{{"case": "{name}", "seconds": {s:e}, "repeats": {n}}}"#);
}

fn dname(d: DType) -> &'static str {
    d.name()
}

fn main() {
    let only: Option<String> = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let want = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    let mut compiled: Vec<(String, Kernel)> = Vec::new();

    let add_big = add_kernel(256, 1024);
    if want("add_4m") {
        let (x, y) = (
            random(DType::F32, &[4096, 1024], 1),
            random(DType::F32, &[4096, 1024], 2),
        );
        let mut o = vec![HostArray::zeros(DType::F32, &[4096, 1024])];
        case("add_4m_f32", &add_big, &[&x, &y], &mut o);
    }
    let add_small = add_kernel(8, 128);
    if want("add_256x1024") {
        let (x, y) = (
            random(DType::F32, &[256, 1024], 1),
            random(DType::F32, &[256, 1024], 2),
        );
        let mut o = vec![HostArray::zeros(DType::F32, &[256, 1024])];
        case("add_256x1024_8x128_f32", &add_small, &[&x, &y], &mut o);
    }
    compiled.push(("add".into(), add_small));
    let (m, n) = (4096, 1024);
    for dtype in [DType::F32, DType::BF16] {
        let x = random(dtype, &[m, n], 3);
        let sm = softmax(&row_spec(dtype, n, vec![])).expect("softmax builds");
        if want("softmax") {
            let mut o = vec![HostArray::zeros(dtype, &[m, n])];
            case(
                &format!("softmax_4096x1024_{}", dname(dtype)),
                &sm,
                &[&x],
                &mut o,
            );
        }
        let wb = ArraySpec::new(dtype, [n]);
        let ln = layer_norm(&row_spec(dtype, n, vec![wb.clone(), wb]), n).expect("ln builds");
        if want("layer_norm") {
            let (w, b) = (random(dtype, &[n], 4), random(dtype, &[n], 5));
            let mut o = vec![HostArray::zeros(dtype, &[m, n])];
            case(
                &format!("layer_norm_4096x1024_{}", dname(dtype)),
                &ln,
                &[&x, &w, &b],
                &mut o,
            );
        }
        let mm = matmul_kernel(dtype, 256);
        if want("matmul") {
            let (a, b) = (
                random(dtype, &[1024, 1024], 6),
                random(dtype, &[1024, 1024], 7),
            );
            let mut o = vec![HostArray::zeros(DType::F32, &[1024, 1024])];
            case(
                &format!("matmul_1024_{}", dname(dtype)),
                &mm,
                &[&a, &b],
                &mut o,
            );
        }
        compiled.push((format!("softmax_{}", dname(dtype)), sm));
        compiled.push((format!("layer_norm_{}", dname(dtype)), ln));
        compiled.push((format!("matmul_{}", dname(dtype)), mm));
    }
    if want("compile") {
        for (name, k) in &compiled {
            let (s, n) = median_seconds(
                || {
                    cpu::compile(k, false).expect("compiles");
                },
                5,
                0.5,
            );
            println!(r#"{{"compile": "{name}", "seconds": {s:e}, "repeats": {n}}}"#);
        }
    }
    if want("limits") {
        limits();
    }
}

/// The machine's limits: stream copy bandwidth and FMA peak, on one and on all threads.
fn limits() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = 1 << 24; // 64 MiB per f32 array: far beyond the caches.
    for t in [1, threads] {
        let src: Vec<Vec<f32>> = (0..t).map(|_| vec![1.0f32; n / t]).collect();
        let mut dst: Vec<Vec<f32>> = (0..t).map(|_| vec![0.0f32; n / t]).collect();
        let (s, _) = median_seconds(
            || {
                std::thread::scope(|sc| {
                    for (d, s) in dst.iter_mut().zip(&src) {
                        sc.spawn(move || d.copy_from_slice(s));
                    }
                });
            },
            10,
            1.0,
        );
        // A copy reads and writes every byte.
        let gbs = 2.0 * (n * 4) as f64 / s / 1e9;
        println!(r#"{{"limit": "copy_gbs_{t}t", "value": {gbs:.2}}}"#);
    }
    for t in [1, threads] {
        let iters = 20_000_000u64;
        let (s, _) = median_seconds(
            || {
                std::thread::scope(|sc| {
                    for _ in 0..t {
                        sc.spawn(move || std::hint::black_box(fma_loop(iters)));
                    }
                });
            },
            5,
            1.0,
        );
        let flops = t as f64 * iters as f64 * fma::flops_per_iter();
        println!(
            r#"{{"limit": "fma_gflops_{t}t", "value": {:.1}}}"#,
            flops / s / 1e9
        );
    }
}

fn fma_loop(iters: u64) -> f32 {
    fma::run(iters)
}

/// A register-resident FMA chain: 12 independent accumulators of the widest vector.
mod fma {
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::*;

    pub const ACC: usize = 12;

    pub fn flops_per_iter() -> f64 {
        (ACC * 2 * lanes()) as f64
    }

    fn lanes() -> usize {
        if is_x86_feature_detected!("avx512f") {
            16
        } else {
            8
        }
    }

    pub fn run(iters: u64) -> f32 {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: the feature was detected at run time.
            unsafe { run512(iters) }
        } else {
            // SAFETY: every x86-64 tpukit supports has AVX2 + FMA.
            unsafe { run256(iters) }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn run512(iters: u64) -> f32 {
        let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); ACC];
        for _ in 0..iters {
            for x in &mut acc {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        let mut s = _mm512_setzero_ps();
        for x in acc {
            s = _mm512_add_ps(s, x);
        }
        _mm512_reduce_add_ps(s)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn run256(iters: u64) -> f32 {
        let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); ACC];
        for _ in 0..iters {
            for x in &mut acc {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let mut out = [0.0f32; 8];
        let mut s = _mm256_setzero_ps();
        for x in acc {
            s = _mm256_add_ps(s, x);
        }
        // SAFETY: `out` holds 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
        out.iter().sum()
    }
}
