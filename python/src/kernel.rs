//! `tpukit._native.Kernel`: one kernel IR value, with what Python needs to run and lower it.

use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use tpukit::runtime::{RawArray, RuntimeError, launch_borrowed as launch_borrowed_new, launch_raw};
use tpukit::{Device, HostArray, LaunchOptions, Prepared};
use tpukit_dsl::{Kernel, Role};

use crate::array::{self, Wire};
use crate::borrow::{self, Borrowed};
use crate::error::{self, TpukitError, guard};
use crate::operand::PyOperand;
use crate::plan::LaunchPlan;

/// A kernel. Immutable: every method reads it.
#[pyclass(name = "Kernel", module = "tpukit._native", frozen)]
pub struct PyKernel {
    pub kernel: Kernel,
    /// The kernel verified and hashed, at its first launch: later launches pay neither (the
    /// hash prints and hashes the whole IR). Unset while verification fails, so every launch
    /// reports the failure.
    prepared: OnceLock<Arc<Prepared>>,
}

impl PyKernel {
    pub fn new(kernel: Kernel) -> PyKernel {
        PyKernel {
            kernel,
            prepared: OnceLock::new(),
        }
    }

    /// Runs a method's body in the boundary's [`guard`], naming this kernel.
    fn guard<T>(&self, body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
        guard(Some(&self.kernel.name), body)
    }

    /// The kernel, verified and hashed once.
    pub fn prepared(&self) -> PyResult<&Arc<Prepared>> {
        if let Some(p) = self.prepared.get() {
            return Ok(p);
        }
        let p = Prepared::new(self.kernel.clone()).map_err(error::runtime)?;
        Ok(self.prepared.get_or_init(|| Arc::new(p)))
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
    /// initial contents (and bind shapes), as for aliased outputs (copied: results never
    /// alias the arrays given). On `cpu` the inputs are read in place where they can be (see
    /// [`crate::borrow`]); the interpreter works on copies.
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
            let kernel = &**self.prepared()?;
            let outputs = outputs.map(|o| host_arrays(&o)).transpose()?;
            let borrowed = match device {
                Device::Cpu => borrow::borrow(&inputs)?,
                _ => None,
            };
            let result = match borrowed {
                Some(ins) => py.detach(|| launch_borrowed(kernel, &ins, outputs)),
                None => {
                    let inputs = host_arrays(&inputs)?;
                    py.detach(move || {
                        let refs: Vec<&HostArray> = inputs.iter().collect();
                        match outputs {
                            Some(mut outs) => {
                                tpukit::launch_into(kernel, device, &refs, &mut outs).map(|()| outs)
                            }
                            None => tpukit::launch(kernel, device, &refs),
                        }
                    })
                }
            };
            let outs = result.map_err(error::runtime)?;
            outs.into_iter().map(|a| array::to_wire(py, a)).collect()
        })
    }

    /// A [`LaunchPlan`] on the compiled CPU backend for inputs of these `(dtype name, shape)`
    /// (prefetch operands, then inputs), each output passed to its callable in `wraps`.
    fn plan(
        slf: Bound<'_, Self>,
        inputs: Vec<(String, Vec<usize>)>,
        wraps: Vec<Option<Py<PyAny>>>,
    ) -> PyResult<LaunchPlan> {
        let this = slf.get();
        this.guard(|| {
            let outputs = this.kernel.operands_with_role(Role::Output).count();
            if wraps.len() != outputs {
                return Err(TpukitError::new_err(format!(
                    "a launch plan needs one wrap per output ({outputs}), got {}",
                    wraps.len()
                )));
            }
            LaunchPlan::new(slf.clone().unbind(), inputs, wraps)
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

/// Launches on the compiled CPU backend reading `inputs` in place: into `outputs` (their
/// initial contents) when given, else into new zero-filled ones.
fn launch_borrowed(
    kernel: &Prepared,
    inputs: &Borrowed<'_>,
    outputs: Option<Vec<HostArray>>,
) -> Result<Vec<HostArray>, RuntimeError> {
    let options = LaunchOptions::from_env();
    let Some(mut outs) = outputs else {
        // SAFETY: `borrow` checked each array's length against its shape; the held buffers
        // keep the memory alive for the call.
        return unsafe { launch_borrowed_new(kernel, &inputs.arrays, options) };
    };
    let shapes: Vec<Vec<usize>> = outs.iter().map(|o| o.shape().to_vec()).collect();
    let raw: Vec<RawArray> = outs
        .iter_mut()
        .zip(&shapes)
        .map(|(o, shape)| {
            o.make_standard_layout();
            RawArray {
                dtype: o.dtype(),
                shape,
                data: o.data_ptr_mut(),
            }
        })
        .collect();
    // SAFETY: inputs as above; the outputs are this call's own row-major host arrays, which
    // overlap nothing else.
    unsafe { launch_raw(kernel, &inputs.arrays, &raw, options)? };
    Ok(outs)
}

fn host_arrays(wires: &[Wire<'_>]) -> PyResult<Vec<HostArray>> {
    wires.iter().map(|w| array::from_wire(w)).collect()
}
