//! `tpukit._native.BlasPlan`: a tpuBLAS operator call replayed for the next call with the
//! same non-tensor arguments and plain CPU torch tensors of the same dtypes and shapes (see
//! `tpukit_blas::plan`): the arguments are checked, the tensors read in place, and the
//! kernels the call resolved to are launched in order — no argument parsing, no operator
//! host code.
//!
//! A run checks every argument: a tensor position takes an exact `torch.Tensor` on the CPU,
//! C-contiguous (or, where the plan was made on a product's operand given transposed, a
//! transposed view as it lies: [`Taken::transposed`]), aligned, without a lazy negation
//! (requiring a gradient only where the caller takes such tensors: [`Grads`]), of the plan's
//! dtype and shape; any other position an object of the same type equal to the planned one (a
//! float bit for bit). Anything else returns `None` and the caller runs the operator in full,
//! which makes the right plan or raises the right error. Results are new tensors (never an
//! argument's memory).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyList, PyTuple};
use tpukit::LaunchOptions;
use tpukit::runtime::{BoundLaunch, RawArray, launch_borrowed, launch_raw};
use tpukit_blas::{Init, Plan, Source};
use tpukit_dsl::DType;

use crate::error::{self, guard};
use crate::gil;
use crate::tensor::{self, Tensor};

/// A tensor a plan takes at one position: its dtype, the shape its memory is read in, and
/// whether it lies transposed (a `w.t()` view given to a product as it lies, whose memory's
/// shape is the tensor's with its last two extents swapped).
pub struct Taken {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub transposed: bool,
}

impl Taken {
    /// What the operator was given: `array` (as a `Value::Transposed` if `transposed`).
    pub fn new(array: &tpukit::HostArray, transposed: bool) -> Taken {
        Taken {
            dtype: array.dtype(),
            shape: array.shape().to_vec(),
            transposed,
        }
    }
}

/// Whether a run takes tensors that require a gradient. Where autograd already ran (inside
/// `tpublas.mode()`, below torch's Autograd key) or is not wanted (a direct call, whose
/// results never carry a gradient, as on the general path) it does; torch's Autograd kernel
/// of a `torch.ops.tpublas` operator refuses them, so that torch's own kernel records the
/// graph.
#[derive(Copy, Clone, PartialEq, Eq)]
pub enum Grads {
    Taken,
    Refused,
}

/// Where one Python argument's values are among the operator's arguments (a list of
/// tensors is one argument per tensor).
#[derive(Clone, Debug)]
pub enum Position {
    One(usize),
    Tensors(std::ops::Range<usize>),
}

/// What a run takes at one argument position.
enum Slot {
    /// A plain CPU tensor, as given when the plan was made.
    Tensor(Taken),
    /// A list (or tuple) of plain CPU tensors, as given when the plan was made (`cat`'s).
    Tensors(Vec<Taken>),
    /// An object of the type of, and equal to, this one (a copy of a list argument).
    Value(Py<PyAny>),
}

/// One tpuBLAS call's plan, with what its arguments must be (see the module docs).
#[pyclass(name = "BlasPlan", module = "tpukit._native", frozen)]
pub struct BlasPlan {
    name: String,
    plan: Plan,
    /// The plan's launches with their extents bound, the outputs that are results handed
    /// back in the results' shapes: what a call outside debug mode runs. Empty where a
    /// kernel cannot be bound (its grid reads input values): the general path then.
    bound: Vec<BoundLaunch>,
    slots: Vec<Slot>,
    single: bool,
}

impl BlasPlan {
    /// The plan of a call with Python `values` (the schema-ordered arguments, each at its
    /// `positions` among the operator's arguments), its `results` results each a new torch
    /// tensor; `tensors` holds, per operator argument, the tensor it read there or None. None
    /// where a list of tensors holds something else.
    pub fn new(
        py: Python<'_>,
        name: &str,
        plan: Plan,
        values: &Bound<'_, PyList>,
        (mut tensors, positions): (Vec<Option<Taken>>, &[Position]),
        results: usize,
    ) -> PyResult<Option<BlasPlan>> {
        let bound = bind(&plan, &tensors).map_err(error::runtime)?;
        let mut slots = Vec::with_capacity(values.len());
        for (v, at) in values.iter().zip(positions) {
            slots.push(match at {
                Position::One(i) => match tensors[*i].take() {
                    Some(taken) => Slot::Tensor(taken),
                    None if v.is_instance_of::<PyList>() => Slot::Value(
                        PyList::new(py, v.cast::<PyList>()?.iter())?
                            .into_any()
                            .unbind(),
                    ),
                    None => Slot::Value(v.unbind()),
                },
                Position::Tensors(range) => {
                    match tensors[range.clone()]
                        .iter_mut()
                        .map(Option::take)
                        .collect()
                    {
                        Some(list) => Slot::Tensors(list),
                        None => return Ok(None),
                    }
                }
            });
        }
        Ok(Some(BlasPlan {
            name: name.to_string(),
            single: results == 1,
            plan,
            bound,
            slots,
        }))
    }

