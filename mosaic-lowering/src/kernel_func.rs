//! The kernel function as Pallas emits it:
//!
//! ```text
//! func.func @name(grid i32…, scalar prefetch…, inputs…, outputs…, scratch…) attributes {
//!   dimension_semantics, iteration_bounds, scalar_prefetch, scratch_operands,
//!   tpu.core_type, window_params = [{transform_indices = @transform_i, window_bounds}…]}
//! ```
//!
//! Windowed operands (inputs and outputs) have their block's shape; prefetch and scratch
//! their whole shape. A grid kernel gives every input and output a window: whole-array
//! operands get a window of the full shape placed by a transform returning zeros (what
//! `pallas_call` does for an operand without a `BlockSpec`). A kernel without a grid has no
//! `iteration_bounds` and no `window_params`.

use crate::{
    Options, Shapes,
    emit::{Emitter, Val},
    lowering::{FuncLowering, Terminator},
    shapes::window_shape,
    types::{self, MemorySpace},
};
use melior::{
    Context,
    ir::{
        Attribute, Block, Region, RegionLike, Type, attribute::TypeAttribute, r#type::FunctionType,
    },
};
use tpukit_dsl::{Kernel, Literal, OpKind, Operand, Result, Role, ValueId, Window};

/// The buffer types of the kernel's operands, in operand order.
pub fn buffer_types<'c>(
    context: &'c Context,
    kernel: &Kernel,
    shapes: &Shapes,
) -> Result<Vec<Type<'c>>> {
    kernel
        .operands
        .iter()
        .zip(&shapes.operands)
        .map(|(o, global)| {
            let space = if o.role == Role::Prefetch {
                MemorySpace::Smem
            } else {
                MemorySpace::Vmem
            };
            types::memref(context, &window_shape(o, global), o.dtype, space)
        })
        .collect()
}

/// Whether an operand's window is the whole array at every grid step: Pallas's
/// `has_trivial_window` (block shape equal to the array's, index map yielding literal zeros),
/// for which it forces `pipeline_mode = #tpu.pipeline_mode<synchronous>` (single buffering).
pub fn trivial_window(operand: &Operand, global: &[usize]) -> bool {
    match &operand.window {
        Window::Whole => true,
        Window::Blocked(spec) => {
            let whole = spec.block.iter().zip(global).all(|(b, &n)| b.size() == n);
            let ops = &spec.index_map.body.ops;
            let Some(OpKind::Yield { values }) = ops.last().map(|op| &op.kind) else {
                return false;
            };
            let zero = |v: &ValueId| {
                ops.iter().any(|op| {
                    op.results.first() == Some(v)
                        && matches!(
                            op.kind,
                            OpKind::Const {
                                value: Literal::Int(0)
                            }
                        )
                })
            };
            whole && values.iter().all(zero)
        }
    }
}

/// `function_type` of a function from `inputs` to `results`.
pub fn function_type<'c>(
    context: &'c Context,
    inputs: &[Type<'c>],
    results: &[Type<'c>],
) -> Attribute<'c> {
    TypeAttribute::new(FunctionType::new(context, inputs, results).into()).into()
}

/// The operands that get a window (and a `@transform_i`), in signature order.
pub fn windowed(kernel: &Kernel) -> impl Iterator<Item = usize> + '_ {
    (0..kernel.operands.len())
        .filter(|&i| matches!(kernel.operands[i].role, Role::Input | Role::Output))
}

/// Appends the kernel function to `module_body`.
pub fn build<'c>(
    context: &'c Context,
    module_body: &Block<'c>,
    kernel: &Kernel,
    shapes: &Shapes,
    options: &Options,
) -> Result<()> {
    let outer = Emitter::new(context, module_body);
    let mut arg_types = vec![outer.ty("i32")?; kernel.grid.len()];
    arg_types.extend(buffer_types(context, kernel, shapes)?);
    let block = Block::new(
        &arg_types
            .iter()
            .map(|t| (*t, outer.location))
            .collect::<Vec<_>>(),
    );
    let em = Emitter::new(context, &block);
    let grid: Vec<Val<'c>> = (0..kernel.grid.len()).map(|i| em.argument(i)).collect();
    let refs: Vec<Option<Val<'c>>> = (0..kernel.operands.len())
        .map(|i| Some(em.argument(kernel.grid.len() + i)))
        .collect();
    let mut lowering = FuncLowering::new(kernel, &kernel.body, shapes, options, grid, refs);
    lowering.lower_region(em, &kernel.body.body, &[], Terminator::Return)?;
    let region = Region::new();
    region.append_block(block);

    let count = |role| kernel.operands_with_role(role).count();
    let semantics: Vec<String> = kernel
        .grid
        .iter()
        .map(|a| format!("#tpu.dimension_semantics<{}>", a.semantics.name()))
        .collect();
    let mut attributes = vec![
        ("sym_name", outer.attr(&format!("\"{}\"", kernel.name))?),
        ("function_type", function_type(context, &arg_types, &[])),
        (
            "dimension_semantics",
            outer.attr(&format!("[{}]", semantics.join(", ")))?,
        ),
        (
            "scalar_prefetch",
            outer.attr(&format!("{} : i64", count(Role::Prefetch)))?,
        ),
        (
            "scratch_operands",
            outer.attr(&format!("{} : i64", count(Role::Scratch)))?,
        ),
        ("tpu.core_type", outer.attr("#tpu.core_type<tc>")?),
    ];
    if !kernel.grid.is_empty() {
        let bounds: Vec<String> = shapes.grid.iter().map(|n| n.to_string()).collect();
        attributes.push((
            "iteration_bounds",
            outer.attr(&format!("array<i64: {}>", bounds.join(", ")))?,
        ));
        let params: Vec<String> = windowed(kernel)
            .enumerate()
            .map(|(t, i)| {
                let o = &kernel.operands[i];
                let bounds: Vec<String> = window_shape(o, &shapes.operands[i])
                    .iter()
                    .map(|n| n.to_string())
                    .collect();
                // As Pallas: a window that never moves needs one buffer, not two.
                let pipeline = if trivial_window(o, &shapes.operands[i]) {
                    "pipeline_mode = #tpu.pipeline_mode<synchronous>, "
                } else {
                    ""
                };
                format!(
                    "{{{pipeline}transform_indices = @transform_{t}, window_bounds = array<i64: {}>}}",
                    bounds.join(", ")
                )
            })
            .collect();
        attributes.push((
            "window_params",
            outer.attr(&format!("[{}]", params.join(", ")))?,
        ));
    }
    outer.op_with_regions("func.func", &[], &[], &attributes, vec![region])?;
    Ok(())
}
