//! Out-of-line helper functions that LLVM's loop vectoriser calls in vector form.
//!
//! A helper (`bf16_round`'s rounding, `erf_table`'s `erf`) is an internal `noinline`
//! function whose calls name vector variants (`vector-function-abi-variant`); the variants are
//! not called before vectorisation, so `llvm.compiler.used` ([`KEPT`]) lists every helper to
//! keep them through `default<O3>`. [`release`] then marks them `alwaysinline` and drops the
//! list, and `finish`'s inliner inlines them.

use super::{CodegenError, Result};
use inkwell::AddressSpace;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::FunctionType;
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, FunctionValue, ValueKind};

/// Names every helper, so `default<O3>` keeps the (not yet called) vector variants.
const KEPT: &str = "llvm.compiler.used";

/// The prefix of every helper's name.
const PREFIX: &str = "tpukit.";

/// An internal helper function named `name` (which starts with `tpukit.`), out of line until
/// [`release`]: `noinline`, without side effects.
pub(super) fn helper<'ctx>(
    ctx: &'ctx Context,
    m: &Module<'ctx>,
    name: &str,
    ty: FunctionType<'ctx>,
) -> FunctionValue<'ctx> {
    debug_assert!(name.starts_with(PREFIX));
    let f = m.add_function(name, ty, Some(Linkage::Internal));
    for attr in ["noinline", "nounwind", "willreturn"] {
        let kind = Attribute::get_named_enum_kind_id(attr);
        f.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(kind, 0));
    }
    // `memory(none)`: reads and writes no memory.
    let memory = Attribute::get_named_enum_kind_id("memory");
    f.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(memory, 0));
    f
}

/// A builder at the end of `f`'s new entry block, and `f`'s one parameter.
pub(super) fn entry<'ctx>(f: FunctionValue<'ctx>) -> (Builder<'ctx>, BasicValueEnum<'ctx>) {
    let ctx = f.get_type().get_context();
    let b = ctx.create_builder();
    b.position_at_end(ctx.append_basic_block(f, "entry"));
    (b, f.get_nth_param(0).expect("one parameter"))
}

/// The name of the `n`-lane vector variant of the helper named `scalar`.
pub(super) fn variant_name(scalar: &str, n: u32) -> String {
    format!("{scalar}.v{n}")
}

/// A call of helper `f` on `x` that names its vector variants to the loop vectoriser: the
/// function [`variant_name`]`(f, n)` for each width `n` in `widths`, taking and returning
/// `n` lanes.
pub(super) fn call_with_variants<'ctx>(
    b: &Builder<'ctx>,
    f: FunctionValue<'ctx>,
    x: BasicMetadataValueEnum<'ctx>,
    widths: &[u32],
) -> Result<BasicValueEnum<'ctx>> {
    let name = f.get_name().to_string_lossy().into_owned();
    let call = b.build_call(f, &[x], "call")?;
    let variants: Vec<String> = widths
        .iter()
        .map(|&n| format!("_ZGV_LLVM_N{n}v_{name}({})", variant_name(&name, n)))
        .collect();
    let ctx = f.get_type().get_context();
    call.add_attribute(
        AttributeLoc::Function,
        ctx.create_string_attribute("vector-function-abi-variant", &variants.join(",")),
    );
    match call.try_as_basic_value() {
        ValueKind::Basic(v) => Ok(v),
        _ => Err(CodegenError::internal(format!("`{name}` returns no value"))),
    }
}

/// The module's helpers: its internal `noinline` functions named `tpukit.*`.
fn helpers<'ctx>(m: &Module<'ctx>) -> Vec<FunctionValue<'ctx>> {
    let noinline = Attribute::get_named_enum_kind_id("noinline");
    m.get_functions()
        .filter(|f| {
            f.get_name().to_bytes().starts_with(PREFIX.as_bytes())
                && f.get_linkage() == Linkage::Internal
                && f.get_enum_attribute(AttributeLoc::Function, noinline)
                    .is_some()
        })
        .collect()
}

/// (Re)writes [`KEPT`] to list every helper the module has: call after defining helpers.
pub(super) fn keep(m: &Module<'_>) {
    if let Some(old) = m.get_global(KEPT) {
        // SAFETY: the list is only read by LLVM's passes; nothing else refers to it.
        unsafe { old.delete() };
    }
    let ctx = m.get_context();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let list: Vec<_> = helpers(m)
        .iter()
        .map(|f| f.as_global_value().as_pointer_value())
        .collect();
    let global = m.add_global(ptr.array_type(list.len() as u32), None, KEPT);
    global.set_linkage(Linkage::Appending);
    global.set_section(Some("llvm.metadata"));
    global.set_initializer(&ptr.const_array(&list));
}

/// After `default<O3>` (which vectorised the calls it could): marks every helper
/// `alwaysinline` and drops [`KEPT`] (the inliner `finish` runs then inlines and drops
/// them); whether the module has helpers.
pub(super) fn release(m: &Module<'_>) -> bool {
    let found = helpers(m);
    let ctx = m.get_context();
    let noinline = Attribute::get_named_enum_kind_id("noinline");
    let always = Attribute::get_named_enum_kind_id("alwaysinline");
    for f in &found {
        f.remove_enum_attribute(AttributeLoc::Function, noinline);
        f.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(always, 0));
    }
    if let Some(kept) = m.get_global(KEPT) {
        // SAFETY: as in `keep`.
        unsafe { kept.delete() };
    }
    !found.is_empty()
}
