//! `tpukit._native.OperatorCall`: the native base of `tpublas.Operator` and `tpublas.Packet`,
//! whose `__call__` runs a call the last plan takes without a Python frame (as
//! [`crate::dispatch`]'s callables do for torch's hooks).
//!
//! A call of positional arguments only, within the schema's positional arity, on tpuBLAS's
//! `"cpu"` device, that the plan (`_fast`, a [`BlasPlan`] or None, which the Python side
//! sets) takes is the plan's; any other call is `self._run(self._bind(args, kwargs))`, the
//! Python operator's full path. The plan and the thread's device are read at every call, so
//! it decides exactly as that Python code would.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::blas_plan::Grads;
use crate::dispatch::{on_cpu, run};
use crate::error::guard;

/// The native base of `tpublas.Operator` and `tpublas.Packet` (see the module docs).
#[pyclass(name = "OperatorCall", module = "tpukit._native", subclass)]
pub struct OperatorCall {
    /// The operator's current plan (a `BlasPlan`), or None.
    #[pyo3(get, set, name = "_fast")]
    fast: Option<Py<PyAny>>,
    /// The fewest and most positional arguments, and the schema's defaults by position;
    /// `(0, 0, ())` until `_set_arity`.
    least: usize,
    most: usize,
    fills: Option<Py<PyTuple>>,
    /// `tpublas._local`, whose `device` says where calls run.
    local: Option<Py<PyAny>>,
}

#[pymethods]
impl OperatorCall {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<OperatorCall> {
        guard(None, || {
            Ok(OperatorCall {
                fast: None,
                least: 0,
                most: 0,
                fills: None,
                local: None,
            })
        })
    }

    /// Sets the positional arity (`least..=most` arguments, the rest from `fills`) and the
    /// thread-local state read for the device.
    fn _set_arity(
        &mut self,
        least: usize,
        most: usize,
        fills: Py<PyTuple>,
        local: Py<PyAny>,
    ) -> PyResult<()> {
        guard(None, || {
            (self.least, self.most) = (least, most);
            self.fills = Some(fills);
            self.local = Some(local);
            Ok(())
        })
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        guard(None, || {
            let planned = {
                let me = slf.borrow();
                let n = args.len();
                match (&me.fast, &me.fills, &me.local) {
                    (Some(plan), Some(fills), Some(local))
                        if kwargs.is_none_or(|k| k.is_empty()) && me.least <= n && n <= me.most =>
                    {
                        Some((
                            plan.bind(py).clone(),
                            fills.bind(py).clone(),
                            local.bind(py).clone(),
                        ))
                    }
                    _ => None,
                }
            };
            if let Some((plan, fills, local)) = planned
                && on_cpu(&local)?
            {
                let values: Vec<_> = args.iter().collect();
                if let Some(out) = run(&plan, &values, &fills, Grads::Taken)? {
                    return Ok(out);
                }
            }
            let kwargs = match kwargs {
                Some(k) => k.clone(),
                None => PyDict::new(py),
            };
            let values = slf.call_method1(intern!(py, "_bind"), (args, kwargs))?;
            slf.call_method1(intern!(py, "_run"), (values,))
        })
    }
}
