//! `tpukit._native.OperatorCall`: the native base of `tpublas.Operator` and `tpublas.Packet`,
//! whose `__call__` runs a call the last plan takes without a Python frame (as
//! [`crate::dispatch`]'s callables do for torch's hooks).
//!
//! A call of positional arguments only, within the schema's positional arity, on tpuBLAS's
//! `"cpu"` device, that the plan (`_fast`, a [`BlasPlan`] or None, which the Python side
//! sets) takes is the plan's; any other call is `self._run(self._bind(args, kwargs))`, the
//! Python operator's full path. The plan and the thread's device are read at every call, so
//! it decides exactly as that Python code would. A call `_fast` does not take looks up the
//! plan of its signature in `_plans` ([`OperatorCall::run_plans`], as `Operator._run` does).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::blas_plan::{BlasPlan, Grads};
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
    /// An operator's plans by call signature ([`plan_key`]), or None (a packet's).
    #[pyo3(get, set, name = "_plans")]
    plans: Option<Py<PyDict>>,
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
                plans: None,
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
            if let Some((_, fills, local)) = planned
                && on_cpu(&local)?
            {
                let values: Vec<_> = args.iter().collect();
                if let Some(out) =
                    OperatorCall::run_plans(slf, &values, &fills, Grads::Taken, Dtypes::Any)?
                {
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

impl OperatorCall {
    /// Whether the operator has a plan (`_fast`).
    pub fn has_plan(&self) -> bool {
        self.fast.is_some()
    }

    /// The results of `op`'s plans on `args` followed by the defaults `fills[args.len()..]`:
    /// its last plan (`_fast`) where it takes them, else the plan its `_plans` holds for
    /// their signature, which then becomes `_fast`; None where neither takes them. Only
    /// plans of f32 and bf16 tensors run for [`Dtypes::Floats`] (what `tpublas.mode()`
    /// serves).
    pub fn run_plans<'py>(
        op: &Bound<'py, OperatorCall>,
        args: &[Bound<'py, PyAny>],
        fills: &Bound<'py, PyTuple>,
        grads: Grads,
        dtypes: Dtypes,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = op.py();
        let (fast, plans) = {
            let me = op.borrow();
            (
                me.fast.as_ref().map(|p| p.clone_ref(py)),
                me.plans.as_ref().map(|p| p.clone_ref(py)),
            )
        };
        let Some(fast) = fast else {
            return Ok(None);
        };
        if dtypes.allow(fast.bind(py))
            && let Some(out) = run(fast.bind(py), args, fills, grads)?
        {
            return Ok(Some(out));
        }
        let Some(plans) = plans.filter(|p| !p.bind(py).is_empty()) else {
            return Ok(None);
        };
        let mut values = Vec::with_capacity(fills.len().max(args.len()));
        values.extend(args.iter().cloned());
        values.extend(fills.iter().skip(args.len()));
        let Some(key) = plan_key(py, &values)? else {
            return Ok(None);
        };
        let Some(plan) = plans.bind(py).get_item(key)? else {
            return Ok(None);
        };
        let Ok(blas) = plan.cast::<BlasPlan>() else {
            return Ok(None);
        };
        if !dtypes.allow(&plan) {
            return Ok(None);
        }
        let out = blas.get().run_on(py, &values, grads)?;
        if out.is_some() {
            op.borrow_mut().fast = Some(plan.unbind());
        }
        Ok(out)
    }
}

/// Which plans a caller runs, by the dtypes of their tensors.
#[derive(Copy, Clone, PartialEq, Eq)]
pub enum Dtypes {
    Any,
    /// Only f32 and bf16 tensors.
    Floats,
}

impl Dtypes {
    fn allow(self, plan: &Bound<'_, PyAny>) -> bool {
        self == Dtypes::Any
            || plan
                .cast::<BlasPlan>()
                .is_ok_and(|p| p.get().takes_floats())
    }
}

/// A key for the plan of a call with these schema-ordered values: per value, a torch
/// tensor's `(type, dtype, shape, strides)` (a transposed view is planned apart from its
/// copy), a list or tuple as a tuple of its items (tensors described so: `cat`'s), anything
/// else as it is; None if some value cannot be a key (is
/// unhashable: a numpy or JAX array, which no plan takes). Only a hint: a plan found by it
/// still checks every argument itself.
pub fn plan_key<'py>(
    py: Python<'py>,
    values: &[Bound<'py, PyAny>],
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let torch = crate::tensor::torch(py)?;
    // A tensor by its type, dtype, shape and strides (a plan takes any tensor so described).
    let part = |v: &Bound<'py, PyAny>| -> PyResult<Bound<'py, PyAny>> {
        if !torch.is_some_and(|t| t.reads(v)) {
            return Ok(v.clone());
        }
        let part = (
            v.get_type(),
            v.getattr(intern!(py, "dtype"))?,
            v.getattr(intern!(py, "shape"))?,
            v.call_method0(intern!(py, "stride"))?,
        );
        Ok(part.into_pyobject(py)?.into_any())
    };
    let mut key = Vec::with_capacity(values.len());
    for v in values {
        if v.is_instance_of::<PyList>() || v.is_exact_instance_of::<PyTuple>() {
            // A list's items (`cat`'s tensors described as above).
            let items = v
                .try_iter()?
                .map(|item| part(&item?))
                .collect::<PyResult<Vec<_>>>()?;
            key.push(PyTuple::new(py, items)?.into_any());
        } else {
            key.push(part(v)?);
        }
    }
    let key = PyTuple::new(py, key)?;
    if key.hash().is_err() {
        return Ok(None);
    }
    Ok(Some(key))
}

/// [`plan_key`] from Python (`tpublas.Operator._run` keys its plans by it).
#[pyfunction(name = "plan_key")]
pub fn py_plan_key<'py>(values: &Bound<'py, PyList>) -> PyResult<Option<Bound<'py, PyTuple>>> {
    guard(None, || {
        plan_key(values.py(), &values.iter().collect::<Vec<_>>())
    })
}
