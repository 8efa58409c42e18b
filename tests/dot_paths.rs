//! The CPU backend's `dot` paths against an f64 reference: bf16 products (with AVX-512 BF16's
//! `vdpbf16ps` where the host has it), operands read in place, and `acc[..] += dot(..)` fused
//! into the micro-kernel (see `runtime/src/cpu/codegen/{dot,dot_bf16,fuse}.rs`). Shapes do
//! not divide the micro-kernel's tiles (8×48 and 12×32, 16-lane vectors) or the blocks; k is odd.

mod common;

use common::*;
use tpukit::prelude::*;
use tpukit::runtime::cpu::HostTarget;

#[tpu_kernel]
fn products(a: In, b: In, ab: Out, abt: Out, ab16: Out) {
    ab[..] = dot(a[..], b[..]);
    abt[..] = dot_t(a[..], b[..].t());
    ab16[..] = dot(a[..], b[..]).cast(bf16);
}

/// `Σ_p a[i,p]·b[p,j]` in f64, and `Σ_p |a[i,p]·b[p,j]|` (what bounds the f32 sum's error).
fn reference(av: &[f64], bv: &[f64], (m, k, n): (usize, usize, usize)) -> (Vec<f64>, Vec<f64>) {
    let (mut sum, mut abs) = (vec![0.0; m * n], vec![0.0; m * n]);
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                let t = av[i * k + p] * bv[p * n + j];
                sum[i * n + j] += t;
                abs[i * n + j] += t.abs();
            }
        }
    }
    (sum, abs)
}

/// Asserts `got` is the f32 sum of `k` exact products (each bf16·bf16 product is exact in
/// f32): within `k` f32 roundings of the sum of the products' magnitudes, plus one rounding
/// to `out` (the result's dtype).
#[track_caller]
fn assert_dot(what: &str, got: &[f64], (want, abs): (&[f64], &[f64]), k: usize, out: DType) {
    let last = if out == DType::BF16 {
        2f64.powi(-8)
    } else {
        0.0
    };
    for (i, ((g, w), a)) in got.iter().zip(want).zip(abs).enumerate() {
        let bound = (k as f64 + 1.0) * 2f64.powi(-24) * a + last * w.abs() + 1e-30;
        assert!(
            (g - w).abs() <= bound,
            "{what}: element {i}: got {g}, want {w} (bound {bound:e})"
        );
    }
}

/// The `products` kernel for `dtype` operands of shape `(m, k)` and `(k, n)`.
fn products_kernel(dtype: DType, (m, k, n): (usize, usize, usize)) -> Kernel {
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(dtype, [m, k]), ArraySpec::new(dtype, [k, n])],
        outputs: vec![
            ArraySpec::new(DType::F32, [m, n]),
            ArraySpec::new(DType::F32, [m, n]),
            ArraySpec::new(DType::BF16, [m, n]),
        ],
        ..Default::default()
    };
    products(&spec).unwrap()
}

/// Runs [`products_kernel`] on random operands and checks its three results.
fn check_products(dtype: DType, (m, k, n): (usize, usize, usize), seed: u64) {
    let kern = products_kernel(dtype, (m, k, n));
    let mut r = rng(seed);
    let (a, av) = random(&mut r, dtype, &[m, k], -2.0, 2.0);
    let (b, bv) = random(&mut r, dtype, &[k, n], -2.0, 2.0);
    let (want, abs) = reference(&av, &bv, (m, k, n));
    let out = launch(&kern, Device::Cpu, &[&a, &b]).unwrap();
    let at = format!("{dtype} {m}x{k}x{n}");
    let r = (&want[..], &abs[..]);
    assert_dot(&format!("dot {at}"), &out[0].to_f64_vec(), r, k, DType::F32);
    assert_dot(
        &format!("dot_t {at}"),
        &out[1].to_f64_vec(),
        r,
        k,
        DType::F32,
    );
    assert_dot(
        &format!("bf16 {at}"),
        &out[2].to_f64_vec(),
        r,
        k,
        DType::BF16,
    );
}

