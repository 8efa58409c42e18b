//! Plans: an operator call reduced to the one kernel launch it made, so a host can replay it
//! for the next call with tensors of the same dtypes and shapes and the same other arguments
//! without running the operator's host code again ([`run_planned`]).
//!
//! A plan is made from a trace of the call (`launch::trace`) only when the replay
//! provably computes what the operator would:
//! - the operator's family reads no tensor's elements on the host, except a one-element
//!   tensor's value (a number passed as a tensor; [`Op::plannable`]), and makes no launch
//!   that depends on them;
//! - no tensor argument has fewer than two elements (so no tensor's value became a number);
//! - the call made exactly one launch, which returned new outputs;
//! - each kernel input is a tensor argument's memory as it is (the same address, dtype and
//!   size, row-major: a reshape; for a [`Value::Transposed`] argument, its memory as it lies,
//!   so a host replays the plan only on a tensor lying the same way), or a constant made from the other arguments and the
//!   tensors' shapes (`alpha`, a Python number; a norm's ones and zeros for a missing weight
//!   and bias: `max_constant_elements`), and every tensor argument is one of the inputs;
//! - each result is one of the launch's outputs (a different one), row-major, reshaped at
//!   most.
//!
//! Arguments sharing memory (`x + x`) are traced again on copies of the tensors, so that
//! each input's argument is known. Anything else gives no plan, and the host runs the operator in full every time.

use crate::launch::{Prepared, Traced, device, trace};
use crate::table::{Family, Op, find};
use crate::{BlasError, Result, Value};
use tpukit::dsl::DType;
use tpukit::runtime::RawArray;
use tpukit::{Device, HostArray};

/// Where a planned launch's input comes from.
#[derive(Debug)]
pub enum Source {
    /// The tensor argument at this position (in the schema's order), read in place.
    Arg(usize),
    /// A constant made from the call's other arguments and its tensors' shapes.
    Const(HostArray),
}

/// One operator call's launch, replayable for calls with the same non-tensor arguments and
/// tensors of the same dtypes and shapes (see the module docs).
#[derive(Debug)]
pub struct Plan {
    pub kernel: Prepared,
    /// Per kernel input: its source and the shape the kernel reads it in.
    pub inputs: Vec<(Source, Vec<usize>)>,
    /// Per result: the kernel output it is and its shape.
    pub results: Vec<(usize, Vec<usize>)>,
}

impl Plan {
    /// The kernel's inputs for a replay, in the shapes the kernel reads them in: argument `i`'s
    /// tensor is `arg(i)` (its dtype and row-major data, of the planned dtype and element
    /// count), a constant the plan's own.
    pub fn raw_inputs(&self, arg: impl Fn(usize) -> (DType, *mut u8)) -> Vec<RawArray<'_>> {
        self.inputs
            .iter()
            .map(|(source, shape)| {
                let (dtype, data) = match source {
                    Source::Arg(i) => arg(*i),
                    Source::Const(c) => (c.dtype(), c.data_ptr() as *mut u8),
                };
                RawArray { dtype, shape, data }
            })
            .collect()
    }

    /// The call's results from the replayed launch's outputs `outs`: each planned output (a
    /// different one per result), reshaped to its result's shape.
    pub fn results_from(&self, outs: Vec<HostArray>) -> Vec<HostArray> {
        self.results_of(outs)
            .into_iter()
            .zip(&self.results)
            .map(|(r, (_, shape))| r.reshape(shape).expect("the planned result's size"))
            .collect()
    }

    /// The call's results from outputs `outs` already in the results' shapes (a bound launch's
    /// whose outputs were reshaped when bound): each planned output, a different one per
    /// result.
    pub fn results_of(&self, outs: Vec<HostArray>) -> Vec<HostArray> {
        let mut outs: Vec<Option<HostArray>> = outs.into_iter().map(Some).collect();
        self.results
            .iter()
            .map(|(j, _)| outs[*j].take().expect("a distinct output per result"))
            .collect()
    }
}

impl Op {
    /// Whether calls of this operator may be planned: its family's host code reads no tensor
    /// elements other than a one-element tensor's value, draws no random seed and launches
    /// no kernel chosen by tensor values.
    pub fn plannable(&self) -> bool {
        matches!(
            self.family,
            Family::Unary(_)
                | Family::Binary(_)
                | Family::Scalar(_)
                | Family::Where
                | Family::Clamp
                | Family::Backward(_)
                | Family::Reduction(_)
                | Family::Softmax(_)
                | Family::Norm(_)
                | Family::Matmul(_)
                | Family::Compare(_)
                | Family::Copy(_)
                | Family::Permute(_)
        )
    }
}

