//! What the Mosaic a value comes from says about its parity: a slice of 16-bit rows split
//! from 32-bit ones (`ref.bitcast(jnp.int16).at[pl.ds(i * 32, 32)]`) starts at a 32-bit row
//! only when its start is even, which a traced start proves by how it is computed.

use super::scope::op_name;
use super::text;
use melior::ir::{
    Value,
    operation::{OperationLike, OperationResult},
};

/// How deep [`even`] follows the ops computing a value.
const DEPTH: usize = 8;

/// Whether `v` (an integer) is even by construction: an even `arith.constant`, a product
/// with an even factor, a sum or difference of even values, a left shift by a positive
/// constant, an integer cast or `arith.select` of even values. `false` when unknown.
pub fn even(v: Value<'_, '_>) -> bool {
    even_at(v, DEPTH)
}

fn even_at(v: Value<'_, '_>, depth: usize) -> bool {
    let Ok(r) = OperationResult::try_from(v) else {
        return false;
    };
    let op = r.owner();
    let operand = |i: usize| op.operand(i).ok();
    let even_operand = |i: usize| depth > 0 && operand(i).is_some_and(|x| even_at(x, depth - 1));
    match op_name(&op).as_str() {
        "arith.constant" => constant(&op).is_some_and(|c| c % 2 == 0),
        "arith.muli" => even_operand(0) || even_operand(1),
        "arith.addi" | "arith.subi" => even_operand(0) && even_operand(1),
        "arith.shli" => {
            even_operand(0)
                || operand(1)
                    .and_then(|x| OperationResult::try_from(x).ok())
                    .filter(|r| op_name(&r.owner()) == "arith.constant")
                    .and_then(|r| constant(&r.owner()))
                    .is_some_and(|c| c > 0)
        }
        "arith.index_cast" | "arith.extsi" | "arith.trunci" => even_operand(0),
        "arith.select" => even_operand(1) && even_operand(2),
        _ => false,
    }
}

/// The value of an integer `arith.constant`.
fn constant(op: &melior::ir::operation::OperationRef<'_, '_>) -> Option<i64> {
    let a = op.attribute("value").ok()?;
    text::int(&a.to_string()).ok()
}
