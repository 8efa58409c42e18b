//! tpuBLAS from Python: the operator table and running an operator on wire-form arrays.

use pyo3::prelude::*;
use tpukit::Device;
use tpukit_blas::Value;

use pyo3::types::{PyList, PyTuple};

use crate::array::{self, Wire};
use crate::blas_plan::{BlasPlan, Position, Taken};
use crate::borrow;
use crate::error::{self, TpukitError, guard};
use crate::tensor::Tensor;

/// `(name, schema, about)` of every operator (`aten.add.Tensor`, ATen's schema, a summary).
#[pyfunction]
pub fn tpublas_ops() -> PyResult<Vec<(String, &'static str, &'static str)>> {
    guard(None, || {
        Ok(tpukit_blas::ops()
            .iter()
            .map(|op| (op.name(), op.schema, op.about))
            .collect())
    })
}

/// Warms up the code that builds operators' kernels (see `tpukit_blas::warm_up`).
#[pyfunction]
pub fn tpublas_warm_up() -> PyResult<()> {
    guard(None, || tpukit_blas::warm_up().map_err(error::blas))
}

/// Runs the operator `name` on `args`, given in its schema's order as `(kind, value)` pairs:
/// `tensor` (a wire triple, read in place where it can be: see `borrow::host_array`), `float`, `int`, `ints` (a list), `bool`, `str` (also dtype
/// names), `none`, launching its kernels on `device`. Returns the results in wire form.
#[pyfunction]
#[pyo3(signature = (name, args, device="cpu"))]
pub fn tpublas_run<'py>(
    py: Python<'py>,
    name: &str,
    args: Vec<(String, Bound<'py, PyAny>)>,
    device: &str,
) -> PyResult<Vec<Wire<'py>>> {
    guard(Some(name), || {
        let device: Device = device.parse().map_err(TpukitError::new_err)?;
        let values = arguments(name, &args)?;
        let results = py
            .detach(|| tpukit_blas::on_device(device, || tpukit_blas::run(name, &values)))
            .map_err(error::blas)?;
        // Results over a borrowed argument's memory (a reshape an operator handed back) are
        // copied by `to_wire`: no result aliases an argument, and none outlives the call.
        results.into_iter().map(|a| array::to_wire(py, a)).collect()
    })
}

/// [`tpublas_run`] on the CPU, also returning the call's plan (`tpukit._native.BlasPlan`)
/// where one can be made: `values` are the call's Python arguments in schema order, one per
/// entry of `args`, the tensors exact CPU torch tensors (else no plan). The plan's results
/// are torch tensors.
#[pyfunction]
pub fn tpublas_run_planned<'py>(
    py: Python<'py>,
    name: &str,
    args: Vec<(String, Bound<'py, PyAny>)>,
    values: Bound<'py, PyList>,
) -> PyResult<(Vec<Wire<'py>>, Option<Py<BlasPlan>>)> {
    guard(Some(name), || {
        let values_ = arguments(name, &args)?;
        let (results, plan) = py
            .detach(|| {
                tpukit_blas::on_device(Device::Cpu, || tpukit_blas::run_planned(name, &values_))
            })
            .map_err(error::blas)?;
        let count = results.len();
        let wires = results
            .into_iter()
            .map(|a| array::to_wire(py, a))
            .collect::<PyResult<Vec<_>>>()?;
        let mut tensors = Vec::with_capacity(values_.len());
        for ((kind, _), v) in args.iter().zip(&values_) {
            tensors.push(match v {
                Value::Tensor(t) if kind == "tensor" => Some(Taken::new(t, false)),
                Value::Transposed(t) => Some(Taken::new(t, true)),
                _ => None,
            });
        }
        drop(values_);
        let plan = match (plan, positions(&values, &args)) {
            (Some(plan), Some(at)) if plain(&values, &at, &tensors) => {
                BlasPlan::new(py, name, plan, &values, (tensors, &at), count)?
            }
            _ => None,
        };
        let plan = plan.map(|p| Py::new(py, p)).transpose()?;
        Ok((wires, plan))
    })
}

/// Where each of the call's Python `values` lies among the operator's arguments `args` (a
/// list of tensors gives one `"tensor"` argument per tensor); None where they do not line up
/// (an empty list of tensors gives none, and is counted as one).
fn positions(
    values: &Bound<'_, PyList>,
    args: &[(String, Bound<'_, PyAny>)],
) -> Option<Vec<Position>> {
    let mut at = Vec::with_capacity(values.len());
    let mut next = 0;
    for v in values.iter() {
        let list = v
            .cast::<PyList>()
            .map(|l| l.len())
            .or_else(|_| v.cast::<PyTuple>().map(|t| t.len()));
        match list {
            Ok(n) if n > 0 && args.get(next).is_some_and(|(kind, _)| kind == "tensor") => {
                at.push(Position::Tensors(next..next + n));
                next += n;
            }
            _ => {
                at.push(Position::One(next));
                next += 1;
            }
        }
    }
    (next == args.len()).then_some(at)
}

/// Whether every tensor the operator read is a plain CPU torch tensor among the call's
/// `values` (at its position `at`), as a plan reads them.
fn plain(values: &Bound<'_, PyList>, at: &[Position], tensors: &[Option<Taken>]) -> bool {
    let read = |v: &Bound<'_, PyAny>, t: &Taken| match t.transposed {
        true => Tensor::transposed(v),
        false => Tensor::get(v),
    };
    values.iter().zip(at).all(|(v, at)| match at {
        Position::One(i) => tensors[*i]
            .as_ref()
            .is_none_or(|t| matches!(read(&v, t), Ok(Some(_)))),
        Position::Tensors(range) => v.try_iter().is_ok_and(|items| {
            items.zip(&tensors[range.clone()]).all(|(item, t)| {
                matches!((item, t), (Ok(item), Some(t)) if matches!(read(&item, t), Ok(Some(_))))
            })
        }),
    })
}

/// The operator's arguments from `(kind, value)` pairs (see [`tpublas_run`]): a tensor at
/// a position the operator reads transposed (a product's operand) that is a transposed view
/// is passed as it lies ([`Value::Transposed`]), any other as [`value`] reads it.
fn arguments(name: &str, args: &[(String, Bound<'_, PyAny>)]) -> PyResult<Vec<Value>> {
    let op = tpukit_blas::find(name);
    args.iter()
        .enumerate()
        .map(|(i, (kind, v))| {
            if kind == "tensor"
                && op.is_some_and(|op| op.reads_transposed(i))
                && let Some(a) = borrow::transposed(&v.extract::<Wire<'_>>()?)?
            {
                return Ok(Value::Transposed(a));
            }
            value(kind, v)
        })
        .collect()
}

fn value(kind: &str, v: &Bound<'_, PyAny>) -> PyResult<Value> {
    Ok(match kind {
        "tensor" => Value::Tensor(borrow::host_array(&v.extract::<Wire<'_>>()?)?),
        "float" => Value::Scalar(v.extract()?),
        "int" => Value::Int(v.extract()?),
        "ints" => Value::IntList(v.extract()?),
        "bool" => Value::Bool(v.extract()?),
        "str" => Value::Str(v.extract()?),
        "none" => Value::None,
        other => {
            return Err(TpukitError::new_err(format!(
                "unknown argument kind `{other}`"
            )));
        }
    })
}
