//! Launching a kernel: binding symbols from the arrays given, checking them, running.

use crate::array::Contents;
use crate::{Device, HostArray, LaunchOptions, Launchable, RuntimeError};
use tpukit_dsl::{Bindings, DType, Dim, ErrorKind, Extent, Kernel, Role};

/// Runs `kernel` (a [`Kernel`] or a [`crate::Prepared`] one) on `device` with `inputs` (the
/// prefetch operands, then the inputs, in kernel order) and returns new outputs, zero-filled
/// before the kernel runs (except, on `Device::Cpu` outside debug mode, those the kernel
/// provably writes whole, which it fills alone: the results are the same). Options come from the environment ([`LaunchOptions::from_env`]).
pub fn launch<K: Launchable>(
    kernel: &K,
    device: Device,
    inputs: &[&HostArray],
) -> Result<Vec<HostArray>, RuntimeError> {
    launch_with(kernel, device, inputs, LaunchOptions::from_env())
}

/// [`launch`] with explicit options.
pub fn launch_with<K: Launchable>(
    kernel: &K,
    device: Device,
    inputs: &[&HostArray],
    options: LaunchOptions,
) -> Result<Vec<HostArray>, RuntimeError> {
    kernel.verify()?;
    let k = kernel.kernel();
    let mut bindings = bind(k, &signatures(inputs), None)?;
    bind_values(k, &mut bindings, |i| inputs[i].to_f64_vec()[0] as i64)?;
    let whole = match (device, options.debug) {
        (Device::Cpu, false) => kernel.whole_outputs(),
        _ => Default::default(),
    };
    let addresses: Vec<*const u8> = inputs.iter().map(|a| a.data_ptr()).collect();
    let mut outputs = new_outputs(k, &bindings, &whole, &addresses)?;
    device
        .backend()
        .run(kernel, &bindings, inputs, &mut outputs, options)?;
    Ok(outputs)
}

/// Runs `kernel` writing into caller-provided `outputs` (whose shapes also bind symbols).
pub fn launch_into<K: Launchable>(
    kernel: &K,
    device: Device,
    inputs: &[&HostArray],
    outputs: &mut [HostArray],
) -> Result<(), RuntimeError> {
    launch_into_with(kernel, device, inputs, outputs, LaunchOptions::from_env())
}

/// [`launch_into`] with explicit options.
pub fn launch_into_with<K: Launchable>(
    kernel: &K,
    device: Device,
    inputs: &[&HostArray],
    outputs: &mut [HostArray],
    options: LaunchOptions,
) -> Result<(), RuntimeError> {
    kernel.verify()?;
    let outs: Vec<Signature> = outputs.iter().map(|a| (a.dtype(), a.shape())).collect();
    let mut bindings = bind(kernel.kernel(), &signatures(inputs), Some(&outs))?;
    bind_values(kernel.kernel(), &mut bindings, |i| {
        inputs[i].to_f64_vec()[0] as i64
    })?;
    device
        .backend()
        .run(kernel, &bindings, inputs, outputs, options)
}

/// The kernel's outputs for `bindings` (what [`launch`] hands the kernel), placed apart from
/// its `inputs` (their addresses): zero-filled, except output `i` where `whole[i]`
/// (missing: false), left as allocated.
///
/// `whole[i]` may only be true where the kernel writes output `i` whole and the backend runs
/// it as compiled ([`Launchable::whole_outputs`], `Device::Cpu` outside debug mode): nothing
/// then reads an element before the kernel writes it.
pub(crate) fn new_outputs(
    k: &Kernel,
    bindings: &Bindings,
    whole: &[bool],
    inputs: &[*const u8],
) -> Result<Vec<HostArray>, RuntimeError> {
    k.operands_with_role(Role::Output)
        .enumerate()
        .map(|(i, (_, o))| {
            let shape = resolve(k, &o.shape, bindings, &o.name)?;
            new_output(k, o, &shape, whole.get(i) == Some(&true), inputs)
        })
        .collect()
}

/// The shape of each of `k`'s outputs for `bindings`.
pub(crate) fn output_shapes(
    k: &Kernel,
    bindings: &Bindings,
) -> Result<Vec<Vec<usize>>, RuntimeError> {
    k.operands_with_role(Role::Output)
        .map(|(_, o)| resolve(k, &o.shape, bindings, &o.name))
        .collect()
}

/// A new array for output `o` of `k` in `shape` (its element count), placed apart from the
/// kernel's `inputs` (their addresses): zero-filled unless `whole`, under [`new_outputs`]'s
/// contract for `whole`.
pub(crate) fn new_output(
    k: &Kernel,
    o: &tpukit_dsl::Operand,
    shape: &[usize],
    whole: bool,
    inputs: &[*const u8],
) -> Result<HostArray, RuntimeError> {
    let what = || format!("output `{}`", o.name);
    let contents = if whole {
        Contents::Uninit
    } else {
        Contents::Zeros
    };
    // SAFETY: for `Uninit`, the kernel writes every element before anything reads one (the
    // caller's contract); a failed launch drops its outputs unread.
    let array = unsafe { HostArray::try_output(o.dtype, shape, &what, contents, inputs) };
    array.map_err(|e| RuntimeError::new(&k.name, e.message).with_kind(e.kind))
}

/// Whether every symbol of `kernel` (see [`Kernel::symbols`]) is bound: checked in place, no
/// list of names made per launch (the error path lists them, sorted, for its message).
fn all_bound(kernel: &Kernel, bindings: &Bindings) -> bool {
    let dims = kernel.operands.iter().flat_map(|o| o.shape.iter());
    let mut operands = dims.filter_map(|d| match d {
        Dim::Sym(s) => Some(s),
        Dim::Static(_) => None,
    });
    let mut grid = kernel.grid.iter().filter_map(|a| match &a.extent {
        Extent::CeilDiv { sym, .. } => Some(sym),
        Extent::Static(_) | Extent::Value { .. } => None,
    });
    operands.all(|s| bindings.contains_key(s)) && grid.all(|s| bindings.contains_key(s))
}

