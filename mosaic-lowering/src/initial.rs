//! Outputs that start as the caller's buffer.
//!
//! The IR says an output starts as the caller's buffer and a load from it sees its current
//! contents. Mosaic gives an output window no contents of its own: its pipeline copies an
//! output window back to HBM when the grid moves on to another block, but never copies one
//! in — not even when XLA aliases the output with an operand of the custom call (checked in
//! libtpu's LLO for a Pallas kernel with `input_output_aliases`: the output's window gets
//! only a `vmem_to_hbm` DMA, the aliased operand a window and `hbm_to_vmem` DMA of its own).
//! A kernel that reads its output would read stale VMEM, and one that leaves part of a block
//! unwritten would write stale VMEM back over the caller's data.
//!
//! So the lowering does what Pallas kernels do by hand with `input_output_aliases`. For each
//! output in [`outputs`]:
//!
//! - the custom call takes the output's initial contents as an extra operand, aliased to the
//!   output (`output_operand_aliases`, [`crate::custom_call`]);
//! - the kernel function gets a window on that operand, after the inputs, with the output's
//!   block shape and index map ([`crate::kernel_func::buffers`]);
//! - before the body, on the first grid step of each visit of an output block — the first
//!   step, or a step whose block index differs from the previous step's — the body copies the
//!   operand's window into the output's window ([`copy_in`]).
//!
//! While the grid stays on one block the output window stays in VMEM (Mosaic writes it back
//! only when the block index changes), so loads see every earlier store of the visit.
//!
//! **Limit.** A block visited again after the grid has visited another one in between starts
//! from what the operand's window fetched from HBM, and Mosaic's pipeline does not order that
//! fetch after the write-back of the earlier visit (it prefetches a step ahead and waits for
//! write-backs two steps late), so the later visit may see the block as it was before the
//! earlier one (a Pallas kernel accumulating into an output block depends on consecutive
//! visits in the same way). The IR's other backends see the earlier visit's stores.

use crate::{
    emit::{Emitter, Val},
    lowering::{FuncLowering, Terminator},
    rules::{
        elementwise::{cmpi, select_values},
        memory::vector_store,
    },
    shapes::window_shape,
    types,
};
use melior::ir::{Block, Region, RegionLike};
use tpukit_dsl::{DType, Initial, Kernel, OpKind, Region as IrRegion, Result, Role, Type, Window};

/// The outputs (operand indices, in operand order) that start as the caller's buffer: every
/// output with [`crate::Options::alias_outputs`]; otherwise each output the body loads from,
/// or stores to under a mask (a masked store keeps the elements it masks off, so they must
/// hold the caller's values), unless the IR says it starts undefined ([`Initial::Undefined`]:
/// an imported Pallas output no input aliases). Other outputs start undefined, as in Pallas.
/// A semaphore output is among them when it starts as the caller's (an input's semaphores
/// aliased to it): the custom call aliases the caller's semaphores to it, and nothing is copied
/// (Mosaic gives it no window: the output is those semaphores).
pub fn outputs(kernel: &Kernel, alias_all: bool) -> Vec<usize> {
    kernel
        .operands_with_role(Role::Output)
        .filter(|(id, o)| {
            if matches!(o.space, tpukit_dsl::Space::Semaphore(_)) {
                return o.initial == Initial::Caller;
            }
            alias_all
                || (o.initial == Initial::Caller
                    && needs_contents(&kernel.body.body, id.0 as usize))
        })
        .map(|(id, _)| id.0 as usize)
        .collect()
}

/// Whether `region` (or a region nested in it) loads from operand `i` or stores to it masked.
fn needs_contents(region: &IrRegion, i: usize) -> bool {
    region.ops.iter().any(|op| {
        let here = match op.kind {
            OpKind::Load { operand, .. } => operand.0 as usize == i,
            OpKind::Store { operand, mask, .. } => operand.0 as usize == i && mask.is_some(),
            _ => false,
        };
        here || op.kind.regions().iter().any(|r| needs_contents(r, i))
    })
}

/// Emits, at the start of the kernel body, the copy of each output's initial contents into
/// its window: `initial` pairs an output's operand index with its initial-contents window (a
/// block argument). In a kernel without a grid the copy is unconditional (the body runs
/// once); otherwise it runs under `scf.if` on the first step of each visit of the block.
pub fn copy_in<'c>(
    lw: &FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    initial: &[(usize, Val<'c>)],
) -> Result<()> {
    for &(output, from) in initial {
        let to = lw.refs[output].expect("the kernel body sees every output");
        let operand = &lw.kernel.operands[output];
        // Semaphores: the caller's, which the output aliases, are the output's.
        if matches!(operand.space, tpukit_dsl::Space::Semaphore(_)) {
            continue;
        }
        let shape = window_shape(operand, &lw.shapes.operands[output]);
        let element = types::memory_element(operand.dtype);
        let copy = match operand.space {
            tpukit_dsl::Space::Smem => copy_scalars,
            _ => copy,
        };
        let Some(first) = first_visit(lw, em, output)? else {
            copy(em, from, to, &shape, element)?;
            continue;
        };
        let then_block = Block::new(&[]);
        let then = Emitter::new(em.context, &then_block).at(em.location);
        copy(&then, from, to, &shape, element)?;
        then.op("scf.yield", &[], &[], &[])?;
        let else_block = Block::new(&[]);
        Emitter::new(em.context, &else_block)
            .at(em.location)
            .op("scf.yield", &[], &[], &[])?;
        let regions = [then_block, else_block].map(|block| {
            let region = Region::new();
            region.append_block(block);
            region
        });
        em.op_with_regions("scf.if", &[first], &[], &[], regions.into())?;
    }
    Ok(())
}

/// `to[...] = from[...]` for two VMEM buffers of `shape` (a window's whole block).
fn copy<'c>(
    em: &Emitter<'c>,
    from: Val<'c>,
    to: Val<'c>,
    shape: &[usize],
    element: &str,
) -> Result<()> {
    let indices = shape
        .iter()
        .map(|_| em.index(0))
        .collect::<Result<Vec<_>>>()?;
    let mut operands = vec![from];
    operands.extend(&indices);
    let v = em.op1(
        "vector.load",
        &operands,
        em.ty(&types::vector(shape, element))?,
        &[],
    )?;
    vector_store(em, v, to, &indices, None)
}

