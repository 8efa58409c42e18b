//! torch's hooks into tpuBLAS as native callables, so a planned call runs no Python frame
//! between torch and the plan ([`BlasPlan::run_on`]):
//!
//! - [`PlannedKernel`]: the Autograd kernel of a `torch.ops.tpublas` operator (called by
//!   torch's dispatcher with the key set first). A call of positional arguments, with no
//!   dispatch mode on the stack, no functorch transform, on tpuBLAS's `"cpu"` device, that
//!   the operator's plans take (its last, `Operator._fast`, or the one of the call's
//!   signature: [`OperatorCall::run_plans`]; exact CPU tensors needing no gradient,
//!   [`Grads::Refused`]) is the plan's; any other call is handed as it is to torch's own
//!   autograd kernel.
//! - [`ModeDispatch`]: a `tpublas.mode()`'s `__torch_dispatch__`. A call of an operator the
//!   mode planned (see `Mode._planned`: keyed by `id(func)`, with the operator held), on the
//!   `"cpu"` device, that the tpuBLAS operator's plans take (f32 or bf16 tensors, needing a
//!   gradient or not: torch's autograd ran above the mode; its numbers, lists, flags and
//!   keyword arguments equal to the plan's), or a tensor and a number its Scalar overload's
//!   plans take, is the plan's and counted in `served` (a backward operator's results its
//!   `output_mask` leaves out returned as None; an in-place operator's result written into
//!   its `self`, which is returned: [`write_back`]); a view or metadata operator's call
//!   (`Mode._viewed`) is made as it came and counted in `views`; any other call goes to the
//!   mode's Python `__torch_dispatch__` (as torch wrapped it). It stands as the mode's
//!   instance attribute `__torch_dispatch__`, bound to it as torch requires (`__self__`, the
//!   mode, held weakly: no reference cycle).
//!
//! Both read the Python state they depend on at every call (the operator's current plans, the
//! thread's device, the mode stack), so they decide exactly as the Python code they stand in
//! front of.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyTuple};

use crate::blas_plan::{BlasPlan, Grads};
use crate::error::guard;
use crate::operator_call::{Dtypes, OperatorCall};
use crate::write_back;

/// Whether tpuBLAS's thread-local state (`tpublas._local`) says the `"cpu"` device.
pub fn on_cpu(local: &Bound<'_, PyAny>) -> PyResult<bool> {
    let device = local.getattr(intern!(local.py(), "device"))?;
    device.eq(intern!(local.py(), "cpu"))
}

/// The results of `plan` (if it is a [`BlasPlan`]) on `args` followed by the defaults
/// `fills[args.len()..]`, or None where it does not take them.
pub fn run<'py>(
    plan: &Bound<'py, PyAny>,
    args: &[Bound<'py, PyAny>],
    fills: &Bound<'py, PyTuple>,
    grads: Grads,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Ok(plan) = plan.cast::<BlasPlan>() else {
        return Ok(None);
    };
    let plan = plan.get();
    let mut values = Vec::with_capacity(fills.len().max(args.len()));
    values.extend(args.iter().cloned());
    values.extend(fills.iter().skip(args.len()));
    plan.run_on(fills.py(), &values, grads)
}

/// The Autograd kernel of one `torch.ops.tpublas` operator (see the module docs).
#[pyclass(name = "PlannedKernel", module = "tpukit._native", frozen)]
pub struct PlannedKernel {
    /// The `tpublas.Operator`, whose `_fast` is its current plan or None.
    op: Py<PyAny>,
    least: usize,
    most: usize,
    /// The schema's defaults, by position.
    fills: Py<PyTuple>,
    /// `torch._C._len_torch_dispatch_stack` and `torch._C._functorch.peek_interpreter_stack`.
    modes: Py<PyAny>,
    functorch: Py<PyAny>,
    /// `tpublas._local`.
    local: Py<PyAny>,
    /// torch's autograd kernel, called with the key set and the call as they came.
    fallback: Py<PyAny>,
}

