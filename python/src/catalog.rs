//! The kernels tpukit ships, from Python: `catalog()` lists them, `instantiate` builds one.

use pyo3::prelude::*;
use std::collections::BTreeMap;

use crate::array;
use crate::error::{self, TpukitError, guard};
use crate::kernel::PyKernel;

/// `(name, about, shape names, dtype names)` of a catalog kernel (`tpukit.catalog.Entry`).
type EntryInfo = (String, String, Vec<String>, Vec<String>);

/// Every catalog kernel.
#[pyfunction]
pub fn catalog() -> PyResult<Vec<EntryInfo>> {
    guard(None, || {
        Ok(tpukit::catalog::CATALOG
            .iter()
            .map(|e| {
                (
                    e.name.to_string(),
                    e.about.to_string(),
                    e.shape.iter().map(|s| s.to_string()).collect(),
                    e.dtypes.iter().map(|d| d.name().to_string()).collect(),
                )
            })
            .collect())
    })
}

/// The catalog kernel `name` for a problem `shape` and `dtype`, with the bindings of its
/// symbolic extents (for lowering; launching binds them from the arrays).
#[pyfunction]
pub fn instantiate(
    name: &str,
    shape: Vec<usize>,
    dtype: &str,
) -> PyResult<(PyKernel, BTreeMap<String, usize>)> {
    guard(Some(name), || {
        let entry = tpukit::catalog::find(name)
            .ok_or_else(|| TpukitError::new_err(format!("no catalog kernel called `{name}`")))?;
        let instance = entry
            .instantiate(&shape, array::dtype(dtype)?)
            .map_err(error::dsl)?;
        Ok((PyKernel::new(instance.kernel), instance.bindings))
    })
}
