//! The MLIR context every lowering builds in.

use melior::{Context, dialect::DialectRegistry, utility::register_all_dialects};

/// A context with upstream MLIR's dialects registered (so `func`, `arith`, `math`, `vector`,
/// `scf` and `memref` ops are built and verified by their own definitions) that also accepts
/// unregistered dialects: `tpu`, `stablehlo` and the serialized `stable_mosaic` names are not
/// part of upstream MLIR and stay generic.
///
/// Upstream MLIR cannot parse `#tpu.memory_space<…>` inside a memref type when the tpu dialect
/// is not registered, so VMEM windows carry no memory space; Mosaic infers VMEM for them.
pub fn mosaic_context() -> Context {
    let registry = DialectRegistry::new();
    register_all_dialects(&registry);
    let context = Context::new();
    context.append_dialect_registry(&registry);
    context.load_all_available_dialects();
    context.set_allow_unregistered_dialects(true);
    context
}
