//! What the caller chooses about one lowering.

use tpukit_dsl::Bindings;

/// The `stable_mosaic.version` JAX 0.10.2 emits when lowering without a TPU (its
/// forward-compatible version), which libtpu 0.0.42 accepts.
pub const DEFAULT_SERDE_VERSION: i64 = 11;

#[derive(Clone, Debug)]
pub struct Options {
    /// Concrete values of the kernel's symbolic extents (see [`crate::Shapes`]).
    pub bindings: Bindings,
    /// The Mosaic serialization version written into the body (`stable_mosaic.version`).
    pub serde_version: i64,
    /// The custom call's `kernel_name` (default: the kernel's name).
    pub kernel_name: Option<String>,
    /// Whether `@main` passes every output's initial contents to the kernel (aliased with
    /// `output_operand_aliases` and copied into the output's window, see
    /// [`crate::initial`]), so outputs start as the caller's buffers as the IR says. Without
    /// it only outputs the body loads from or stores to under a mask do; the others start
    /// undefined, as in Pallas.
    pub alias_outputs: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            bindings: Bindings::new(),
            serde_version: DEFAULT_SERDE_VERSION,
            kernel_name: None,
            alias_outputs: false,
        }
    }
}
