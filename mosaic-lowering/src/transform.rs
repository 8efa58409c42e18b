//! The index-map functions `@transform_i`, one per windowed operand: from the grid indices
//! (i32) and the scalar-prefetch buffers to one i32 *block* index per array dimension (Mosaic
//! multiplies by the window bounds). A squeezed dimension has block size 1, so its block index
//! is the element index, as the IR says.

use crate::{
    Options, Shapes,
    emit::{Emitter, Val},
    kernel_func::{buffer_types, function_type, windowed},
    lowering::{FuncLowering, Terminator},
};
use melior::{
    Context,
    ir::{Block, Region, RegionLike},
};
use tpukit_dsl::{Kernel, Result, Role, Window};

/// Appends `@transform_0 …` to `module_body`, one per windowed buffer
/// ([`crate::kernel_func::windowed`]; an output's initial contents move with the output).
pub fn build_all<'c>(
    context: &'c Context,
    module_body: &Block<'c>,
    kernel: &Kernel,
    shapes: &Shapes,
    options: &Options,
    initial: &[usize],
) -> Result<()> {
    if kernel.grid.is_empty() {
        return Ok(());
    }
    let outer = Emitter::new(context, module_body);
    let buffers = buffer_types(context, kernel, shapes)?;
    // The operands sizing the grid are no arguments of the kernel's functions.
    let values = kernel.grid_values();
    let prefetch: Vec<usize> = kernel
        .operands_with_role(Role::Prefetch)
        .map(|(id, _)| id.0 as usize)
        .filter(|i| !values.contains(i))
        .collect();
    let mut arg_types = vec![outer.ty("i32")?; kernel.grid.len()];
    arg_types.extend(prefetch.iter().map(|&i| buffers[i]));
    for (t, i) in windowed(kernel, initial)
        .into_iter()
        .map(|b| b.operand())
        .enumerate()
    {
        if kernel.operands[i].space != tpukit_dsl::Space::Local {
            continue;
        }
        let rank = shapes.operands[i].len();
        let block = outer.block(&arg_types);
        let em = Emitter::new(context, &block);
        let grid: Vec<Val<'c>> = (0..kernel.grid.len()).map(|a| em.argument(a)).collect();
        let mut refs: Vec<Option<Val<'c>>> = vec![None; kernel.operands.len()];
        for (k, &p) in prefetch.iter().enumerate() {
            refs[p] = Some(em.argument(kernel.grid.len() + k));
        }
        match &kernel.operands[i].window {
            Window::Blocked(spec) => {
                let mut map =
                    FuncLowering::new(kernel, &spec.index_map, shapes, options, grid.clone(), refs);
                map.lower_region(em, &spec.index_map.body, &grid, Terminator::Return)?;
            }
            Window::Whole => {
                let zero = em.i32(0)?;
                em.op("func.return", &vec![zero; rank], &[], &[])?;
            }
        }
        let region = Region::new();
        region.append_block(block);
        let results = vec![outer.ty("i32")?; rank];
        outer.op_with_regions(
            "func.func",
            &[],
            &[],
            &[
                ("sym_name", outer.attr(&format!("\"transform_{t}\""))?),
                (
                    "function_type",
                    function_type(context, &arg_types, &results),
                ),
            ],
            vec![region],
        )?;
    }
    Ok(())
}
