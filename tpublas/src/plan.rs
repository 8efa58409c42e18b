//! Plans: an operator call reduced to the kernel launches it made, so a host can replay them
//! for the next call with tensors of the same dtypes and shapes and the same other arguments
//! without running the operator's host code again ([`run_planned`]).
//!
//! A plan is made from a trace of the call (`launch::trace`) only when the replay
//! provably computes what the operator would:
//! - the operator's family reads no tensor's elements on the host, except a one-element
//!   tensor's value (a number passed as a tensor; [`Op::plannable`]), and makes no launch
//!   that depends on them;
//! - no tensor argument has exactly one element (so no tensor's value became a number);
//! - the call made at least one launch; each returned new outputs, or wrote into outputs
//!   that were all zeros (the host's new arrays: a fill of a requested size) or an earlier
//!   launch's output that nothing else reads afterwards (rows scattered into one result by
//!   several launches): [`Init`];
//! - each kernel input is a tensor argument's memory as it is (the same address, dtype and
//!   size, row-major: a reshape; for a [`Value::Transposed`] argument, its memory as it lies,
//!   so a host replays the plan only on a tensor lying the same way), an earlier launch's
//!   output as that launch wrote it (the same address, dtype and size, row-major), or a
//!   constant made from the other arguments and the tensors' shapes (`alpha`, a Python
//!   number; a norm's ones and zeros for a missing weight and bias; the row numbers `cat`
//!   scatters to: `max_constant_elements`), and every tensor argument is one of the inputs
//!   (but those the operator never reads, [`Op::unread`], and those without elements);
//! - each result is one of the launches' outputs (a different one), row-major, reshaped at
//!   most.
//!
//! The trace holds every launch's outputs until the plan is made, so their memory is never
//! handed to another array of the call, and an output the host (or a later launch into it)
//! changed after its launch was copied first (storage is copy-on-write): an input at an
//! output's address is that output as its launch wrote it. Arguments sharing memory (`x + x`)
//! are traced again on copies of the tensors, so that each input's argument is known.
//! Anything else gives no plan, and the host runs the operator in full every time.

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
    /// Output `output` (of dtype `dtype`) of the plan's earlier launch `step`.
    Output {
        step: usize,
        output: usize,
        dtype: DType,
    },
}

/// What a launch into given outputs ([`Step::into`]) writes into, per output.
#[derive(Debug)]
pub enum Init {
    /// New zeros of this dtype and shape (row-major).
    Zeros { dtype: DType, shape: Vec<usize> },
    /// Output `output` (of `dtype` and `shape`) of the plan's earlier launch `step`, as that
    /// launch left it (no later launch reads it, and it is no result: this launch's output
    /// is what it became).
    Output {
        step: usize,
        output: usize,
        dtype: DType,
        shape: Vec<usize>,
    },
}

/// One launch of a plan: its kernel and, per kernel input, its source and the shape the
/// kernel reads it in; for a launch into given outputs (a fill of a requested size, rows
/// scattered into one result by several launches), what each output starts as.
#[derive(Debug)]
pub struct Step {
    pub kernel: Prepared,
    pub inputs: Vec<(Source, Vec<usize>)>,
    pub into: Option<Vec<Init>>,
}

/// One result of a plan: output `output` of launch `step`, in `shape`.
#[derive(Debug)]
pub struct Planned {
    pub step: usize,
    pub output: usize,
    pub shape: Vec<usize>,
}

/// One operator call's launches, replayable for calls with the same non-tensor arguments and
/// tensors of the same dtypes and shapes (see the module docs).
#[derive(Debug)]
pub struct Plan {
    /// The launches in order; a launch reads only earlier launches' outputs.
    pub steps: Vec<Step>,
    /// Per result, the output it is (a different one per result).
    pub results: Vec<Planned>,
}

