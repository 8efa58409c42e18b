//! Pallas index maps (`@transform_i` functions) back to [`IndexExpr`]s.
//!
//! A transform takes the grid indices and the scalar-prefetch refs and returns one block
//! index per dimension. Its body is integer arithmetic, comparisons and selects (causal
//! block skipping), SMEM loads and the grid's extents, which map one to one onto index expressions; any other op
//! is an error naming it. Index expressions are all i32, an `i1` being 0 or 1, so widening an
//! `i1` unsigned is the value itself and signed is its negation (true is -1).

use super::rules::{predicate, predicate_name};
use super::scope::{attr, key, op_name};
use super::text;
use melior::ir::{
    BlockLike, RegionLike, ValueLike,
    operation::{OperationLike, OperationRef},
};
use std::collections::HashMap;
use tpukit_dsl::{Error, ErrorKind, IndexBinOp, IndexExpr, Result};

/// The block indices `transform` computes, as expressions of the grid indices (its first
/// `grid_rank` arguments) and the prefetch operands (the rest), which are the kernel's
/// prefetch operands after its first `skip` (the dynamic grid extents, no arguments here).
pub fn index_map(
    transform: &OperationRef<'_, '_>,
    grid_rank: usize,
    skip: usize,
) -> Result<Vec<IndexExpr>> {
    let map_name = attr(transform, "sym_name")?;
    let block = transform
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| Error::new(format!("index map {map_name} has no body")))?;
    let mut exprs: HashMap<usize, IndexExpr> = HashMap::new();
    let mut prefetch: HashMap<usize, usize> = HashMap::new();
    for i in 0..block.argument_count() {
        let arg = block.argument(i).expect("argument in range");
        if i < grid_rank {
            exprs.insert(key(arg.into()), IndexExpr::Grid(i));
        } else {
            prefetch.insert(key(arg.into()), i - grid_rank + skip);
        }
    }
    let mut op = block.first_operation();
    while let Some(o) = op {
        let operand = |i: usize| -> Result<IndexExpr> {
            let v = o.operand(i).map_err(|_| Error::new("missing operand"))?;
            exprs.get(&key(v)).cloned().ok_or_else(|| {
                Error::new(format!("operand {i} of `{}` is not an index", op_name(&o)))
            })
        };
        let bin = |op: IndexBinOp| -> Result<IndexExpr> {
            Ok(IndexExpr::Binary(
                op,
                Box::new(operand(0)?),
                Box::new(operand(1)?),
            ))
        };
        let name = op_name(&o);
        let value = match name.as_str() {
            "arith.constant" => IndexExpr::Const(match attr(&o, "value")?.as_str() {
                "true" => 1,
                "false" => 0,
                v => text::int(v)?,
            }),
            "arith.addi" => bin(IndexBinOp::Add)?,
            "arith.subi" => bin(IndexBinOp::Sub)?,
            "arith.muli" => bin(IndexBinOp::Mul)?,
            "arith.divsi" => bin(IndexBinOp::Div)?,
            "arith.remsi" => bin(IndexBinOp::Rem)?,
            "arith.maxsi" => bin(IndexBinOp::Max)?,
            "arith.minsi" => bin(IndexBinOp::Min)?,
            "arith.andi" => bin(IndexBinOp::And)?,
            "arith.ori" => bin(IndexBinOp::Or)?,
            "arith.xori" => bin(IndexBinOp::Xor)?,
            "arith.cmpi" => IndexExpr::Compare(
                predicate(&predicate_name(&o, false)?)?,
                Box::new(operand(0)?),
                Box::new(operand(1)?),
            ),
            "arith.select" => IndexExpr::Select {
                cond: Box::new(operand(0)?),
                on_true: Box::new(operand(1)?),
                on_false: Box::new(operand(2)?),
            },
            // `pl.num_programs(d)`: the grid's extent along `d` (static or sized at launch).
            "tpu.iteration_bound" => IndexExpr::NumPrograms(text::int(&attr(&o, "dim")?)? as usize),
            "arith.extsi" if operand_is_i1(&o) => IndexExpr::Const(0) - operand(0)?,
            "arith.extui"
            | "arith.extsi"
            | "arith.trunci"
            | "arith.index_cast"
            | "tpu.assume_multiple" => operand(0)?,
            "memref.load" => {
                let buffer = o.operand(0).map_err(|_| Error::new("missing operand"))?;
                let operand_index = *prefetch.get(&key(buffer)).ok_or_else(|| {
                    Error::new("an index map loads from something other than a prefetch ref")
                })?;
                let index = (1..o.operand_count())
                    .map(&operand)
                    .collect::<Result<Vec<_>>>()?;
                IndexExpr::Prefetch {
                    operand: operand_index,
                    index,
                }
            }
            "func.return" => {
                return (0..o.operand_count()).map(operand).collect();
            }
            other => {
                return Err(
                    Error::op(other, format!("unsupported: op in index map {map_name}"))
                        .with_kind(ErrorKind::Unsupported)
                        .at(text::loc(&o.location().to_string()).as_ref()),
                );
            }
        };
        if let Ok(r) = o.result(0) {
            exprs.insert(key(r.into()), value);
        }
        op = o.next_in_block();
    }
    Err(Error::new(format!("index map {map_name} does not return")))
}

/// Whether `op`'s first operand is an `i1` (a comparison's result).
fn operand_is_i1(op: &OperationRef<'_, '_>) -> bool {
    op.operand(0).is_ok_and(|v| v.r#type().to_string() == "i1")
}
