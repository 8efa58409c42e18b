//! `tpukit._native.Kernel`: one kernel IR value, with what Python needs to run and lower it.

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::collections::BTreeMap;
use tpukit::{Device, HostArray};
use tpukit_dsl::{Dim, Kernel, Operand, Role};

use crate::array::{self, Wire};
use crate::error::{self, TpukitError, guard};

/// A verified kernel. Immutable: every method reads it.
#[pyclass(name = "Kernel", module = "tpukit._native", frozen)]
pub struct PyKernel {
    pub kernel: Kernel,
}

impl PyKernel {
    /// Runs a method's body in the boundary's [`guard`], naming this kernel.
    fn guard<T>(&self, body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
        guard(Some(&self.kernel.name), body)
    }
}

/// One extent of an operand's shape: a number, or the name of a symbol bound at launch.
#[derive(Clone, Debug, PartialEq, IntoPyObject)]
pub enum Extent {
    Static(usize),
    Symbol(String),
}

/// One operand of a kernel, as Python sees it: `name`, `role` (`prefetch`, `input`,
/// `output` or `scratch`), `dtype` (`f32`, `bf16`, …) and `shape` (a tuple of ints and symbol
/// names). Immutable; equal when every field is.
#[pyclass(name = "Operand", module = "tpukit._native", frozen, eq)]
#[derive(Clone, Debug, PartialEq)]
pub struct PyOperand {
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    role: &'static str,
    #[pyo3(get)]
    dtype: &'static str,
    shape: Vec<Extent>,
}

impl PyOperand {
    fn of(o: &Operand) -> PyOperand {
        PyOperand {
            name: o.name.clone(),
            role: o.role.name(),
            dtype: o.dtype.name(),
            shape: o
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Static(n) => Extent::Static(*n),
                    Dim::Sym(s) => Extent::Symbol(s.clone()),
                })
                .collect(),
        }
    }
}

#[pymethods]
impl PyOperand {
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        guard(None, || PyTuple::new(py, self.shape.clone()))
    }

    fn __repr__(&self) -> PyResult<String> {
        guard(None, || {
            let shape: Vec<String> = self
                .shape
                .iter()
                .map(|e| match e {
                    Extent::Static(n) => n.to_string(),
                    Extent::Symbol(s) => format!("'{s}'"),
                })
                .collect();
            let comma = if shape.len() == 1 { "," } else { "" };
            Ok(format!(
                "Operand(name='{}', role='{}', dtype='{}', shape=({}{comma}))",
                self.name,
                self.role,
                self.dtype,
                shape.join(", ")
            ))
        })
    }
}

#[pymethods]
impl PyKernel {
    #[getter]
    fn name(&self) -> PyResult<String> {
        self.guard(|| Ok(self.kernel.name.clone()))
    }

    /// The operands in kernel order (prefetch, inputs, outputs, scratch).
    #[getter]
    fn operands(&self) -> PyResult<Vec<PyOperand>> {
        self.guard(|| Ok(self.kernel.operands.iter().map(PyOperand::of).collect()))
    }

    /// The structural hash (hex), which keys every cache.
    #[getter]
    fn hash(&self) -> PyResult<String> {
        self.guard(|| Ok(self.kernel.structural_hash().to_string()))
    }

    /// The IR as text.
    fn __str__(&self) -> PyResult<String> {
        self.guard(|| {
            Ok(tpukit_dsl::print_kernel(
                &self.kernel,
                tpukit_dsl::PrintOptions { locations: true },
            ))
        })
    }

    fn __repr__(&self) -> PyResult<String> {
        self.guard(|| Ok(format!("<tpukit Kernel `{}`>", self.kernel.name)))
    }

    /// Runs the kernel on `device` (`"cpu"` or `"interpret"`) with the prefetch operands and
    /// inputs (wire form), returning new outputs. With `outputs` given, they are the outputs'
    /// initial contents (and bind shapes), as for aliased outputs.
    #[pyo3(signature = (device, inputs, outputs=None))]
    fn launch<'py>(
        &self,
        py: Python<'py>,
        device: &str,
        inputs: Vec<Wire<'py>>,
        outputs: Option<Vec<Wire<'py>>>,
    ) -> PyResult<Vec<Wire<'py>>> {
        self.guard(|| {
            let device: Device = device.parse().map_err(TpukitError::new_err)?;
            let inputs = host_arrays(&inputs)?;
            let outputs = outputs.map(|o| host_arrays(&o)).transpose()?;
            let kernel = &self.kernel;
            let result = py.detach(move || {
                let refs: Vec<&HostArray> = inputs.iter().collect();
                match outputs {
                    Some(mut outs) => {
                        tpukit::launch_into(kernel, device, &refs, &mut outs).map(|()| outs)
                    }
                    None => tpukit::launch(kernel, device, &refs),
                }
            });
            let outs = result.map_err(error::runtime)?;
            outs.into_iter().map(|a| array::to_wire(py, a)).collect()
        })
    }

    /// Lowers the kernel to a StableHLO module with a Mosaic `tpu_custom_call`, every symbol
    /// bound by `bindings`.
    #[pyo3(signature = (bindings=BTreeMap::new()))]
    fn lower(&self, bindings: BTreeMap<String, usize>) -> PyResult<String> {
        self.guard(|| {
            let options = tpukit_mosaic::Options {
                bindings,
                ..Default::default()
            };
            let lowered = tpukit_mosaic::lower(&self.kernel, &options).map_err(error::dsl)?;
            Ok(lowered.stablehlo)
        })
    }

    /// The number of operands of `role` (`prefetch`, `input`, `output`, `scratch`).
    fn count(&self, role: &str) -> PyResult<usize> {
        self.guard(|| {
            let role = [Role::Prefetch, Role::Input, Role::Output, Role::Scratch]
                .into_iter()
                .find(|r| r.name() == role)
                .ok_or_else(|| TpukitError::new_err(format!("unknown operand role `{role}`")))?;
            Ok(self.kernel.operands_with_role(role).count())
        })
    }
}

fn host_arrays(wires: &[Wire<'_>]) -> PyResult<Vec<HostArray>> {
    wires.iter().map(|w| array::from_wire(w)).collect()
}