#[test]
fn bf16_and_f32_products_against_f64() {
    // Edge tiles in m, leftover columns after whole vectors in n, odd and tiny k.
    let shapes = [
        (16, 64, 16),
        (13, 37, 29),
        (1, 1, 1),
        (12, 128, 32),
        (25, 255, 47),
        (7, 3, 33),
        (40, 129, 100),
        (20, 33, 70),
        // AVX-512 column panels of 4 + 3 + 2 vectors (9) and of 4 + 3 (7), 6-row tiles.
        (22, 40, 144),
        (12, 17, 112),
    ];
    for dtype in [DType::BF16, DType::F32] {
        for (s, &shape) in shapes.iter().enumerate() {
            check_products(dtype, shape, 40 + s as u64);
        }
    }
}

/// Windows with a leading unit dimension, reshaped to matrices (how JAX's flash attention
/// reads its blocks): `s = q·ktᵀ`, its `kt` read where it lies and transposed 16×16 (or 8×8)
/// tiles at a time in registers, with leftover rows and columns; then `s·v`.
#[tpu_kernel]
fn unit_dim_products(q: In, kt: In, v: In, s: Out, o: Out) {
    let qm = q[(ds(0, 1), .., ..)].reshape([37, 45]);
    let km = kt[(ds(0, 1), .., ..)].reshape([29, 45]);
    let sm = dot_t(qm, km);
    s[(ds(0, 1), .., ..)] = sm.reshape([1, 37, 29]);
    let vm = v[(ds(0, 1), .., ..)].reshape([29, 19]);
    o[(ds(0, 1), .., ..)] = dot(sm, vm).reshape([1, 37, 19]);
}

#[test]
fn unit_dim_windows_read_in_place_and_transposed() {
    let (h, m, k, n, d) = (2, 37, 45, 29, 19);
    let arr = |r, c| {
        ArraySpec::new(DType::F32, [h, r, c]).blocked([1, r, c], [grid(0), 0.into(), 0.into()])
    };
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::Static(h))],
        inputs: vec![arr(m, k), arr(n, k), arr(n, d)],
        outputs: vec![arr(m, n), arr(m, d)],
        ..Default::default()
    };
    let kern = unit_dim_products(&spec).unwrap();
    let mut r = rng(70);
    let (q, qv) = random(&mut r, DType::F32, &[h, m, k], -1.0, 1.0);
    let (kt, ktv) = random(&mut r, DType::F32, &[h, n, k], -1.0, 1.0);
    let (v, vv) = random(&mut r, DType::F32, &[h, n, d], -1.0, 1.0);
    let out = launch(&kern, Device::Cpu, &[&q, &kt, &v]).unwrap();
    let (s_got, o_got) = (out[0].to_f64_vec(), out[1].to_f64_vec());
    for b in 0..h {
        // kᵀ as a k × n matrix, then s as computed (f32), then s·v.
        let kb = &ktv[b * n * k..(b + 1) * n * k];
        let kmat: Vec<f64> = (0..k * n).map(|i| kb[(i % n) * k + i / n]).collect();
        let (want, abs) = reference(&qv[b * m * k..(b + 1) * m * k], &kmat, (m, k, n));
        let s_b = &s_got[b * m * n..(b + 1) * m * n];
        assert_dot(
            &format!("q·kᵀ, head {b}"),
            s_b,
            (&want, &abs),
            k,
            DType::F32,
        );
        let (want, abs) = reference(s_b, &vv[b * n * d..(b + 1) * n * d], (m, n, d));
        let o_b = &o_got[b * m * d..(b + 1) * m * d];
        assert_dot(&format!("s·v, head {b}"), o_b, (&want, &abs), n, DType::F32);
    }
}

