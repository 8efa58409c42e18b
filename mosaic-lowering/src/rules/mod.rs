//! The lowering rules: one function per kernel-IR op, as JAX's Pallas TPU lowering keeps its
//! `lowering_rules` dict, found by an exhaustive `match` on the op (`rule`). A rule reads
//! its op's operands from the `FuncLowering`, appends Mosaic ops through the `Emitter` and
//! returns the op's results. Within a rule, each op family's variants are matched exhaustively
//! too (`elementwise::unary` over every `UnaryOp`), so an op added to the op table does not
//! compile until it lowers.
//!
//! Ops are lowered as Pallas lowers the matching JAX primitives (the Mosaic format notes in
//! the project's shared design documents), so libtpu sees the Mosaic it is tested against.

mod bitcast;
mod control;
mod dense;
mod dma;
mod dot;
pub(crate) mod elementwise;
mod gather;
pub(crate) mod grid;
pub(crate) mod memory;
mod print;
mod reduce;
mod roll;
mod row_gather;
pub(crate) mod shape;

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
};
use tpukit_dsl::{Error, ErrorKind, Op, OpKind, Result};

/// Lowers `op` by its rule: an exhaustive `match`, so a new IR op is a compiler error here
/// until it has a rule. `yield` ends a region and is lowered by the region's owner
/// (`FuncLowering::lower_region`), never here.
pub fn lower<'c, 'k>(
    lw: &mut FuncLowering<'c, 'k>,
    em: &Emitter<'c>,
    op: &'k Op,
) -> Result<Vec<Val<'c>>> {
    match &op.kind {
        OpKind::Const { .. } => elementwise::constant(lw, em, op),
        OpKind::Dense { .. } => dense::dense(lw, em, op),
        OpKind::ProgramId { .. } => grid::program_id(lw, em, op),
        OpKind::NumPrograms { .. } => grid::num_programs(lw, em, op),
        OpKind::ArrayDim { .. } => grid::array_dim(lw, em, op),
        OpKind::Load { .. } => memory::load(lw, em, op),
        OpKind::Store { .. } => memory::store(lw, em, op),
        OpKind::Unary { .. } => elementwise::unary(lw, em, op),
        OpKind::Binary { .. } => elementwise::binary(lw, em, op),
        OpKind::Compare { .. } => elementwise::compare(lw, em, op),
        OpKind::Select { .. } => elementwise::select(lw, em, op),
        OpKind::Cast { .. } => elementwise::cast(lw, em, op),
        OpKind::Bitcast { .. } => bitcast::bitcast(lw, em, op),
        OpKind::Gather { .. } => gather::gather(lw, em, op),
        OpKind::Roll { .. } => roll::roll(lw, em, op),
        OpKind::Broadcast { .. } => shape::broadcast(lw, em, op),
        OpKind::Reshape { .. } => shape::reshape(lw, em, op),
        OpKind::Transpose { .. } => shape::transpose(lw, em, op),
        OpKind::Iota { .. } => shape::iota(lw, em, op),
        OpKind::Reduce { .. } => reduce::reduce(lw, em, op),
        OpKind::Dot { .. } => dot::dot(lw, em, op),
        OpKind::For { .. } => control::for_loop(lw, em, op),
        OpKind::While { .. } => control::while_loop(lw, em, op),
        OpKind::If { .. } => control::if_else(lw, em, op),
        OpKind::Print { .. } => print::print(lw, em, op),
        OpKind::Yield { .. } => {
            Err(Error::op("yield", "ends a region: its owner lowers it")
                .with_kind(ErrorKind::Internal))
        }
        OpKind::DmaStart { .. }
        | OpKind::DmaWait { .. }
        | OpKind::SemaphoreSignal { .. }
        | OpKind::SemaphoreWait { .. }
        | OpKind::SemaphoreRead { .. } => dma::dma(lw, em, op),
    }
}
