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
//!
//! Outputs that start as the caller's buffer ([`crate::initial`]) add one windowed argument
//! each, for their initial contents, between the inputs and the outputs: the custom call
//! passes those contents after the inputs, and Mosaic pairs the function's buffers with the
//! custom call's operands, then its results, in order.

use crate::{
    Options, Shapes,
    emit::{Emitter, Val},
    initial,
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
use tpukit_dsl::{Kernel, Literal, OpKind, Operand, Result, Role, Space, ValueId, Window};

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
            let space = MemorySpace::of(o.role, o.space);
            types::memref(context, &window_shape(o, global), o.dtype, space)
        })
        .collect()
}

/// The window parameters of a whole operand in SMEM, as Pallas gives them: no bounds, and
/// `transform_indices` an affine map from the `grid_rank` grid indices to `rank` zeros.
fn smem_window(grid_rank: usize, rank: usize) -> String {
    let dims: Vec<String> = (0..grid_rank).map(|d| format!("d{d}")).collect();
    format!(
        "{{transform_indices = affine_map<({}) -> ({})>}}",
        dims.join(", "),
        vec!["0"; rank].join(", ")
    )
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

/// A buffer argument of the kernel function.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// Operand `i` itself.
    Operand(usize),
    /// The initial contents of output operand `i` ([`crate::initial`]): a buffer with the
    /// output's shape, dtype and window.
    Initial(usize),
}

impl Buffer {
    /// The operand whose shape, dtype and window the buffer has.
    pub fn operand(self) -> usize {
        match self {
            Buffer::Operand(i) | Buffer::Initial(i) => i,
        }
    }
}

/// The kernel function's buffer arguments in signature order: scalar prefetch (but the
/// operands sizing the grid, which the custom call passes as leading scalars), inputs, the
/// initial contents of each output in `initial` (in that order), outputs, scratch — the
/// custom call's operands, then its results, then scratch, as Mosaic pairs them.
pub fn buffers(kernel: &Kernel, initial: &[usize]) -> Vec<Buffer> {
    let role = |r| {
        kernel
            .operands_with_role(r)
            .map(|(id, _)| Buffer::Operand(id.0 as usize))
    };
    let values = kernel.grid_values();
    role(Role::Prefetch)
        .filter(|b| !values.contains(&b.operand()))
        .chain(role(Role::Input))
        .chain(initial.iter().map(|&i| Buffer::Initial(i)))
        .chain(role(Role::Output))
        .chain(role(Role::Scratch))
        .collect()
}

/// The buffers that get a window (a `window_params` entry and a `@transform_i`, numbered in
/// this order): inputs, initial contents and outputs.
pub fn windowed(kernel: &Kernel, initial: &[usize]) -> Vec<Buffer> {
    buffers(kernel, initial)
        .into_iter()
        .filter(|b| {
            matches!(
                kernel.operands[b.operand()].role,
                Role::Input | Role::Output
            )
        })
        .collect()
}

/// Appends the kernel function to `module_body`. `initial` lists the outputs that start as
/// the caller's buffer ([`crate::initial::outputs`]).
pub fn build<'c>(
    context: &'c Context,
    module_body: &Block<'c>,
    kernel: &Kernel,
    shapes: &Shapes,
    options: &Options,
    initial: &[usize],
) -> Result<()> {
    let outer = Emitter::new(context, module_body);
    let operand_types = buffer_types(context, kernel, shapes)?;
    let buffers = buffers(kernel, initial);
    let mut arg_types = vec![outer.ty("i32")?; kernel.grid.len()];
    arg_types.extend(buffers.iter().map(|b| operand_types[b.operand()]));
    let block = outer.block(&arg_types);
    let em = Emitter::new(context, &block);
    let grid: Vec<Val<'c>> = (0..kernel.grid.len()).map(|i| em.argument(i)).collect();
    let mut refs: Vec<Option<Val<'c>>> = vec![None; kernel.operands.len()];
    let mut initial_refs = Vec::new();
    for (k, b) in buffers.iter().enumerate() {
        let arg = em.argument(kernel.grid.len() + k);
        match *b {
            Buffer::Operand(i) => refs[i] = Some(arg),
            Buffer::Initial(i) => initial_refs.push((i, arg)),
        }
    }
    let mut lowering = FuncLowering::new(kernel, &kernel.body, shapes, options, grid, refs);
    initial::copy_in(&lowering, &em, &initial_refs)?;
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
            outer.attr(&format!(
                "{} : i64",
                count(Role::Prefetch) - kernel.grid_values().len()
            ))?,
        ),
        (
            "scratch_operands",
            outer.attr(&format!("{} : i64", count(Role::Scratch)))?,
        ),
        ("tpu.core_type", outer.attr("#tpu.core_type<tc>")?),
    ];
    if !kernel.grid.is_empty() {
        // Mosaic's dynamic size (`ShapedType::kDynamic`) for an axis sized at run time.
        let bounds: Vec<String> = shapes
            .grid
            .iter()
            .map(|n| n.map_or(i64::MIN, |n| n as i64).to_string())
            .collect();
        attributes.push((
            "iteration_bounds",
            outer.attr(&format!("array<i64: {}>", bounds.join(", ")))?,
        ));
        let params: Vec<String> = windowed(kernel, initial)
            .into_iter()
            .enumerate()
            .map(|(t, b)| {
                let i = b.operand();
                let o = &kernel.operands[i];
                // As Pallas: an operand left in HBM, or semaphores, have no window (and no
                // transform); a whole operand in SMEM has no window bounds, its transform an
                // affine map to zeros.
                match o.space {
                    Space::Local => {}
                    Space::Smem => return smem_window(kernel.grid.len(), o.shape.len()),
                    _ => return "{}".to_string(),
                }
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
