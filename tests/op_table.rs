//! Every entry of the op table, on every dtype it accepts, on every device, against a
//! reference written here in f64 (with the IR's integer semantics: wrapping, division by
//! zero). The kernels come from `tpukit::catalog::op_kernels` (one per op, elementwise over
//! extents the blocks do not divide), which is driven by the table itself: an op added to the
//! table runs here with no edit to the kernel list, and the `match`es below — the test's own
//! semantics and input domains — do not compile until they cover it.

mod common;

use common::*;
use tpukit::catalog::op_kernels::{Case, RN};
use tpukit::dsl::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use tpukit::prelude::*;

/// Extents off the blocks (`BM` = 32, `BN` = 128): edge windows on both axes.
const M: usize = 45;
const N: usize = 300;

/// The range random inputs of `case` are drawn from (`[x, y]` for two operands).
fn domain(case: Case, dtype: DType, operand: usize) -> (f64, f64) {
    if dtype.is_bool() {
        return (0.0, 2.0);
    }
    if !dtype.is_float() {
        let wide = dtype == DType::I32;
        let shift = matches!(
            case,
            Case::Binary(BinaryOp::Shl | BinaryOp::ShrA | BinaryOp::ShrL)
        );
        return match case {
            // Shift amounts: negative, in range, and past the width (32, 16 or 8).
            _ if shift && operand == 1 => (-3.0, 40.0),
            _ if shift => (-100.0, 100.0),
            // Products of i16 overflow and wrap; sums of a row (300 elements) too.
            Case::Binary(_) if dtype == DType::I16 => (-400.0, 400.0),
            Case::Reduce(_) if dtype == DType::I16 => (-4000.0, 4000.0),
            // Small values: products of i8 overflow and wrap, divisors include 0.
            Case::Binary(_) => (-12.0, 12.0),
            _ if wide => (-1000.0, 1000.0),
            _ => (-100.0, 100.0),
        };
    }
    match case {
        Case::Unary(u) => match u {
            UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => (0.05, 4.0),
            UnaryOp::Log1p => (-0.9, 4.0),
            UnaryOp::Exp | UnaryOp::Exp2 => (-5.0, 5.0),
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Tanh
            | UnaryOp::Erf
            | UnaryOp::Logistic
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::RoundEven
            | UnaryOp::Round
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Not => (-3.0, 3.0),
        },
        Case::Binary(BinaryOp::Pow) if operand == 0 => (0.1, 3.0),
        Case::Binary(BinaryOp::Pow) => (-2.0, 2.0),
        Case::Binary(_) | Case::Reduce(_) => (-3.0, 3.0),
        // Whole numbers (see `inputs`), so equal operands occur.
        Case::Compare(_) => (-3.0, 3.0),
    }
}

fn unary(op: UnaryOp, dtype: DType, a: f64) -> f64 {
    if !dtype.is_float() {
        let a = a as i64;
        let r = match op {
            UnaryOp::Neg => -a,
            UnaryOp::Abs => a.abs(),
            UnaryOp::Not if dtype.is_bool() => (a == 0) as i64,
            UnaryOp::Not => !a,
            tpukit::dsl::float_unary_ops!() => unreachable!("{op:?} accepts floats only"),
        };
        return dtype.wrap_int(r) as f64;
    }
    match op {
        UnaryOp::Neg => -a,
        UnaryOp::Abs => a.abs(),
        UnaryOp::Exp => a.exp(),
        UnaryOp::Exp2 => a.exp2(),
        UnaryOp::Log => a.ln(),
        UnaryOp::Log1p => a.ln_1p(),
        UnaryOp::Sqrt => a.sqrt(),
        UnaryOp::Rsqrt => 1.0 / a.sqrt(),
        UnaryOp::Tanh => a.tanh(),
        UnaryOp::Erf => libm::erf(a),
        UnaryOp::Logistic => 1.0 / (1.0 + (-a).exp()),
        UnaryOp::Floor => a.floor(),
        UnaryOp::Ceil => a.ceil(),
        UnaryOp::RoundEven => a.round_ties_even(),
        UnaryOp::Round => a.round(),
        UnaryOp::Sin => a.sin(),
        UnaryOp::Cos => a.cos(),
        UnaryOp::Not => unreachable!("not accepts integers only"),
    }
}

fn binary(op: BinaryOp, dtype: DType, a: f64, b: f64) -> f64 {
    if dtype.is_float() {
        return match op {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Rem => a % b,
            BinaryOp::Pow => a.powf(b),
            BinaryOp::Max => a.max(b),
            BinaryOp::Min => a.min(b),
            BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Xor
            | BinaryOp::Shl
            | BinaryOp::ShrA
            | BinaryOp::ShrL
            | BinaryOp::DivU
            | BinaryOp::RemU => unreachable!("integers only"),
        };
    }
    let (a, b) = (a as i64, b as i64);
    let r = match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        // The IR's total integer division: by zero gives 0, a remainder the dividend.
        BinaryOp::Div if b == 0 => 0,
        BinaryOp::Div => a / b,
        BinaryOp::Rem if b == 0 => a,
        BinaryOp::Rem => a % b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::And => a & b,
        BinaryOp::Or => a | b,
        BinaryOp::Xor => a ^ b,
        BinaryOp::Shl | BinaryOp::ShrA | BinaryOp::ShrL => return shift(op, dtype, a, b),
        // The operands' bits as unsigned numbers (`rem_euclid` of 2^bits), divided totally.
        BinaryOp::DivU | BinaryOp::RemU => {
            let modulus = 1i64 << (8 * dtype.size_bytes());
            let (a, b) = (a.rem_euclid(modulus), b.rem_euclid(modulus));
            match (op, b) {
                (BinaryOp::DivU, 0) => 0,
                (BinaryOp::RemU, 0) => a,
                (BinaryOp::DivU, _) => a / b,
                _ => a % b,
            }
        }
        BinaryOp::Pow => unreachable!("floats only"),
    };
    dtype.wrap_int(r) as f64
}