/// Runs the operator `name` on `args` (as [`crate::run`]) and returns its results with the
/// plan of the call, where one can be made (see the module docs; never on a device other than
/// `Device::Cpu`).
pub fn run_planned(name: &str, args: &[Value]) -> Result<(Vec<HostArray>, Option<Plan>)> {
    let op = find(name).ok_or_else(|| BlasError::new(name, "no such tpuBLAS operator"))?;
    if !op.plannable() || device() != Device::Cpu {
        return Ok((op.run(args)?, None));
    }
    let (results, launches) = trace(|| op.run(args));
    let results = results?;
    let plan = if aliased(args) {
        // Which argument each kernel input reads is ambiguous when arguments share memory
        // (`x + x`): traced again on a copy of each tensor, whose addresses all differ.
        let copies: Vec<Value> = args
            .iter()
            .map(|v| {
                let copy = |t: &HostArray| t.permuted(&(0..t.shape().len()).collect::<Vec<_>>());
                match v {
                    Value::Tensor(t) => Value::Tensor(copy(t)),
                    Value::Transposed(t) => Value::Transposed(copy(t)),
                    other => other.clone(),
                }
            })
            .collect();
        let (again, launches) = trace(|| op.run(&copies));
        again
            .ok()
            .and_then(|again| plan_of(&copies, launches, &again, max_constant_elements(op)))
    } else {
        plan_of(args, launches, &results, max_constant_elements(op))
    };
    Ok((results, plan))
}

/// Whether two tensor arguments' elements overlap in memory.
fn aliased(args: &[Value]) -> bool {
    let ranges: Vec<(usize, usize)> = args
        .iter()
        .filter_map(|v| v.array().map(|t| (t.data_ptr() as usize, t.size_bytes())))
        .collect();
    ranges.iter().enumerate().any(|(i, &(a, n))| {
        ranges[i + 1..]
            .iter()
            .any(|&(b, m)| n > 0 && m > 0 && a < b + m && b < a + n)
    })
}

/// The most elements of a kernel input a plan of `op` keeps as a constant (an input that is
/// no tensor argument's memory). One for every family: a Python number (`alpha`) made into
/// an operand, and no tensor's values, since no tensor argument of a planned call has fewer
/// than two elements. Norms also keep the `[1, n]` ones and zeros their host code makes for
/// a missing weight and bias from the normalised shape alone (up to 1 Mi elements). Their
/// other multi-element inputs not over an argument are weights converted from another dtype
/// (from the tensor's values): that tensor is then no kernel input, and no plan is made.
fn max_constant_elements(op: &Op) -> usize {
    match op.family {
        Family::Norm(_) => 1 << 20,
        _ => 1,
    }
}

fn plan_of(
    args: &[Value],
    launches: Vec<Traced>,
    results: &[HostArray],
    max_constant: usize,
) -> Option<Plan> {
    let [launch] = <[Traced; 1]>::try_from(launches).ok()?;
    let outputs = launch.outputs?;
    let tensors: Vec<(usize, &HostArray)> = args
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.array().map(|t| (i, t)))
        .collect();
    if tensors.iter().any(|(_, t)| elements(t) < 2) {
        return None;
    }
    let mut used = vec![false; args.len()];
    let mut inputs = Vec::with_capacity(launch.inputs.len());
    for input in launch.inputs {
        let shape = input.shape().to_vec();
        let mut args = tensors.iter().filter(|(_, t)| {
            t.data_ptr() == input.data_ptr()
                && t.dtype() == input.dtype()
                && t.size_bytes() == input.size_bytes()
        });
        let (arg, other) = (args.next(), args.next());
        let source = match arg {
            Some(&(i, t))
                if other.is_none() && t.is_standard_layout() && input.is_standard_layout() =>
            {
                used[i] = true;
                Source::Arg(i)
            }
            Some(_) => return None,
            None if elements(&input) <= max_constant && !input.is_borrowed() => {
                Source::Const(input)
            }
            None => return None,
        };
        inputs.push((source, shape));
    }
    if tensors.iter().any(|&(i, _)| !used[i]) {
        return None;
    }
    let results = results
        .iter()
        .map(|r| {
            let j = outputs.iter().position(|&(p, n)| {
                p == r.data_ptr() && n == r.size_bytes() && r.is_standard_layout()
            })?;
            Some((j, r.shape().to_vec()))
        })
        .collect::<Option<Vec<_>>>()?;
    let mut taken = vec![false; outputs.len()];
    for &(j, _) in &results {
        if std::mem::replace(&mut taken[j], true) {
            return None;
        }
    }
    Some(Plan {
        kernel: launch.kernel,
        inputs,
        results,
    })
}