#[pymethods]
impl PlannedKernel {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        op: Py<PyAny>,
        least: usize,
        most: usize,
        fills: Py<PyTuple>,
        modes: Py<PyAny>,
        functorch: Py<PyAny>,
        local: Py<PyAny>,
        fallback: Py<PyAny>,
    ) -> PyResult<PlannedKernel> {
        guard(None, || {
            Ok(PlannedKernel {
                op,
                least,
                most,
                fills,
                modes,
                functorch,
                local,
                fallback,
            })
        })
    }

    /// `kernel(keyset, *args, **kwargs)`, as torch calls an Autograd kernel.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(None, || {
            let n = args.len().saturating_sub(1);
            if kwargs.is_none_or(|k| k.is_empty()) && self.least <= n && n <= self.most {
                let op = self.op.bind(py).cast::<OperatorCall>()?;
                if op.borrow().has_plan()
                    && self
                        .modes
                        .bind(py)
                        .call0()?
                        .cast::<PyInt>()?
                        .extract::<usize>()?
                        == 0
                    && self.functorch.bind(py).call0()?.is_none()
                    && on_cpu(self.local.bind(py))?
                {
                    let values: Vec<_> = args.iter().skip(1).collect();
                    let fills = self.fills.bind(py);
                    if let Some(out) =
                        OperatorCall::run_plans(op, &values, fills, Grads::Refused, Dtypes::Any)?
                    {
                        return Ok(out);
                    }
                }
            }
            self.fallback.bind(py).call(args, kwargs)
        })
    }
}

/// A `tpublas.mode()`'s `__torch_dispatch__` (see the module docs).
#[pyclass(name = "ModeDispatch", module = "tpukit._native", frozen)]
pub struct ModeDispatch {
    /// `id(func)` → `(func, tpuBLAS operator, least, most, fills, name, scalar, names, mask,
    /// in_place)`: `scalar` None or `(Scalar overload, its fills, number)` (`number(v)` is
    /// `v` as a Python number if it is one or a number ATen wrapped in a 0-d tensor, else
    /// None); `names` the schema's argument names, which keywords bind to; `mask` the
    /// position of an `output_mask` or None; `in_place` whether `func` is the in-place form
    /// of the operator (`add_` of `add`), whose result is written into its first argument.
    planned: Py<PyDict>,
    /// The mode's `served` counter (a `collections.Counter`, a dict).
    served: Py<PyDict>,
    /// `id(func)` → `(func, name)` of the view and metadata operators, called as they came.
    viewed: Py<PyDict>,
    /// The mode's `views` counter.
    views: Py<PyDict>,
    /// `tpublas._local`.
    local: Py<PyAny>,
    /// The mode class's own `__torch_dispatch__` (as torch wrapped it), called with the
    /// mode first.
    fallback: Py<PyAny>,
    /// A weak reference to the mode (`__self__`).
    mode: Py<PyAny>,
}

#[pymethods]
impl ModeDispatch {
    #[new]
    fn new(
        planned: Py<PyDict>,
        served: Py<PyDict>,
        viewed: Py<PyDict>,
        views: Py<PyDict>,
        local: Py<PyAny>,
        fallback: Py<PyAny>,
        mode: Py<PyAny>,
    ) -> PyResult<ModeDispatch> {
        guard(None, || {
            Ok(ModeDispatch {
                planned,
                served,
                viewed,
                views,
                local,
                fallback,
                mode,
            })
        })
    }

    /// The mode, as a bound method's `__self__` (torch checks that a mode's
    /// `__torch_dispatch__` is bound to it).
    #[getter]
    fn __self__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        guard(None, || self.mode.bind(py).call0())
    }

    /// `__torch_dispatch__(func, types, args=(), kwargs=None)`, as torch calls it (the
    /// fallback gets the call as it came).
    #[pyo3(signature = (*call, **keywords))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        call: &Bound<'py, PyTuple>,
        keywords: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(None, || {
            if call.len() >= 3
                && keywords.is_none_or(|k| k.is_empty())
                && let Ok(args) = call.get_item(2)?.cast_into::<PyTuple>()
            {
                let func = call.get_item(0)?;
                let kwargs = match call.get_item(3) {
                    Ok(k) if !k.is_none() => Some(k.cast_into::<PyDict>()?),
                    _ => None,
                };
                if let Some(out) = self.serve(py, &func, &args, kwargs.as_ref())? {
                    return Ok(out);
                }
            }
            let mode = self.mode.bind(py).call0()?;
            let mut with_mode = Vec::with_capacity(call.len() + 1);
            with_mode.push(mode);
            with_mode.extend(call.iter());
            let with_mode = PyTuple::new(py, with_mode)?;
            self.fallback.bind(py).call(with_mode, keywords)
        })
    }
}

