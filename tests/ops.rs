//! One generic test body per behaviour, instantiated for every device (as CubeCL's testgen
//! suites do): each kernel runs on random inputs with shapes that do not divide the block and
//! is checked against an independent reference written as plain loops.

mod common;

use common::*;
use rand::Rng;
use tpukit::dsl::{CmpOp, IndexExpr};
use tpukit::prelude::*;

#[tpu_kernel]
fn unary_all(
    x: In,
    exp: Out,
    log: Out,
    sqrt: Out,
    rsqrt: Out,
    tanh: Out,
    erf: Out,
    sig: Out,
    abs: Out,
    neg: Out,
    floor: Out,
    sin: Out,
    log1p: Out,
    exp2: Out,
) {
    let v = x[..];
    exp[..] = v.exp();
    log[..] = v.abs().log();
    sqrt[..] = v.abs().sqrt();
    rsqrt[..] = v.abs().rsqrt();
    tanh[..] = v.tanh();
    erf[..] = v.erf();
    sig[..] = v.sigmoid();
    abs[..] = v.abs();
    neg[..] = -v;
    floor[..] = v.floor();
    sin[..] = v.sin();
    log1p[..] = v.abs().log1p();
    exp2[..] = v.exp2();
}

#[tpu_kernel]
fn transcendental(x: In, exp: Out, log: Out, tanh: Out, sig: Out, erf: Out) {
    let v = x[..];
    exp[..] = v.exp();
    log[..] = v.log();
    tanh[..] = v.tanh();
    sig[..] = v.sigmoid();
    erf[..] = v.erf();
}

/// Special and extreme values, where inline approximations go wrong first: zeros, infinities,
/// NaN, subnormals, overflow and underflow thresholds, tiny and huge magnitudes.
pub fn transcendentals_at_special_values(device: Device) {
    let xs = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-40,
        1e-45,
        -1e-40,
        1e-30,
        1e-6,
        -1e-6,
        0.3,
        -0.3,
        0.6249,
        0.6251,
        -0.6251,
        1.0,
        -1.0,
        2.0,
        9.0,
        -9.0,
        20.0,
        88.7,
        88.8,
        -87.0,
        -103.9,
        -104.5,
        -200.0,
        1e30,
        3.4e38,
        f32::MIN_POSITIVE as f64,
        0.70710677,
        0.70710683,
        std::f64::consts::SQRT_2,
        0.4999,
        0.5001,
        -0.5001,
        3.9,
        -5.5,
    ];
    let n = xs.len();
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [n])],
        outputs: vec![ArraySpec::new(DType::F32, [n]); 5],
        ..Default::default()
    };
    let k = transcendental(&spec).unwrap();
    let data: Vec<f64> = xs.iter().map(|&x| DType::F32.round_f64(x)).collect();
    let x = HostArray::from_f64(DType::F32, &[n], &data);
    let out = launch(&k, device, &[&x]).unwrap();
    type F = fn(f64) -> f64;
    let refs: [(&str, F); 5] = [
        ("exp", f64::exp),
        ("log", f64::ln),
        ("tanh", f64::tanh),
        ("sigmoid", |x| 1.0 / (1.0 + (-x).exp())),
        ("erf", libm::erf),
    ];
    for ((name, f), o) in refs.iter().zip(&out) {
        let got = o.to_f64_vec();
        for (i, (&g, &v)) in got.iter().zip(&data).enumerate() {
            let w = DType::F32.round_f64(f(v));
            // A few ULPs of f32, relative; exact where the result is 0, ±inf or NaN.
            let ok = (g.is_nan() && w.is_nan())
                || g == w
                || (w.is_finite() && w != 0.0 && ((g - w) / w).abs() <= 4e-7)
                || (w.abs() < 1e-37 && g.abs() < 1e-37);
            assert!(ok, "{name}({v:e}) #{i}: got {g:e}, want {w:e}");
        }
    }
}

#[tpu_kernel]
fn erf_only(x: In, o: Out) {
    o[..] = x[..].erf();
}

/// The compiled backend's inline f32 `erf` is within the 6 ulps its doc comment states of
/// libm's f64 `erf`, rounded to f32, on random inputs: uniform on [-5, 5] (through the whole
/// fitted range, its clamp and beyond) and of log-uniform magnitude from 1e-30 to 10 with
/// either sign. (The interpreter calls libm.)
#[test]
fn compiled_erf_is_within_six_ulps_of_libm() {
    check_erf_on_random_inputs();
}

/// On AVX-512 CPUs, vectorised loops evaluate `erf` from tables of polynomials on quarter
/// binades of |x| from 2⁻⁵ up to its clamp at 3.919206, and scalar code runs the same code
/// on one lane: each interval's edges and their f32 neighbours, both signs, and the special
/// values (±0 keep their sign, ±inf → ±1, NaN → NaN, subnormals are not flushed) are within
/// 6 ulps of libm in every lane of 16-lane vectors, with remainders of 1 to 15 elements
/// after them, and exactly ±1 from the clamp on.
#[test]
fn compiled_erf_at_interval_edges_and_special_values() {
    check_erf_at_edges(ERF_EDGE_LENGTHS);
}

/// The rational `erf` of CPUs without AVX-512 (the portable x86-64-v3 target, 8-lane
/// vectors), in a child process that runs a bundle compiled for that target: the same
/// checks, with a vector body and a remainder of 7.
#[test]
fn rational_erf_on_the_portable_target() {
    let kernels: Vec<_> = std::iter::once(ERF_RANDOM_LENGTH)
        .chain(erf_edge_lengths(PORTABLE_ERF_EDGE_LENGTHS))
        .map(erf_kernel)
        .collect();
    run_in_portable_child("rational_erf_child", &kernels);
}

#[test]
#[ignore = "run as a child process by rational_erf_on_the_portable_target"]
fn rational_erf_child() {
    check_erf_on_random_inputs();
    check_erf_at_edges(PORTABLE_ERF_EDGE_LENGTHS);
    let s = tpukit::runtime::cpu::stats();
    assert_eq!(s.compiled, 0, "all from the portable bundle");
}

const ERF_RANDOM_LENGTH: usize = 1 << 18;

/// Lengths past a whole number of 16-lane vectors holding every edge value, as offsets.
const ERF_EDGE_LENGTHS: std::ops::Range<usize> = 0..16;
const PORTABLE_ERF_EDGE_LENGTHS: std::ops::Range<usize> = 7..8;

fn check_erf_on_random_inputs() {
    let mut r = rng(17);
    let data: Vec<f64> = (0..ERF_RANDOM_LENGTH)
        .map(|i| {
            let x = if i % 2 == 0 {
                r.random_range(-5.0..5.0)
            } else {
                let sign = if i % 4 == 1 { 1.0 } else { -1.0 };
                sign * 10f64.powf(r.random_range(-30.0..1.0))
            };
            DType::F32.round_f64(x)
        })
        .collect();
    let got = compiled_erf(&data);
    let mut worst = (0.0f64, 0.0f64);
    for (&g, &v) in got.iter().zip(&data) {
        let err = erf_ulps(g, v);
        assert!(g.abs() <= 1.0, "erf({v:e}) = {g:e} is outside [-1, 1]");
        if err > worst.0 {
            worst = (err, v);
        }
    }
    assert!(worst.0 < 6.0, "erf({:e}) is {} ulps off", worst.1, worst.0);
}

/// The error of `erf(x)` (f32 `got`) in ulps of the f32 nearest libm's f64 `erf` (at least
/// the smallest normal's ulp, so subnormal results are held to their spacing).
fn erf_ulps(got: f64, x: f64) -> f64 {
    let want = libm::erf(x);
    let w = (want as f32).abs().max(f32::MIN_POSITIVE);
    let ulp = (f32::from_bits(w.to_bits() + 1) - w) as f64;
    (got - want).abs() / ulp
}

/// The least f32 whose `erf` rounds to 1.
const ERF_ONE_FROM: f32 = 3.919_206;

