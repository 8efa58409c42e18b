//! Kernel IR → LLVM IR.
//!
//! The emitted entry function (see [`abi`](super::abi)) loops over its share of the grid; at
//! each step it places every blocked operand's window (evaluating the index map, checking the
//! start lies inside the array) and runs the body, emitted once. A window inside its array is
//! a view (no copy, no per-element checks: the common case, and the one LLVM vectorises
//! best); a window that overhangs its array (an edge block) is staged through a block-sized
//! buffer, filled with the operand's fill value where it lies outside the array and, for
//! outputs, written back only where it lies inside (see `window`).
//!
//! Values are fused, not materialised: an elementwise value is a recipe for one element at a
//! given index ([`Val::Lazy`]), and a `store` emits one loop nest that computes every element
//! of the stored value in registers. A value is stored in the workspace ([`Val::Buffer`]) only
//! when recomputing it would cost more (used twice or inside a loop it is defined outside of),
//! when it is a reduction, a `dot` or a loop/branch result, or when it loads from an operand
//! the kernel also stores to (a load sees memory as it was at the load). A value with one
//! value per row (see `uniform`) is computed at lane 0 only, and materialised one element per
//! row ([`Val::Rows`]).

mod access;
mod alias;
mod analysis;
mod bf16_round;
mod bitcast;
pub(super) mod clip;
mod control;
mod deferred;
mod dense;
mod dma;
mod dot;
mod dot_bf16;
mod erf_table;
mod fuse;
mod gather;
mod interleave;
mod kept;
mod loops;
mod minmax;
mod print;
mod reduce;
mod roll;
mod scalar;
mod snapshot;
mod transpose;
mod uniform;
mod value;
mod window;

use super::abi::field;
use analysis::Uses;
use inkwell::AddressSpace;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicMetadataTypeEnum, BasicTypeEnum};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValueEnum, FunctionValue, IntValue, PointerValue, ValueKind,
};
use std::collections::HashMap;
use tpukit_dsl::{DType, ErrorKind, Kernel, Loc, Op, OpKind, OperandId};
pub(crate) use value::Val;

pub(crate) type Result<T> = std::result::Result<T, CodegenError>;

/// Code generation failed: an op the backend cannot compile ([`ErrorKind::Unsupported`],
/// what a message converts to), or an internal error ([`CodegenError::internal`]).
/// `located` once the message names the op and its source line.
#[derive(Debug)]
pub(crate) struct CodegenError {
    pub kind: ErrorKind,
    pub message: String,
    pub located: bool,
}

impl CodegenError {
    /// A broken invariant of the code generator (a bug in tpukit, not in the kernel).
    pub fn internal(message: impl std::fmt::Display) -> CodegenError {
        CodegenError {
            kind: ErrorKind::Internal,
            message: format!("internal error: {message}"),
            located: false,
        }
    }
}

impl From<BuilderError> for CodegenError {
    fn from(e: BuilderError) -> CodegenError {
        CodegenError::internal(format!("LLVM builder: {e}"))
    }
}

impl From<String> for CodegenError {
    fn from(message: String) -> CodegenError {
        CodegenError {
            kind: ErrorKind::Unsupported,
            message,
            located: false,
        }
    }
}

impl From<&str> for CodegenError {
    fn from(m: &str) -> CodegenError {
        m.to_string().into()
    }
}

