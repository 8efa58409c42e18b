//! The StableHLO module around the kernel: `@main` takes the custom call's operands (scalar
//! prefetch, then inputs) and returns its results (the outputs), as `jax.jit` of a
//! `pallas_call` lowers for TPU.
//!
//! ```text
//! %0:N = "stablehlo.custom_call"(%arg0, …) {api_version = 1 : i32, backend_config = "…",
//!     call_target_name = "tpu_custom_call", called_computations = [], has_side_effect = false,
//!     kernel_name = "…", mhlo.frontend_attributes = {kernel_metadata = "{}"},
//!     operand_layouts = [dense<[1, 0]> : tensor<2xindex>, …], result_layouts = […]}
//! ```
//!
//! Layouts are row-major. Scratch is not an operand. For each output that starts as the
//! caller's buffer ([`crate::initial`]), `@main` also takes the output's initial contents,
//! passed to the custom call after the inputs, and `output_operand_aliases` makes the custom
//! call write the output into them.

use crate::{Shapes, emit::Emitter, types};
use melior::{
    Context,
    ir::{Block, Location, Module, Region, RegionLike, operation::OperationMutLike},
};
use tpukit_dsl::{Kernel, Result, Role};

/// The row-major layout of a rank-`n` array: `dense<[n-1, …, 0]> : tensor<nxindex>`.
fn layout(rank: usize) -> String {
    match rank {
        0 => "dense<> : tensor<0xindex>".into(),
        1 => "dense<0> : tensor<1xindex>".into(),
        n => {
            let dims: Vec<String> = (0..n).rev().map(|d| d.to_string()).collect();
            format!("dense<[{}]> : tensor<{n}xindex>", dims.join(", "))
        }
    }
}

/// The `output_operand_aliases` entry making the custom call write output operand `output`
/// into its operand `operand_index`. As JAX writes it: the result's tuple index only when the
/// call has several results.
fn alias(outputs: &[usize], output: &usize, operand_index: usize) -> String {
    let tuple = if outputs.len() > 1 {
        let k = outputs
            .iter()
            .position(|o| o == output)
            .expect("an aliased output is an output");
        format!("[{k}]")
    } else {
        "[]".into()
    };
    format!(
        "#stablehlo.output_operand_alias<output_tuple_indices = {tuple}, operand_index = {operand_index}, operand_tuple_indices = []>"
    )
}

/// Quotes `s` as an MLIR string literal.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\22"),
            '\\' => out.push_str("\\5C"),
            '\n' => out.push_str("\\0A"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `kernel` and `shapes` are what the kernel sees (after [`crate::tiling`]); `@main` takes and
/// returns arrays of the caller's `shapes`, reshaped where they differ. `initial` lists the
/// outputs (operand indices) whose initial contents `@main` takes.
pub fn build<'c>(
    context: &'c Context,
    kernel: &Kernel,
    caller: &Shapes,
    shapes: &Shapes,
    kernel_name: &str,
    backend_config: &str,
    initial: &[usize],
) -> Result<Module<'c>> {
    let mut module = Module::new(Location::unknown(context));
    let em = Emitter::new(context, &module.body());
    for (name, value) in [
        ("sym_name", quote(&format!("jit_{}", kernel.name))),
        ("mhlo.num_partitions", "1 : i32".into()),
        ("mhlo.num_replicas", "1 : i32".into()),
    ] {
        module
            .as_operation_mut()
            .set_attribute(name, em.attr(&value)?);
    }
    let tensor = |i: usize| types::tensor(&shapes.operands[i], kernel.operands[i].dtype);
    let caller_tensor = |i: usize| types::tensor(&caller.operands[i], kernel.operands[i].dtype);
    let ids = |role| kernel.operands_with_role(role).map(|(id, _)| id.0 as usize);
    let mut operands: Vec<usize> = ids(Role::Prefetch).chain(ids(Role::Input)).collect();
    let outputs: Vec<usize> = ids(Role::Output).collect();
    let first_alias = operands.len();
    operands.extend(initial);
    let operand_types: Vec<String> = operands.iter().map(|&i| caller_tensor(i)).collect();
    let result_types: Vec<String> = outputs.iter().map(|&i| caller_tensor(i)).collect();

    let block = Block::new(
        &operand_types
            .iter()
            .map(|t| Ok((em.ty(t)?, em.location)))
            .collect::<Result<Vec<_>>>()?,
    );
    let body = Emitter::new(context, &block);
    let reshape = |v, from: String, to: String| -> Result<_> {
        if from == to {
            Ok(v)
        } else {
            body.op1("stablehlo.reshape", &[v], body.ty(&to)?, &[])
        }
    };
    let args = operands
        .iter()
        .enumerate()
        .map(|(k, &i)| reshape(body.argument(k), caller_tensor(i), tensor(i)))
        .collect::<Result<Vec<_>>>()?;
    let layouts = |ids: &[usize]| {
        let l: Vec<String> = ids
            .iter()
            .map(|&i| layout(shapes.operands[i].len()))
            .collect();
        format!("[{}]", l.join(", "))
    };
    let mut attributes = vec![
        ("api_version", body.attr("1 : i32")?),
        ("backend_config", body.attr(&quote(backend_config))?),
        ("call_target_name", body.attr("\"tpu_custom_call\"")?),
        ("called_computations", body.attr("[]")?),
        ("has_side_effect", body.attr("false")?),
        ("kernel_name", body.attr(&quote(kernel_name))?),
        (
            "mhlo.frontend_attributes",
            body.attr("{kernel_metadata = \"{}\"}")?,
        ),
        ("operand_layouts", body.attr(&layouts(&operands))?),
        ("result_layouts", body.attr(&layouts(&outputs))?),
    ];
    if !initial.is_empty() {
        let aliases: Vec<String> = initial
            .iter()
            .enumerate()
            .map(|(k, i)| alias(&outputs, i, first_alias + k))
            .collect();
        attributes.push((
            "output_operand_aliases",
            body.attr(&format!("[{}]", aliases.join(", ")))?,
        ));
    }
    let result_mlir = outputs
        .iter()
        .map(|&i| body.ty(&tensor(i)))
        .collect::<Result<Vec<_>>>()?;
    let results = body.op("stablehlo.custom_call", &args, &result_mlir, &attributes)?;
    let results = results
        .into_iter()
        .zip(&outputs)
        .map(|(v, &i)| reshape(v, tensor(i), caller_tensor(i)))
        .collect::<Result<Vec<_>>>()?;
    body.op("func.return", &results, &[], &[])?;
    let region = Region::new();
    region.append_block(block);
    em.op_with_regions(
        "func.func",
        &[],
        &[],
        &[
            ("sym_name", em.attr("\"main\"")?),
            ("sym_visibility", em.attr("\"public\"")?),
            (
                "function_type",
                em.attr(&format!(
                    "({}) -> ({})",
                    operand_types.join(", "),
                    result_types.join(", ")
                ))?,
            ),
        ],
        vec![region],
    )?;
    Ok(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_row_major() {
        assert_eq!(layout(0), "dense<> : tensor<0xindex>");
        assert_eq!(layout(1), "dense<0> : tensor<1xindex>");
        assert_eq!(layout(3), "dense<[2, 1, 0]> : tensor<3xindex>");
    }

    #[test]
    fn strings_escape_as_mlir_prints_them() {
        assert_eq!(quote(r#"{"a": 1}"#), r#""{\22a\22: 1}""#);
    }
}