/// The edge values `check_erf_at_edges` runs: special values, and each table interval's
/// edges and their neighbours, both signs.
fn erf_edge_values() -> Vec<f32> {
    let mut xs: Vec<f32> = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(1),
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        1e-30,
        -1e-7,
        1e30,
        -f32::MAX,
        10.0,
    ];
    let mut edges = vec![3.84f32, 4.0, 8.0, ERF_ONE_FROM];
    for e in -5..=1 {
        for q in 0..4 {
            edges.push(2f32.powi(e) * (1.0 + q as f32 / 4.0));
        }
    }
    for b in edges {
        for v in [
            f32::from_bits(b.to_bits() - 1),
            b,
            f32::from_bits(b.to_bits() + 1),
        ] {
            xs.extend([v, -v]);
        }
    }
    xs
}

/// The lengths `check_erf_at_edges(offsets)` launches: the edge values rounded up to whole
/// 16-lane vectors, plus each offset.
fn erf_edge_lengths(offsets: std::ops::Range<usize>) -> impl Iterator<Item = usize> {
    let body = erf_edge_values().len().next_multiple_of(16);
    offsets.map(move |o| body + o)
}

fn check_erf_at_edges(offsets: std::ops::Range<usize>) {
    let xs = erf_edge_values();
    for n in erf_edge_lengths(offsets) {
        // Every value in a vector lane, then the first ones again in the remainder.
        let data: Vec<f64> = (0..n).map(|i| xs[i % xs.len()] as f64).collect();
        let got = compiled_erf(&data);
        for (i, (&g, &v)) in got.iter().zip(&data).enumerate() {
            let at = format!("erf({v:e}) = {g:e} (element {i} of {n})");
            if v.is_nan() {
                assert!(g.is_nan(), "{at}");
                continue;
            }
            assert!(g.abs() <= 1.0, "{at} is outside [-1, 1]");
            assert_eq!(
                (g as f32).is_sign_negative(),
                v.is_sign_negative(),
                "{at}: sign"
            );
            if v.abs() >= ERF_ONE_FROM as f64 {
                assert_eq!(g, v.signum(), "{at}");
            }
            assert!(erf_ulps(g, v) < 6.0, "{at} is {} ulps off", erf_ulps(g, v));
            // The same input has the same result in a vector lane and in a remainder.
            let first = got[i % xs.len()];
            assert_eq!(
                (g as f32).to_bits(),
                (first as f32).to_bits(),
                "{at}, not {first:e}"
            );
        }
    }
}

/// The `erf` kernel over `n` f32 elements.
fn erf_kernel(n: usize) -> tpukit::dsl::Kernel {
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [n])],
        outputs: vec![ArraySpec::new(DType::F32, [n])],
        ..Default::default()
    };
    erf_only(&spec).unwrap()
}

/// `erf` of f32 `data` through a compiled kernel on the CPU.
fn compiled_erf(data: &[f64]) -> Vec<f64> {
    let n = data.len();
    let x = HostArray::from_f64(DType::F32, &[n], data);
    launch(&erf_kernel(n), Device::Cpu, &[&x]).unwrap()[0].to_f64_vec()
}

pub fn elementwise_unary(device: Device) {
    type F = fn(f64) -> f64;
    let refs: [(&str, F); 13] = [
        ("exp", f64::exp),
        ("log", |x| x.abs().ln()),
        ("sqrt", |x| x.abs().sqrt()),
        ("rsqrt", |x| 1.0 / x.abs().sqrt()),
        ("tanh", f64::tanh),
        ("erf", erf_reference),
        ("sigmoid", |x| 1.0 / (1.0 + (-x).exp())),
        ("abs", f64::abs),
        ("neg", |x| -x),
        ("floor", f64::floor),
        ("sin", f64::sin),
        ("log1p", |x| x.abs().ln_1p()),
        ("exp2", f64::exp2),
    ];
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        let (m, n) = (19, 300);
        let spec = CallSpec {
            grid: grid2(8, 128),
            inputs: vec![tiles(dtype, 8, 128)],
            outputs: vec![tiles(dtype, 8, 128); 13],
            ..Default::default()
        };
        let k = unary_all(&spec).unwrap();
        let (x, xv) = random(&mut rng(1), dtype, &[m, n], -3.0, 3.0);
        let out = launch(&k, device, &[&x]).unwrap();
        for ((name, f), o) in refs.iter().zip(&out) {
            // The reference rounds its input's exact value; bf16/f16 results round once more.
            let want: Vec<f64> = xv.iter().map(|&v| dtype.round_f64(f(v))).collect();
            assert_close(
                &format!("{name} {dtype}"),
                &o.to_f64_vec(),
                &want,
                tol(dtype),
            );
        }
    }
}

/// erf by its Taylor series (|x| ≤ 3 here), independent of any libm.
///
/// (`transcendentals_at_special_values` uses libm's `erf` in f64 instead, for all ranges: the
/// backends' f32 `erf` is an approximation of their own, so libm is independent of it.)
fn erf_reference(x: f64) -> f64 {
    let (mut term, mut sum, mut k) = (x, x, 0.0);
    while term.abs() > 1e-17 * sum.abs().max(1e-300) {
        k += 1.0;
        term *= -x * x / k;
        sum += term / (2.0 * k + 1.0);
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[tpu_kernel]
fn binary_all(
    x: In,
    y: In,
    add: Out,
    sub: Out,
    mul: Out,
    div: Out,
    max: Out,
    min: Out,
    pow: Out,
    rem: Out,
) {
    let v = x[..];
    let w = y[..];
    add[..] = v + w;
    sub[..] = v - w;
    mul[..] = v * w;
    div[..] = v / w;
    max[..] = v.max(w);
    min[..] = v.min(w);
    pow[..] = v.abs().pow(w);
    rem[..] = v % w;
}

pub fn elementwise_binary(device: Device) {
    type F = fn(f64, f64) -> f64;
    let refs: [(&str, F); 8] = [
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("div", |a, b| a / b),
        ("max", f64::max),
        ("min", f64::min),
        ("pow", |a, b| a.abs().powf(b)),
        ("rem", |a, b| a % b),
    ];
    for dtype in [DType::F32, DType::BF16] {
        let spec = CallSpec {
            grid: grid2(8, 128),
            inputs: vec![tiles(dtype, 8, 128); 2],
            outputs: vec![tiles(dtype, 8, 128); 8],
            ..Default::default()
        };
        let k = binary_all(&spec).unwrap();
        let mut r = rng(2);
        let (x, xv) = random(&mut r, dtype, &[13, 130], -4.0, 4.0);
        let (y, yv) = random(&mut r, dtype, &[13, 130], 0.5, 3.0);
        let out = launch(&k, device, &[&x, &y]).unwrap();
        for ((name, f), o) in refs.iter().zip(&out) {
            let want: Vec<f64> = xv
                .iter()
                .zip(&yv)
                .map(|(&a, &b)| dtype.round_f64(f(a, b)))
                .collect();
            assert_close(
                &format!("{name} {dtype}"),
                &o.to_f64_vec(),
                &want,
                tol(dtype),
            );
        }
    }
}

#[tpu_kernel]
fn int_ops(x: In, y: In, add: Out, mul: Out, div: Out, rem: Out, and: Out, lt: Out) {
    let v = x[..];
    let w = y[..];
    add[..] = v + w;
    mul[..] = v * w;
    div[..] = v / w;
    rem[..] = v % w;
    and[..] = v & w;
    lt[..] = (v < w).cast(i32);
}

pub fn integer_arithmetic_wraps_and_truncates(device: Device) {
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("n", 128))],
        inputs: vec![ArraySpec::new(DType::I32, ["n"]).blocked([128], [grid(0)]); 2],
        outputs: vec![ArraySpec::new(DType::I32, ["n"]).blocked([128], [grid(0)]); 6],
        ..Default::default()
    };
    let k = int_ops(&spec).unwrap();
    let mut r = rng(3);
    let (x, xv) = random(&mut r, DType::I32, &[200], -2e9, 2e9);
    let (_, mut yv) = random(&mut r, DType::I32, &[200], 1.0, 1e5);
    yv[7] = 0.0; // division by zero is defined: quotient 0, remainder the dividend
    let y = HostArray::from_f64(DType::I32, &[200], &yv);
    let out = launch(&k, device, &[&x, &y]).unwrap();
    let pairs = xv.iter().zip(&yv).map(|(&a, &b)| (a as i32, b as i32));
    let want: [Vec<i32>; 6] = [
        pairs.clone().map(|(a, b)| a.wrapping_add(b)).collect(),
        pairs.clone().map(|(a, b)| a.wrapping_mul(b)).collect(),
        pairs
            .clone()
            .map(|(a, b)| a.checked_div(b).unwrap_or(0))
            .collect(),
        pairs
            .clone()
            .map(|(a, b)| if b == 0 { a } else { a % b })
            .collect(),
        pairs.clone().map(|(a, b)| a & b).collect(),
        pairs.map(|(a, b)| (a < b) as i32).collect(),
    ];
    for (i, (o, w)) in out.iter().zip(want).enumerate() {
        assert_eq!(
            o.as_i32().unwrap().iter().copied().collect::<Vec<_>>(),
            w,
            "output {i}"
        );
    }
}