/// Operands computed in the kernel that a product reads down their columns: a transposed
/// elementwise value (`(2·x)ᵀ` as the left operand), and one contracted along its rows
/// (`dot_t` of `a` with `2·bt`): each is computed row-major into a buffer and transposed in
/// registers, with leftover rows and columns.
#[tpu_kernel]
fn computed_transposed_products(x: In, b: In, a: In, bt: In, xb: Out, abt: Out) {
    xb[..] = dot((x[..] * 2.0).t(), b[..]);
    abt[..] = dot_t(a[..], bt[..] * 2.0);
}

#[test]
fn computed_operands_read_down_their_columns() {
    let (m, k, n) = (37, 45, 29);
    let spec = CallSpec {
        inputs: vec![
            ArraySpec::new(DType::F32, [k, m]),
            ArraySpec::new(DType::F32, [k, n]),
            ArraySpec::new(DType::F32, [m, k]),
            ArraySpec::new(DType::F32, [n, k]),
        ],
        outputs: vec![ArraySpec::new(DType::F32, [m, n]); 2],
        ..Default::default()
    };
    let kern = computed_transposed_products(&spec).unwrap();
    let mut r = rng(71);
    let (x, xv) = random(&mut r, DType::F32, &[k, m], -1.0, 1.0);
    let (b, bv) = random(&mut r, DType::F32, &[k, n], -1.0, 1.0);
    let (a, av) = random(&mut r, DType::F32, &[m, k], -1.0, 1.0);
    let (bt, btv) = random(&mut r, DType::F32, &[n, k], -1.0, 1.0);
    let out = launch(&kern, Device::Cpu, &[&x, &b, &a, &bt]).unwrap();
    // (2·x)ᵀ as an m × k matrix; 2·btᵀ as a k × n matrix (doubling is exact).
    let xt: Vec<f64> = (0..m * k).map(|i| 2.0 * xv[(i % k) * m + i / k]).collect();
    let b2: Vec<f64> = (0..k * n).map(|i| 2.0 * btv[(i % n) * k + i / n]).collect();
    let want = reference(&xt, &bv, (m, k, n));
    assert_dot(
        "(2x)ᵀ·b",
        &out[0].to_f64_vec(),
        (&want.0, &want.1),
        k,
        DType::F32,
    );
    let want = reference(&av, &b2, (m, k, n));
    assert_dot(
        "a·(2bt)ᵀ",
        &out[1].to_f64_vec(),
        (&want.0, &want.1),
        k,
        DType::F32,
    );
}

/// Extreme magnitudes in bf16: products overflowing to ±inf and NaN propagate as in f32
/// arithmetic; values in f32's normal range are not flushed.
#[test]
fn bf16_products_at_special_values() {
    let (m, k, n) = (3, 4, 16);
    let kern = products_kernel(DType::BF16, (m, k, n));
    let big = 3e38;
    let small = 1e-30; // normal in f32: its products with 1 are exact
    let av = [
        [big, big, 0.0, 0.0],
        [f64::NAN, 1.0, 0.0, 0.0],
        [small, small, 0.0, 0.0],
    ];
    let a = HostArray::from_f64(DType::BF16, &[m, k], av.as_flattened());
    let b = HostArray::from_f64(DType::BF16, &[k, n], &vec![1.0; k * n]);
    let out = launch(&kern, Device::Cpu, &[&a, &b]).unwrap()[0].to_f64_vec();
    let small = DType::BF16.round_f64(small);
    for j in 0..n {
        assert_eq!(out[j], f64::INFINITY, "overflow to inf, column {j}");
        assert!(out[n + j].is_nan(), "NaN propagates, column {j}");
        let want = DType::F32.round_f64(2.0 * small);
        let got = out[2 * n + j];
        assert!(
            (got - want).abs() <= 1e-6 * want,
            "column {j}: got {got}, want {want}"
        );
    }
}

#[tpu_kernel]
fn blocked_matmul(a: In, b: In, o: Out, acc: Scratch) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    if program_id(2) == num_programs(2) - 1 {
        o[..] = acc[..];
    }
}

