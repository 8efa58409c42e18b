//! The reverse direction: Mosaic kernels that JAX Pallas lowered, back to kernel IR.
//!
//! ```text
//! pallas_call ──jax.export(platforms=["tpu"])──▶ StableHLO with tpu_custom_call
//!   └─ backend_config body (base64 MLIR bytecode, stable_mosaic.* ops)
//!        ──jaxlib: parse bytecode, print generic (Python side)──▶ text with #tpu.memory_space
//!        ──memory_space::rewrite──▶ text upstream MLIR parses
//!        ──melior (MLIR 22, unregistered dialects allowed)──▶ ops
//!        ──rules table, one rule per op──▶ Kernel
//! ```
//!
//! # Getting past `#tpu.memory_space<…>`
//!
//! Upstream MLIR cannot parse `memref<…, #tpu.memory_space<vmem>>` without the tpu dialect,
//! and the bytecode reader fails the same way. So the body is read in two steps: jaxlib,
//! which has the tpu dialect and is present wherever JAX lowered the kernel, turns the
//! bytecode into generic text (`tpukit/_lowering.py`); here `memory_space::rewrite` replaces
//! each memory space by an integer memory space (lossless: [`MemorySpace`] reads it back), and
//! melior parses the result in [`tpukit_mosaic::mosaic_context`]. The body stays in its serialized
//! form (`stable_mosaic.*` op names): every op is then unregistered, so all attributes are
//! plain, version-independent entries of its attribute dictionary, and no upstream verifier
//! second-guesses Mosaic's ops. Other tpu attributes (`#tpu.dimension_semantics<…>`,
//! `#tpu.dot_dimension_numbers<…>`) parse as opaque attributes and are read from their
//! printed form (`text`).
//!
//! # What is imported
//!
//! The kernel function's signature becomes a [`tpukit_dsl::CallSpec`] (`kernel_func`): the
//! grid from `iteration_bounds` and `dimension_semantics`, scalar prefetch, windows from
//! `window_params` with their `@transform_i` index maps (`index_map`), scratch. The body
//! is imported op by op through `rules::MOSAIC`: arith and math, `vector.load`,
//! `tpu.vector_store` (masked too), `memref.load/store` (SMEM scalars), `vector.broadcast`,
//! `shape_cast`, `transpose`, `multi_reduction`, `vector.extract` at constant positions,
//! `extract_strided_slice` (unit strides), `tpu.matmul`, `tpu.iota`, `tpu.transpose`,
//! `tpu.concatenate`, `tpu.dynamic_rotate` (these two, and slices wider than one element,
//! through a scratch buffer of their own, added after the kernel's), `tpu.dynamic_gather`,
//! `tpu.bitcast`, the TensorCore PRNG (`prng`, its state in a scratch buffer too), `scf.for`,
//! `scf.if` and `scf.while`; manual DMA, semaphores and `tpu.region` scopes (`dma`);
//! `tpu.memref_reshape`/`memref_bitcast` views read by `vector.load` and `tpu.strided_load`,
//! written by `vector.store` (`ref_view`), sliced and copied. Anything else — an op, a
//! memory space, a dtype, a predicate, a dynamic shape — is an error naming it and, where
//! the body has one, the Python source location; errors about unsupported input are of kind
//! [`ErrorKind::Unsupported`](tpukit_dsl::ErrorKind).
//!
//! # Pure JAX functions
//!
//! A JAX function without a Pallas call lowers to plain StableHLO; [`import_stablehlo`]
//! imports its `@main` as a single-step kernel over whole arrays, one rule per StableHLO op
//! (see `stablehlo`).

mod bitcast;
mod chosen_size;
mod dma;
mod element_window;
mod gather;
mod index_map;
mod kernel_func;
mod memory_space;
mod parity;
mod prng;
mod reduce_index;
mod reduce_precision;
mod ref_view;
mod rules;
mod scope;
mod stablehlo;
mod text;
mod unsigned;
mod vmem;

pub use memory_space::MemorySpace;
pub use stablehlo::{import_stablehlo, supported_ops as stablehlo_ops};

use melior::ir::{
    BlockLike, Module, RegionLike,
    operation::{OperationLike, OperationRef},
};
use scope::{Scope, Val, attr, op_name};
use std::{cell::RefCell, collections::HashMap, rc::Rc};
use tpukit_dsl::{Error, Kernel, KernelBuilder, Result, Role, Type};
use tpukit_mosaic::mosaic_context;

/// Parses a printed tensor type (`tensor<16x128xf32>`) into a kernel-IR type.
pub fn tensor_type(s: &str) -> Result<Type> {
    text::value_ty(s)
}

/// Imports the Mosaic module `body` (generic text as jaxlib prints the deserialized body) of
/// a `tpu_custom_call` whose operands have types `operands` (scalar-prefetch arrays first,
/// then inputs) and whose results have types `results`. The kernel is called `name`.
pub fn import_mosaic(
    body: &str,
    operands: &[Type],
    results: &[Type],
    name: &str,
) -> Result<Kernel> {
    import_mosaic_with(body, operands, results, name, &CallOptions::default())
}