#[tpu_kernel]
fn shift_ops(x: In, s: In, shl: Out, shr: Out, shr_logical: Out) {
    let v = x[..];
    let k = s[..];
    let mut w = v;
    w <<= k;
    shl[..] = w;
    shr[..] = v >> k;
    shr_logical[..] = v.shr_logical(k);
}

/// `<<`, `>>` (arithmetic) and `shr_logical` on i32, with amounts the IR defines past Rust's:
/// negative or at least 32 (read as unsigned) shift every bit out (XLA's semantics).
pub fn shifts_are_defined_past_the_width(device: Device) {
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("n", 128))],
        inputs: vec![ArraySpec::new(DType::I32, ["n"]).blocked([128], [grid(0)]); 2],
        outputs: vec![ArraySpec::new(DType::I32, ["n"]).blocked([128], [grid(0)]); 3],
        ..Default::default()
    };
    let k = shift_ops(&spec).unwrap();
    let mut r = rng(5);
    let (x, xv) = random(&mut r, DType::I32, &[300], -2e9, 2e9);
    let (s, sv) = random(&mut r, DType::I32, &[300], -4.0, 40.0);
    let out = launch(&k, device, &[&x, &s]).unwrap();
    let pairs = xv
        .iter()
        .zip(&sv)
        .map(|(&a, &b)| (a as i32, b as i32 as u32));
    let want: [Vec<i32>; 3] = [
        pairs
            .clone()
            .map(|(a, k)| a.checked_shl(k).unwrap_or(0))
            .collect(),
        pairs.clone().map(|(a, k)| a >> k.min(31)).collect(),
        pairs
            .map(|(a, k)| (a as u32).checked_shr(k).unwrap_or(0) as i32)
            .collect(),
    ];
    for (i, (o, w)) in out.iter().zip(want).enumerate() {
        assert_eq!(
            o.as_i32().unwrap().iter().copied().collect::<Vec<_>>(),
            w,
            "output {i}"
        );
    }
}

#[tpu_kernel]
fn int16_ops(
    x: In,
    y: In,
    s: In,
    f: In,
    wrapped: Out,
    ratio: Out,
    shifts: Out,
    cmp: Out,
    conv: Out,
    rows: Out,
) {
    let a = x[..];
    let b = y[..];
    let k = s[..];
    wrapped[..] = (a + b) ^ (a * b) ^ (a - b);
    ratio[..] = (a / b) ^ (a % b) ^ a.max(b) ^ a.min(b);
    shifts[..] = (a << k) ^ (a >> k) ^ a.shr_logical(k);
    cmp[..] = where_(a < b, a, -b);
    let back = a.cast(f32).cast(i16) ^ a.cast(i8).cast(i16) ^ a.cast(i32).cast(i16);
    conv[..] = f[..].cast(i16) ^ back ^ (a.cast(bf16) * 2.0).cast(i32).cast(i16);
    let r = a.sum_keepdims(1) ^ a.reduce_max_keepdims(1) ^ a.reduce_min_keepdims(1);
    rows[..] = r.broadcast_to([8, 128]);
}

/// i16 with exact integer semantics, against Rust's i16 arithmetic: wrapping `+ - *`, `/` and
/// `%` truncating (`MIN / -1` wraps, by zero gives 0 and the dividend), shifts defined past
/// the width, signed compares, conversions (f32 → i16 truncating and saturating, NaN → 0; i8
/// wrapping), and reductions whose sums wrap.
pub fn int16_is_exact(device: Device) {
    let (m, n) = (21, 200);
    let spec = CallSpec {
        grid: grid2(8, 128),
        inputs: [DType::I16, DType::I16, DType::I16, DType::F32]
            .map(|d| tiles(d, 8, 128))
            .to_vec(),
        outputs: vec![tiles(DType::I16, 8, 128); 6],
        ..Default::default()
    };
    let k = int16_ops(&spec).unwrap();
    let mut r = rng(16);
    let (_, mut xv) = random(&mut r, DType::I16, &[m, n], -32768.0, 32767.0);
    let (_, mut yv) = random(&mut r, DType::I16, &[m, n], -32768.0, 32767.0);
    let (s, sv) = random(&mut r, DType::I16, &[m, n], -3.0, 40.0);
    let (_, mut fv) = random(&mut r, DType::F32, &[m, n], -1e5, 1e5);
    xv[..4].copy_from_slice(&[-32768.0, -32768.0, 7.0, 32767.0]);
    yv[..4].copy_from_slice(&[-1.0, 0.0, 0.0, 32767.0]);
    fv[..5].copy_from_slice(&[f64::NAN, f64::INFINITY, -3e4 - 0.5, 40000.0, -0.99]);
    let x = HostArray::from_f64(DType::I16, &[m, n], &xv);
    let y = HostArray::from_f64(DType::I16, &[m, n], &yv);
    let f = HostArray::from_f64(DType::F32, &[m, n], &fv);
    let out = launch(&k, device, &[&x, &y, &s, &f]).unwrap();
    let at = |i: usize, j: usize| {
        if i < m && j < n {
            xv[i * n + j] as i16
        } else {
            0
        }
    }; // fill 0
    let bf16 = |a: i16| tpukit::dsl::bf16::from_f32(a as f32).to_f32();
    let mut want: [Vec<i16>; 6] = Default::default();
    for i in 0..m {
        for j in 0..n {
            let (a, b, sh) = (
                xv[i * n + j] as i16,
                yv[i * n + j] as i16,
                sv[i * n + j] as i16,
            );
            let k = sh as u16 as u32;
            want[0].push(a.wrapping_add(b) ^ a.wrapping_mul(b) ^ a.wrapping_sub(b));
            let (div, rem) = match b {
                0 => (0, a),
                _ => (a.wrapping_div(b), a.wrapping_rem(b)),
            };
            want[1].push(div ^ rem ^ a.max(b) ^ a.min(b));
            let shl = if k >= 16 { 0 } else { a << k };
            let shr_l = if k >= 16 { 0 } else { ((a as u16) >> k) as i16 };
            want[2].push(shl ^ (a >> k.min(15)) ^ shr_l);
            want[3].push(if a < b { a } else { b.wrapping_neg() });
            let doubled = (bf16(a) * 2.0) as i32 as i16;
            want[4].push((fv[i * n + j] as f32 as i16) ^ a ^ (a as i8 as i16) ^ a ^ doubled);
            let row = (0..128).map(|c| at(i, j / 128 * 128 + c));
            let sum = row.clone().fold(0i16, i16::wrapping_add);
            want[5].push(sum ^ row.clone().max().unwrap() ^ row.min().unwrap());
        }
    }
    let names = ["wrapped", "ratio", "shifts", "cmp", "conv", "rows"];
    for ((o, w), name) in out.iter().zip(want).zip(names) {
        assert_eq!(
            o.as_i16().unwrap().iter().copied().collect::<Vec<_>>(),
            w,
            "{name}"
        );
    }
}

