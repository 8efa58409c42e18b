//! `tpukit._native`: the Rust half of the `tpukit` Python package.
//!
//! Kept small and free of Python policy: it exposes the kernel IR ([`kernel::PyKernel`]), the
//! catalog, tpuBLAS, the importers of JAX's lowered programs, the runtime's launch and its
//! process-wide state (bundles, cache statistics). The Python half (`python/tpukit/`) owns
//! the decorators, argument binding, caching and array interop.

mod array;
mod catalog;
mod error;
mod import;
mod kernel;
mod runtime;
mod tpublas;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<kernel::PyKernel>()?;
    m.add_class::<array::Buffer>()?;
    m.add_function(wrap_pyfunction!(catalog::catalog, m)?)?;
    m.add_function(wrap_pyfunction!(catalog::instantiate, m)?)?;
    m.add_function(wrap_pyfunction!(import::import_mosaic, m)?)?;
    m.add_function(wrap_pyfunction!(import::import_stablehlo, m)?)?;
    m.add_function(wrap_pyfunction!(import::stablehlo_ops, m)?)?;
    m.add_function(wrap_pyfunction!(tpublas::tpublas_ops, m)?)?;
    m.add_function(wrap_pyfunction!(tpublas::tpublas_run, m)?)?;
    m.add_function(wrap_pyfunction!(tpublas::tpublas_warm_up, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::register_bundle, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::warm_up, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::cache_stats, m)?)?;
    m.add("TpukitError", m.py().get_type::<error::TpukitError>())?;
    m.add(
        "UnsupportedError",
        m.py().get_type::<error::UnsupportedError>(),
    )?;
    Ok(())
}