/// JAX's shipped matmul: the output block is written from the accumulator at every k step
/// (the copy is fused into the product's micro-kernel, see `fuse`).
#[tpu_kernel]
fn matmul_copy_out(a: In, b: In, o: Out, acc: Scratch) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    o[..] = acc[..];
}

/// As [`matmul_copy_out`], the output block written from a value computed from the
/// accumulator (not a fusable copy): the store runs at the last k step only (see
/// `deferred`).
#[tpu_kernel]
fn matmul_scaled_out(a: In, b: In, o: Out, acc: Scratch) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    o[..] = acc[..] * 2.0;
}

/// The accumulate reads the ref it adds to in between: the `load` is its own value (a
/// snapshot), so the update must not be fused past it.
#[tpu_kernel]
fn accumulate_and_peek(a: In, b: In, o: Out, before: Out, acc: Scratch) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
    }
    let old = acc[..];
    acc[..] += dot(a[..], b[..]);
    before[..] = old;
    if program_id(2) == num_programs(2) - 1 {
        o[..] = acc[..];
    }
}

/// The accumulator set to ones at the first k step and zeroed at the second: the zeroing
/// `if` is left to the product (which starts from zeros exactly where it would have run,
/// see `fuse`), the store of ones is not.
#[tpu_kernel]
fn matmul_restarted(a: In, b: In, o: Out, acc: Scratch) {
    if program_id(2) == 0 {
        acc[..] = 1.0;
    }
    if program_id(2) == 1 {
        acc[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    o[..] = acc[..];
}

/// Two accumulators started by one `if` (flash attention's backward starts `dk` and `dv`
/// together): the `if` must run for the one whose product does not start from zeros.
#[tpu_kernel]
fn two_accumulators(a: In, b: In, o: Out, twice: Out, acc: Scratch, acc2: Scratch) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
        acc2[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    acc2[..] += dot(a[..] * 2.0, b[..]);
    if program_id(2) == num_programs(2) - 1 {
        o[..] = acc[..];
        twice[..] = acc2[..];
    }
}

fn blocked_spec(dtype: DType, bs: usize, outputs: usize) -> CallSpec {
    let arr = |r: &str, c: &str| ArraySpec::new(dtype, [Dim::sym(r), Dim::sym(c)]);
    let out = ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::sym("n")]);
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", bs)),
            GridAxis::parallel(Extent::cdiv("n", bs)),
            GridAxis::arbitrary(Extent::cdiv("k", bs)),
        ],
        inputs: vec![
            arr("m", "k").blocked([bs, bs], [grid(0), grid(2)]),
            arr("k", "n").blocked([bs, bs], [grid(2), grid(1)]),
        ],
        outputs: vec![out.blocked([bs, bs], [grid(0), grid(1)]); outputs],
        scratch: vec![ArraySpec::new(DType::F32, [bs, bs])],
        ..Default::default()
    }
}

/// `acc[..] += dot(a, b)` over an `arbitrary` k axis, blocks overhanging every array (read
/// as zeros): f32 (operands read in place where their window fits) and bf16.
/// Runs [`blocked_matmul`] in blocks of `bs` on random operands of every shape of `shapes`.
fn check_blocked(dtype: DType, bs: usize, shapes: &[(usize, usize, usize)]) {
    check_blocked_kernel(
        &blocked_matmul(&blocked_spec(dtype, bs, 1)).unwrap(),
        dtype,
        bs,
        shapes,
    );
}

/// Runs `kern` (a blocked product of `dtype` operands in blocks of `bs`) on random operands of
/// every shape of `shapes`, against the f64 reference.
fn check_blocked_kernel(kern: &Kernel, dtype: DType, bs: usize, shapes: &[(usize, usize, usize)]) {
    for &(m, k, n) in shapes {
        let mut r = rng(60 + bs as u64);
        let (a, av) = random(&mut r, dtype, &[m, k], -1.0, 1.0);
        let (b, bv) = random(&mut r, dtype, &[k, n], -1.0, 1.0);
        let (want, abs) = reference(&av, &bv, (m, k, n));
        let out = launch(kern, Device::Cpu, &[&a, &b]).unwrap();
        let what = format!("{} {dtype} blocks {bs}, {m}x{k}x{n}", kern.name);
        assert_dot(&what, &out[0].to_f64_vec(), (&want, &abs), k, DType::F32);
    }
}