#[tpu_kernel]
fn casts(x: In, bf: Out, int: Out, byte: Out, flag: Out) {
    let v = x[..];
    bf[..] = v.cast(bf16);
    int[..] = v.cast(i32);
    byte[..] = v.cast(i32).cast(i8);
    flag[..] = v.cast(bool);
}

pub fn casts_round_truncate_saturate_and_wrap(device: Device) {
    let n = 300;
    let v = |d| ArraySpec::new(d, ["n"]).blocked([128], [grid(0)]);
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("n", 128))],
        inputs: vec![v(DType::F32)],
        outputs: vec![v(DType::BF16), v(DType::I32), v(DType::I8), v(DType::Bool)],
        ..Default::default()
    };
    let k = casts(&spec).unwrap();
    let mut data: Vec<f64> = random(&mut rng(4), DType::F32, &[n - 4], -300.0, 300.0).1;
    data.extend([3e10, -3e10, f64::NAN, 0.0]);
    let x = HostArray::from_f64(DType::F32, &[n], &data);
    let out = launch(&k, device, &[&x]).unwrap();
    for (i, &d) in data.iter().enumerate() {
        let f = d as f32;
        assert_eq!(
            out[0].as_bf16().unwrap()[i].to_bits(),
            tpukit::dsl::bf16::from_f32(f).to_bits(),
            "bf16 of {f}"
        );
        assert_eq!(out[1].as_i32().unwrap()[i], f as i32, "i32 of {f}");
        assert_eq!(out[2].as_i8().unwrap()[i], (f as i32) as i8, "i8 of {f}");
        assert_eq!(out[3].as_bool().unwrap()[i], f != 0.0, "bool of {f}");
    }
}

/// f32 bit patterns rounded to bf16: `bf` is the cast (rounded in memory form), `half` the
/// bf16 product `bf · 0.5` (rounded in register form, then stored).
const BF16_ROUNDING: &str = "kernel @bf16_rounding grid() {
  input %bits: i32[1000]
  output %bf: bf16[1000]
  output %half: bf16[1000]
body {
  %0 = load %bits[ds(0, 1000)] : i32[1000]
  %1 = bitcast %0 : f32[1000]
  %2 = cast %1 : bf16[1000]
  store %bf[ds(0, 1000)], %2
  %3 = const 0.5 : bf16[1000]
  %4 = mul %2, %3 : bf16[1000]
  store %half[ds(0, 1000)], %4
  yield
}
";

/// Rounding f32 to bf16 is to nearest, ties to even, bit for bit as `half` rounds, on every
/// kind of value: subnormals (which AVX-512 BF16's `vcvtneps2bf16` alone would flush to
/// zero), ties between subnormals and up to the smallest normal, ties of normals, overflow to
/// infinity, NaNs with payloads (kept NaN, quietened) and random bit patterns, a fifth of them
/// subnormal; 1000 elements, so vectors mix normals and subnormals and a remainder is left.
pub fn bf16_rounding_is_exact(device: Device) {
    let k = tpukit::dsl::parse_kernel(BF16_ROUNDING).unwrap();
    let special: [u32; 38] = [
        0x0000_0000,
        0x8000_0000,
        0x0000_0001,
        0x0000_7fff,
        0x0000_8000,
        0x0000_8001,
        0x0001_8000,
        0x0001_7fff,
        0x0040_0000,
        0x007f_7fff,
        0x007f_8000,
        0x007f_ffff,
        0x8000_0001,
        0x8000_8001,
        0x8001_8000,
        0x807f_ffff,
        0x0080_0000,
        0x0080_8000,
        0x0081_8000,
        0x3f80_8000,
        0x3f81_8000,
        0x3f80_8001,
        0xbf18_8001,
        0x7f7f_7fff,
        0x7f7f_8000,
        0x7f7f_ffff,
        0xff7f_ffff,
        0x7f80_0000,
        0xff80_0000,
        0x7f80_0001,
        0xff80_0001,
        0x7fc0_0000,
        0x7fff_ffff,
        0xffc0_0001,
        0x7f81_ffff,
        0x7fbf_ffff,
        0x3f80_0000,
        0x0000_ffff,
    ];
    let mut r = rng(27);
    let mut bits: Vec<u32> = special.to_vec();
    while bits.len() < 1000 {
        let b: u32 = r.random();
        bits.push(if r.random_range(0..5) == 0 {
            b & 0x807f_ffff
        } else {
            b
        });
    }
    let x = HostArray::from_f64(
        DType::I32,
        &[1000],
        &bits.iter().map(|&b| b as i32 as f64).collect::<Vec<_>>(),
    );
    let out = launch(&k, device, &[&x]).unwrap();
    let (bf, half) = (out[0].as_bf16().unwrap(), out[1].as_bf16().unwrap());
    for (i, &b) in bits.iter().enumerate() {
        let want = tpukit::dsl::bf16::from_f32(f32::from_bits(b));
        assert_eq!(bf[i].to_bits(), want.to_bits(), "bf16 of {b:#010x}");
        let want = tpukit::dsl::bf16::from_f32(want.to_f32() * 0.5);
        let got = half[i];
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "bf16 of {b:#010x} times 0.5: got {:#06x}, want {:#06x}",
            got.to_bits(),
            want.to_bits()
        );
    }
}

/// Elementwise `max`/`min` of two vectors and row maxima/minima.
const MIN_MAX: &str = "kernel @min_max grid() {
  input %a: f32[1000]
  input %b: f32[1000]
  input %rows: f32[8,300]
  output %mx: f32[1000]
  output %mn: f32[1000]
  output %rmax: f32[8]
  output %rmin: f32[8]
body {
  %0 = load %a[ds(0, 1000)] : f32[1000]
  %1 = load %b[ds(0, 1000)] : f32[1000]
  %2 = max %0, %1 : f32[1000]
  store %mx[ds(0, 1000)], %2
  %3 = min %0, %1 : f32[1000]
  store %mn[ds(0, 1000)], %3
  %4 = load %rows[ds(0, 8), ds(0, 300)] : f32[8,300]
  %5 = reduce_max %4 [1] : f32[8]
  store %rmax[ds(0, 8)], %5
  %6 = reduce_min %4 [1] : f32[8]
  store %rmin[ds(0, 8)], %6
  yield
}
";

/// IEEE `maximum` (`largest` true) or `minimum`: NaN if either is, −0 < +0.
fn ieee_max_min(x: f64, y: f64, largest: bool) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && y == 0.0 {
        let negative = if largest {
            x.is_sign_negative() && y.is_sign_negative()
        } else {
            x.is_sign_negative() || y.is_sign_negative()
        };
        if negative { -0.0 } else { 0.0 }
    } else if largest {
        x.max(y)
    } else {
        x.min(y)
    }
}