impl ModeDispatch {
    /// The call `func(*args, **kwargs)` served natively: a view's, or a planned operator's
    /// that its plans (or its Scalar overload's) take; None for the mode's Python code.
    fn serve<'py>(
        &self,
        py: Python<'py>,
        func: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let id = func.as_ptr() as usize;
        if let Some(entry) = self.viewed.bind(py).get_item(id)? {
            let name = entry.cast::<PyTuple>()?.get_item(1)?;
            count(self.views.bind(py), name)?;
            return func.call(args, kwargs).map(Some);
        }
        let Some(entry) = self.planned.bind(py).get_item(id)? else {
            return Ok(None);
        };
        let entry = entry.cast::<PyTuple>()?;
        let (least, most): (usize, usize) =
            (entry.get_item(2)?.extract()?, entry.get_item(3)?.extract()?);
        let op = entry.get_item(1)?;
        let op = op.cast::<OperatorCall>()?;
        if !(least <= args.len() && args.len() <= most && on_cpu(self.local.bind(py))?) {
            return Ok(None);
        }
        let fills = entry.get_item(4)?;
        let fills = fills.cast::<PyTuple>()?;
        let mut values: Vec<_> = args.iter().collect();
        if let Some(kwargs) = kwargs.filter(|k| !k.is_empty()) {
            let names = entry.get_item(7)?;
            let Some(all) = by_name(&values, kwargs, names.cast::<PyTuple>()?, fills)? else {
                return Ok(None);
            };
            values = all;
        }
        // (No plan yet: None at once.)
        let mut out = OperatorCall::run_plans(op, &values, fills, Grads::Taken, Dtypes::Floats)?;
        let scalar = entry.get_item(6)?;
        if out.is_none() && values.len() == 2 && !scalar.is_none() {
            // `x ⊕ number` (as `Mode._scalar_call`): the Scalar overload's plans.
            let scalar = scalar.cast::<PyTuple>()?;
            let number = scalar.get_item(2)?.call1((&values[1],))?;
            if !number.is_none() {
                let op = scalar.get_item(0)?;
                let fills = scalar.get_item(1)?;
                out = OperatorCall::run_plans(
                    op.cast::<OperatorCall>()?,
                    &[values[0].clone(), number],
                    fills.cast::<PyTuple>()?,
                    Grads::Taken,
                    Dtypes::Floats,
                )?;
            }
        }
        let Some(out) = out else {
            return Ok(None);
        };
        if entry.get_item(9)?.is_truthy()? {
            // An in-place operator run as its counterpart: the result goes into `self`,
            // which is returned (else the Python path converts, or raises, and runs again).
            let target = &values[0];
            if !write_back::into_self(target, &out)? {
                return Ok(None);
            }
            count(self.served.bind(py), entry.get_item(5)?)?;
            return Ok(Some(target.clone()));
        }
        count(self.served.bind(py), entry.get_item(5)?)?;
        let mask = entry.get_item(8)?;
        if mask.is_none() {
            return Ok(Some(out));
        }
        let at = mask.extract::<usize>()?;
        let mask = match values.get(at) {
            Some(given) => given.clone(),
            None => fills.get_item(at)?,
        };
        masked(&out, &mask).map(Some)
    }
}

/// The arguments of a call of `positional` arguments and `keywords` in the schema's order
/// (its argument `names`), the defaults `fills` where neither gives one; None if a keyword
/// names no argument after the positional ones.
fn by_name<'py>(
    positional: &[Bound<'py, PyAny>],
    keywords: &Bound<'py, PyDict>,
    names: &Bound<'py, PyTuple>,
    fills: &Bound<'py, PyTuple>,
) -> PyResult<Option<Vec<Bound<'py, PyAny>>>> {
    let mut values = positional.to_vec();
    let mut used = 0;
    for (name, fill) in names.iter().zip(fills.iter()).skip(positional.len()) {
        values.push(match keywords.get_item(name)? {
            Some(v) => {
                used += 1;
                v
            }
            None => fill,
        });
    }
    Ok((used == keywords.len()).then_some(values))
}

/// The results `out` (a tuple) with those `mask` (a backward operator's `output_mask`, a
/// list of flags) leaves out as None, as ATen returns them undefined (`_mode._masked`).
fn masked<'py>(out: &Bound<'py, PyAny>, mask: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = out.py();
    let results: Vec<Bound<'py, PyAny>> = out
        .try_iter()?
        .zip(mask.try_iter()?)
        .map(|(r, wanted)| {
            Ok(if wanted?.is_truthy()? {
                r?
            } else {
                py.None().into_bound(py)
            })
        })
        .collect::<PyResult<_>>()?;
    Ok(PyTuple::new(py, results)?.into_any())
}

/// One more of `name` in `counter` (a `collections.Counter`).
fn count(counter: &Bound<'_, PyDict>, name: Bound<'_, PyAny>) -> PyResult<()> {
    let n = match counter.get_item(&name)? {
        Some(c) => c.extract::<u64>()? + 1,
        None => 1,
    };
    counter.set_item(name, n)
}
