//! Edge blocks: where a window overhangs its array.
//!
//! The IR defines loads there to read the operand's `fill` value. Pallas on TPU pads a partial
//! edge block with unspecified values, so the lowering masks: for every dimension whose extent
//! the block does not divide, an element of the loaded vector is inside the array when
//!
//! ```text
//! block_index(grid) * block + start + iota < extent
//! ```
//!
//! (`block_index` is the operand's index map, evaluated inline), and the load becomes
//! `select(inside, loaded, fill)`. Dimensions the block divides need no mask, so kernels on
//! divisible shapes lower exactly as Pallas lowers them.
//!
//! Stores need nothing: Mosaic's pipeline copies a partial edge block back only up to the
//! array's end, dropping the rest, which is the IR's semantics for stores there.

use crate::{
    emit::{Emitter, Val},
    lowering::{FuncLowering, Terminator},
    rules::{elementwise::cmpi, shape::iota_positions},
    shapes::overhangs,
};
use tpukit_dsl::{DType, OperandId, Result, Start, Type, Window};

/// A `vector<sizes x i1>` that is true where the access of `sizes` elements at `starts`, every
/// `strides`-th (one of each per buffer dimension), lies inside operand `id`'s array, or `None` when it always does.
pub fn in_bounds<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    id: OperandId,
    starts: &[Start],
    sizes: &[usize],
    strides: &[usize],
    dynamic_starts: &[Option<Val<'c>>],
) -> Result<Option<Val<'c>>> {
    let operand = lw.kernel.operand(id);
    let Window::Blocked(spec) = &operand.window else {
        return Ok(None);
    };
    let extents = &lw.shapes.operands[id.0 as usize];
    let edges: Vec<usize> = (0..extents.len())
        .filter(|&d| overhangs(spec.block[d], extents[d]))
        .collect();
    if edges.is_empty() {
        return Ok(None);
    }
    let block_index = {
        let mut map = FuncLowering::new(
            lw.kernel,
            &spec.index_map,
            lw.shapes,
            lw.options,
            lw.grid.clone(),
            lw.refs.clone(),
        );
        map.lower_region(*em, &spec.index_map.body, &lw.grid, Terminator::Inline)?
    };
    let positions = Type::new(DType::I32, sizes.to_vec());
    let vector = em.ty(&crate::types::value(&positions))?;
    let mut mask: Option<Val<'c>> = None;
    for d in edges {
        let block = em.i32(spec.block[d].size() as i64)?;
        let mut base = em.op1("arith.muli", &[block_index[d], block], em.ty("i32")?, &[])?;
        let start = match (starts[d], dynamic_starts[d]) {
            (_, Some(v)) => Some(v),
            (Start::Static(0), None) => None,
            (Start::Static(s), None) => Some(em.i32(s)?),
            (Start::Dynamic(_), None) => unreachable!("dynamic starts come with their value"),
        };
        if let Some(s) = start {
            base = em.op1("arith.addi", &[base, s], em.ty("i32")?, &[])?;
        }
        let mut iota = iota_positions(em, sizes, d)?;
        if strides[d] != 1 {
            let step = em.constant(
                &format!("dense<{}>", strides[d]),
                &crate::types::value(&positions),
            )?;
            iota = em.op1("arith.muli", &[iota, step], vector, &[])?;
        }
        let base = em.op1("vector.broadcast", &[base], vector, &[])?;
        let position = em.op1("arith.addi", &[iota, base], vector, &[])?;
        let extent = em.constant(
            &format!("dense<{}>", extents[d]),
            &crate::types::value(&positions),
        )?;
        let inside = cmpi(em, "slt", position, extent, &positions)?;
        mask = Some(match mask {
            None => inside,
            Some(m) => em.op1(
                "arith.andi",
                &[m, inside],
                em.ty(&crate::types::value(&positions.with_dtype(DType::Bool)))?,
                &[],
            )?,
        });
    }
    Ok(mask)
}