/// `max`, `min`, `reduce_max` and `reduce_min` of f32 propagate NaN from either operand and
/// (compiled) order −0 below +0 (the IR's `arith.maximumf`), bit for bit, on every pair of
/// special values and on random data with NaNs and zeros in vector lanes and remainders.
pub fn max_min_propagate_nan_and_order_zeros(device: Device) {
    let k = tpukit::dsl::parse_kernel(MIN_MAX).unwrap();
    let special = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-40,
        -1e-40,
        3.4e38,
        -2.5,
        2.5,
    ];
    let special = special.map(|x| DType::F32.round_f64(x));
    let mut r = rng(29);
    let pick = |r: &mut rand::rngs::StdRng| {
        if r.random_range(0..4) == 0 {
            special[r.random_range(0..special.len())]
        } else {
            DType::F32.round_f64(r.random_range(-10.0..10.0))
        }
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &x in &special {
        for &y in &special {
            a.push(x);
            b.push(y);
        }
    }
    while a.len() < 1000 {
        a.push(pick(&mut r));
        b.push(pick(&mut r));
    }
    let mut rows: Vec<f64> = (0..8 * 300)
        .map(|_| DType::F32.round_f64(r.random_range(-10.0..-1.0)))
        .collect();
    rows[300 + 5] = f64::NAN;
    rows[2 * 300 + 299] = f64::NAN;
    rows[3 * 300..4 * 300].fill(-0.0);
    rows[3 * 300 + 150] = 0.0;
    rows[4 * 300..5 * 300].fill(-0.0);
    rows[5 * 300 + 17] = 0.0;
    rows[5 * 300 + 200] = -0.0;
    rows[6 * 300..7 * 300].fill(0.0);
    rows[6 * 300 + 298] = -0.0;
    rows[7 * 300..8 * 300].fill(f64::NAN);
    let arrays = [
        HostArray::from_f64(DType::F32, &[1000], &a),
        HostArray::from_f64(DType::F32, &[1000], &b),
        HostArray::from_f64(DType::F32, &[8, 300], &rows),
    ];
    let out = launch(&k, device, &arrays.iter().collect::<Vec<_>>()).unwrap();
    // The interpreter leaves the sign of max(−0, +0) open (Rust's `f64::max`); the compiled
    // backend orders it, as `arith.maximumf` does.
    let signed = device == Device::Cpu;
    let same = |g: f64, w: f64| {
        (g.is_nan() && w.is_nan())
            || g.to_bits() == w.to_bits()
            || (!signed && g == 0.0 && w == 0.0)
    };
    for (o, largest) in [(0, true), (1, false)] {
        let got = out[o].to_f64_vec();
        for i in 0..1000 {
            let want = ieee_max_min(a[i], b[i], largest);
            assert!(
                same(got[i], want),
                "{} of {:e}, {:e}: got {:e}, want {want:e}",
                if largest { "max" } else { "min" },
                a[i],
                b[i],
                got[i]
            );
        }
    }
    for (o, largest) in [(2, true), (3, false)] {
        let got = out[o].to_f64_vec();
        for (row, &g) in got.iter().enumerate() {
            let r = &rows[row * 300..(row + 1) * 300];
            let want = r[1..]
                .iter()
                .fold(r[0], |m, &x| ieee_max_min(m, x, largest));
            assert!(
                same(g, want),
                "row {row} (largest: {largest}): got {g:e}, want {want:e}"
            );
        }
    }
}

#[tpu_kernel]
fn shapes(x: In, rows: Out, cols: Out, tr: Out, masked: Out) {
    let v = x[..];
    rows[..] = v.sum_keepdims(1).broadcast_to([8, 128]) + v.reduce_max(0).reshape([1, 128]);
    cols[..] = v.reduce_min_keepdims(-1) * 2.0;
    tr[..] = v.t().t() + iota(i32, [8, 128], 1).cast(f32);
    let inside = iota(i32, [8, 128], 1) + program_id(1) * 128 < dim(x, 1);
    masked[..] = where_(inside, v, -1.0);
}

pub fn reductions_broadcasts_transposes_and_iota(device: Device) {
    let (m, n) = (21, 200);
    let spec = CallSpec {
        grid: grid2(8, 128),
        inputs: vec![tiles(DType::F32, 8, 128)],
        outputs: vec![tiles(DType::F32, 8, 128); 4],
        ..Default::default()
    };
    let k = shapes(&spec).unwrap();
    let (x, xv) = random(&mut rng(5), DType::F32, &[m, n], -2.0, 2.0);
    let out = launch(&k, device, &[&x]).unwrap();
    let at = |i: usize, j: usize| if i < m && j < n { xv[i * n + j] } else { 0.0 }; // fill is 0
    let (mut rows, mut cols, mut tr, mut masked) = (vec![], vec![], vec![], vec![]);
    for i in 0..m {
        for j in 0..n {
            let (bi, bj) = (i / 8 * 8, j / 128 * 128);
            let row_sum: f64 = (0..128).map(|c| at(i, bj + c)).sum();
            let col_max = (0..8)
                .map(|r| at(bi + r, j))
                .fold(f64::NEG_INFINITY, f64::max);
            let row_min = (0..128)
                .map(|c| at(i, bj + c))
                .fold(f64::INFINITY, f64::min);
            rows.push(DType::F32.round_f64(row_sum + col_max));
            cols.push(row_min * 2.0);
            tr.push(DType::F32.round_f64(at(i, j) + (j - bj) as f64));
            masked.push(at(i, j));
        }
    }
    // The sum accumulates 128 terms of magnitude <= 2 in f32 (in any order): its error is
    // about sqrt(128) * 2^-24 * sum|x|, a few 1e-6.
    assert_close(
        "sum_keepdims + reduce_max",
        &out[0].to_f64_vec(),
        &rows,
        2e-5,
    );
    assert_close("reduce_min_keepdims", &out[1].to_f64_vec(), &cols, 0.0);
    assert_close("transpose + iota", &out[2].to_f64_vec(), &tr, 0.0);
    assert_close("where over iota < dim", &out[3].to_f64_vec(), &masked, 0.0);
}

#[tpu_kernel]
fn transposed(x: In, o: Out) {
    o[..] = x[..].t() * 2.0 + iota(i32, [21, 37], 0).cast(f32);
}

/// A store of a transposed value runs in tiles on the CPU: shapes off the tile size (21x37,
/// 16-element tiles) must still write every element once, from the right source element.
pub fn transposed_stores_off_the_tiles(device: Device) {
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [37usize, 21])],
        outputs: vec![ArraySpec::new(DType::F32, [21usize, 37])],
        ..Default::default()
    };
    let k = transposed(&spec).unwrap();
    let (x, xv) = random(&mut rng(9), DType::F32, &[37, 21], -2.0, 2.0);
    let out = launch(&k, device, &[&x]).unwrap();
    let want: Vec<f64> = (0..21 * 37)
        .map(|e| {
            let (i, j) = (e / 37, e % 37);
            DType::F32.round_f64(xv[j * 21 + i] * 2.0 + i as f64)
        })
        .collect();
    assert_close("2·xᵀ + iota", &out[0].to_f64_vec(), &want, 0.0);
}

#[tpu_kernel]
fn dots(a: In, b: In, ab: Out, abt: Out, atb: Out, atbt: Out) {
    ab[..] = dot(a[..], b[..]);
    abt[..] = dot_t(a[..], b[..].t());
    // `aᵀ @ b` and `aᵀ @ bᵀ` of the transposed operands: `a @ b` again.
    atb[..] = dot_general(a[..].t(), b[..], 0, 0);
    atbt[..] = dot_general(a[..].t(), b[..].t(), 0, 1);
}

pub fn dot_accumulates_in_f32(device: Device) {
    for dtype in [DType::F32, DType::BF16] {
        let (m, k, n) = (16, 64, 16);
        let w = |r: usize, c: usize| ArraySpec::new(dtype, [r, c]);
        let spec = CallSpec {
            inputs: vec![w(m, k), w(k, n)],
            outputs: vec![ArraySpec::new(DType::F32, [m, n]); 4],
            ..Default::default()
        };
        let kern = dots(&spec).unwrap();
        let mut r = rng(6);
        let (a, av) = random(&mut r, dtype, &[m, k], -1.0, 1.0);
        let (b, bv) = random(&mut r, dtype, &[k, n], -1.0, 1.0);
        let out = launch(&kern, device, &[&a, &b]).unwrap();
        let want: Vec<f64> = (0..m * n)
            .map(|ij| {
                (0..k)
                    .map(|p| av[ij / n * k + p] * bv[p * n + ij % n])
                    .sum()
            })
            .collect();
        assert_close(&format!("dot {dtype}"), &out[0].to_f64_vec(), &want, 1e-6);
        assert_close(&format!("dot_t {dtype}"), &out[1].to_f64_vec(), &want, 1e-6);
        assert_close(&format!("aᵀ·b {dtype}"), &out[2].to_f64_vec(), &want, 1e-6);
        assert_close(&format!("aᵀ·bᵀ {dtype}"), &out[3].to_f64_vec(), &want, 1e-6);
    }
}