/// `acc[..] += dot(a, b)` over an `arbitrary` k axis, blocks overhanging every array (read
/// as zeros): f32 (operands read in place where their window fits) and bf16. k = 75: the
/// windows that fit are views with an odd row stride.
#[test]
fn accumulated_blocked_products_against_f64() {
    for dtype in [DType::F32, DType::BF16] {
        for bs in [32, 48] {
            let shapes = [(70, 90, 50), (70, 75, 50), (bs, 3 * bs, bs), (5, 7, 3)];
            check_blocked(dtype, bs, &shapes);
        }
    }
}

/// [`two_accumulators`]: both sums, the second exactly twice the first (`2·a` is exact).
#[test]
fn two_accumulators_started_by_one_if() {
    for dtype in [DType::F32, DType::BF16] {
        let mut spec = blocked_spec(dtype, 32, 2);
        spec.scratch.push(ArraySpec::new(DType::F32, [32, 32]));
        let kern = two_accumulators(&spec).unwrap();
        check_blocked_kernel(&kern, dtype, 32, &[(70, 90, 50), (5, 7, 3)]);
        let mut r = rng(7);
        let (a, _) = random(&mut r, dtype, &[70, 90], -1.0, 1.0);
        let (b, _) = random(&mut r, dtype, &[90, 50], -1.0, 1.0);
        let out = launch(&kern, Device::Cpu, &[&a, &b]).unwrap();
        let want: Vec<f64> = out[0].to_f64_vec().iter().map(|x| 2.0 * x).collect();
        assert_eq!(out[1].to_f64_vec(), want, "{dtype}: the second accumulator");
    }
}

/// `acc[..] += dot(a, b); o[..] = acc[..]` at every step: the copy to `o` made by the
/// micro-kernel (at the last k step only), for windows that fit and that overhang
/// (staged), and blocks of 40 columns (two vectors and 8 columns the scalar loop
/// finishes); and `o[..] = 2·acc[..]`, stored at the last k step only.
#[test]
fn accumulated_products_copied_out_against_f64() {
    for dtype in [DType::F32, DType::BF16] {
        for bs in [32, 40] {
            let kern = matmul_copy_out(&blocked_spec(dtype, bs, 1)).unwrap();
            let shapes = [(70, 90, 50), (bs, 3 * bs, bs), (5, 7, 3)];
            check_blocked_kernel(&kern, dtype, bs, &shapes);
            // Doubled exactly: the same sums as the copy's, times 2.
            let scaled = matmul_scaled_out(&blocked_spec(dtype, bs, 1)).unwrap();
            for &(m, k, n) in &shapes {
                let mut r = rng(90);
                let (a, _) = random(&mut r, dtype, &[m, k], -1.0, 1.0);
                let (b, _) = random(&mut r, dtype, &[k, n], -1.0, 1.0);
                let copied = launch(&kern, Device::Cpu, &[&a, &b]).unwrap()[0].to_f64_vec();
                let got = launch(&scaled, Device::Cpu, &[&a, &b]).unwrap()[0].to_f64_vec();
                let want: Vec<f64> = copied.iter().map(|x| 2.0 * x).collect();
                assert_eq!(got, want, "{dtype} blocks {bs}, {m}x{k}x{n}: 2·acc");
            }
        }
    }
}

/// The products of this file from a bundle compiled for the portable x86-64-v3 target
/// (8-lane AVX2 vectors, no AVX-512 BF16), in a child process.
#[test]
#[ignore = "run as a child process by products_compiled_for_the_portable_target"]
fn portable_child() {
    for dtype in [DType::F32, DType::BF16] {
        check_products(dtype, PORTABLE_PRODUCT, 5);
        check_blocked(dtype, 32, &[(70, 75, 50)]);
    }
    let s = tpukit::runtime::cpu::stats();
    assert_eq!((s.compiled, s.bundle_hits), (0, 4), "all from the bundle");
}