fn elements(a: &HostArray) -> usize {
    a.shape().iter().product()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpukit::LaunchOptions;
    use tpukit::runtime::launch_borrowed;

    fn array(shape: &[usize], seed: f64) -> HostArray {
        let n: usize = shape.iter().product();
        let data: Vec<f64> = (0..n).map(|i| ((i as f64 + seed) * 0.37).sin()).collect();
        HostArray::from_f64(DType::F32, shape, &data)
    }

    /// The plan's launch on `args` (which must be what it was made for).
    fn replay(plan: &Plan, args: &[Value]) -> Vec<HostArray> {
        let arrays = plan.raw_inputs(|i| match &args[i] {
            Value::Tensor(t) => (t.dtype(), t.data_ptr() as *mut u8),
            other => panic!("argument {i} is {other:?}"),
        });
        // SAFETY: the arrays are owned, row-major, of the sizes the plan read them in.
        let outs =
            unsafe { launch_borrowed(&*plan.kernel, &arrays, LaunchOptions::default()) }.unwrap();
        plan.results_from(outs)
    }

    #[test]
    fn a_plan_replays_the_call_on_new_values() {
        let args = [
            Value::Tensor(array(&[5, 70], 0.0)),
            Value::Tensor(array(&[5, 70], 1.0)),
            Value::Scalar(2.0),
        ];
        let (_, plan) = run_planned("aten.sub.Tensor", &args).unwrap();
        let plan = plan.expect("a plan for sub");
        assert!(matches!(plan.inputs[0].0, Source::Arg(0)));
        assert!(matches!(plan.inputs[1].0, Source::Arg(1)));
        let new = [
            Value::Tensor(array(&[5, 70], 5.0)),
            Value::Tensor(array(&[5, 70], 9.0)),
            Value::Scalar(2.0),
        ];
        assert_eq!(
            replay(&plan, &new),
            crate::run("aten.sub.Tensor", &new).unwrap()
        );
    }

    #[test]
    fn a_tensor_passed_twice_is_told_apart_on_copies() {
        let x = array(&[4, 33], 0.0);
        let (_, plan) = run_planned(
            "aten.sub.Tensor",
            &[
                Value::Tensor(x.clone()),
                Value::Tensor(x),
                Value::Scalar(1.0),
            ],
        )
        .unwrap();
        let plan = plan.expect("a plan for x - x");
        let new = [
            Value::Tensor(array(&[4, 33], 3.0)),
            Value::Tensor(array(&[4, 33], 7.0)),
            Value::Scalar(1.0),
        ];
        assert_eq!(
            replay(&plan, &new),
            crate::run("aten.sub.Tensor", &new).unwrap()
        );
    }

    #[test]
    fn a_layer_norm_without_weight_keeps_its_ones_and_with_a_weight_reads_it() {
        let ln = |x: HostArray, w: Value, b: Value| {
            [
                Value::Tensor(x),
                Value::IntList(vec![70]),
                w,
                b,
                Value::Scalar(1e-5),
            ]
        };
        let name = "aten.native_layer_norm.default";
        // No weight or bias: the [1, 70] ones and zeros are the plan's constants.
        let (_, plan) =
            run_planned(name, &ln(array(&[5, 70], 0.0), Value::None, Value::None)).unwrap();
        let plan = plan.expect("a plan for a layer norm without weight");
        assert!(matches!(&plan.inputs[1].0, Source::Const(c) if elements(c) == 70));
        let new = ln(array(&[5, 70], 4.0), Value::None, Value::None);
        assert_eq!(replay(&plan, &new), crate::run(name, &new).unwrap());
        // With f32 weight and bias (the input's dtype), they are read in place: a replay on
        // other weights computes with them.
        let args = |seed: f64| {
            ln(
                array(&[5, 70], seed),
                Value::Tensor(array(&[70], seed + 1.0)),
                Value::Tensor(array(&[70], seed + 2.0)),
            )
        };
        let (_, plan) = run_planned(name, &args(0.0)).unwrap();
        let plan = plan.expect("a plan for a layer norm with weights");
        assert!(matches!(plan.inputs[1].0, Source::Arg(2)));
        assert!(matches!(plan.inputs[2].0, Source::Arg(3)));
        assert_eq!(
            replay(&plan, &args(9.0)),
            crate::run(name, &args(9.0)).unwrap()
        );
        // bf16 weights are converted to f32 from their values: no plan.
        let bf16 = |shape: &[usize], seed: f64| {
            HostArray::from_f64(DType::BF16, shape, &array(shape, seed).to_f64_vec())
        };
        let x = bf16(&[5, 70], 0.0);
        let (w, b) = (bf16(&[70], 1.0), bf16(&[70], 2.0));
        let (_, plan) = run_planned(name, &ln(x, Value::Tensor(w), Value::Tensor(b))).unwrap();
        assert!(plan.is_none());
    }

    #[test]
    fn calls_that_read_values_on_the_host_are_not_planned() {
        let x = array(&[4, 33], 0.0);
        let one = array(&[1], 2.0);
        let planned = |name: &str, args: &[Value]| run_planned(name, args).unwrap().1.is_some();
        // A one-element tensor becomes a number on the host.
        assert!(!planned(
            "aten.mul.Tensor",
            &[Value::Tensor(x.clone()), Value::Tensor(one)]
        ));
        // A broadcast materialised on the host.
        assert!(!planned(
            "aten.add.Tensor",
            &[
                Value::Tensor(array(&[4, 1, 33], 0.0)),
                Value::Tensor(array(&[3, 1], 1.0)),
                Value::Scalar(1.0)
            ]
        ));
        // A seed drawn per call.
        assert!(!planned(
            "aten.bernoulli.p",
            &[Value::Tensor(x), Value::Scalar(0.5), Value::Int(7)]
        ));
    }
}