#[tpu_kernel]
fn batched(a: In, b: In, o: Out) {
    o[..] = dot(a[..], b[..]);
}

pub fn batched_dot(device: Device) {
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("b", 2))],
        inputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("b"), 8.into(), 32.into()])
                .blocked([2, 8, 32], [grid(0), 0.into(), 0.into()]),
            ArraySpec::new(DType::F32, [Dim::sym("b"), 32.into(), 16.into()])
                .blocked([2, 32, 16], [grid(0), 0.into(), 0.into()]),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("b"), 8.into(), 16.into()])
                .blocked([2, 8, 16], [grid(0), 0.into(), 0.into()]),
        ],
        ..Default::default()
    };
    let k = batched(&spec).unwrap();
    let mut r = rng(7);
    let nb = 5;
    let (a, av) = random(&mut r, DType::F32, &[nb, 8, 32], -1.0, 1.0);
    let (b, bv) = random(&mut r, DType::F32, &[nb, 32, 16], -1.0, 1.0);
    let out = launch(&k, device, &[&a, &b]).unwrap();
    let want: Vec<f64> = (0..nb * 8 * 16)
        .map(|e| {
            let (z, i, j) = (e / 128, e / 16 % 8, e % 16);
            DType::F32.round_f64(
                (0..32)
                    .map(|p| av[z * 256 + i * 32 + p] * bv[z * 512 + p * 16 + j])
                    .sum(),
            )
        })
        .collect();
    assert_close("batched dot", &out[0].to_f64_vec(), &want, 1e-6);
}

#[tpu_kernel]
fn loops(x: In, o: Out, peak: Out) {
    let mut acc = zeros(f32, [8, 128]);
    let mut hi = full(f32, [8, 128], -1000.0);
    for j in (0..4).step_by(1) {
        let chunk = x[(.., ds(j * 128, 128))];
        acc = acc + chunk;
        if j % 2 == 0 {
            hi = hi.max(chunk);
        }
    }
    o[..] = acc;
    peak[..] = hi;
}

pub fn for_loops_carry_values_through_ifs(device: Device) {
    let m = 11;
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", 8))],
        inputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), 512.into()])
                .blocked([8, 512], [grid(0), 0.into()]),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), 128.into()])
                .blocked([8, 128], [grid(0), 0.into()]);
            2
        ],
        ..Default::default()
    };
    let k = loops(&spec).unwrap();
    let (x, xv) = random(&mut rng(8), DType::F32, &[m, 512], -5.0, 5.0);
    let out = launch(&k, device, &[&x]).unwrap();
    let (mut sum, mut peak) = (vec![], vec![]);
    for i in 0..m {
        for c in 0..128 {
            let chunk = |j: usize| xv[i * 512 + j * 128 + c];
            sum.push(
                DType::F32.round_f64((0..4).fold(0.0, |a, j| DType::F32.round_f64(a + chunk(j)))),
            );
            peak.push([0, 2].iter().fold(-1000.0f64, |a, &j| a.max(chunk(j))));
        }
    }
    assert_close("sum over chunks", &out[0].to_f64_vec(), &sum, 0.0);
    assert_close("max over even chunks", &out[1].to_f64_vec(), &peak, 0.0);
}

/// Data-dependent loops: each 8-row block of `x` is doubled until its largest magnitude
/// reaches 100 (counting the doublings), then `count[i]` ones are added to block `i`.
#[tpu_kernel]
fn doubling(count: Prefetch, x: In, o: Out, steps: Out) {
    let mut v = x[..];
    let mut n = 0;
    while v.abs().reduce_max([0, 1]) < 100.0 {
        v = v * 2.0;
        n = n + 1;
    }
    let mut i = 0;
    while i < count[program_id(0)] {
        v = v + 1.0;
        i = i + 1;
    }
    o[..] = v;
    steps[..] = zeros(i32, [8, 128]) + n;
}

pub fn while_loops_run_until_their_data_says_stop(device: Device) {
    let m = 27; // four blocks, the last overhanging: it reads fill 0.0 there
    let block = |dtype| {
        ArraySpec::new(dtype, [Dim::sym("m"), 128.into()]).blocked([8, 128], [grid(0), 0.into()])
    };
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", 8))],
        prefetch: vec![ArraySpec::new(DType::I32, [4usize])],
        inputs: vec![block(DType::F32)],
        outputs: vec![block(DType::F32), block(DType::I32)],
        ..Default::default()
    };
    let k = doubling(&spec).unwrap();
    let mut r = rng(12);
    let (x, xv) = random(&mut r, DType::F32, &[m, 128], -0.5, 0.5);
    let (count, cv) = random(&mut r, DType::I32, &[4], 0.0, 5.0);
    let out = launch(&k, device, &[&count, &x]).unwrap();
    let (mut want, mut want_steps) = (vec![], vec![]);
    for (b, &count) in cv.iter().enumerate() {
        let rows = 8 * b..(8 * b + 8).min(m);
        let peak = rows
            .clone()
            .flat_map(|i| &xv[i * 128..][..128])
            .fold(0.0f64, |a, v| a.max(v.abs()));
        let steps = (0..).find(|&s| peak * 2f64.powi(s) >= 100.0).unwrap();
        for i in rows {
            for c in 0..128 {
                let v = DType::F32.round_f64(xv[i * 128 + c] * 2f64.powi(steps));
                want.push((0..count as i32).fold(v, |a, _| DType::F32.round_f64(a + 1.0)));
                want_steps.push(f64::from(steps));
            }
        }
    }
    assert_close(
        "doubled, then counted ones added",
        &out[0].to_f64_vec(),
        &want,
        0.0,
    );
    assert_close("doublings", &out[1].to_f64_vec(), &want_steps, 0.0);
}

pub fn dma_copies_and_semaphores_from_the_macro(device: Device) {
    let k = dma_rows(&dma_rows_spec(32)).unwrap();
    let (x, xv) = random(&mut rng(13), DType::F32, &[32, 128], -4.0, 4.0);
    let out = launch(&k, device, &[&x]).unwrap();
    let want: Vec<f64> = xv
        .iter()
        .map(|v| DType::F32.round_f64(v * 2.0 + 2.0))
        .collect();
    assert_close("rows copied by DMA", &out[0].to_f64_vec(), &want, 0.0);
}

/// A copy started on a DMA semaphore output and handed to the caller, and a regular
/// semaphore output left holding a count (`tpukit_dsl::dma`): the counts are the results.
#[tpu_kernel]
fn hand_over(x: In, o: Out, sems: Out, count: Out) {
    dma_start(x[..], o[..], sems[1]);
    semaphore_signal(count[0], 3);
}

pub fn semaphore_outputs_from_the_macro(device: Device) {
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [8, 128]).any()],
        outputs: vec![
            ArraySpec::new(DType::F32, [8, 128]).any(),
            ArraySpec::semaphores(SemaphoreKind::Dma, [2]),
            ArraySpec::semaphores(SemaphoreKind::Regular, [1]),
        ],
        ..Default::default()
    };
    let k = hand_over(&spec).unwrap();
    let (x, xv) = random(&mut rng(14), DType::F32, &[8, 128], -4.0, 4.0);
    let out = launch(&k, device, &[&x]).unwrap();
    assert_close("copied", &out[0].to_f64_vec(), &xv, 0.0);
    assert_eq!(out[1].to_f64_vec(), vec![0.0, 4096.0], "bytes in flight");
    assert_eq!(out[2].to_f64_vec(), vec![3.0], "regular count");
}