    /// The tensors of `values`, one per position (None elsewhere), if every argument is what
    /// the plan was made for.
    fn hold(
        &self,
        py: Python<'_>,
        values: &[Bound<'_, PyAny>],
        grads: Grads,
    ) -> PyResult<Option<Vec<Option<Tensor>>>> {
        if values.len() != self.slots.len() {
            return Ok(None);
        }
        let mut held = Vec::with_capacity(self.slots.len());
        for (v, slot) in values.iter().zip(&self.slots) {
            match slot {
                Slot::Tensor(taken) => match hold_one(py, v, taken, &held, grads)? {
                    Some(t) => held.push(Some(t)),
                    None => return Ok(None),
                },
                Slot::Tensors(takens) => {
                    let list = match (v.cast::<PyList>(), v.cast::<PyTuple>()) {
                        (Ok(l), _) => l.to_tuple(),
                        (_, Ok(t)) => t.clone(),
                        _ => return Ok(None),
                    };
                    if list.len() != takens.len() {
                        return Ok(None);
                    }
                    for (item, taken) in list.iter().zip(takens) {
                        match hold_one(py, &item, taken, &held, grads)? {
                            Some(t) => held.push(Some(t)),
                            None => return Ok(None),
                        }
                    }
                }
                Slot::Value(want) => {
                    if !same(v, want.bind(py)) {
                        return Ok(None);
                    }
                    held.push(None);
                }
            }
        }
        Ok(Some(held))
    }
}

/// The tensor `v` if it is what `taken` says (read once if `held` has it already: `x * x`),
/// or None.
fn hold_one(
    py: Python<'_>,
    v: &Bound<'_, PyAny>,
    taken: &Taken,
    held: &[Option<Tensor>],
    grads: Grads,
) -> PyResult<Option<Tensor>> {
    let Taken {
        dtype,
        shape,
        transposed,
    } = taken;
    let again = held.iter().flatten().find(|t: &&Tensor| t.is(v));
    let read = match (again, transposed) {
        (Some(t), _) => Ok(Some(t.again(py))),
        (None, false) => Tensor::get(v),
        (None, true) => Tensor::transposed(v),
    };
    let Ok(Some(t)) = read else {
        return Ok(None);
    };
    if t.dtype != *dtype
        || t.shape != *shape
        || !(t.ptr as usize).is_multiple_of(dtype.size_bytes())
        || (again.is_none()
            && grads == Grads::Refused
            && v.getattr(intern!(py, "requires_grad"))?.is_truthy()?)
    {
        return Ok(None);
    }
    Ok(Some(t))
}

/// Whether a call's non-tensor argument `v` is the planned `want`: of its type and equal to
/// it, floats bit for bit (`-0.0 == 0.0` in Python, but `x * -0.0` is not `x * 0.0`, and a
/// plan holds its numbers as constants of the launch).
fn same(v: &Bound<'_, PyAny>, want: &Bound<'_, PyAny>) -> bool {
    if !v.get_type().is(want.get_type()) {
        return false;
    }
    match (v.cast::<PyFloat>(), want.cast::<PyFloat>()) {
        (Ok(a), Ok(b)) => a.value().to_bits() == b.value().to_bits(),
        _ => v.eq(want).unwrap_or(false),
    }
}

/// `plan`'s launches bound to their inputs (argument `i`'s tensor of the dtype `tensors[i]`
/// gives), handing back each result's output in the result's shape; empty if a kernel
/// cannot be bound.
fn bind(
    plan: &Plan,
    tensors: &[Option<Taken>],
) -> Result<Vec<BoundLaunch>, tpukit::runtime::RuntimeError> {
    let mut bound = Vec::with_capacity(plan.steps.len());
    for (i, step) in plan.steps.iter().enumerate() {
        let inputs: Vec<(DType, &[usize])> = step
            .inputs
            .iter()
            .map(|(source, shape)| match source {
                Source::Arg(i) => (
                    tensors[*i].as_ref().expect("a tensor argument").dtype,
                    &shape[..],
                ),
                Source::Const(c) => (c.dtype(), &shape[..]),
                Source::Output { dtype, .. } => (*dtype, &shape[..]),
            })
            .collect();
        let made = match &step.into {
            None => BoundLaunch::new(step.kernel.clone(), &inputs)?,
            Some(inits) => {
                let outputs: Vec<(DType, &[usize])> = inits
                    .iter()
                    .map(|init| match init {
                        Init::Zeros { dtype, shape } | Init::Output { dtype, shape, .. } => {
                            (*dtype, &shape[..])
                        }
                    })
                    .collect();
                BoundLaunch::new_into(step.kernel.clone(), &inputs, &outputs)?
            }
        };
        let Some(mut launch) = made else {
            return Ok(Vec::new());
        };
        for r in plan.results.iter().filter(|r| r.step == i) {
            launch.reshape_output(r.output, &r.shape)?;
        }
        bound.push(launch);
    }
    Ok(bound)
}

/// The held tensors, moved to the launches without the GIL.
struct Launch {
    tensors: Vec<Option<Tensor>>,
}

// SAFETY: the launches only read the tensors' memory (kept alive by the held tensors) by the
// pointers taken when they were held. Nothing touches a Python object off the GIL.
unsafe impl Send for Launch {}
// SAFETY: as for `Send`.
unsafe impl Sync for Launch {}

#[pymethods]
impl BlasPlan {
    /// Whether every tensor the plan takes is f32 or bf16 (what `tpublas.mode()` serves).
    #[getter]
    fn floats(&self) -> PyResult<bool> {
        guard(Some(&self.name), || Ok(self.takes_floats()))
    }

