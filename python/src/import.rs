//! Importing what JAX lowered (see `tpukit_import` and `tpukit/_lowering.py`).

use pyo3::prelude::*;

use crate::error::{self, guard};
use crate::kernel::PyKernel;

/// The kernel of one `tpu_custom_call`: its Mosaic `body` (generic text, as jaxlib prints
/// the decoded body) and the call's operand and result tensor types (printed); `aliases` are
/// its `(result, operand)` aliases (`output_operand_aliases`); `vmem_limit_bytes` the call's
/// VMEM limit (Pallas' compiler parameter), which its windows and VMEM scratch must fit.
#[pyfunction]
#[pyo3(signature = (body, operand_types, result_types, name, aliases = Vec::new(), vmem_limit_bytes = None))]
pub fn import_mosaic(
    body: &str,
    operand_types: Vec<String>,
    result_types: Vec<String>,
    name: &str,
    aliases: Vec<(usize, usize)>,
    vmem_limit_bytes: Option<usize>,
) -> PyResult<PyKernel> {
    guard(Some(name), || {
        let parse = |types: &[String]| -> PyResult<Vec<tpukit_dsl::Type>> {
            types
                .iter()
                .map(|t| tpukit_import::tensor_type(t).map_err(error::dsl))
                .collect()
        };
        let (operands, results) = (parse(&operand_types)?, parse(&result_types)?);
        let options = tpukit_import::CallOptions {
            aliases,
            vmem_limit: vmem_limit_bytes,
        };
        let kernel = tpukit_import::import_mosaic_with(body, &operands, &results, name, &options)
            .map_err(error::dsl)?;
        Ok(PyKernel::new(kernel))
    })
}

/// The kernel of a pure JAX function: `@main` of its StableHLO module (generic text with
/// locations, as jaxlib prints it), one grid step over whole arrays.
#[pyfunction]
pub fn import_stablehlo(module: &str, name: &str) -> PyResult<PyKernel> {
    guard(Some(name), || {
        let kernel = tpukit_import::import_stablehlo(module, name).map_err(error::dsl)?;
        Ok(PyKernel::new(kernel))
    })
}

/// The StableHLO ops a pure JAX function may use.
#[pyfunction]
pub fn stablehlo_ops() -> PyResult<Vec<&'static str>> {
    guard(None, || Ok(tpukit_import::stablehlo_ops().collect()))
}