/// An index map reading the grid's extent: step `i` reads block `num_programs - 1 - i`.
pub fn index_maps_read_the_grid_extent(device: Device) {
    let row = [BlockDim::Blocked(8), BlockDim::Blocked(128)];
    let back = IndexExpr::NumPrograms(0) - 1 - grid(0);
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("k", 8))],
        inputs: vec![
            ArraySpec::new(DType::F32, [Dim::from("k"), Dim::from(128)])
                .blocked(row, [back, 0.into()]),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [Dim::from("k"), Dim::from(128)])
                .blocked(row, [grid(0), 0.into()]),
        ],
        ..Default::default()
    };
    let k = copy_rows(&spec).unwrap();
    let (x, xv) = random(&mut rng(15), DType::F32, &[24, 128], -1.0, 1.0);
    let out = launch(&k, device, &[&x]).unwrap();
    let want: Vec<f64> = (0..3)
        .flat_map(|i| xv[(2 - i) * 1024..][..1024].to_vec())
        .collect();
    assert_close("reversed blocks", &out[0].to_f64_vec(), &want, 0.0);
}

#[tpu_kernel]
fn masked(x: In, o: Out) {
    let keep = x[..] > 0.0;
    let v = load(x, (..,), keep, 7.0);
    store(o, (..,), v * 2.0, keep);
}

pub fn masked_loads_and_stores(device: Device) {
    let v = ArraySpec::new(DType::F32, ["n"]).blocked([128], [grid(0)]);
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("n", 128))],
        inputs: vec![v.clone()],
        outputs: vec![v],
        ..Default::default()
    };
    let k = masked(&spec).unwrap();
    let n = 250;
    let (x, xv) = random(&mut rng(9), DType::F32, &[n], -1.0, 1.0);
    let mut outs = vec![HostArray::from_f64(DType::F32, &[n], &vec![5.0; n])];
    launch_into(&k, device, &[&x], &mut outs).unwrap();
    let want: Vec<f64> = xv
        .iter()
        .map(|&v| if v > 0.0 { 2.0 * v } else { 5.0 })
        .collect();
    assert_close(
        "masked store keeps the caller's values",
        &outs[0].to_f64_vec(),
        &want,
        0.0,
    );
}

#[tpu_kernel]
fn gather(idx: Prefetch, table: In, o: Out) {
    o[..] = table[..] + (program_id(0) * 0).cast(f32);
}

pub fn scalar_prefetch_drives_the_index_map(device: Device) {
    let row = [BlockDim::Squeezed, BlockDim::Blocked(128)];
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("k", 1)),
            GridAxis::parallel(Extent::cdiv("d", 128)),
        ],
        prefetch: vec![ArraySpec::new(DType::I32, ["k"])],
        inputs: vec![
            ArraySpec::new(DType::F32, ["rows", "d"])
                .blocked(row, [prefetch(0, [grid(0)]), grid(1)]),
        ],
        outputs: vec![ArraySpec::new(DType::F32, ["k", "d"]).blocked(row, [grid(0), grid(1)])],
        ..Default::default()
    };
    let k = gather(&spec).unwrap();
    let mut r = rng(10);
    let (table, tv) = random(&mut r, DType::F32, &[40, 200], -1.0, 1.0);
    let (idx, iv) = random(&mut r, DType::I32, &[9], 0.0, 40.0);
    let out = launch(&k, device, &[&idx, &table]).unwrap();
    let want: Vec<f64> = iv
        .iter()
        .flat_map(|&i| tv[i as usize * 200..][..200].to_vec())
        .collect();
    assert_close("gather", &out[0].to_f64_vec(), &want, 0.0);
}

#[tpu_kernel]
fn copy_rows(table: In, o: Out) {
    o[..] = table[..];
}

/// An index map of comparisons (1 or 0), `&`, `max` and a select: output row `i` copies row
/// `i / 2` for even `i >= 2` and row `max(8 - i, 0) + 30` otherwise.
pub fn index_maps_compare_and_select(device: Device) {
    let row = [BlockDim::Squeezed, BlockDim::Blocked(128)];
    let i = || grid(0);
    let even_past_one = (i() % 2).compare(CmpOp::Eq, 0) & i().compare(CmpOp::Ge, 2);
    let source = even_past_one.select(i() / 2, (IndexExpr::from(8) - i()).max(0) + 30);
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("k", 1)),
            GridAxis::parallel(Extent::cdiv("d", 128)),
        ],
        inputs: vec![ArraySpec::new(DType::F32, ["rows", "d"]).blocked(row, [source, grid(1)])],
        outputs: vec![ArraySpec::new(DType::F32, ["k", "d"]).blocked(row, [grid(0), grid(1)])],
        ..Default::default()
    };
    let k = copy_rows(&spec).unwrap();
    let (table, tv) = random(&mut rng(11), DType::F32, &[40, 200], -1.0, 1.0);
    let mut outs = vec![HostArray::from_f64(DType::F32, &[12, 200], &[0.0; 2400])];
    launch_into(&k, device, &[&table], &mut outs).unwrap();
    let want: Vec<f64> = (0..12usize)
        .flat_map(|i| {
            let r = if i % 2 == 0 && i >= 2 {
                i / 2
            } else {
                8usize.saturating_sub(i) + 30
            };
            tv[r * 200..][..200].to_vec()
        })
        .collect();
    assert_close("rows", &outs[0].to_f64_vec(), &want, 0.0);
}

#[tpu_kernel]
fn accumulate(a: In, o: Out, acc: Scratch) {
    if program_id(1) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += a[..];
    if program_id(1) == num_programs(1) - 1 {
        o[..] = acc[..];
    }
}

pub fn scratch_persists_across_an_arbitrary_axis(device: Device) {
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", 8)),
            GridAxis::arbitrary(Extent::cdiv("n", 128)),
        ],
        inputs: vec![tiles(DType::F32, 8, 128)],
        outputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), 128.into()])
                .blocked([8, 128], [grid(0), 0.into()]),
        ],
        scratch: vec![ArraySpec::new(DType::F32, [8usize, 128])],
        ..Default::default()
    };
    let k = accumulate(&spec).unwrap();
    for (m, n) in [(8, 128), (13, 300), (3, 1000)] {
        let (a, av) = random(&mut rng(11), DType::F32, &[m, n], -1.0, 1.0);
        let out = launch(&k, device, &[&a]).unwrap();
        let want: Vec<f64> = (0..m * 128)
            .map(|e| {
                let (i, c) = (e / 128, e % 128);
                (0..n.div_ceil(128))
                    .filter(|b| b * 128 + c < n)
                    .fold(0.0, |s, b| {
                        DType::F32.round_f64(s + av[i * n + b * 128 + c])
                    })
            })
            .collect();
        assert_close(
            &format!("column-block sums at {m}x{n}"),
            &out[0].to_f64_vec(),
            &want,
            0.0,
        );
    }
}

/// `roll` (a constant and a traced shift, negative included) and `gather` (in-range lane
/// indices, and a few outside the lanes, which read 0 on the CPU devices) against loops.
pub fn rolls_and_gathers_move_elements(device: Device) {
    let k = rolls_and_gathers(&rolls_and_gathers_spec()).unwrap();
    let mut r = rng(21);
    let (x, xv) = random(&mut r, DType::F32, &[16, 128], -4.0, 4.0);
    let (_, mut iv) = random(&mut r, DType::I32, &[16, 128], 0.0, 128.0);
    for (at, bad) in [(5, -1.0), (300, 128.0), (2000, 1000.0)] {
        iv[at] = bad;
    }
    let idx = HostArray::from_f64(DType::I32, &[16, 128], &iv);
    let out = launch(&k, device, &[&x, &idx]).unwrap();
    let (mut rows, mut lanes, mut picked) = (vec![0.0; 2048], vec![0.0; 2048], vec![0.0; 2048]);
    for e in 0..2048 {
        let (i, j) = (e / 128, e % 128);
        let (block, row) = (i / 8, i % 8);
        rows[e] = xv[(block * 8 + (row + 8 - 3) % 8) * 128 + j];
        let shift = block as i64 * 7 - 5;
        lanes[e] = xv[i * 128 + (j as i64 - shift).rem_euclid(128) as usize];
        let at = iv[e] as i64;
        picked[e] = if (0..128).contains(&at) {
            xv[i * 128 + at as usize]
        } else {
            0.0
        };
    }
    assert_close("roll by 3 along the rows", &out[0].to_f64_vec(), &rows, 0.0);
    assert_close("roll by a traced shift", &out[1].to_f64_vec(), &lanes, 0.0);
    assert_close("gather along the lanes", &out[2].to_f64_vec(), &picked, 0.0);
}

