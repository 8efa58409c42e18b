//! The TensorCore's stateful PRNG: `tpu.prng_set_seed_32` (`pltpu.prng_seed`) and
//! `tpu.prng_random_bits` (`pltpu.prng_random_bits`, and `pltpu.stateful_uniform`,
//! `stateful_normal` and `sample_block` built on them).
//!
//! A TPU's generator is hardware whose bits Mosaic does not specify; tpukit defines one,
//! written in the IR's own integer ops, so a kernel draws the same bits on `cpu`, on
//! `interpret` and (lowered back to Mosaic as those ops) on a TPU:
//! - seeding hashes the seeds, in order, into a key and restarts the draw count;
//! - draw `c` after a seed gives element `i` (row-major index in the drawn shape) the bits
//!   `mix(mix(i + stream) ^ key)`, where `stream = mix(key ^ mix(c))` and `mix` is a
//!   bijection of 32-bit words (xor-shift-multiply, "lowbias32"). One draw's elements are
//!   therefore all distinct; draws and seeds differ in every bit pattern a test can see.
//!
//! The state (key, draw count) lives in a small scratch buffer of its own, kept across grid
//! steps as the hardware's is; bits drawn before any seed are unspecified, as on a TPU. Steps
//! of `parallel` axes may run on different workers, each with its own state (a TPU's cores
//! each have theirs), so a kernel that draws in several steps after one seed gets bits that
//! depend on that split: seeding each step (`prng_seed(seed, pl.program_id(0))`) makes them
//! depend on the step alone.

use super::rules::Table;
use super::scope::{Scope, op_name, result_type};
use melior::ir::operation::{OperationLike, OperationRef};
use tpukit_dsl::{ArraySpec, BinaryOp, DType, Error, Ix, KernelBuilder, Result, Type, ValueId};

/// The state buffer's shape: one (8, 128) tile of i32; `[0, 0]` holds the key, `[1, 0]` the
/// number of draws since the seed. Read and written as (1, 1) windows, which a TPU serves
/// from vector memory.
const STATE_SHAPE: [usize; 2] = [8, 128];

/// Whether `op` reads or writes the PRNG state (the kernel then gets a state buffer).
pub(crate) fn uses_state(op: &OperationRef<'_, '_>) -> bool {
    matches!(
        op_name(op).as_str(),
        "tpu.prng_set_seed_32" | "tpu.prng_random_bits"
    )
}

/// The scratch buffer holding the state.
pub(crate) fn state_spec() -> ArraySpec {
    ArraySpec::new(DType::I32, STATE_SHAPE.to_vec())
}

/// `mix(x)`, elementwise on an i32 value of any shape (wrapping arithmetic, logical shifts).
fn mix(b: &mut KernelBuilder, x: ValueId) -> Result<ValueId> {
    let mut x = x;
    for (shift, factor) in [(16, 0x7feb_352d_u32), (15, 0x846c_a68b)] {
        let s = b.binary(BinaryOp::ShrL, x, shift)?;
        x = b.binary(BinaryOp::Xor, x, s)?;
        x = b.binary(BinaryOp::Mul, x, factor as i32)?;
    }
    let s = b.binary(BinaryOp::ShrL, x, 16)?;
    b.binary(BinaryOp::Xor, x, s)
}

fn state(s: &Scope) -> Result<tpukit_dsl::Ref> {
    s.prng_state
        .ok_or_else(|| Error::new("no PRNG state buffer set aside"))
}

/// The (1, 1) window of state row `row`.
fn slot(row: i64) -> [Ix; 2] {
    [Ix::Ds(row.into(), 1), Ix::Ds(0.into(), 1)]
}

/// `tpu.prng_set_seed_32 %s0, %s1, …`: the key hashes the seeds in order; no draws yet.
pub(crate) fn set_seed(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let buf = state(s)?;
    let mut key = b.constant(0x2545_f491_i64, Type::new(DType::I32, vec![1, 1]));
    for i in 0..op.operand_count() {
        let seed = s.value(op, i)?;
        if b.ty(seed).dtype != DType::I32 {
            return Err(Error::unsupported(format!(
                "a seed of dtype {} (32-bit seeds are imported)",
                b.ty(seed).dtype
            )));
        }
        let seed = b.broadcast_to(seed, &[1, 1])?;
        let k = b.binary(BinaryOp::Xor, key, seed)?;
        key = mix(b, k)?;
    }
    b.store(buf, &slot(0), key)?;
    let zero = b.constant(0_i64, Type::new(DType::I32, vec![1, 1]));
    b.store(buf, &slot(1), zero)
}

/// `tpu.prng_random_bits : vector<…xi32>`: one draw of the result's shape.
pub(crate) fn random_bits(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let ty = result_type(op, 0)?;
    if ty.dtype != DType::I32 {
        return Err(Error::unsupported(format!(
            "random bits of dtype {} (32-bit draws are imported)",
            ty.dtype
        )));
    }
    let buf = state(s)?;
    let key = b.load(buf, &slot(0))?;
    let count = b.load(buf, &slot(1))?;
    let next = b.binary(BinaryOp::Add, count, 1_i32)?;
    b.store(buf, &slot(1), next)?;
    let c = mix(b, count)?;
    let k = b.binary(BinaryOp::Xor, key, c)?;
    let stream = mix(b, k)?;
    // Row-major element index over the drawn shape, as a 2-D or higher value (a 1-D draw is
    // computed as one row and reshaped).
    let shape = if ty.shape.len() < 2 {
        vec![1, ty.shape.iter().product()]
    } else {
        ty.shape.clone()
    };
    let mut index: Option<ValueId> = None;
    let mut stride = 1_i64;
    for d in (0..shape.len()).rev() {
        let at = b.iota(DType::I32, &shape, d)?;
        let term = b.binary(BinaryOp::Mul, at, stride as i32)?;
        index = Some(match index {
            None => term,
            Some(i) => b.binary(BinaryOp::Add, i, term)?,
        });
        stride *= shape[d] as i64;
    }
    let index = index.expect("a shape of rank 2 or more");
    let x = b.binary(BinaryOp::Add, index, stream)?;
    let x = mix(b, x)?;
    let x = b.binary(BinaryOp::Xor, x, key)?;
    let bits = mix(b, x)?;
    let bits = b.reshape(bits, &ty.shape)?;
    s.define(op, 0, bits)
}
