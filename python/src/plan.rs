//! `tpukit._native.LaunchPlan`: a kernel's launch on the compiled CPU backend for one
//! signature of arrays (each input's dtype and shape), made once, run many times.
//!
//! A run checks only what can differ between two calls of the same Python signature: each
//! argument exports a C-contiguous buffer of the plan's element format, shape and alignment
//! (else the run returns `None` and the caller takes the general path, which makes the right
//! plan or raises the right error). It reads the arguments in place, launches (bound to the
//! plan's shapes once, by its first run outside debug mode, which checks them against the
//! kernel as any launch does: `tpukit::runtime::BoundLaunch`), and returns the new outputs —
//! which alias no argument — each passed to its `wrap` (`numpy.asarray`, say), or with no
//! wrap, made a torch tensor over it (`crate::tensor::Torch::wrap`).

use pyo3::prelude::*;
use pyo3::types::PyList;
use std::sync::{Arc, OnceLock};
use tpukit::LaunchOptions;
use tpukit::runtime::{BoundLaunch, RawArray, launch_borrowed};
use tpukit_dsl::DType;

use crate::array::{self, Buffer};
use crate::borrow::Borrowed;
use crate::buffer::{self, Held};
use crate::error::{self, TpukitError, guard};
use crate::gil;
use crate::kernel::PyKernel;
use crate::tensor;

/// One kernel's launch for arrays of fixed dtypes and shapes (see the module docs).
#[pyclass(name = "LaunchPlan", module = "tpukit._native", frozen)]
pub struct LaunchPlan {
    kernel: Py<PyKernel>,
    /// Each input's dtype and shape (prefetch operands, then inputs); never `bool`.
    inputs: Vec<(DType, Vec<usize>)>,
    /// One callable per output, given the output's [`Buffer`]; None: a torch tensor.
    wraps: Vec<Option<Py<PyAny>>>,
    /// The launch bound to `inputs`, made by the first run outside debug mode; None inside
    /// it where the kernel cannot be bound (see `BoundLaunch::new`: the general path then).
    bound: OnceLock<Option<BoundLaunch>>,
}

impl LaunchPlan {
    /// The plan for `inputs` (`(dtype name, shape)` pairs): an error for a `bool` input
    /// (its bytes are normalised by a copy, which plans do not make) or an unknown dtype.
    pub fn new(
        kernel: Py<PyKernel>,
        inputs: Vec<(String, Vec<usize>)>,
        wraps: Vec<Option<Py<PyAny>>>,
    ) -> PyResult<LaunchPlan> {
        let inputs = inputs
            .into_iter()
            .map(|(name, shape)| {
                let dtype = array::dtype(&name)?;
                if dtype == DType::Bool {
                    return Err(TpukitError::new_err("launch plans read no bool arrays"));
                }
                Ok((dtype, shape))
            })
            .collect::<PyResult<_>>()?;
        Ok(LaunchPlan {
            kernel,
            inputs,
            wraps,
            bound: OnceLock::new(),
        })
    }

    /// The launch bound to the plan's inputs (made at the first call), or None where the
    /// kernel cannot be bound.
    fn bound(&self, prepared: &Arc<tpukit::Prepared>) -> PyResult<Option<&BoundLaunch>> {
        if let Some(b) = self.bound.get() {
            return Ok(b.as_ref());
        }
        let inputs: Vec<(DType, &[usize])> =
            self.inputs.iter().map(|(d, s)| (*d, &s[..])).collect();
        let b = BoundLaunch::new(prepared.clone(), &inputs).map_err(error::runtime)?;
        Ok(self.bound.get_or_init(|| b).as_ref())
    }

    /// The arguments' buffers, if every one is what the plan reads in place.
    fn hold(&self, arrays: &Bound<'_, PyAny>) -> PyResult<Option<Vec<Held>>> {
        let mut held = Vec::with_capacity(self.inputs.len());
        let mut iter = arrays.try_iter()?;
        for (dtype, shape) in &self.inputs {
            let Some(a) = iter.next().transpose()? else {
                return Ok(None);
            };
            match Held::get(&a, buffer::SHAPED) {
                Ok(b) if b.is(*dtype, shape) => held.push(b),
                _ => return Ok(None),
            }
        }
        Ok(iter.next().is_none().then_some(held))
    }
}

#[pymethods]
impl LaunchPlan {
    /// The wrapped new outputs of a launch on `arrays` (a sequence, prefetch operands then
    /// inputs), or `None` where the arrays are not what the plan was made for.
    fn run<'py>(
        &self,
        py: Python<'py>,
        arrays: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let kernel = self.kernel.get();
        guard(Some(&kernel.kernel.name), || {
            let Some(buffers) = self.hold(arrays)? else {
                return Ok(None);
            };
            let arrays = buffers
                .iter()
                .zip(&self.inputs)
                .map(|(b, (dtype, shape))| RawArray {
                    dtype: *dtype,
                    shape,
                    data: b.ptr(),
                })
                .collect();
            let borrowed = Borrowed {
                _buffers: buffers,
                arrays,
            };
            let prepared = kernel.prepared()?;
            let options = LaunchOptions::from_env();
            let bound = if options.debug {
                None
            } else {
                self.bound(prepared)?
            };
            // SAFETY: each array's buffer was checked to be C-contiguous, of the plan's shape
            // and element size, and aligned; the held buffers keep the memory alive for the
            // call. A bound launch was bound to exactly these dtypes and shapes.
            let held = &borrowed; // captured whole: `Borrowed` is `Sync`, its fields are not
            let all = bound.map_or(&[][..], std::slice::from_ref);
            let outs = gil::launch(py, all, || match bound {
                Some(bound) => {
                    let ptrs: Vec<*const u8> =
                        held.arrays.iter().map(|a| a.data as *const u8).collect();
                    unsafe { bound.run(&ptrs) }
                }
                None => unsafe { launch_borrowed(&**prepared, &held.arrays, options) },
            })
            .map_err(error::runtime)?;
            drop(borrowed);
            let list = PyList::empty(py);
            for (a, wrap) in outs.into_iter().zip(&self.wraps) {
                list.append(match wrap {
                    Some(wrap) => wrap.bind(py).call1((Bound::new(py, Buffer::new(a))?,))?,
                    None => {
                        let torch = tensor::torch(py)?.ok_or_else(|| {
                            TpukitError::new_err("a launch plan makes torch tensors: no torch")
                        })?;
                        torch.wrap(py, a)?
                    }
                })?;
            }
            Ok(Some(list))
        })
    }
}