/// What a `tpu_custom_call` says of its kernel beyond the body and the types.
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    /// The call's results that alias operands (`output_operand_aliases`: `(result, operand)`
    /// pairs, operands counted as the call passes them). An input left in HBM that aliases
    /// an output in HBM is the output's memory: a kernel that copies into it (a Pallas
    /// kernel over refs closed over from `pl.run_state`, discharged into aliased operands)
    /// writes the output.
    pub aliases: Vec<(usize, usize)>,
    /// The VMEM the call was compiled with (Pallas' `vmem_limit_bytes`): a kernel whose
    /// windows and VMEM scratch need more is refused as a TPU's compiler refuses it; without
    /// one, the limit is a v5e's default scoped VMEM (16 MiB).
    pub vmem_limit: Option<usize>,
}

/// [`import_mosaic`] of a call with [`CallOptions`].
pub fn import_mosaic_with(
    body: &str,
    operands: &[Type],
    results: &[Type],
    name: &str,
    options: &CallOptions,
) -> Result<Kernel> {
    import_mosaic_inner(body, operands, results, name, options).map_err(|e| e.in_kernel(name))
}

fn import_mosaic_inner(
    body: &str,
    operands: &[Type],
    results: &[Type],
    name: &str,
    options: &CallOptions,
) -> Result<Kernel> {
    let aliases = options.aliases.as_slice();
    let text = memory_space::rewrite(body)?;
    let context = mosaic_context();
    let module = parse(&context, &text)?;
    let mut funcs: HashMap<String, OperationRef<'_, '_>> = HashMap::new();
    let mut kernel_fn = None;
    let mut op = module.body().first_operation();
    while let Some(o) = op {
        if op_name(&o) == "func.func" {
            let sym = attr(&o, "sym_name")?.trim_matches('"').to_string();
            if o.has_attribute("scalar_prefetch") {
                if kernel_fn.is_some() {
                    return Err(Error::new("the Mosaic module has two kernel functions"));
                }
                kernel_fn = Some(o);
            }
            funcs.insert(sym, o);
        }
        op = o.next_in_block();
    }
    let kernel_fn =
        kernel_fn.ok_or_else(|| Error::new("the Mosaic module has no kernel function"))?;
    let mut sig =
        kernel_func::signature(&kernel_fn, &funcs, operands, results, options.vmem_limit)?;
    // A Pallas output holds nothing until the kernel writes it, unless an input aliases it.
    for (j, output) in sig.spec.outputs.iter_mut().enumerate() {
        if !aliases.iter().any(|&(result, _)| result == j) {
            output.initial = tpukit_dsl::Initial::Undefined;
        }
    }
    // Ops that go through memory (concatenations, rotations) get a scratch buffer each, after
    // the kernel's own.
    let mut through_memory = Vec::new();
    stablehlo::walk(&kernel_fn, &mut |x| {
        if let Some(t) = rules::mosaic_scratch_type(x) {
            through_memory.push((scope::op_key(x), t));
        }
    });
    for (_, t) in &through_memory {
        let t = t.clone()?;
        sig.spec
            .scratch
            .push(tpukit_dsl::ArraySpec::new(t.dtype, t.shape));
    }
    // Scoped allocations (`pl.run_scoped`) become scratch operands too, after those.
    let mut allocations = Vec::new();
    stablehlo::walk(&kernel_fn, &mut |x| {
        if let Some(a) = dma::allocation(x) {
            allocations.push((scope::op_key(x), a));
        }
    });
    let mut allocation_keys = Vec::new();
    for (key, a) in allocations {
        sig.spec.scratch.push(a?);
        allocation_keys.push(key);
    }
    // The PRNG's state, last, when the kernel seeds or draws.
    let mut uses_prng = false;
    stablehlo::walk(&kernel_fn, &mut |x| uses_prng |= prng::uses_state(x));
    if uses_prng {
        sig.spec.scratch.push(prng::state_spec());
    }
    let mut b = KernelBuilder::new(name, &sig.spec)?;
    let mut scope = Scope::default();
    let block = kernel_fn
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| Error::new("the kernel function has no body"))?;
    let grid_rank = sig.spec.grid.len();
    for axis in 0..grid_rank {
        let pid = b.program_id(axis)?;
        scope.bind_value(block.argument(axis).expect("in range").into(), pid);
    }
    for n in 0..sig.n_values {
        b.declare(Role::Prefetch, &format!("grid_extent{n}"))?;
    }
    let redirected = aliased_targets(&kernel_fn, &block, grid_rank, &sig, operands, aliases);
    let mut counts: HashMap<Role, usize> = HashMap::new();
    let mut refs = Vec::with_capacity(sig.roles.len());
    for role in &sig.roles {
        let n = counts.entry(*role).or_default();
        let label = match role {
            Role::Prefetch => format!("prefetch{n}"),
            Role::Input => format!("in{n}"),
            Role::Output => format!("out{n}"),
            Role::Scratch => format!("scratch{n}"),
        };
        *n += 1;
        refs.push(b.declare(*role, &label)?);
    }
    for (i, &r) in refs.iter().enumerate() {
        let r = redirected
            .iter()
            .find(|(input, _)| *input == i)
            .map_or(r, |&(_, output)| refs[output]);
        let arg = block.argument(grid_rank + i).expect("in range");
        scope.bind(arg.into(), Val::Ref(r));
    }
    for (key, _) in &through_memory {
        let n = counts.entry(Role::Scratch).or_default();
        let r = b.declare(Role::Scratch, &format!("scratch{n}"))?;
        *n += 1;
        scope.scratch.insert(*key, r);
    }
    dma::declare(&mut b, &mut scope, &allocation_keys, &mut counts)?;
    if uses_prng {
        let n = counts.entry(Role::Scratch).or_default();
        scope.prng_state = Some(b.declare(Role::Scratch, &format!("scratch{n}"))?);
        *n += 1;
    }
    scope.ops(&mut b, block, rules::MOSAIC)?;
    b.finish()
}

