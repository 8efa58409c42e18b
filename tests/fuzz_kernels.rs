//! Random valid kernels, run on both devices: elementwise op DAGs over two operands (unary,
//! binary, compare + select from the op table), 2-D blocks on extents the blocks need not
//! divide, f32, bf16 and i32. The compiled `cpu` device must match the exact `interpret`
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
