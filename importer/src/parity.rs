//! What the Mosaic a value comes from says about its divisors: a slice of 16-bit rows split
//! from 32-bit ones (`ref.bitcast(jnp.int16).at[pl.ds(i * 32, 32)]`) starts at a 32-bit row
//! only when its start is even (a multiple of 4 for 8-bit rows), and a store at a traced
//! row of a reshaped ref (`o_ref.reshape(16, 128)[pl.ds(i * 8, 8)]` of a `(2, 8, 128)` ref)
//! lands on whole rows of the ref beneath only when the start is a multiple of their size; a traced start proves it
//! by how it is computed.

use super::scope::op_name;
use super::text;
use melior::ir::{
    Value,
    operation::{OperationLike, OperationRef, OperationResult},
};

/// How deep [`multiple_of`] follows the ops computing a value.
const DEPTH: usize = 8;

/// Whether `v` (an integer) is a multiple of `k` (positive) by construction: an
/// `arith.constant` multiple, a product with a multiple factor (or of constants whose product
/// is one), a sum or difference of multiples, a left shift by enough, an integer cast,
/// `tpu.assume_multiple` or `arith.select` of multiples. `false` when unknown.
pub fn multiple_of(v: Value<'_, '_>, k: i64) -> bool {
    k > 0 && at(v, k, DEPTH)
}

fn at(v: Value<'_, '_>, k: i64, depth: usize) -> bool {
    if k == 1 {
        return true;
    }
    let Ok(r) = OperationResult::try_from(v) else {
        return false;
    };
    let op = r.owner();
    let operand = |i: usize| op.operand(i).ok();
    let of = |i: usize, k: i64| depth > 0 && operand(i).is_some_and(|x| at(x, k, depth - 1));
    let known = |i: usize| operand(i).and_then(constant_value);
    match op_name(&op).as_str() {
        "arith.constant" => constant(&op).is_some_and(|c| c % k == 0),
        "arith.muli" => {
            of(0, k)
                || of(1, k)
                || [(0, 1), (1, 0)]
                    .iter()
                    .any(|&(a, b)| known(a).is_some_and(|c| c != 0 && of(b, k / gcd(c, k))))
        }
        "arith.addi" | "arith.subi" => of(0, k) && of(1, k),
        "arith.shli" => known(1).is_some_and(|c| (0..31).contains(&c) && of(0, k / gcd(1 << c, k))),
        "arith.index_cast" | "arith.extsi" | "arith.trunci" => of(0, k),
        "tpu.assume_multiple" => {
            text::int(
                &op.attribute("multiple")
                    .map(|a| a.to_string())
                    .unwrap_or_default(),
            )
            .is_ok_and(|m| m % k == 0)
                || of(0, k)
        }
        "arith.select" => of(1, k) && of(2, k),
        _ => false,
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The value of an integer `arith.constant` defining `v`.
pub(crate) fn constant_value(v: Value<'_, '_>) -> Option<i64> {
    let r = OperationResult::try_from(v).ok()?;
    let op = r.owner();
    (op_name(&op) == "arith.constant").then(|| constant(&op))?
}

/// The value of an integer `arith.constant`.
fn constant(op: &OperationRef<'_, '_>) -> Option<i64> {
    let a = op.attribute("value").ok()?;
    text::int(&a.to_string()).ok()
}
