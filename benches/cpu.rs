//! tpukit's CPU backend on the benchmark problems, as JSON lines for `benches/compare.py`
//! (which times numpy and XLA CPU in the same run and writes the table in BENCHMARKS.md).
//!
//! `cargo bench --bench cpu [FILTER]` prints one line per case: `{"case", "seconds",
//! "repeats"}` (median wall time of one launch, compiled kernel cached), then one `compile`
//! line per kernel (IR → callable, median of fresh compilations), then the machine's limits.
//! The kernels are the catalog's (`tpukit::catalog`), as shipped. Not a timed test: nothing
//! here asserts a speed.

use std::time::Instant;
use tpukit::prelude::*;
use tpukit::runtime::cpu;

/// One of the two kernels not in the catalog: a 2-D add with any block shape (the catalog's
/// `add_vectors` is 1-D).
#[tpu_kernel]
fn add(x: In, y: In, o: Out) {
    o[..] = x[..] + y[..];
}

/// The other: the catalog's softmax computed in f32 and rounded once to the storage dtype,
/// which is what XLA computes for `jax.nn.softmax` of a bf16 array (it drops the roundings
/// between ops: `xla_allow_excess_precision`, on by default). The catalog kernel rounds
/// after every op, as its source says; this case times the same computation as XLA's.
#[tpu_kernel]
fn softmax_in_f32(x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    let e = (v - v.reduce_max_keepdims(-1)).exp();
    o[..] = (e / e.sum_keepdims(-1)).cast(out);
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

/// A catalog kernel instantiated for `shape` and `dtype`.
fn catalog(name: &str, shape: &[usize], dtype: DType) -> Kernel {
    tpukit::catalog::find(name)
        .expect("in the catalog")
        .instantiate(shape, dtype)
        .expect("instantiates")
        .kernel
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

fn main() {
    let only: Option<String> = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let want = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    let mut compiled: Vec<(String, Kernel)> = Vec::new();

    let n4m = 4 << 20;
    let add_big = catalog("add_vectors", &[n4m], DType::F32);
    if want("add_4m") {
        let (x, y) = (random(DType::F32, &[n4m], 1), random(DType::F32, &[n4m], 2));
        let mut o = vec![HostArray::zeros(DType::F32, &[n4m])];
        case("add_4m_f32", &add_big, &[&x, &y], &mut o);
    }
    compiled.push(("add_vectors".into(), add_big));
    let add_small = add_kernel(8, 128);
    if want("add_256x1024") {
        let (x, y) = (
            random(DType::F32, &[256, 1024], 1),
            random(DType::F32, &[256, 1024], 2),
        );
        let mut o = vec![HostArray::zeros(DType::F32, &[256, 1024])];
        case("add_256x1024_8x128_f32", &add_small, &[&x, &y], &mut o);
    }
    compiled.push(("add_8x128".into(), add_small));
    let (m, n) = (4096, 1024);
    for dtype in [DType::F32, DType::BF16] {
        let d = dtype.name();
        let x = random(dtype, &[m, n], 3);
        let sm = catalog("softmax", &[m, n], dtype);
        if want("softmax") {
            let mut o = vec![HostArray::zeros(dtype, &[m, n])];
            case(&format!("softmax_4096x1024_{d}"), &sm, &[&x], &mut o);
        }
        if want("softmax") && dtype == DType::BF16 {
            let spec = tpukit::catalog::softmax::spec(n, dtype);
            let in_f32 = softmax_in_f32(&spec, dtype).expect("builds");
            let mut o = vec![HostArray::zeros(dtype, &[m, n])];
            case("softmax_4096x1024_bf16_in_f32", &in_f32, &[&x], &mut o);
        }
        let ln = catalog("layer_norm", &[m, n], dtype);
        if want("layer_norm") {
            let (w, b) = (random(DType::F32, &[n], 4), random(DType::F32, &[n], 5));
            let mut o = vec![HostArray::zeros(dtype, &[m, n])];
            case(
                &format!("layer_norm_4096x1024_{d}"),
                &ln,
                &[&x, &w, &b],
                &mut o,
            );
        }
        let mm = catalog("matmul", &[1024, 1024, 1024], dtype);
        if want("matmul") {
            let (a, b) = (
                random(dtype, &[1024, 1024], 6),
                random(dtype, &[1024, 1024], 7),
            );
            let mut o = vec![HostArray::zeros(dtype, &[1024, 1024])];
            case(&format!("matmul_1024_{d}"), &mm, &[&a, &b], &mut o);
        }
        compiled.push((format!("softmax_{d}"), sm));
        compiled.push((format!("layer_norm_{d}"), ln));
        compiled.push((format!("matmul_{d}"), mm));
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
