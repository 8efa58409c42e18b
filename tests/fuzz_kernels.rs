//! Random valid kernels, run on both devices: elementwise op DAGs over two operands (unary,
//! binary, compare + select from the op table), and the richer kernels of
//! `tpukit::random_kernel` (reductions broadcast back, matmuls, iotas, casts); 2-D blocks on
//! extents the blocks need not divide, f32, bf16 and i32. The compiled `cpu` device must match the exact `interpret`
//! device (exactly for i32, within a dtype tolerance for floats), and the kernel must lower
//! to Mosaic (`tpukit_mosaic::lower`; compiling it needs libtpu, outside `cargo test`).
//!
//! The op subset keeps values bounded (tanh/logistic squash, no exp/log/division), so the
//! comparison is about the backends, not about ill-conditioned math. The case count is
//! `TPUKIT_FUZZ_CASES` (default 64: each case compiles a kernel); `make fuzz` raises it.

mod common;

use common::*;
use proptest::prelude::*;
use proptest::test_runner::Config;
use tpukit::dsl::{BinaryOp, CmpOp, KernelBuilder, Role, UnaryOp, ValueId};
use tpukit::prelude::*;
use tpukit::random_kernel::RandomKernel;

fn config() -> Config {
    let cases = std::env::var("TPUKIT_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

const FLOAT_UNARY: [UnaryOp; 4] = [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Tanh, UnaryOp::Logistic];
const INT_UNARY: [UnaryOp; 2] = [UnaryOp::Neg, UnaryOp::Abs];
const BINARY: [BinaryOp; 5] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Max,
    BinaryOp::Min,
];

/// One step: op kind, which op, two picks among the values built so far.
type Step = (u8, u8, u8, u8);

/// `o = f(x, y)` for the DAG `steps` describe, over `bm x bn` blocks of an `m x n` grid.
fn kernel(dtype: DType, (bm, bn): (usize, usize), steps: &[Step]) -> Kernel {
    let spec = CallSpec {
        grid: grid2(bm, bn),
        inputs: vec![tiles(dtype, bm, bn), tiles(dtype, bm, bn)],
        outputs: vec![tiles(dtype, bm, bn)],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("random_dag", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let y = b.declare(Role::Input, "y").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let mut pool: Vec<ValueId> = vec![b.load(x, &[]).unwrap(), b.load(y, &[]).unwrap()];
    let unary: &[UnaryOp] = if dtype.is_float() {
        &FLOAT_UNARY
    } else {
        &INT_UNARY
    };
    for &(kind, op, p, q) in steps {
        let (a, c) = (pool[p as usize % pool.len()], pool[q as usize % pool.len()]);
        let built = match kind % 3 {
            0 => b.unary(unary[op as usize % unary.len()], a),
            1 => b.binary(BINARY[op as usize % BINARY.len()], a, c),
            _ => {
                let cmp = CmpOp::ALL[op as usize % CmpOp::ALL.len()];
                b.compare(cmp, a, c).and_then(|m| b.select(m, a, c))
            }
        };
        // Every op here type-checks on same-typed operands; an error is a generator bug.
        pool.push(built.unwrap());
    }
    b.store(o, &[], *pool.last().unwrap()).unwrap();
    b.finish().unwrap()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_dags_agree_on_interpret_and_cpu(
        dtype in prop::sample::select(vec![DType::F32, DType::BF16, DType::I32]),
        block in prop::sample::select(vec![(8usize, 128usize), (16, 128), (8, 256)]),
        m in 1usize..40,
        n in 1usize..300,
        steps in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()), 1..10),
        seed in any::<u64>(),
    ) {
        let k = kernel(dtype, block, &steps);
        let mut r = rng(seed);
        let (lo, hi) = if dtype.is_float() { (-2.0, 2.0) } else { (-50.0, 50.0) };
        let (xa, _) = random(&mut r, dtype, &[m, n], lo, hi);
        let (ya, _) = random(&mut r, dtype, &[m, n], lo, hi);
        let run = |device| {
            launch(&k, device, &[&xa, &ya])
                .unwrap_or_else(|e| panic!("{device:?}: {e}\n{k}"))[0]
                .to_f64_vec()
        };
        let (want, got) = (run(Device::Interpret), run(Device::Cpu));
        // A few roundings per step: the tolerance grows with the DAG's length.
        let rel = tol(dtype) * 4.0 * steps.len() as f64;
        assert_close(&format!("{dtype:?} {m}x{n}\n{k}"), &got, &want, rel);
        let options = tpukit_mosaic::Options {
            bindings: [("m".to_string(), m), ("n".to_string(), n)].into(),
            ..Default::default()
        };
        if let Err(e) = tpukit_mosaic::lower(&k, &options) {
            panic!("lowering failed: {e}\n{k}");
        }
    }
}

/// Inputs for `rk` on `m x n`, drawn with `seed`.
fn inputs(rk: &RandomKernel, m: usize, n: usize, seed: u64) -> Vec<HostArray> {
    let mut r = rng(seed);
    rk.input_shapes(m, n)
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            let (lo, hi, integral) = rk.input_range(i);
            let (a, values) = random(&mut r, rk.dtype, shape, lo, hi);
            if integral {
                let floored: Vec<f64> = values.iter().map(|v| v.floor()).collect();
                HostArray::from_f64(rk.dtype, shape, &floored)
            } else {
                a
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(config())]

    /// Kernels beyond elementwise ops (`tpukit::random_kernel`): reductions broadcast back,
    /// matmuls, iotas, casts, over edge blocks of a 2-D grid.
    #[test]
    fn random_kernels_agree_on_interpret_and_cpu(
        seed in any::<u64>(),
        m in 1usize..40,
        n in 1usize..300,
    ) {
        let rk = RandomKernel::new(seed);
        let k = &rk.kernel;
        random_kernel_agrees(&rk, seed, m, n);
        let options = tpukit_mosaic::Options {
            bindings: rk.bindings(m, n).into_iter().collect(),
            ..Default::default()
        };
        if let Err(e) = tpukit_mosaic::lower(k, &options) {
            panic!("seed {seed}: lowering failed: {e}\n{k}");
        }
    }
}

/// Runs `rk` on `m x n` inputs drawn with `seed` on both devices and compares them. Row and
/// column sums may reassociate on `cpu`, so the tolerance is norm-wise.
fn random_kernel_agrees(rk: &RandomKernel, seed: u64, m: usize, n: usize) {
    let k = &rk.kernel;
    let arrays = inputs(rk, m, n, seed);
    let refs: Vec<&HostArray> = arrays.iter().collect();
    let run = |device| {
        launch(k, device, &refs).unwrap_or_else(|e| panic!("seed {seed}, {device:?}: {e}\n{k}"))[0]
            .to_f64_vec()
    };
    let (want, got) = (run(Device::Interpret), run(Device::Cpu));
    let rel = tol(rk.precision) * 4.0 * rk.ops as f64;
    assert_close_normwise(&format!("seed {seed}, {m}x{n}\n{k}"), &got, &want, rel);
}

/// Found by `random_kernels_agree_on_interpret_and_cpu` (seed 1979373727408578877, 27x235):
/// an f32 logistic rounded through bf16 lands one bf16 ulp apart on the two devices (their f32
/// results differ by an ulp across a bf16 rounding boundary): compared at bf16's tolerance.
#[test]
fn a_value_rounded_through_bf16_agrees_to_bf16_precision() {
    let seed = 1979373727408578877;
    let rk = RandomKernel::new(seed);
    assert_eq!((rk.dtype, rk.precision), (DType::F32, DType::BF16));
    random_kernel_agrees(&rk, seed, 27, 235);
}

/// Found by `random_kernels_agree_on_interpret_and_cpu` (seed 15574744330830091217, 35x112):
/// a row sum whose terms cancel, 2e-5 off under an element-wise relative tolerance.
#[test]
fn a_cancelling_row_sum_agrees_normwise() {
    let seed = 15574744330830091217;
    random_kernel_agrees(&RandomKernel::new(seed), seed, 35, 112);
}

/// Found by `random_kernels_agree_on_interpret_and_cpu` (seed 6016252610140686840): f32 values
/// just above a bf16 halfway point (`0xBF18_8001`) rounded down on `interpret`, whose
/// f64 → bf16 conversion (`half`'s) ignored the excess. Both devices must round every value
/// near a tie correctly, through one cast or two.
#[test]
fn f32_to_bf16_casts_round_near_ties_alike_on_both_devices() {
    let spec = CallSpec {
        grid: grid2(16, 128),
        inputs: vec![tiles(DType::F32, 16, 128)],
        outputs: vec![tiles(DType::F32, 16, 128)],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("round_trip", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let v = b.load(x, &[]).unwrap();
    let narrow = b.cast(v, DType::BF16).unwrap();
    let wide = b.cast(narrow, DType::F32).unwrap();
    b.store(o, &[], wide).unwrap();
    let k = b.finish().unwrap();
    // Random sign, exponent and bf16 bits; low halves at, just above and just below a tie.
    let lows = [
        0x8000u32, 0x8001, 0x8007, 0x80ff, 0x7fff, 0x7ff8, 0x0001, 0xffff,
    ];
    let mut r = rng(3);
    let bits: Vec<u32> = (0..22 * 189)
        .map(|i| {
            let hi =
                (0x3c00 + rand::Rng::random_range(&mut r, 0..0x0800u32)) | ((i as u32 & 1) << 15);
            (hi << 16) | lows[i % lows.len()]
        })
        .collect();
    let values: Vec<f64> = bits.iter().map(|&b| f64::from(f32::from_bits(b))).collect();
    let want: Vec<f64> = bits
        .iter()
        .map(|&b| f64::from(half::bf16::from_f32(f32::from_bits(b)).to_f32()))
        .collect();
    let xa = HostArray::from_f64(DType::F32, &[22, 189], &values);
    for device in [Device::Interpret, Device::Cpu] {
        let got = launch(&k, device, &[&xa]).unwrap()[0].to_f64_vec();
        if let Some(i) = got.iter().zip(&want).position(|(g, w)| g != w) {
            panic!(
                "{device:?}: {:#x} became {}, want {}",
                bits[i], got[i], want[i]
            );
        }
    }
}
