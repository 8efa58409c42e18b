//! Lane-uniform values on the CPU backend (`runtime/src/cpu/codegen/uniform.rs`): values with
//! one value per row, as TPU kernels keep row statistics across 128 lanes in scratch, are
//! computed once per row. Checked against an f64 reference and the interpreter: flash
//! attention's running max and sum, a uniform scratch row updated from itself (each lane reads
//! the row's value from before the update), and a scratch ref written on some lanes only
//! (not uniform).

mod common;

use common::*;
use tpukit::dsl::parse_kernel;
use tpukit::prelude::*;

/// The input `x: f32[8, 384]` read in three `[8, 128]` blocks along an `arbitrary` axis.
const HEAD: &str = "grid(arbitrary 3) {
  input %x: f32[8,384] block[8,128] fill 0.0 map(%0) {
    %1 = const 0 : i32[]
    yield %1, %0
  }";

const FIRST_STEP: &str = "  %0 = program_id 0 : i32[]
  %1 = const 0 : i32[]
  %2 = eq %0, %1 : bool[]";

/// Online softmax statistics of `x / 2` per row, kept lane-replicated in `[8, 128]` scratch:
/// `m` the running max, `l` the running sum of `exp(x / 2 - m)` (rescaled by `exp(m_old -
/// m_new)`), both also written out at every step.
fn online_softmax() -> String {
    format!(
        "kernel @online_softmax {HEAD}
  output %m_out: f32[8,128]
  output %l_out: f32[8,128]
  scratch %m: f32[8,128]
  scratch %l: f32[8,128]
body {{
{FIRST_STEP}
  if %2 : () {{
    %3 = const -inf : f32[8,128]
    store %m[ds(0, 8), ds(0, 128)], %3
    %4 = const 0.0 : f32[8,128]
    store %l[ds(0, 8), ds(0, 128)], %4
    yield
  }} else {{
    yield
  }}
  %5 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  %6 = const 0.5 : f32[8,128]
  %7 = mul %5, %6 : f32[8,128]
  %8 = load %m[ds(0, 8), ds(0, 128)] : f32[8,128]
  %9 = reduce_max %7 [1] : f32[8]
  %10 = reshape %9 : f32[8,1]
  %11 = broadcast %10 : f32[8,128]
  %12 = max %8, %11 : f32[8,128]
  %13 = sub %7, %12 : f32[8,128]
  %14 = exp %13 : f32[8,128]
  %15 = sub %8, %12 : f32[8,128]
  %16 = exp %15 : f32[8,128]
  %17 = load %l[ds(0, 8), ds(0, 128)] : f32[8,128]
  %18 = mul %16, %17 : f32[8,128]
  %19 = reduce_sum %14 [1] : f32[8]
  %20 = reshape %19 : f32[8,1]
  %21 = broadcast %20 : f32[8,128]
  %22 = add %21, %18 : f32[8,128]
  store %l[ds(0, 8), ds(0, 128)], %22
  store %m[ds(0, 8), ds(0, 128)], %12
  store %m_out[ds(0, 8), ds(0, 128)], %12
  store %l_out[ds(0, 8), ds(0, 128)], %22
  yield
}}
"
    )
}

/// `u = 2·u + rowsum(x block)` per step from `u = 1`, in a lane-replicated scratch row: the
/// update reads `u` and stores it back elementwise (no snapshot needed per lane, but every
/// lane of a uniform value reads lane 0). `sums` is `u`'s row sums by a `dot`, which reads
/// the ref's memory in place: every lane must hold the row's value.
fn self_update() -> String {
    format!(
        "kernel @self_update {HEAD}
  output %o: f32[8,128]
  output %sums: f32[8,8]
  scratch %u: f32[8,128]
body {{
{FIRST_STEP}
  if %2 : () {{
    %3 = const 1.0 : f32[8,128]
    store %u[ds(0, 8), ds(0, 128)], %3
    yield
  }} else {{
    yield
  }}
  %4 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  %5 = reduce_sum %4 [1] : f32[8]
  %6 = reshape %5 : f32[8,1]
  %7 = broadcast %6 : f32[8,128]
  %8 = load %u[ds(0, 8), ds(0, 128)] : f32[8,128]
  %9 = const 2.0 : f32[8,128]
  %10 = mul %8, %9 : f32[8,128]
  %11 = add %10, %7 : f32[8,128]
  store %u[ds(0, 8), ds(0, 128)], %11
  %12 = load %u[ds(0, 8), ds(0, 128)] : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %12
  %13 = const 1.0 : f32[128,8]
  %14 = dot %12, %13 contract(1, 0) : f32[8,8]
  store %sums[ds(0, 8), ds(0, 8)], %14
  yield
}}
"
    )
}