/// What the code generator is asked for beyond the kernel.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CodegenOptions {
    /// Check every element access against its array and report the element (debug mode).
    pub debug: bool,
    /// Lanes of the widest float vector the `dot` micro-kernel uses (8 for AVX2, 16 for
    /// AVX-512).
    pub vector_lanes: u32,
    /// bf16 × bf16 `dot`s use AVX-512 BF16's `vdpbf16ps` (the target has it; see `dot_bf16`).
    pub bf16_dot: bool,
    /// Rounding to bf16 converts with AVX-512 BF16's `vcvtneps2bf16` (exactly: see
    /// `bf16_round`); the target has it, AVX-512 DQ's `vfpclassps` and AVX-512 VL.
    pub bf16_convert: bool,
    /// Vector `maximum`/`minimum` of f32 use AVX-512 DQ's `vrangeps` (see `minmax`); the
    /// target has AVX-512 DQ and VL.
    pub minmax_range: bool,
    /// `erf` reads piecewise polynomials from tables with AVX-512F's `vpermi2ps`, in vector
    /// lanes and scalar code alike (see `erf_table`); the target has AVX-512F.
    pub erf_table: bool,
}

/// After `default<O3>`: the target-specific rewrites that must wait for vectorisation
/// (`minmax`'s `vrangeps`, inlining `kept`'s helpers), then the inliner and a cleanup.
pub(crate) fn finish(
    m: &Module<'_>,
    machine: &inkwell::targets::TargetMachine,
    options: CodegenOptions,
) -> Result<()> {
    let ranged = options.minmax_range && minmax::use_range(m)?;
    let released = kept::release(m);
    if !(ranged || released) {
        return Ok(());
    }
    // One instcombine round: run alone, the pass checks it reached a fixpoint and aborts the
    // process (an LLVM fatal error) when it did not; the default pipeline turns that off too.
    m.run_passes(
        "always-inline,globaldce,function(instcombine<no-verify-fixpoint>,simplifycfg)",
        machine,
        inkwell::passes::PassBuilderOptions::create(),
    )
    .map_err(|e| CodegenError::internal(format!("LLVM passes: {e}")))
}

/// An op the generated code can report a failure at.
#[derive(Clone, Debug)]
pub(crate) struct OpSite {
    pub name: String,
    pub loc: Option<Loc>,
    /// The operand a load or store accesses.
    pub operand: Option<OperandId>,
}

/// The result of code generation.
pub(crate) struct Emitted<'ctx> {
    pub module: Module<'ctx>,
    pub workspace_bytes: usize,
    pub sites: Vec<OpSite>,
}

/// What a failed check records (see [`abi::field`](super::abi::field)).
struct Report<'ctx> {
    code: i64,
    /// The operand (for window checks) or the op's site number.
    subject: i64,
    dim: usize,
    value: IntValue<'ctx>,
    extent: IntValue<'ctx>,
    /// An access's size, or -1 for a single index.
    size: i64,
    /// For window checks: every block index the index map gave (i32).
    blocks: Vec<IntValue<'ctx>>,
}

impl<'ctx> Report<'ctx> {
    fn new(
        code: i64,
        subject: i64,
        dim: usize,
        value: IntValue<'ctx>,
        extent: IntValue<'ctx>,
    ) -> Self {
        Report {
            code,
            subject,
            dim,
            value,
            extent,
            size: -1,
            blocks: Vec::new(),
        }
    }
}

/// One operand as the generated code sees it.
struct OperandState<'ctx> {
    ptr: PointerValue<'ctx>,
    dims: Vec<IntValue<'ctx>>,
    /// Row-major element strides of the array (the last is 1).
    strides: Vec<IntValue<'ctx>>,
    numel: IntValue<'ctx>,
    /// The ref at the current step: element `idx` of the ref is at
    /// `base + sum(idx[k] * ref_strides[k])`, and `span` elements from `base` are addressable.
    /// For a whole operand, the array itself; for a window inside its array, a view of it; for
    /// a window that overhangs its array, a staging copy in the workspace (see `window`).
    base: PointerValue<'ctx>,
    ref_strides: Vec<IntValue<'ctx>>,
    span: IntValue<'ctx>,
    /// Blocked operands: where the window starts, whether it lies inside the array, and its
    /// staging buffer.
    origin: Vec<IntValue<'ctx>>,
    fits: Option<IntValue<'ctx>>,
    stage: Option<PointerValue<'ctx>>,
    /// Blocked outputs: the workspace record of the window's origin at the previous step.
    last_origin: Option<PointerValue<'ctx>>,
}

