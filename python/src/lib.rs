//! `tpukit._native`: the Rust half of the `tpukit` Python package.
//!
//! Kept small and free of Python policy: it exposes the kernel IR (`kernel::PyKernel`, its
//! operands as `operand::PyOperand`), the catalog, tpuBLAS, the importers of JAX's lowered
//! programs, the runtime's launch and its process-wide state (devices, TPU topologies,
//! bundles, cache statistics), and the XLA FFI handler that runs registered kernels as
//! custom calls inside jitted JAX programs (`ffi`, `registry`). The Python half (`python/tpukit/`) owns the decorators,
//! argument binding, caching and array interop.
//!
//! Every entry point runs in `error::guard`: errors cross as one exception class per
//! [`tpukit_dsl::ErrorKind`], and a panic as `InternalError`, never as pyo3's
//! `PanicException`.

mod array;
mod blas_plan;
mod borrow;
mod buffer;
mod catalog;
mod dispatch;
mod dlpack;
mod error;
mod exchange;
mod ffi;
mod gil;
mod import;
mod in_place;
mod kernel;
mod op_table;
mod operand;
mod operator_call;
mod plan;
mod registry;
mod runtime;
mod strided;
mod tensor;
mod tpublas;
mod write_back;

use pyo3::prelude::*;

/// Freed arrays above glibc's heap limit are kept for the next call's (see
/// `tpukit::runtime::LargeBlocks`): a large result no longer costs a page fault per page.
#[global_allocator]
static ALLOCATOR: tpukit::runtime::LargeBlocks = tpukit::runtime::LargeBlocks;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The crates' version, which maturin also writes into the package metadata.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<kernel::PyKernel>()?;
    m.add_class::<operand::PyOperand>()?;
    m.add_class::<array::Buffer>()?;
    m.add_class::<plan::LaunchPlan>()?;
    m.add_class::<blas_plan::BlasPlan>()?;
    m.add_class::<dispatch::PlannedKernel>()?;
    m.add_class::<dispatch::ModeDispatch>()?;
    m.add_class::<operator_call::OperatorCall>()?;
    m.add_function(wrap_pyfunction!(operator_call::py_plan_key, m)?)?;
    m.add_function(wrap_pyfunction!(catalog::catalog, m)?)?;
    m.add_function(wrap_pyfunction!(catalog::instantiate, m)?)?;
    m.add_function(wrap_pyfunction!(import::import_mosaic, m)?)?;
    m.add_function(wrap_pyfunction!(import::import_stablehlo, m)?)?;
    m.add_function(wrap_pyfunction!(import::stablehlo_ops, m)?)?;
    m.add_function(wrap_pyfunction!(tpublas::tpublas_ops, m)?)?;
    m.add_function(wrap_pyfunction!(tpublas::tpublas_run, m)?)?;
    m.add_function(wrap_pyfunction!(tpublas::tpublas_run_planned, m)?)?;
    m.add_function(wrap_pyfunction!(tpublas::tpublas_warm_up, m)?)?;
    m.add_function(wrap_pyfunction!(op_table::op_table, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::devices, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::torch_interop, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::tpu_topologies, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::register_bundle, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::register_first_bundle, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::loaded_bundles, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::warm_up, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::cache_stats, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::set_min_split_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(registry::ffi_register, m)?)?;
    m.add_function(wrap_pyfunction!(registry::ffi_handler, m)?)?;
    m.add_function(wrap_pyfunction!(error::arm_test_panic, m)?)?;
    error::add_classes(m)
}