/// A scratch row set to 0 whole, then to 1 on lanes 0..64 only: not uniform. The output is
/// the last block of `x` plus the scratch.
fn half_lanes() -> String {
    format!(
        "kernel @half_lanes {HEAD}
  output %o: f32[8,128]
  scratch %w: f32[8,128]
body {{
{FIRST_STEP}
  if %2 : () {{
    %3 = const 0.0 : f32[8,128]
    store %w[ds(0, 8), ds(0, 128)], %3
    yield
  }} else {{
    yield
  }}
  %4 = const 1.0 : f32[8,64]
  store %w[ds(0, 8), ds(0, 64)], %4
  %5 = load %w[ds(0, 8), ds(0, 128)] : f32[8,128]
  %6 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  %7 = add %5, %6 : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %7
  yield
}}
"
    )
}

/// Runs `text` on `x` on both devices; returns the CPU's outputs after checking they match
/// the interpreter's within `rel`.
fn run_both(text: &str, x: &HostArray, rel: f64) -> Vec<Vec<f64>> {
    let k = parse_kernel(text).unwrap();
    let cpu = launch(&k, Device::Cpu, &[x]).unwrap();
    let int = launch(&k, Device::Interpret, &[x]).unwrap();
    for (i, (c, n)) in cpu.iter().zip(&int).enumerate() {
        assert_close(
            &format!("{} output {i}", k.name),
            &c.to_f64_vec(),
            &n.to_f64_vec(),
            rel,
        );
    }
    cpu.iter().map(|a| a.to_f64_vec()).collect()
}

/// Each row's value, asserted equal at all 128 lanes.
#[track_caller]
fn rows(what: &str, v: &[f64]) -> Vec<f64> {
    (0..8)
        .map(|i| {
            let row = &v[i * 128..(i + 1) * 128];
            assert!(
                row.iter().all(|&e| e == row[0]),
                "{what}: row {i} not uniform"
            );
            row[0]
        })
        .collect()
}

#[test]
fn online_softmax_statistics_against_f64() {
    let (x, xs) = random(&mut rng(11), DType::F32, &[8, 384], -6.0, 6.0);
    let out = run_both(&online_softmax(), &x, 1e-5);
    let (m, l) = (rows("m", &out[0]), rows("l", &out[1]));
    for i in 0..8 {
        let row: Vec<f64> = xs[i * 384..(i + 1) * 384].iter().map(|e| e / 2.0).collect();
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row.iter().map(|e| (e - max).exp()).sum();
        assert_eq!(m[i], max, "row {i} max");
        assert_close(&format!("row {i} sum"), &[l[i]], &[sum], 1e-5);
    }
}

#[test]
fn a_uniform_row_updated_from_itself_reads_it_before_the_update() {
    let (x, xs) = random(&mut rng(12), DType::F32, &[8, 384], -4.0, 4.0);
    let out = run_both(&self_update(), &x, 1e-5);
    let u = rows("u", &out[0]);
    for (i, got) in u.iter().enumerate() {
        let want = (0..3).fold(1.0, |u, b| {
            2.0 * u
                + xs[i * 384 + b * 128..i * 384 + (b + 1) * 128]
                    .iter()
                    .sum::<f64>()
        });
        assert_close(&format!("row {i}"), &[*got], &[want], 1e-5);
        let sums = &out[1][i * 8..(i + 1) * 8];
        assert_close(&format!("row {i} sums"), sums, &[128.0 * got; 8], 1e-5);
    }
}

#[test]
fn scratch_written_on_some_lanes_is_not_uniform() {
    let (x, xs) = random(&mut rng(13), DType::F32, &[8, 384], -4.0, 4.0);
    let out = run_both(&half_lanes(), &x, 0.0);
    for i in 0..8 {
        for j in 0..128 {
            let w = if j < 64 { 1.0 } else { 0.0 };
            let want = f64::from(xs[i * 384 + 256 + j] as f32 + w);
            assert_eq!(out[0][i * 128 + j], want, "element ({i}, {j})");
        }
    }
}