pub(crate) struct Emitter<'ctx, 'k> {
    ctx: &'ctx Context,
    module: Module<'ctx>,
    b: Builder<'ctx>,
    func: FunctionValue<'ctx>,
    kernel: &'k Kernel,
    options: CodegenOptions,
    operands: Vec<OperandState<'ctx>>,
    /// Operands some store writes: loads from them are materialised.
    stored: Vec<OperandId>,
    uses: Uses,
    /// Which values of the body are lane-uniform (see `uniform`).
    uniform: uniform::Uniform,
    /// The current grid point and the grid's extents (i64).
    point: Vec<IntValue<'ctx>>,
    grid: Vec<IntValue<'ctx>>,
    workspace: PointerValue<'ctx>,
    workspace_bytes: usize,
    status: PointerValue<'ctx>,
    /// The runtime's helper functions ([`abi::helper`](super::abi::helper)).
    helpers: PointerValue<'ctx>,
    /// The `dims` argument: every operand's extents, concatenated.
    dims_param: PointerValue<'ctx>,
    fail: BasicBlock<'ctx>,
    sites: Vec<OpSite>,
    site_of: HashMap<*const Op, usize>,
    /// The op being emitted (its site number), for failure reports.
    site: i64,
    /// `dot`s that add themselves to a ref, and the ops they make redundant (see `fuse`).
    accumulations: HashMap<*const Op, fuse::Accumulate<'k>>,
    fused: std::collections::HashSet<*const Op>,
    /// Every workspace buffer's base, in allocation order (see `alias`).
    buffers: Vec<PointerValue<'ctx>>,
    /// Loads of stored operands that need no snapshot (see `snapshot`).
    unsnapshotted: std::collections::HashSet<*const Op>,
    /// Workspace offsets of the words the body zeroes on entry (the flags of `window`'s
    /// origin records): the runtime does not zero the workspace.
    zero_on_entry: Vec<usize>,
    /// Outputs whose store runs only at the last step of the innermost axis (see `deferred`).
    deferred: Vec<OperandId>,
    /// The innermost loop of the loop nest being emitted, if any (see `loops::LaneLoop`).
    lane_loop: Option<loops::LaneLoop<'ctx>>,
    /// The window shape of a kernel whose edge steps are clipped, not staged (see `clip`),
    /// and where the current step's windows end inside their arrays: loop nests over that
    /// shape run to those extents.
    clip: Option<clip::Clip>,
    clip_extents: Vec<IntValue<'ctx>>,
}