fn resolve(
    kernel: &Kernel,
    dims: &[Dim],
    bindings: &Bindings,
    operand: &str,
) -> Result<Vec<usize>, RuntimeError> {
    dims.iter()
        .map(|d| {
            d.resolve(bindings).ok_or_else(|| {
                RuntimeError::new(
                    &kernel.name,
                    format!("symbol `{d}` of `{operand}` is not bound by any array given"),
                )
                .with_kind(ErrorKind::Shape)
            })
        })
        .collect()
}

/// Binds each grid extent that is an operand's value ([`tpukit_dsl::Extent::Value`]) to that
/// value, `read(i)` giving the element of input `i` (a one-element int32 array, checked by `bind`;
/// such operands come first, so operand and input indices agree). A negative value is a
/// shape error naming the operand.
pub(crate) fn bind_values(
    kernel: &Kernel,
    bindings: &mut Bindings,
    read: impl Fn(usize) -> i64,
) -> Result<(), RuntimeError> {
    for i in kernel.grid_values() {
        let n = read(i);
        let n = usize::try_from(n).map_err(|_| {
            RuntimeError::new(
                &kernel.name,
                format!(
                    "operand `{}` sizes a grid axis but holds {n}",
                    kernel.operands[i].name
                ),
            )
            .with_kind(ErrorKind::Shape)
        })?;
        bindings.insert(tpukit_dsl::value_key(i), n);
    }
    Ok(())
}

/// What binding checks of an array: its dtype and shape.
pub(crate) type Signature<'a> = (DType, &'a [usize]);

fn signatures<'a>(arrays: &[&'a HostArray]) -> Vec<Signature<'a>> {
    arrays.iter().map(|a| (a.dtype(), a.shape())).collect()
}

/// Checks the arrays (their dtypes and shapes) against the (verified) kernel's operands and
/// binds every symbol; `outputs`, when the caller provides them, must be one array per
/// output (even none).
pub(crate) fn bind(
    kernel: &Kernel,
    inputs: &[Signature],
    outputs: Option<&[Signature]>,
) -> Result<Bindings, RuntimeError> {
    let err = |kind, m: String| RuntimeError::new(&kernel.name, m).with_kind(kind);
    let mut given: Vec<(&tpukit_dsl::Operand, Signature)> = Vec::new();
    let ins: Vec<_> = kernel
        .operands
        .iter()
        .filter(|o| matches!(o.role, Role::Prefetch | Role::Input))
        .collect();
    if inputs.len() != ins.len() {
        return Err(err(
            ErrorKind::Invalid,
            format!(
                "takes {} input arrays (prefetch operands, then inputs), got {}",
                ins.len(),
                inputs.len()
            ),
        ));
    }
    given.extend(ins.into_iter().zip(inputs.iter().copied()));
    if let Some(outputs) = outputs {
        let outs: Vec<_> = kernel
            .operands
            .iter()
            .filter(|o| o.role == Role::Output)
            .collect();
        if outputs.len() != outs.len() {
            return Err(err(
                ErrorKind::Invalid,
                format!(
                    "has {} outputs, got {} output arrays",
                    outs.len(),
                    outputs.len()
                ),
            ));
        }
        given.extend(outs.into_iter().zip(outputs.iter().copied()));
    }
    let mut bindings = Bindings::new();
    // The operand that bound each symbol (named in errors only: formatted then).
    let mut bound_by: Vec<(&str, &tpukit_dsl::Operand)> = Vec::new();
    let name = |o: &tpukit_dsl::Operand| format!("{} `{}`", o.role.name(), o.name);
    for (o, (dtype, shape)) in given {
        let what = || name(o);
        if dtype != o.dtype {
            return Err(err(
                ErrorKind::DType,
                format!("{} must be {}, got a {dtype} array", what(), o.dtype),
            ));
        }
        if shape.len() != o.shape.len() {
            return Err(err(
                ErrorKind::Shape,
                format!(
                    "{} must have rank {}, got shape {shape:?}",
                    what(),
                    o.shape.len()
                ),
            ));
        }
        for (d, (dim, &n)) in o.shape.iter().zip(shape).enumerate() {
            match dim {
                Dim::Static(s) if *s != n => {
                    return Err(err(
                        ErrorKind::Shape,
                        format!("{} has shape {shape:?}, but dim {d} must be {s}", what()),
                    ));
                }
                Dim::Sym(sym) => match bindings.get(sym) {
                    Some(&b) if b != n => {
                        return Err(err(
                            ErrorKind::Shape,
                            format!(
                                "{} has shape {shape:?} but `{sym}` is bound to {b} by {}",
                                what(),
                                bound_by
                                    .iter()
                                    .find(|(s, _)| s == sym)
                                    .map_or_else(String::new, |(_, o)| name(o))
                            ),
                        ));
                    }
                    Some(_) => {}
                    None => {
                        bindings.insert(sym.clone(), n);
                        bound_by.push((sym, o));
                    }
                },
                _ => {}
            }
        }
    }
    if all_bound(kernel, &bindings) {
        return Ok(bindings);
    }
    for sym in kernel.symbols() {
        if !bindings.contains_key(&sym) {
            return Err(err(
                ErrorKind::Shape,
                format!("symbol `{sym}` is not bound by any array given"),
            ));
        }
    }
    Ok(bindings)
}