/// `to[...] = from[...]` for two whole SMEM buffers of `shape`, one scalar at a time (SMEM
/// has no vector loads): `memref.load`/`memref.store` in one `scf.for` per dimension. When
/// XLA gives the output the buffer of the operand it aliases, it copies each element onto
/// itself.
fn copy_scalars<'c>(
    em: &Emitter<'c>,
    from: Val<'c>,
    to: Val<'c>,
    shape: &[usize],
    element: &str,
) -> Result<()> {
    let mut indices = Vec::with_capacity(shape.len());
    copy_nest(em, from, to, shape, element, &mut indices)
}

/// The loops of [`copy_scalars`] from dimension `indices.len()` on.
fn copy_nest<'c>(
    em: &Emitter<'c>,
    from: Val<'c>,
    to: Val<'c>,
    shape: &[usize],
    element: &str,
    indices: &mut Vec<Val<'c>>,
) -> Result<()> {
    let Some(&extent) = shape.get(indices.len()) else {
        let mut operands = vec![from];
        operands.extend(indices.iter());
        let v = em.op1("memref.load", &operands, em.ty(element)?, &[])?;
        let mut operands = vec![v, to];
        operands.extend(indices.iter());
        em.op("memref.store", &operands, &[], &[])?;
        return Ok(());
    };
    let index = em.ty("index")?;
    let body_block = em.block(&[index]);
    let body = Emitter::new(em.context, &body_block).at(em.location);
    indices.push(body.argument(0));
    copy_nest(&body, from, to, shape, element, indices)?;
    indices.pop();
    body.op("scf.yield", &[], &[], &[])?;
    let region = Region::new();
    region.append_block(body_block);
    let bounds = [em.index(0)?, em.index(extent as i64)?, em.index(1)?];
    em.op_with_regions("scf.for", &bounds, &[], &[], vec![region])?;
    Ok(())
}

/// An i1 that is true on the first grid step of a visit of output `output`'s block: the
/// kernel's first step, or one where the output's index map gives another block than at the
/// previous step (grid steps run in row-major order). `None` when the kernel has no grid.
fn first_visit<'c>(
    lw: &FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    output: usize,
) -> Result<Option<Val<'c>>> {
    if lw.grid.is_empty() {
        return Ok(None);
    }
    let (previous, first_step) = previous_step(em, &lw.grid, lw.shapes)?;
    // A whole-array window never moves: only the first step starts its visit.
    let Window::Blocked(spec) = &lw.kernel.operands[output].window else {
        return Ok(Some(first_step));
    };
    let block_index = |grid: &[Val<'c>]| {
        let mut map = FuncLowering::new(
            lw.kernel,
            &spec.index_map,
            lw.shapes,
            lw.options,
            grid.to_vec(),
            lw.refs.clone(),
        );
        map.lower_region(*em, &spec.index_map.body, grid, Terminator::Inline)
    };
    let now = block_index(&lw.grid)?;
    let before = block_index(&previous)?;
    let i32 = Type::scalar(DType::I32);
    let i1 = em.ty("i1")?;
    let mut first = first_step;
    for (a, b) in now.into_iter().zip(before) {
        let moved = cmpi(em, "ne", a, b, &i32)?;
        first = em.op1("arith.ori", &[first, moved], i1, &[])?;
    }
    Ok(Some(first))
}

/// The grid indices of the step before `grid` in row-major order (the last axis fastest),
/// and whether `grid` is the first step. Before the first step comes the last one, so every
/// index is a real grid point (an index map may read scalar prefetch with it).
///
/// Axis `d` steps back when every later axis is at 0 (`borrow`), wrapping from 0 to its last
/// index; the first step is the one where all axes are at 0.
fn previous_step<'c>(
    em: &Emitter<'c>,
    grid: &[Val<'c>],
    shapes: &crate::Shapes,
) -> Result<(Vec<Val<'c>>, Val<'c>)> {
    let i32 = Type::scalar(DType::I32);
    let i1 = em.ty("i1")?;
    let zero = em.i32(0)?;
    let one = em.i32(1)?;
    let mut previous = grid.to_vec();
    let mut borrow: Option<Val<'c>> = None; // `None`: true (the last axis always steps back)
    for d in (0..grid.len()).rev() {
        let at_zero = cmpi(em, "eq", grid[d], zero, &i32)?;
        let last = match shapes.grid[d] {
            Some(n) => em.i32(n as i64 - 1)?,
            None => {
                let n = crate::rules::grid::extent(em, shapes, d)?;
                em.op1("arith.subi", &[n, one], em.ty("i32")?, &[])?
            }
        };
        let back = em.op1("arith.subi", &[grid[d], one], em.ty("i32")?, &[])?;
        let stepped = select_values(em, at_zero, last, back, &i32)?;
        previous[d] = match borrow {
            None => stepped,
            Some(b) => select_values(em, b, stepped, grid[d], &i32)?,
        };
        borrow = Some(match borrow {
            None => at_zero,
            Some(b) => em.op1("arith.andi", &[b, at_zero], i1, &[])?,
        });
    }
    Ok((previous, borrow.expect("a grid has at least one axis")))
}
