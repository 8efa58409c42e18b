//! `tpukit.Operand`: one operand of a kernel, with named fields.

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tpukit_dsl::{Dim, Operand};

use crate::error::guard;

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
    pub fn of(o: &Operand) -> PyOperand {
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