#[tpu_kernel]
fn transposed_copy(x: In, o: Out) {
    o[..] = x[..].t();
}

/// A store of a loaded window's transpose (`o[...] = x[...].T`, what tpuBLAS's `permute`
/// runs) is a copy: exact in every dtype, with blocks that overhang the array and whose
/// sides are not multiples of the CPU's register tiles (20×36 blocks of a 3×50×70 array).
pub fn transposed_copies_are_exact_in_every_dtype(device: Device) {
    let (a, b, c, (tb, tc)): (usize, usize, usize, _) = (3, 50, 70, (20, 36));
    let block = |r, s| {
        [
            BlockDim::Squeezed,
            BlockDim::Blocked(r),
            BlockDim::Blocked(s),
        ]
    };
    for dtype in [DType::F32, DType::BF16, DType::I32, DType::I16, DType::I8] {
        let spec = CallSpec {
            grid: vec![
                GridAxis::parallel(Extent::Static(a)),
                GridAxis::parallel(Extent::Static(b.div_ceil(tb))),
                GridAxis::parallel(Extent::Static(c.div_ceil(tc))),
            ],
            inputs: vec![
                ArraySpec::new(dtype, [a, b, c])
                    .blocked(block(tb, tc), [grid(0), grid(1), grid(2)]),
            ],
            outputs: vec![
                ArraySpec::new(dtype, [a, c, b])
                    .blocked(block(tc, tb), [grid(0), grid(2), grid(1)]),
            ],
            ..Default::default()
        };
        let k = transposed_copy(&spec).unwrap();
        let (x, xv) = random(&mut rng(14), dtype, &[a, b, c], -100.0, 100.0);
        let out = launch(&k, device, &[&x]).unwrap();
        let want: Vec<f64> = (0..a * b * c)
            .map(|e| {
                let (i, j, l) = (e / (c * b), e / b % c, e % b);
                xv[(i * b + l) * c + j]
            })
            .collect();
        assert_close(dtype.name(), &out[0].to_f64_vec(), &want, 0.0);
    }
}

/// Loads of a ref that the kernel then stores to: each sees the ref as it was at the load,
/// whether the CPU backend reads it in place (rewrites computed pointwise from it, with a
/// materialised reduction beside) or copies it first (a transposed rewrite, a broadcast of
/// one column, a mask read transposed, a store before the last read).
#[tpu_kernel]
fn rewrite_in_place(x: In, o: Out, t: Out, c: Out, s: Scratch) {
    s[..] = x[..];
    let a = s[..];
    s[..] = a * 2.0 + 1.0;
    let b = s[..];
    s[..] = b + b.reduce_max_keepdims(1).broadcast_to([16, 16]);
    let d = s[..];
    s[..] = d.t();
    let e = s[(.., ds(0, 1))];
    s[..] = e.broadcast_to([16, 16]) - s[..];
    let h = s[..];
    store(s, (.., ..), h + 1.0, h.t() > 0.0);
    o[..] = s[..];
    let g = s[..];
    s[..] = 0.0;
    t[..] = g;
    c[..] = s[..] + g * 3.0;
}

pub fn loads_see_the_ref_as_it_was_when_loaded(device: Device) {
    let spec = CallSpec {
        grid: grid2(16, 16),
        inputs: vec![tiles(DType::F32, 16, 16)],
        outputs: vec![tiles(DType::F32, 16, 16); 3],
        scratch: vec![ArraySpec::new(DType::F32, [16usize, 16])],
        ..Default::default()
    };
    let k = rewrite_in_place(&spec).unwrap();
    let (m, n) = (40, 32);
    let (x, xv) = random(&mut rng(12), DType::F32, &[m, n], -2.0, 2.0);
    let out = launch(&k, device, &[&x]).unwrap();
    let (mut o, mut t, mut c) = (vec![0.0; m * n], vec![0.0; m * n], vec![0.0; m * n]);
    for (bi, bj) in (0..m.div_ceil(16)).flat_map(|i| (0..n / 16).map(move |j| (i, j))) {
        // The block as f32, rows past the array read as 0 (the fill).
        let at = |i: usize, j: usize| {
            let (r, col) = (bi * 16 + i, bj * 16 + j);
            if r < m { xv[r * n + col] as f32 } else { 0.0 }
        };
        let s1: Vec<f32> = (0..256).map(|e| at(e / 16, e % 16) * 2.0 + 1.0).collect();
        let row_max = |i: usize| s1[i * 16..][..16].iter().copied().fold(f32::MIN, f32::max);
        let s2: Vec<f32> = (0..256).map(|e| s1[e] + row_max(e / 16)).collect();
        let s3: Vec<f32> = (0..256).map(|e| s2[(e % 16) * 16 + e / 16]).collect();
        let s4: Vec<f32> = (0..256).map(|e| s3[e / 16 * 16] - s3[e]).collect();
        let s5: Vec<f32> = (0..256)
            .map(|e| match s4[(e % 16) * 16 + e / 16] > 0.0 {
                true => s4[e] + 1.0,
                false => s4[e],
            })
            .collect();
        for (e, &v) in s5.iter().enumerate() {
            let (r, col) = (bi * 16 + e / 16, bj * 16 + e % 16);
            if r < m {
                o[r * n + col] = v as f64;
                t[r * n + col] = v as f64;
                c[r * n + col] = (v * 3.0) as f64;
            }
        }
    }
    assert_close("rewritten", &out[0].to_f64_vec(), &o, 0.0);
    assert_close("loaded before a store", &out[1].to_f64_vec(), &t, 0.0);
    assert_close("after the store", &out[2].to_f64_vec(), &c, 0.0);
}

/// Instantiates every behaviour above as a `#[test]` for one device.
macro_rules! device_tests {
    ($module:ident, $device:expr) => {
        mod $module {
            use super::*;
            device_tests!(@each $device; elementwise_unary, transcendentals_at_special_values,
                elementwise_binary,
                integer_arithmetic_wraps_and_truncates, shifts_are_defined_past_the_width,
                int16_is_exact,
                casts_round_truncate_saturate_and_wrap, bf16_rounding_is_exact,
                max_min_propagate_nan_and_order_zeros,
                reductions_broadcasts_transposes_and_iota, transposed_stores_off_the_tiles,
                transposed_copies_are_exact_in_every_dtype,
                dot_accumulates_in_f32, batched_dot,
                for_loops_carry_values_through_ifs, while_loops_run_until_their_data_says_stop,
                dma_copies_and_semaphores_from_the_macro, semaphore_outputs_from_the_macro,
                index_maps_read_the_grid_extent,
                masked_loads_and_stores, rolls_and_gathers_move_elements,
                scalar_prefetch_drives_the_index_map, index_maps_compare_and_select,
                scratch_persists_across_an_arbitrary_axis, loads_see_the_ref_as_it_was_when_loaded);
        }
    };
    (@each $device:expr; $($test:ident),* $(,)?) => {
        $(#[test] fn $test() { super::$test($device) })*
    };
}

device_tests!(interpret, Device::Interpret);
device_tests!(cpu, Device::Cpu);
