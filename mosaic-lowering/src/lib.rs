//! Lowers tpukit kernels to Mosaic, the TPU kernel dialect JAX Pallas emits, inside a StableHLO
//! `tpu_custom_call` — in process, with melior and MLIR 22, without Python or JAX.
//!
//! ```text
//! Kernel IR ──specialise shapes──▶ Mosaic module ──verify──▶ stable_mosaic bytecode v0
//!   (Bindings)      (rules table)    (func/arith/vector/scf    ──base64──▶ backend_config
//!                                     verified by MLIR)                     ▼
//!                                                              StableHLO @main + custom call
//! ```
//!
//! # The Mosaic module
//!
//! As Pallas emits it (jax 0.10.2): one kernel function with the grid indices (i32), scalar
//! prefetch, inputs, outputs and scratch as arguments (and, before the outputs, the initial
//! contents of outputs that need them: see [Outputs](#outputs)) and the attributes
//! `dimension_semantics`, `iteration_bounds`, `scalar_prefetch`, `scratch_operands`,
//! `tpu.core_type` and `window_params`, plus one `@transform_i` index-map function per
//! windowed argument ([`kernel_func`], [`transform`]). Each IR op is lowered by one rule, chosen by an
//! exhaustive `match` on the op ([`rules::lower`]): an IR op without a rule does not compile.
//!
//! `tests/conformance/test_golden.py` compares every catalog kernel with the same kernel
//! written in Pallas, structurally (ignoring locations, SSA names and dead code), and lists
//! each remaining difference with its reason. None is visible to libtpu's result: stores are
//! not preceded by Pallas's dead "swap" load; `pl.when` conditions are not widened to i32 and
//! compared again; float reductions run in f32 (a bf16 max too) and round after, not before,
//! the keepdims reshape; a rank-1 operand broadcasts to rank 2 in one `vector.broadcast`; a
//! `+=` loads its target after computing the right-hand side; `num_programs(i) - 1` stays a
//! subtraction of constants (Mosaic's canonicalizer folds it).
//!
//! # Shapes
//!
//! Symbolic extents are specialised when lowering ([`Shapes`]): the caller binds every symbol
//! in [`Options::bindings`], as JAX traces one kernel per concrete shape.
//!
//! # Edge blocks
//!
//! Shapes need not divide the block. Loads from an edge block read the operand's `fill` value
//! beyond the array ([`edge`]: an iota mask and a select, emitted only along dimensions the
//! block does not divide); stores beyond the array are dropped by Mosaic's pipeline, which
//! writes a partial edge block back only up to the array's end. Mosaic has no rank-1
//! `tpu.iota` (`iota rank below 2D unsupported`), so the positions of a 1-D access (and the
//! IR's rank-1 `iota`) come from a 2-D iota and a `vector.shape_cast`.
//!
//! # Outputs
//!
//! Mosaic never copies an output window in from HBM, even when the output is aliased. An
//! output the body loads from, or stores to under a mask (or every output, with
//! [`Options::alias_outputs`]), therefore gets its initial contents as an extra custom-call
//! operand aliased to it, windowed like it, and copied into its window on the first step of
//! each visit of a block ([`initial`]). Where the IR and the TPU still differ:
//!
//! - an output block the grid revisits after visiting another one in between may start the
//!   later visit from its contents before the earlier visit: Mosaic's pipeline does not
//!   order the earlier visit's write-back before the later visit's fetch (a Pallas kernel
//!   accumulating into an output block needs consecutive visits too). Steps along a
//!   `parallel` axis split across TensorCores (v4, v5p) are such revisits when they share an
//!   output block;
//! - an output that is neither read nor stored under a mask, without `alias_outputs`, starts
//!   undefined as in Pallas: elements of a visited block the body leaves unwritten are
//!   undefined afterwards (the IR keeps the caller's values), and so are blocks the grid never
//!   visits.
//!
//! # Tests
//!
//! Each lowering rule has a FileCheck test, `tests/lower/RULE.ir`: kernels written as IR text
//! (`tpukit_dsl::parse_kernel`; a `// RUN: extents SYM=N …` line binds their symbols), each
//! followed by `// CHECK:` lines on the Mosaic it lowers to (`-NEXT`, `-SAME`, `-NOT`, `-LABEL`;
//! `{{regex}}` inside a pattern) and `// HLO:` lines on the StableHLO around it, or by
//! `// expected-error:` lines. `tests/filecheck.rs` runs them (a failure names the file's line,
//! the pattern and the output around where it was looked for) and fails if any unary, binary,
//! comparison or reduction op is lowered by none; `tpukit lower --ir FILE --mosaic` shows what
//! a kernel lowers to while writing one, and the conformance suite compiles every case with
//! libtpu. `tests/catalog.rs` checks the catalog's kernels.
//!
//! # Import
//!
//! The crate `tpukit-import` (`importer/`) goes the other way: the Mosaic bodies JAX Pallas
//! emits become kernel IR, so real Pallas kernels run on tpukit's CPU backends.
//!
//! # Serialized form
//!
//! The body is the module with every op renamed `stable_mosaic.*` and the module attribute
//! `stable_mosaic.version` ([`Options::serde_version`], default 11), written as MLIR bytecode
//! version 0 and base64-encoded into `backend_config` with JAX's exact key order and spacing
//! ([`serde`], [`backend_config`]).