/// Generates the module for `kernel`, exporting `entry`.
pub(crate) fn emit<'ctx>(
    ctx: &'ctx Context,
    kernel: &Kernel,
    entry: &str,
    options: CodegenOptions,
) -> Result<Emitted<'ctx>> {
    let module = ctx.create_module(entry);
    let (_, body) = declare(ctx, &module, kernel, entry)?;
    let b = ctx.create_builder();
    let func = body;
    let start = ctx.append_basic_block(func, "entry");
    let fail = ctx.append_basic_block(func, "fail");
    b.position_at_end(fail);
    b.build_return(Some(&ctx.i32_type().const_int(1, false)))?;
    b.position_at_end(start);
    let param = |i: u32| func.get_nth_param(i).expect("declared above");
    let n = kernel.operands.len() as u32;
    let mut stored = Vec::new();
    analysis::stored_operands(&kernel.body.body, &mut stored);
    let clip = (!options.debug).then(|| clip::clip(kernel)).flatten();
    let mut e = Emitter {
        ctx,
        module,
        b,
        func,
        kernel,
        options,
        operands: Vec::new(),
        stored,
        uses: Uses::of(&kernel.body),
        uniform: uniform::Uniform::of(kernel),
        point: Vec::new(),
        grid: Vec::new(),
        workspace: param(n + 2).into_pointer_value(),
        workspace_bytes: 0,
        status: param(n + 5).into_pointer_value(),
        helpers: param(n + 6).into_pointer_value(),
        dims_param: param(n).into_pointer_value(),
        fail,
        sites: Vec::new(),
        site_of: HashMap::new(),
        site: -1,
        accumulations: HashMap::new(),
        fused: Default::default(),
        buffers: Vec::new(),
        unsnapshotted: Default::default(),
        zero_on_entry: Vec::new(),
        deferred: Vec::new(),
        lane_loop: None,
        clip,
        clip_extents: Vec::new(),
    };
    e.deferred = e.deferred_outputs();
    let ptrs: Vec<PointerValue> = (0..n).map(|i| param(i).into_pointer_value()).collect();
    e.bind_operands(&ptrs, param(n).into_pointer_value())?;
    e.grid = (0..kernel.grid.len())
        .map(|a| e.load_i64(param(n + 1).into_pointer_value(), a as i64))
        .collect::<Result<_>>()?;
    let (lo, hi) = (param(n + 3).into_int_value(), param(n + 4).into_int_value());
    e.grid_loops(lo, hi)?;
    e.b.build_return(Some(&ctx.i32_type().const_zero()))?;
    e.zero_records(start)?;
    e.scope_buffers();
    if !(func.verify(false)
        && e.module
            .get_function(entry)
            .is_some_and(|f| f.verify(false)))
    {
        return Err(CodegenError::internal(format!(
            "invalid LLVM IR for kernel `{}`:\n{}",
            kernel.name,
            e.module.print_to_string().to_string()
        )));
    }
    Ok(Emitted {
        workspace_bytes: e.workspace_bytes,
        sites: e.sites,
        module: e.module,
    })
}

/// How many leading grid axes the runtime splits across workers (taken together, linearised
/// row-major): every leading `parallel` axis, or just the first axis if it is `arbitrary`
/// (whose range the runtime then never splits). 0 for a 0-d grid.
pub(crate) fn split_axes(kernel: &Kernel) -> usize {
    let parallel = kernel
        .grid
        .iter()
        .take_while(|a| a.semantics == tpukit_dsl::Semantics::Parallel)
        .count();
    parallel.max(kernel.grid.len().min(1))
}