impl Plan {
    /// Replays the plan: runs each launch with `launch(step, inputs, into)` on its inputs in
    /// the shapes the kernel reads them in (argument `i`'s tensor is `arg(i)`, its dtype and
    /// row-major data, of the planned dtype and element count; a constant the plan's own; an
    /// earlier output as that launch returned it) and, for a launch into given outputs, those
    /// outputs (new zeros, or an earlier launch's output, moved), which `launch` writes and
    /// returns; and returns the results, each reshaped to its shape where `launch` did not
    /// hand it back so.
    pub fn replay<E>(
        &self,
        arg: impl Fn(usize) -> (DType, *mut u8),
        mut launch: impl FnMut(
            usize,
            &[RawArray<'_>],
            Option<Vec<HostArray>>,
        ) -> Result<Vec<HostArray>, E>,
    ) -> Result<Vec<HostArray>, E> {
        let mut outs: Vec<Vec<Option<HostArray>>> = Vec::with_capacity(self.steps.len());
        for (i, step) in self.steps.iter().enumerate() {
            let into = step.into.as_ref().map(|inits| {
                inits
                    .iter()
                    .map(|init| match init {
                        Init::Zeros { dtype, shape } => HostArray::zeros(*dtype, shape),
                        Init::Output { step, output, .. } => outs[*step][*output]
                            .take()
                            .expect("an earlier output no other launch reads"),
                    })
                    .collect()
            });
            let arrays: Vec<RawArray<'_>> = step
                .inputs
                .iter()
                .map(|(source, shape)| {
                    let (dtype, data) = match source {
                        Source::Arg(i) => arg(*i),
                        Source::Const(c) => (c.dtype(), c.data_ptr() as *mut u8),
                        Source::Output { step, output, .. } => {
                            let o = outs[*step][*output].as_ref().expect("an earlier output");
                            (o.dtype(), o.data_ptr() as *mut u8)
                        }
                    };
                    RawArray { dtype, shape, data }
                })
                .collect();
            let made = launch(i, &arrays, into)?;
            outs.push(made.into_iter().map(Some).collect());
        }
        Ok(self
            .results
            .iter()
            .map(|r| {
                let out = outs[r.step][r.output]
                    .take()
                    .expect("a distinct output per result");
                match out.shape() == r.shape.as_slice() {
                    true => out,
                    false => out.reshape(&r.shape).expect("the planned result's size"),
                }
            })
            .collect())
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
                | Family::Ternary(_)
                | Family::Backward(_)
                | Family::Reduction(_)
                | Family::Softmax(_)
                | Family::Norm(_)
                | Family::Matmul(_)
                | Family::Compare(_)
                | Family::Copy(_)
                | Family::Permute(_)
                | Family::NormBackward
                | Family::Attention(_)
                | Family::Cat
                | Family::Factory(_)
                | Family::Pad
        )
    }