const PORTABLE_PRODUCT: (usize, usize, usize) = (25, 255, 47);

#[test]
fn products_compiled_for_the_portable_target() {
    let mut kernels = Vec::new();
    for dtype in [DType::F32, DType::BF16] {
        kernels.push(products_kernel(dtype, PORTABLE_PRODUCT));
        kernels.push(blocked_matmul(&blocked_spec(dtype, 32, 1)).unwrap());
    }
    run_in_portable_child("portable_child", &kernels);
}

#[test]
fn accumulate_read_in_between_matches_interpret() {
    for dtype in [DType::F32, DType::BF16] {
        let kern = accumulate_and_peek(&blocked_spec(dtype, 32, 2)).unwrap();
        let (m, k, n) = (40, 100, 33);
        let mut r = rng(77);
        let (a, _) = random(&mut r, dtype, &[m, k], -1.0, 1.0);
        let (b, _) = random(&mut r, dtype, &[k, n], -1.0, 1.0);
        let cpu = launch(&kern, Device::Cpu, &[&a, &b]).unwrap();
        let int = launch(&kern, Device::Interpret, &[&a, &b]).unwrap();
        for (o, what) in [(0, "result"), (1, "accumulator before the last update")] {
            let tol = 2e-6 * k as f64;
            let (c, i) = (cpu[o].to_f64_vec(), int[o].to_f64_vec());
            assert_close(&format!("{dtype} {what}"), &c, &i, tol);
        }
    }
}

/// One k step (ones, then the product: `1 + a·b`) and several (zeros from the second step
/// on: `a[:, 32..]·b[32.., :]`), against the f64 reference.
#[test]
fn accumulator_zeroed_at_a_later_step_against_f64() {
    let bs = 32;
    for dtype in [DType::F32, DType::BF16] {
        let kern = matmul_restarted(&blocked_spec(dtype, bs, 1)).unwrap();
        for (m, k, n) in [(40, 20, 33), (40, 90, 33), (64, 96, 64)] {
            let mut r = rng(78);
            let (a, av) = random(&mut r, dtype, &[m, k], -1.0, 1.0);
            let (b, bv) = random(&mut r, dtype, &[k, n], -1.0, 1.0);
            let got = launch(&kern, Device::Cpu, &[&a, &b]).unwrap()[0].to_f64_vec();
            let what = format!("{dtype} {m}x{k}x{n}");
            if k <= bs {
                let (sum, abs) = reference(&av, &bv, (m, k, n));
                let want: Vec<f64> = sum.iter().map(|s| 1.0 + s).collect();
                let abs: Vec<f64> = abs.iter().map(|s| 1.0 + s).collect();
                assert_dot(&what, &got, (&want, &abs), k, DType::F32);
            } else {
                let kt = k - bs;
                let at: Vec<f64> = (0..m * kt).map(|x| av[x / kt * k + bs + x % kt]).collect();
                let want = reference(&at, &bv[bs * n..], (m, kt, n));
                assert_dot(&what, &got, (&want.0, &want.1), kt, DType::F32);
            }
        }
    }
}

/// The bf16 instructions are used exactly where the CPU running the tests has them: read at
/// run time from the host, never from how the binary was built.
#[test]
fn bf16_dot_follows_the_host_cpu() {
    let host = HostTarget::detect();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if host.triple.starts_with("x86_64") && !cpuinfo.is_empty() {
        let flags = cpuinfo
            .lines()
            .find(|l| l.starts_with("flags"))
            .unwrap_or("");
        let has = flags.split_whitespace().any(|f| f == "avx512_bf16");
        assert_eq!(
            host.has_avx512_bf16(),
            has,
            "host features: {}",
            host.features
        );
    }
    assert!(!HostTarget::portable().has_avx512_bf16());
}
