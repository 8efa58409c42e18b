//! The lowering rules: one function per kernel-IR op, found by the op's name, as JAX's Pallas
//! TPU lowering keeps its `lowering_rules` dict. A rule reads its op's operands from the
//! [`FuncLowering`], appends Mosaic ops through the [`Emitter`] and returns the op's results.
//!
//! Ops are lowered as Pallas lowers the matching JAX primitives (see
//! `reference/pallas-mosaic-format.md`), so libtpu sees the Mosaic it is tested against.

mod control;
mod dot;
pub(crate) mod elementwise;
mod grid;
pub(crate) mod memory;
mod reduce;
pub(crate) mod shape;

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
};
use tpukit_dsl::{Op, Result};

pub type Rule =
    for<'c, 'k> fn(&mut FuncLowering<'c, 'k>, &Emitter<'c>, &'k Op) -> Result<Vec<Val<'c>>>;

/// Every IR op with a lowering, by `OpKind::name()`. `yield` is not here: it ends a region and
/// is lowered by the region's owner ([`FuncLowering::lower_region`]).
pub const RULES: &[(&str, Rule)] = &[
    ("const", elementwise::constant),
    ("program_id", grid::program_id),
    ("num_programs", grid::num_programs),
    ("array_dim", grid::array_dim),
    ("load", memory::load),
    ("store", memory::store),
    // unary
    ("neg", elementwise::unary),
    ("abs", elementwise::unary),
    ("exp", elementwise::unary),
    ("exp2", elementwise::unary),
    ("log", elementwise::unary),
    ("log1p", elementwise::unary),
    ("sqrt", elementwise::unary),
    ("rsqrt", elementwise::unary),
    ("tanh", elementwise::unary),
    ("erf", elementwise::unary),
    ("logistic", elementwise::unary),
    ("floor", elementwise::unary),
    ("ceil", elementwise::unary),
    ("sin", elementwise::unary),
    ("cos", elementwise::unary),
    ("not", elementwise::unary),
    // binary
    ("add", elementwise::binary),
    ("sub", elementwise::binary),
    ("mul", elementwise::binary),
    ("div", elementwise::binary),
    ("rem", elementwise::binary),
    ("pow", elementwise::binary),
    ("max", elementwise::binary),
    ("min", elementwise::binary),
    ("and", elementwise::binary),
    ("or", elementwise::binary),
    ("xor", elementwise::binary),
    // comparisons
    ("eq", elementwise::compare),
    ("ne", elementwise::compare),
    ("lt", elementwise::compare),
    ("le", elementwise::compare),
    ("gt", elementwise::compare),
    ("ge", elementwise::compare),
    ("select", elementwise::select),
    ("cast", elementwise::cast),
    ("broadcast", shape::broadcast),
    ("reshape", shape::reshape),
    ("transpose", shape::transpose),
    ("iota", shape::iota),
    ("reduce_sum", reduce::reduce),
    ("reduce_max", reduce::reduce),
    ("reduce_min", reduce::reduce),
    ("dot", dot::dot),
    ("for", control::for_loop),
    ("if", control::if_else),
];

/// The rule for the IR op called `name`.
pub fn rule(name: &str) -> Option<Rule> {
    RULES.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}