    /// Whether the plan would run on `values` (the call's schema-ordered arguments, a list):
    /// what [`BlasPlan::run`] checks, without launching.
    fn takes(&self, py: Python<'_>, values: &Bound<'_, PyAny>) -> PyResult<bool> {
        guard(Some(&self.name), || {
            let Ok(values) = values.cast::<PyList>() else {
                return Ok(false);
            };
            Ok(self
                .hold(py, &values.iter().collect::<Vec<_>>(), Grads::Taken)?
                .is_some())
        })
    }

    /// The results of the planned launch on `values` (the call's schema-ordered arguments,
    /// a list), or `None` where they are not what the plan was made for.
    fn run<'py>(
        &self,
        py: Python<'py>,
        values: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        guard(Some(&self.name), || {
            let Ok(values) = values.cast::<PyList>() else {
                return Ok(None);
            };
            self.run_on(py, &values.iter().collect::<Vec<_>>(), Grads::Taken)
        })
    }
}

impl BlasPlan {
    /// Whether every tensor the plan takes is f32 or bf16 (see `floats`).
    pub fn takes_floats(&self) -> bool {
        let float = |t: &Taken| matches!(t.dtype, DType::F32 | DType::BF16);
        self.slots.iter().all(|s| match s {
            Slot::Tensor(t) => float(t),
            Slot::Tensors(ts) => ts.iter().all(float),
            Slot::Value(_) => true,
        })
    }

    /// [`BlasPlan::run`] on the call's schema-ordered arguments, without the guard (the
    /// caller's entry point runs in one), taking tensors that require a gradient or not.
    pub fn run_on<'py>(
        &self,
        py: Python<'py>,
        values: &[Bound<'py, PyAny>],
        grads: Grads,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        {
            let Some(held) = self.hold(py, values, grads)? else {
                return Ok(None);
            };
            let launch = Launch { tensors: held };
            let options = LaunchOptions::from_env();
            let bound: &[BoundLaunch] = if options.debug { &[] } else { &self.bound };
            let held = &launch; // captured whole: `Launch` is `Sync`, its fields are not
            let plan = &self.plan;
            let outs = gil::launch(py, bound, || {
                let arg = |i: usize| {
                    let t = held.tensors[i].as_ref().expect("a tensor slot");
                    (t.dtype, t.ptr)
                };
                // SAFETY: each tensor was checked to be C-contiguous, of the plan's dtype and
                // element count (the kernel reads it reshaped) and aligned, and is held for
                // the call; constants are owned by the plan, earlier outputs by the replay,
                // and so are the outputs a launch writes into (new zeros, or an earlier
                // output moved to it: row-major, of the dtypes and shapes planned, read by
                // no other launch). Bound launches were bound to exactly these dtypes and
                // shapes.
                plan.replay(arg, |i, arrays, into| {
                    let ins = || {
                        arrays
                            .iter()
                            .map(|a| a.data as *const u8)
                            .collect::<Vec<_>>()
                    };
                    let kernel = &*plan.steps[i].kernel;
                    match (bound.get(i), into) {
                        (Some(b), None) => unsafe { b.run(&ins()) },
                        (None, None) => unsafe { launch_borrowed(kernel, arrays, options) },
                        (b, Some(mut outs)) => {
                            let ptrs: Vec<*mut u8> = outs
                                .iter_mut()
                                .map(tpukit::HostArray::data_ptr_mut)
                                .collect();
                            match b {
                                Some(b) => unsafe { b.run_into(&ins(), &ptrs) }?,
                                None => {
                                    let raw: Vec<RawArray<'_>> = outs
                                        .iter()
                                        .zip(&ptrs)
                                        .map(|(o, &data)| RawArray {
                                            dtype: o.dtype(),
                                            shape: o.shape(),
                                            data,
                                        })
                                        .collect();
                                    unsafe { launch_raw(kernel, arrays, &raw, options) }?
                                }
                            }
                            Ok(outs)
                        }
                    }
                })
            })
            .map_err(error::runtime)?;
            drop(launch);
            let torch = tensor::torch(py)?.expect("torch, imported: a plan reads tensors");
            let mut results = Vec::with_capacity(outs.len());
            for out in outs {
                results.push(torch.wrap(py, out)?);
            }
            if self.single {
                return Ok(results.pop());
            }
            Ok(Some(PyTuple::new(py, results)?.into_any()))
        }
    }
}