/// The `(input, output)` kernel arguments (counted after the grid indices) such that the
/// input aliases the output, both whole (no window) and in one memory space (HBM, VMEM or
/// SMEM), and the body writes into the input — a copy (`tpu.enqueue_dma`) or a vector or
/// scalar store, directly or through views of it: the kernel's ref of the input is then the
/// output's (the same memory on a TPU, as `pl.run_state`, `jax.new_ref` and
/// `pl.empty_ref_like` refs of a `pl.core_map` give them; here the output starts as the
/// input's contents, so reads see the same values too). An aliased pair of semaphore arrays
/// is always one (a copy signalling the input is waited on through the output, in this
/// kernel or the next). A windowed input keeps its own block, as a TPU's pipeline gives it.
fn aliased_targets(
    kernel_fn: &OperationRef<'_, '_>,
    block: &melior::ir::BlockRef<'_, '_>,
    grid_rank: usize,
    sig: &kernel_func::Signature,
    operands: &[Type],
    aliases: &[(usize, usize)],
) -> Vec<(usize, usize)> {
    let args: HashMap<usize, usize> = (0..sig.roles.len())
        .map(|i| {
            (
                scope::key(block.argument(grid_rank + i).expect("in range").into()),
                i,
            )
        })
        .collect();
    // Each view's base argument (views of views resolved), and the arguments copied into.
    let mut base: HashMap<usize, usize> = args.clone();
    let mut written = Vec::new();
    stablehlo::walk(kernel_fn, &mut |op| {
        let operand = |i| op.operand(i).ok().map(|v: melior::ir::Value| scope::key(v));
        match op_name(op).as_str() {
            "tpu.memref_slice" | "tpu.memref_squeeze" | "tpu.memref_reshape"
            | "tpu.memref_bitcast" => {
                if let (Some(from), Ok(r)) =
                    (operand(0).and_then(|k| base.get(&k).copied()), op.result(0))
                {
                    base.insert(scope::key(r.into()), from);
                }
            }
            // The destination of a copy, the ref of a store.
            "tpu.enqueue_dma" | "vector.store" | "tpu.vector_store" | "memref.store" => {
                if let Some(arg) = operand(1).and_then(|k| base.get(&k).copied()) {
                    written.push(arg);
                }
            }
            _ => {}
        }
    });
    let n_values = sig.n_values;
    let n_in = operands.len() - n_values;
    let one_buffer = |a: &tpukit_dsl::ArraySpec, b: &tpukit_dsl::ArraySpec| {
        a.block.is_none() && b.block.is_none() && a.space == b.space
    };
    aliases
        .iter()
        .filter_map(|&(result, operand)| {
            let input = operand.checked_sub(n_values)?;
            let output = n_in + result;
            let n_prefetch = sig.spec.prefetch.len() - n_values;
            let in_spec = sig.spec.inputs.get(input.checked_sub(n_prefetch)?)?;
            let out_spec = sig.spec.outputs.get(result)?;
            let semaphores = matches!(in_spec.space, tpukit_dsl::Space::Semaphore(_));
            (one_buffer(in_spec, out_spec) && (semaphores || written.contains(&input)))
                .then_some((input, output))
        })
        .collect()
}

/// Parses MLIR text, turning the parser's diagnostics into the error. Text with a NUL byte is
/// refused first: melior passes the text as a C string and panics on one.
fn parse<'c>(context: &'c melior::Context, text: &str) -> Result<Module<'c>> {
    if let Some(at) = text.find('\0') {
        return Err(Error::new(format!(
            "cannot parse the MLIR text: a NUL byte at offset {at}"
        )));
    }
    let diagnostics = Rc::new(RefCell::new(Vec::<String>::new()));
    let sink = Rc::clone(&diagnostics);
    let id = context.attach_diagnostic_handler(move |d| {
        sink.borrow_mut().push(d.to_string());
        true
    });
    let module = Module::parse(context, text);
    context.detach_diagnostic_handler(id);
    module.ok_or_else(|| {
        Error::new(format!(
            "cannot parse the Mosaic body: {}",
            diagnostics.borrow().join("; ")
        ))
    })
}
