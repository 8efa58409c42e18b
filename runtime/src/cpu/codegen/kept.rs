//! Out-of-line helper functions that LLVM's loop vectoriser calls in vector form.
//!
//! A helper (`bf16_round`'s rounding, `erf_table`'s `erf`) is an internal `noinline`
//! function whose calls name vector variants (`vector-function-abi-variant`); the variants are
//! not called before vectorisation, so `llvm.compiler.used` ([`KEPT`]) lists every helper to
//! keep them through `default<O3>`. [`release`] then marks them `alwaysinline` and drops the
//! list, and `finish`'s inliner inlines them.

use inkwell::AddressSpace;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::FunctionType;
use inkwell::values::FunctionValue;

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
