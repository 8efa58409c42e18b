//! `tpukit._native`: the Rust half of the `tpukit` Python package.
//!
//! Kept small and free of Python policy: it exposes the kernel IR ([`kernel::PyKernel`]), the
//! catalog, the importers of JAX's lowered programs and the runtime's launch. The Python half
//! (`python/tpukit/`) owns the decorators, caching and array interop.

mod array;
mod catalog;
mod error;
mod import;
mod kernel;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<kernel::PyKernel>()?;
    m.add_function(wrap_pyfunction!(catalog::catalog, m)?)?;
    m.add_function(wrap_pyfunction!(catalog::instantiate, m)?)?;
    m.add_function(wrap_pyfunction!(import::import_mosaic, m)?)?;
    m.add_function(wrap_pyfunction!(import::import_stablehlo, m)?)?;
    m.add_function(wrap_pyfunction!(import::stablehlo_ops, m)?)?;
    m.add("TpukitError", m.py().get_type::<error::TpukitError>())?;
    m.add(
        "UnsupportedError",
        m.py().get_type::<error::UnsupportedError>(),
    )?;
    Ok(())
}