/// Declares the exported entry (the ABI in [`abi`](super::abi)) and the private body it calls
/// with one `noalias` pointer per operand (the entry loads them from the operand array; after
/// inlining, LLVM keeps the no-alias facts, so loops need no runtime overlap checks).
/// Returns (entry, body); the entry is complete, the body empty.
fn declare<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    kernel: &Kernel,
    entry: &str,
) -> Result<(FunctionValue<'ctx>, FunctionValue<'ctx>)> {
    let ptr = ctx.ptr_type(AddressSpace::default());
    let i64t = ctx.i64_type();
    let i32t = ctx.i32_type();
    let abi = [ptr, ptr, ptr, ptr].map(Into::into);
    let tail = [i64t.into(), i64t.into(), ptr.into(), ptr.into()];
    let outer = module.add_function(
        entry,
        i32t.fn_type(&[&abi[..], &tail[..]].concat(), false),
        Some(Linkage::External),
    );
    let n = kernel.operands.len();
    let mut params: Vec<BasicMetadataTypeEnum> = vec![ptr.into(); n + 3];
    params.extend::<[BasicMetadataTypeEnum; 4]>([i64t.into(), i64t.into(), ptr.into(), ptr.into()]);
    let inner = module.add_function(
        &format!("{entry}.body"),
        i32t.fn_type(&params, false),
        Some(Linkage::Private),
    );
    let kind = |name| Attribute::get_named_enum_kind_id(name);
    for i in (0..n + 3).chain([n + 5]) {
        inner.add_attribute(
            AttributeLoc::Param(i as u32),
            ctx.create_enum_attribute(kind("noalias"), 0),
        );
    }
    inner.add_attribute(
        AttributeLoc::Function,
        ctx.create_enum_attribute(kind("alwaysinline"), 0),
    );
    let b = ctx.create_builder();
    b.position_at_end(ctx.append_basic_block(outer, "entry"));
    let param = |i: u32| outer.get_nth_param(i).expect("declared above");
    let mut args: Vec<BasicMetadataValueEnum> = Vec::new();
    for i in 0..n {
        // SAFETY (of the emitted code): the runtime passes one pointer per operand.
        let p = unsafe {
            b.build_in_bounds_gep(
                ptr,
                param(0).into_pointer_value(),
                &[i64t.const_int(i as u64, false)],
                "pp",
            )?
        };
        args.push(b.build_load(ptr, p, &kernel.operands[i].name)?.into());
    }
    args.extend((1..8).map(|i| BasicMetadataValueEnum::from(param(i))));
    let rc = match b.build_call(inner, &args, "rc")?.try_as_basic_value() {
        ValueKind::Basic(v) => v,
        _ => return Err(CodegenError::internal("body returns no value")),
    };
    b.build_return(Some(&rc))?;
    Ok((outer, inner))
}

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    fn block(&self) -> BasicBlock<'ctx> {
        self.b.get_insert_block().expect("builder is positioned")
    }

    fn i64(&self, x: i64) -> IntValue<'ctx> {
        self.ctx.i64_type().const_int(x as u64, true)
    }

    fn load_i64(&self, base: PointerValue<'ctx>, i: i64) -> Result<IntValue<'ctx>> {
        let i64t = self.ctx.i64_type();
        // SAFETY (of the emitted code): the runtime passes arrays of the documented lengths.
        let p = unsafe {
            self.b
                .build_in_bounds_gep(i64t, base, &[self.i64(i)], "p")?
        };
        Ok(self.b.build_load(i64t, p, "v")?.into_int_value())
    }

    fn call_value(
        &self,
        f: FunctionValue<'ctx>,
        args: &[BasicMetadataValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        match self.b.build_call(f, args, "call")?.try_as_basic_value() {
            ValueKind::Basic(v) => Ok(v),
            _ => Err(CodegenError::internal("call returns no value")),
        }
    }

    /// Binds every operand's pointer, loads its extents and precomputes its strides.
    fn bind_operands(
        &mut self,
        ptrs: &[PointerValue<'ctx>],
        dims: PointerValue<'ctx>,
    ) -> Result<()> {
        let mut next_dim = 0;
        for (o, &p) in self.kernel.operands.iter().zip(ptrs) {
            let mut ds = Vec::new();
            for d in &o.shape {
                ds.push(match d.as_static() {
                    Some(n) => self.i64(n as i64),
                    None => self.load_i64(dims, next_dim)?,
                });
                next_dim += 1;
            }
            let mut strides = vec![self.i64(1); ds.len()];
            for d in (0..ds.len().saturating_sub(1)).rev() {
                strides[d] = self
                    .b
                    .build_int_nsw_mul(strides[d + 1], ds[d + 1], "stride")?;
            }
            let numel = match ds.first() {
                Some(&d0) => self.b.build_int_nsw_mul(strides[0], d0, "numel")?,
                None => self.i64(1),
            };
            let origin = vec![self.i64(0); ds.len()];
            self.operands.push(OperandState {
                ptr: p,
                dims: ds,
                ref_strides: strides.clone(),
                strides,
                numel,
                base: p,
                span: numel,
                origin,
                fits: None,
                stage: None,
                last_origin: None,
            });
        }
        Ok(())
    }

    /// The grid loop nest: axis 0 over `lo..hi`, the others over their whole extent.
    /// The grid loop nest. `lo..hi` ranges over the leading axes taken together (see
    /// [`split_axes`]), in row-major order; the axes after them run whole.
    fn grid_loops(&mut self, lo: IntValue<'ctx>, hi: IntValue<'ctx>) -> Result<()> {
        let lead = split_axes(self.kernel);
        if lead == 0 {
            return self.step();
        }
        self.counted(lo, hi, &mut |e, flat| {
            // Row-major coordinates of `flat` over the leading axes.
            let mut coords = vec![flat; lead];
            let mut rest = flat;
            for a in (0..lead).rev() {
                coords[a] = e.b.build_int_signed_rem(rest, e.grid[a], "g")?;
                rest = e.b.build_int_signed_div(rest, e.grid[a], "q")?;
            }
            e.point.extend(coords);
            let r = e.grid_axis(lead);
            e.point.truncate(e.point.len() - lead);
            r
        })
    }

    /// Loops over axes `axis..` whole, then runs a step.
    fn grid_axis(&mut self, axis: usize) -> Result<()> {
        if axis == self.kernel.grid.len() {
            return self.step();
        }
        let (lo, hi) = (self.i64(0), self.grid[axis]);
        self.counted(lo, hi, &mut |e, iv| {
            e.point.push(iv);
            let r = e.grid_axis(axis + 1);
            e.point.pop();
            r
        })
    }

    /// One grid step: place the windows (staging the ones that overhang their array), run
    /// the body, write staged output windows back. A clipped kernel's windows are views
    /// whose loops end at the arrays' ends (see `clip`).
    fn step(&mut self) -> Result<()> {
        for i in 0..self.kernel.operands.len() {
            self.place_window(i)?;
        }
        if self.clip.is_some() {
            self.clip_extents = self.window_extents()?;
            return self.body();
        }
        self.body()?;
        for i in 0..self.kernel.operands.len() {
            self.unstage_window(i)?;
        }
        Ok(())
    }

    /// Whether a store to `operand` runs at this grid step (an i1): true, or, for a deferred
    /// output (see `deferred`), whether this is the last step of the innermost axis. `None`
    /// when it always runs.
    fn store_runs(&self, operand: OperandId) -> Result<Option<IntValue<'ctx>>> {
        if !self.deferred.contains(&operand) {
            return Ok(None);
        }
        let last = self.kernel.grid.len() - 1;
        let end = self
            .b
            .build_int_sub(self.grid[last], self.i64(1), "lastk")?;
        let at = self.b.build_int_compare(
            inkwell::IntPredicate::EQ,
            self.point[last],
            end,
            "laststep",
        )?;
        Ok(Some(at))
    }

    /// Branches to the failure exit unless `ok`, recording `report` in the status.
    fn check(&mut self, ok: IntValue<'ctx>, report: Report<'ctx>) -> Result<()> {
        let bad = self.ctx.append_basic_block(self.func, "bad");
        let good = self.ctx.append_basic_block(self.func, "good");
        self.b.build_conditional_branch(ok, good, bad)?;
        self.b.position_at_end(bad);
        let put = |f: usize, v: IntValue<'ctx>| -> Result<()> {
            let p = unsafe {
                self.b.build_in_bounds_gep(
                    self.ctx.i64_type(),
                    self.status,
                    &[self.i64(f as i64)],
                    "st",
                )?
            };
            self.b.build_store(p, v)?;
            Ok(())
        };
        put(field::CODE, self.i64(report.code))?;
        put(field::SUBJECT, self.i64(report.subject))?;
        put(field::DIM, self.i64(report.dim as i64))?;
        put(field::VALUE, report.value)?;
        put(field::EXTENT, report.extent)?;
        put(field::SIZE, self.i64(report.size))?;
        for (a, &p) in self.point.iter().take(field::MAX_POINT).enumerate() {
            put(field::POINT + a, p)?;
        }
        for (d, &bi) in report.blocks.iter().take(field::MAX_BLOCKS).enumerate() {
            let bi = self.b.build_int_s_extend(bi, self.ctx.i64_type(), "bi")?;
            put(field::BLOCKS + d, bi)?;
        }
        self.b.build_unconditional_branch(self.fail)?;
        self.b.position_at_end(good);
        Ok(())
    }

    /// Allocates `bytes` of workspace (64-byte aligned) and returns its address. `None` (a
    /// size that overflowed) and a workspace whose size overflows are errors: the verifier
    /// bounds every buffer (`tpukit_dsl::MAX_BUFFER_BYTES`), so neither happens for a
    /// verified kernel, but a wrapped size would let the kernel write past its workspace.
    /// The memory is not zeroed: its user writes it before reading it.
    fn alloc(&mut self, bytes: Option<usize>) -> Result<PointerValue<'ctx>> {
        Ok(self.alloc_at(bytes)?.0)
    }

    /// [`Emitter::alloc`], also returning the buffer's offset in the workspace.
    fn alloc_at(&mut self, bytes: Option<usize>) -> Result<(PointerValue<'ctx>, usize)> {
        let end = bytes.and_then(|b| {
            self.workspace_bytes
                .checked_next_multiple_of(64)
                .and_then(|off| Some((off, off.checked_add(b.max(1))?)))
        });
        let Some((off, end)) = end else {
            return Err(CodegenError {
                kind: ErrorKind::Memory,
                message: "the kernel's workspace size overflows".into(),
                located: false,
            });
        };
        self.workspace_bytes = end;
        let base = unsafe {
            self.b.build_in_bounds_gep(
                self.ctx.i8_type(),
                self.workspace,
                &[self.i64(off as i64)],
                "buf",
            )?
        };
        // A base folded into the workspace pointer itself would stand for every buffer.
        if base.as_instruction().is_some() {
            self.buffers.push(base);
        }
        Ok((base, off))
    }

    /// Zeroes the `zero_on_entry` words at the start of the body's `entry` block (emitted
    /// last, when every one of them is known).
    fn zero_records(&mut self, entry: inkwell::basic_block::BasicBlock<'ctx>) -> Result<()> {
        match entry.get_first_instruction() {
            Some(first) => self.b.position_before(&first),
            None => self.b.position_at_end(entry),
        }
        let i64t = self.ctx.i64_type();
        for off in std::mem::take(&mut self.zero_on_entry) {
            let at = unsafe {
                self.b.build_in_bounds_gep(
                    self.ctx.i8_type(),
                    self.workspace,
                    &[self.i64(off as i64)],
                    "record",
                )?
            };
            self.b.build_store(at, i64t.const_zero())?;
        }
        Ok(())
    }

    /// The site number of `op` (stable across the two body copies).
    fn site_of(&mut self, op: &Op) -> i64 {
        let key = op as *const Op;
        if let Some(&s) = self.site_of.get(&key) {
            return s as i64;
        }
        let operand = match &op.kind {
            OpKind::Load { operand, .. } | OpKind::Store { operand, .. } => Some(*operand),
            _ => None,
        };
        self.sites.push(OpSite {
            name: op.kind.name().to_string(),
            loc: op.loc.clone(),
            operand,
        });
        self.site_of.insert(key, self.sites.len() - 1);
        (self.sites.len() - 1) as i64
    }

    /// The in-memory type of an operand's elements.
    fn mem_type(&self, dtype: DType) -> BasicTypeEnum<'ctx> {
        match dtype {
            DType::F32 => self.ctx.f32_type().into(),
            DType::BF16 | DType::I16 => self.ctx.i16_type().into(),
            DType::F16 => self.ctx.f16_type().into(),
            DType::I32 => self.ctx.i32_type().into(),
            DType::I8 | DType::Bool => self.ctx.i8_type().into(),
        }
    }
}