/// A shift as arithmetic on whole numbers: the amount `b` is taken modulo 2^bits (unsigned);
/// `x << k` is `x * 2^k` wrapped, `x >> k` arithmetic is `floor(x / 2^k)` with `k` at most
/// `bits - 1`, logical is the unsigned value of `x`'s bits divided by `2^k`; an amount of at
/// least `bits` shifts everything out.
fn shift(op: BinaryOp, dtype: DType, a: i64, b: i64) -> f64 {
    let bits = 8 * dtype.size_bytes() as i64;
    let modulus = 1i64 << bits;
    let k = b.rem_euclid(modulus);
    let pow = |k: i64| 2f64.powi(k as i32);
    let r = match op {
        BinaryOp::Shl if k >= bits => 0.0,
        BinaryOp::Shl => (a as f64 * pow(k)).rem_euclid(modulus as f64),
        BinaryOp::ShrA => (a as f64 / pow(k.min(bits - 1))).floor(),
        BinaryOp::ShrL if k >= bits => 0.0,
        BinaryOp::ShrL => (a.rem_euclid(modulus) as f64 / pow(k)).floor(),
        _ => unreachable!("a shift"),
    };
    dtype.wrap_int(r as i64) as f64
}

fn holds(op: CmpOp, a: f64, b: f64) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

fn reduce(op: ReduceOp, dtype: DType, row: &[f64]) -> f64 {
    let r = match op {
        ReduceOp::Sum => row.iter().sum(),
        ReduceOp::Max => row.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ReduceOp::Min => row.iter().copied().fold(f64::INFINITY, f64::min),
    };
    if dtype.is_float() {
        r
    } else {
        dtype.wrap_int(r as i64) as f64
    }
}

/// The relative tolerance of `case`'s result in `dtype`.
fn tolerance(case: Case, dtype: DType) -> f64 {
    match case {
        // Float sums of RN terms, summed in another order than the reference's.
        Case::Reduce(ReduceOp::Sum) if dtype == DType::F32 => 1e-5,
        _ => tol(dtype),
    }
}

fn inputs(case: Case, dtype: DType, seed: u64) -> (Vec<HostArray>, Vec<Vec<f64>>) {
    let shape = match case {
        Case::Reduce(_) => [M, RN],
        _ => [M, N],
    };
    let mut rng = rng(seed);
    (0..case.arity())
        .map(|i| {
            let (lo, hi) = domain(case, dtype, i);
            let (a, v) = random(&mut rng, dtype, &shape, lo, hi);
            match case {
                Case::Compare(_) if dtype.is_float() => {
                    let whole: Vec<f64> = v.iter().map(|x| x.floor()).collect();
                    (HostArray::from_f64(dtype, &shape, &whole), whole)
                }
                _ => (a, v),
            }
        })
        .unzip()
}

/// The expected output of `case` on inputs `x`.
fn expected(case: Case, dtype: DType, x: &[Vec<f64>]) -> Vec<f64> {
    let round = |r: f64| {
        if dtype.is_float() {
            dtype.round_f64(r)
        } else {
            r
        }
    };
    match case {
        Case::Unary(u) => x[0].iter().map(|&a| round(unary(u, dtype, a))).collect(),
        Case::Binary(b) => (x[0].iter().zip(&x[1]))
            .map(|(&a, &c)| round(binary(b, dtype, a, c)))
            .collect(),
        Case::Compare(c) => (x[0].iter().zip(&x[1]))
            .map(|(&a, &b)| if holds(c, a, b) { a } else { b })
            .collect(),
        Case::Reduce(r) => x[0]
            .chunks(RN)
            .map(|row| round(reduce(r, dtype, row)))
            .collect(),
    }
}

/// Runs every case of the op table accepted by some dtype, for the cases `pick` selects.
fn every_case(device: Device, pick: fn(Case) -> bool) {
    let mut ran = 0;
    for (seed, case) in Case::all().into_iter().filter(|&c| pick(c)).enumerate() {
        for &dtype in case.typing().dtypes() {
            let what = format!("{} on {dtype} ({device:?})", case.id());
            let kernel = case.kernel(dtype).unwrap_or_else(|e| panic!("{what}: {e}"));
            let (arrays, values) = inputs(case, dtype, seed as u64);
            let refs: Vec<&HostArray> = arrays.iter().collect();
            let out = launch(&kernel, device, &refs).unwrap_or_else(|e| panic!("{what}: {e}"));
            let want = expected(case, dtype, &values);
            assert_close(&what, &out[0].to_f64_vec(), &want, tolerance(case, dtype));
            ran += 1;
        }
    }
    assert!(ran > 0, "no case selected");
}

macro_rules! family_tests {
    ($($test:ident: $pick:pat),* $(,)?) => {
        mod interpret {
            use super::*;
            $(#[test] fn $test() { every_case(Device::Interpret, |c| matches!(c, $pick)) })*
        }
        mod cpu {
            use super::*;
            $(#[test] fn $test() { every_case(Device::Cpu, |c| matches!(c, $pick)) })*
        }
    };
}

family_tests! {
    unary_ops: Case::Unary(_),
    binary_ops: Case::Binary(_),
    comparisons: Case::Compare(_),
    reductions: Case::Reduce(_),
}