pub mod backend_config;
mod context;
pub mod custom_call;
pub mod edge;
mod emit;
mod forward;
pub mod initial;
pub mod kernel_func;
mod lowering;
pub mod mosaic_module;
mod options;
pub mod rules;
pub mod serde;
mod shapes;
pub mod tiling;
mod topology;
pub mod transform;
mod types;

pub use context::mosaic_context;
pub use options::{DEFAULT_SERDE_VERSION, Options};
pub use shapes::Shapes;
pub use topology::TOPOLOGIES;

use melior::ir::operation::{OperationLike, OperationPrintingFlags};
use tpukit_dsl::{BlockDim, DType, Error, ErrorKind, Kernel, Result};

/// Everything one lowering produces.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The Mosaic module, readable (what Pallas's lowering prints before serialization).
    pub mosaic: String,
    /// The serialized module (`stable_mosaic.*` ops), in generic form.
    pub serialized: String,
    /// MLIR bytecode of the serialized module: the custom call's body before base64.
    pub body: Vec<u8>,
    pub backend_config: String,
    /// The StableHLO module with the `tpu_custom_call`, as text libtpu's compiler parses.
    pub stablehlo: String,
}

/// Lowers `kernel`, specialised to `options.bindings`, to Mosaic and StableHLO.
/// f16 arrays have no Mosaic vector type on the TPUs tpukit targets: libtpu fails a kernel
/// that loads one ("Invalid vector type for load", v5e and v6e), so lowering one is refused
/// here, with what to use instead. (f16 runs on the CPU devices.)
fn refuse_f16(kernel: &Kernel) -> Result<()> {
    match kernel.operands.iter().find(|o| o.dtype == DType::F16) {
        Some(o) => Err(Error::new(format!(
            "operand `{}` is f16, which TPU kernels cannot load or store (v5e, v6e): use bf16 or f32",
            o.name
        ))
        .with_kind(ErrorKind::Unsupported)
        .in_kernel(&kernel.name)),
        None => Ok(()),
    }
}

/// Element-offset windows (`BlockDim::Element`, from an imported `pl.Element` block spec)
/// run on the CPU devices; lowering them back to Mosaic's `#tpu.element_window` is not built.
fn refuse_element_windows(kernel: &Kernel) -> Result<()> {
    let element = |o: &&tpukit_dsl::Operand| match &o.window {
        tpukit_dsl::Window::Blocked(b) => b.block.iter().any(|d| matches!(d, BlockDim::Element(_))),
        tpukit_dsl::Window::Whole => false,
    };
    match kernel.operands.iter().find(element) {
        Some(o) => Err(Error::new(format!(
            "operand `{}` has an element-offset window (`pl.Element`), which tpukit does not \
             lower to Mosaic yet (it runs on `cpu` and `interpret`)",
            o.name
        ))
        .with_kind(ErrorKind::Unsupported)
        .in_kernel(&kernel.name)),
        None => Ok(()),
    }
}

pub fn lower(kernel: &Kernel, options: &Options) -> Result<Lowered> {
    tpukit_dsl::verify(kernel)?;
    refuse_f16(kernel)?;
    refuse_element_windows(kernel)?;
    let caller_shapes = Shapes::of(kernel, &options.bindings)?;
    let (kernel, shapes) = &tiling::lift_squeezed_rows(kernel, &caller_shapes)?;
    let kernel = &forward::stored_windows(kernel);
    let initial = initial::outputs(kernel, options.alias_outputs);
    let context = mosaic_context();
    let module = mosaic_module::build(&context, kernel, shapes, options, &initial)?;
    let serialized = serde::mangle(&context, &module, options.serde_version)?;
    let body = serde::bytecode(&serialized)?;
    let outputs: Vec<&tpukit_dsl::Operand> = kernel
        .operands
        .iter()
        .filter(|o| o.role == tpukit_dsl::Role::Output)
        .collect();
    let semaphores: Vec<usize> = (0..outputs.len())
        .filter(|&i| matches!(outputs[i].space, tpukit_dsl::Space::Semaphore(_)))
        .collect();
    let config = backend_config::backend_config(&serde::base64(&body), &semaphores, outputs.len());
    let name = options.kernel_name.as_deref().unwrap_or(&kernel.name);
    let stablehlo = custom_call::build(
        &context,
        kernel,
        &caller_shapes,
        shapes,
        name,
        &config,
        &initial,
    )?;
    mosaic_module::verify(&context, &stablehlo)?;
    Ok(Lowered {
        mosaic: module.as_operation().to_string(),
        serialized: serialized
            .as_operation()
            .to_string_with_flags(OperationPrintingFlags::new().print_generic_operation_form())
            .expect("printable"),
        body,
        backend_config: config,
        stablehlo: stablehlo.as_operation().to_string(),
    })
}