    /// The tensor arguments (schema positions) whose elements the operator never reads,
    /// neither its kernels nor its host code: layer norm backward's `bias`, there for
    /// ATen's signature only. A plan need not read them.
    pub fn unread(&self) -> &'static [usize] {
        match self.family {
            Family::NormBackward => &[6],
            _ => &[],
        }
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
        drop(launches); // the first trace's hold on the results' memory
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
            .and_then(|again| plan_of(op, &copies, launches, &again))
    } else {
        plan_of(op, args, launches, &results)
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
/// no tensor argument's memory). One for every family: a Python number (`alpha`, a fill
/// value) made into an operand, and no tensor's values, since no tensor argument of a
/// planned call has exactly one element. Norms also keep the `[1, n]` ones and zeros their
/// host code makes for a missing weight and bias from the normalised shape alone (up to 1 Mi
/// elements); they convert a weight of another dtype on the device (`cast::to`), so no input
/// made from a tensor's values lies outside the launches (were one made so, its tensor would
/// be no kernel input, and no plan would be made). `cat` (and `constant_pad_nd`, a `cat` of
/// fills) keeps the row numbers it scatters each input's rows to, made from the shapes alone
/// (one per row of the result).
fn max_constant_elements(op: &Op) -> usize {
    match op.family {
        Family::Norm(_) | Family::NormBackward | Family::Cat | Family::Pad => 1 << 20,
        _ => 1,
    }
}

fn plan_of(op: &Op, args: &[Value], launches: Vec<Traced>, results: &[HostArray]) -> Option<Plan> {
    let max_constant = max_constant_elements(op);
    let tensors: Vec<(usize, &HostArray)> = args
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.array().map(|t| (i, t)))
        .collect();
    if launches.is_empty() || tensors.iter().any(|(_, t)| elements(t) == 1) {
        return None;
    }
    let same = |a: &HostArray, b: &HostArray| {
        a.data_ptr() == b.data_ptr() && a.dtype() == b.dtype() && a.size_bytes() == b.size_bytes()
    };
    let mut used = vec![false; args.len()];
    let mut outputs: Vec<Vec<HostArray>> = Vec::with_capacity(launches.len());
    // The earlier outputs a launch wrote into (what they held before is read by nothing
    // else: see `Init::Output`).
    let mut consumed: Vec<(usize, usize)> = Vec::new();
    let mut steps = Vec::with_capacity(launches.len());
    for launch in launches {
        let mut inputs = Vec::with_capacity(launch.inputs.len());
        for input in launch.inputs {
            let shape = input.shape().to_vec();
            let mut args = tensors.iter().filter(|(_, t)| same(t, &input));
            let (arg, other) = (args.next(), args.next());
            let earlier = outputs.iter().enumerate().find_map(|(step, outs)| {
                let output = outs.iter().position(|o| same(o, &input))?;
                Some(Source::Output {
                    step,
                    output,
                    dtype: input.dtype(),
                })
            });
            if let Some(Source::Output { step, output, .. }) = earlier
                && consumed.contains(&(step, output))
            {
                return None;
            }
            let source = match (arg, earlier) {
                (Some(&(i, t)), None)
                    if other.is_none() && t.is_standard_layout() && input.is_standard_layout() =>
                {
                    used[i] = true;
                    Source::Arg(i)
                }
                (None, Some(earlier)) if input.is_standard_layout() => earlier,
                (Some(_), _) | (_, Some(_)) => return None,
                (None, None) if elements(&input) <= max_constant && !input.is_borrowed() => {
                    Source::Const(input)
                }
                (None, None) => return None,
            };
            inputs.push((source, shape));
        }
        let into = match launch.into {
            None => None,
            Some(before) => {
                let mut inits = Vec::with_capacity(before.len());
                for (b, after) in before.iter().zip(&launch.outputs) {
                    let earlier = output_at(&outputs, b.address, b.size);
                    // Read by this launch too: its input is what the output held before,
                    // which the replay moves to the launch (a trace's copy-on-write kept it).
                    let read = |at: (usize, usize)| {
                        inputs.iter().any(|(source, _)| {
                            matches!(source, Source::Output { step, output, .. }
                                if (*step, *output) == at)
                        })
                    };
                    inits.push(match earlier {
                        Some(at) if consumed.contains(&at) || read(at) => return None,
                        Some((step, output)) if outputs[step][output].is_standard_layout() => {
                            consumed.push((step, output));
                            let o = &outputs[step][output];
                            Init::Output {
                                step,
                                output,
                                dtype: o.dtype(),
                                shape: o.shape().to_vec(),
                            }
                        }
                        Some(_) => return None,
                        None if b.zero && after.is_standard_layout() => Init::Zeros {
                            dtype: after.dtype(),
                            shape: after.shape().to_vec(),
                        },
                        None => return None,
                    });
                }
                Some(inits)
            }
        };
        outputs.push(launch.outputs);
        steps.push(Step {
            kernel: launch.kernel,
            inputs,
            into,
        });
    }
    if tensors
        .iter()
        .any(|&(i, t)| !used[i] && elements(t) > 0 && !op.unread().contains(&i))
    {
        return None;
    }
    let results = results
        .iter()
        .map(|r| {
            if !r.is_standard_layout() {
                return None;
            }
            let (step, output) = output_at(&outputs, r.data_ptr() as usize, r.size_bytes())?;
            if consumed.contains(&(step, output)) {
                return None;
            }
            Some(Planned {
                step,
                output,
                shape: r.shape().to_vec(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    for (k, r) in results.iter().enumerate() {
        if results[..k]
            .iter()
            .any(|q| (q.step, q.output) == (r.step, r.output))
        {
            return None;
        }
    }
    Some(Plan { steps, results })
}

/// The earlier launch output `(step, output)` whose memory is the `size` bytes at `address`.
fn output_at(outputs: &[Vec<HostArray>], address: usize, size: usize) -> Option<(usize, usize)> {
    outputs.iter().enumerate().find_map(|(step, outs)| {
        let output = outs
            .iter()
            .position(|o| o.data_ptr() as usize == address && o.size_bytes() == size)?;
        Some((step, output))
    })
}

fn elements(a: &HostArray) -> usize {
    a.shape().iter().product()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpukit::LaunchOptions;
    use tpukit::runtime::{launch_borrowed, launch_raw};

    fn array(shape: &[usize], seed: f64) -> HostArray {
        let n: usize = shape.iter().product();
        let data: Vec<f64> = (0..n).map(|i| ((i as f64 + seed) * 0.37).sin()).collect();
        HostArray::from_f64(DType::F32, shape, &data)
    }

    /// The plan's launches on `args` (which must be what it was made for).
    fn replay(plan: &Plan, args: &[Value]) -> Vec<HostArray> {
        let arg = |i: usize| match &args[i] {
            Value::Tensor(t) => (t.dtype(), t.data_ptr() as *mut u8),
            other => panic!("argument {i} is {other:?}"),
        };
        // SAFETY: the arrays are owned, row-major, of the sizes the plan read them in.
        plan.replay(arg, |i, arrays, into| unsafe {
            let kernel = &*plan.steps[i].kernel;
            match into {
                None => launch_borrowed(kernel, arrays, LaunchOptions::default()),
                Some(mut outs) => {
                    let ptrs: Vec<*mut u8> = outs.iter_mut().map(HostArray::data_ptr_mut).collect();
                    let raw: Vec<RawArray<'_>> = outs
                        .iter()
                        .zip(ptrs)
                        .map(|(o, data)| RawArray {
                            dtype: o.dtype(),
                            shape: o.shape(),
                            data,
                        })
                        .collect();
                    launch_raw(kernel, arrays, &raw, LaunchOptions::default())?;
                    drop(raw);
                    Ok(outs)
                }
            }
        })
        .unwrap()
    }

    /// The inputs of a one-launch plan.
    fn inputs(plan: &Plan) -> &[(Source, Vec<usize>)] {
        assert_eq!(plan.steps.len(), 1);
        &plan.steps[0].inputs
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
        assert!(matches!(inputs(&plan)[0].0, Source::Arg(0)));
        assert!(matches!(inputs(&plan)[1].0, Source::Arg(1)));
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
        assert!(matches!(&inputs(&plan)[1].0, Source::Const(c) if elements(c) == 70));
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
        assert!(matches!(inputs(&plan)[1].0, Source::Arg(2)));
        assert!(matches!(inputs(&plan)[2].0, Source::Arg(3)));
        assert_eq!(
            replay(&plan, &args(9.0)),
            crate::run(name, &args(9.0)).unwrap()
        );
        // bf16 weights are converted to f32 on the device: launches the plan replays.
        let bf16 = |shape: &[usize], seed: f64| {
            HostArray::from_f64(DType::BF16, shape, &array(shape, seed).to_f64_vec())
        };
        let args = |seed: f64| {
            let (w, b) = (bf16(&[70], seed + 1.0), bf16(&[70], seed + 2.0));
            ln(bf16(&[5, 70], seed), Value::Tensor(w), Value::Tensor(b))
        };
        let (_, plan) = run_planned(name, &args(0.0)).unwrap();
        let plan = plan.expect("a plan for a layer norm with bf16 weights");
        assert_eq!(plan.steps.len(), 3);
        assert_eq!(
            replay(&plan, &args(4.0)),
            crate::run(name, &args(4.0)).unwrap()
        );
    }

    #[test]
    fn calls_of_several_launches_replay_them_in_order() {
        // A sum over the middle dimension moves it last (a permute), then sums the rows.
        let sum = |seed: f64| {
            [
                Value::Tensor(array(&[4, 50, 70], seed)),
                Value::IntList(vec![1]),
                Value::Bool(false),
                Value::None,
            ]
        };
        let name = "aten.sum.dim_IntList";
        let plan = run_planned(name, &sum(0.0)).unwrap().1.expect("a plan");
        assert_eq!(plan.steps.len(), 2);
        assert!(matches!(
            plan.steps[1].inputs[0].0,
            Source::Output {
                step: 0,
                output: 0,
                ..
            }
        ));
        assert_eq!(
            replay(&plan, &sum(5.0)),
            crate::run(name, &sum(5.0)).unwrap()
        );
        // Layer norm's backward: per-chunk partial sums of the weight's and bias's
        // gradients, summed by a second kernel; `dx` is the first launch's output.
        let name = "aten.native_layer_norm_backward.default";
        let args = |seed: f64, weight: bool| {
            let x = array(&[256, 96], seed);
            let fwd = crate::run(
                "aten.native_layer_norm.default",
                &[
                    Value::Tensor(x.clone()),
                    Value::IntList(vec![96]),
                    Value::None,
                    Value::None,
                    Value::Scalar(1e-5),
                ],
            )
            .unwrap();
            // The bias, never read, does not keep the call from being planned.
            let (w, b) = match weight {
                true => (
                    Value::Tensor(array(&[96], seed + 2.0)),
                    Value::Tensor(array(&[96], seed + 3.0)),
                ),
                false => (Value::None, Value::None),
            };
            [
                Value::Tensor(array(&[256, 96], seed + 1.0)),
                Value::Tensor(x),
                Value::IntList(vec![96]),
                Value::Tensor(fwd[1].clone()),
                Value::Tensor(fwd[2].clone()),
                w,
                b,
                Value::None,
            ]
        };
        for weight in [true, false] {
            let plan = run_planned(name, &args(0.0, weight))
                .unwrap()
                .1
                .expect("a plan");
            assert_eq!(plan.steps.len(), 2);
            let planned: Vec<(usize, usize)> =
                plan.results.iter().map(|r| (r.step, r.output)).collect();
            assert_eq!(planned, [(0, 0), (1, 0), (1, 1)]);
            let new = args(7.0, weight);
            assert_eq!(replay(&plan, &new), crate::run(name, &new).unwrap());
        }
    }

    #[test]
    fn launches_into_new_zeros_or_an_earlier_output_are_replayed() {
        // `cat` scatters each part's rows into one output: the first launch writes into new
        // zeros, the second into what the first left.
        let name = "aten.cat.default";
        let parts = |seed: f64| {
            [
                Value::Tensor(array(&[3, 5, 256], seed)),
                Value::Tensor(array(&[3, 2, 256], seed + 1.0)),
                Value::Int(1),
            ]
        };
        let plan = run_planned(name, &parts(0.0)).unwrap().1.expect("a plan");
        let inits: Vec<_> = plan.steps.iter().map(|s| s.into.as_deref()).collect();
        assert!(matches!(inits[0], Some([Init::Zeros { .. }])));
        assert!(matches!(
            inits[1],
            Some([Init::Output {
                step: 0,
                output: 0,
                ..
            }])
        ));
        assert_eq!(
            replay(&plan, &parts(3.0)),
            crate::run(name, &parts(3.0)).unwrap()
        );
        // Along the last dim (moved to the front and back: five launches), with a bf16
        // part converted on the device, and an empty part that is no launch's input.
        let mixed = |seed: f64| {
            let b = array(&[4, 130], seed + 1.0);
            [
                Value::Tensor(array(&[4, 70], seed)),
                Value::Tensor(HostArray::from_f64(DType::BF16, &[4, 130], &b.to_f64_vec())),
                Value::Tensor(HostArray::zeros(DType::F32, &[0])),
                Value::Int(-1),
            ]
        };
        let plan = run_planned(name, &mixed(0.0)).unwrap().1.expect("a plan");
        assert_eq!(
            replay(&plan, &mixed(6.0)),
            crate::run(name, &mixed(6.0)).unwrap()
        );
        // A fill of a requested size: its output is new zeros, its value a constant.
        let name = "aten.full.default";
        let fill = |n: i64| [Value::IntList(vec![n, 3]), Value::Scalar(2.5), Value::None];
        let plan = run_planned(name, &fill(5000)).unwrap().1.expect("a plan");
        assert!(matches!(
            plan.steps[0].into.as_deref(),
            Some([Init::Zeros { shape, .. }]) if shape == &[15000]
        ));
        assert_eq!(
            replay(&plan, &fill(5000)),
            crate::run(name, &fill(5000)).unwrap()
        );
        // Nothing to fill: no launch, no plan.
        assert!(run_planned(name, &fill(0)).unwrap().1.is_none());
    }

    #[test]
    fn a_launch_into_an_output_it_also_reads_is_not_planned() {
        // Two launches of a copy kernel: the second writes into the first's output, reading
        // `x` (a plan: the output moves to it) or that output itself (no plan: the replay
        // would move what the launch reads).
        let kernel = crate::cast::kernel(DType::F32, DType::F32).unwrap();
        let x = array(&[4096], 0.0);
        let first = array(&[4096], 1.0);
        let written = array(&[4096], 2.0);
        let before = crate::launch::Before {
            address: first.data_ptr() as usize,
            size: first.size_bytes(),
            zero: false,
        };
        let launches = |second_reads: &HostArray| {
            vec![
                Traced {
                    kernel: kernel.clone(),
                    inputs: vec![x.clone()],
                    outputs: vec![first.clone()],
                    into: None,
                },
                Traced {
                    kernel: kernel.clone(),
                    inputs: vec![second_reads.clone()],
                    outputs: vec![written.clone()],
                    into: Some(vec![before]),
                },
            ]
        };
        let op = find("aten.cat.default").unwrap();
        let args = [Value::Tensor(x.clone()), Value::Int(0)];
        let plan = plan_of(op, &args, launches(&x), std::slice::from_ref(&written));
        let plan = plan.expect("a plan");
        assert!(matches!(
            plan.steps[1].into.as_deref(),
            Some([Init::Output {
                step: 0,
                output: 0,
                ..
            }])
        ));
        assert!(plan_of(op, &args, launches(&first), std::slice::from_ref(&written)).is_none());
        // Nor is a result that is what the output held before the second launch.
        assert!(plan_of(op, &args, launches(&x), std::slice::from_ref(&first)).is_none());
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
