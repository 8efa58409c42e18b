//! The TPUs tpukit lowers for.

/// The TPU generations the lowering targets, as libtpu names a compile-only topology of each
/// (`v5e:2x2`): what the conformance suite compiles every lowered kernel for, and what bundles
/// carry TPU executables for. The first is the default target.
pub const TOPOLOGIES: &[&str] = &["v5e:2x2", "v6e:2x2"];
