//! Factories (`full`, `arange.start_step`): tensors made from numbers, by fill kernels over
//! the flattened output (blocks of `BLOCK` elements). The numbers are run-time scalars
//! (f32 operands for float results, int32 for int32 results), so one compiled kernel serves
//! every value and size. The output is allocated on the host and written by the kernel.
//!
//! Results are f32, bf16 or int32 (tpuBLAS's index type; `tpublas.mode()` widens int32 to
//! the int64 ATen asks for on the host). Without a dtype, a float number gives f32 and an
//! integer one int32 (ATen: the default float dtype, int64). `zeros`, `ones`, `*_like`,
//! `scalar_tensor`, `new_*` and `fill_`/`zero_` are `full` with the right size and value;
//! `arange(end)` and `arange(start, end)` are `arange.start_step` (what `mode()` maps them to).

use crate::launch::{Prepared, memo};
use crate::layout::{BLOCK, elementwise};
use crate::value::{Args, Value};
use crate::{BlasError, Result};
use tpukit::dsl::{ArraySpec, DType, ErrorKind};
use tpukit::prelude::*;

/// `o = v` everywhere.
#[tpu_kernel]
fn fill(v: In, o: Out, out: DType) {
    o[..] = v[..].broadcast_to([4096]).cast(out);
}

/// `o[i] = start + i·step`, in f32 for float results.
#[tpu_kernel]
fn ramp(start: In, step: In, o: Out, out: DType) {
    let i = (iota(i32, [4096], 0) + program_id(0) * 4096).cast(f32);
    o[..] = (start[..].broadcast_to([4096]) + i * step[..].broadcast_to([4096])).cast(out);
}

/// `o[i] = start + i·step` in int32.
#[tpu_kernel]
fn ramp_int(start: In, step: In, o: Out) {
    let i = iota(i32, [4096], 0) + program_id(0) * 4096;
    o[..] = start[..].broadcast_to([4096]) + i * step[..].broadcast_to([4096]);
}

const _: () = assert!(BLOCK == 4096);

/// The dtypes factories make.
const MADE: [DType; 3] = [DType::F32, DType::BF16, DType::I32];

/// The dtype run-time scalars of a factory making `out` are passed in.
fn number_dtype(out: DType) -> DType {
    if out == DType::I32 {
        DType::I32
    } else {
        DType::F32
    }
}

fn number(out: DType) -> ArraySpec {
    ArraySpec::new(number_dtype(out), [1])
}

/// The fill kernel making `out`.
pub fn fill_kernel(out: DType) -> Result<Prepared> {
    memo(("fill", out), || {
        Ok(fill(&elementwise(vec![number(out)], out), out)?)
    })
}

/// The ramp kernel making `out`.
pub fn ramp_kernel(out: DType) -> Result<Prepared> {
    memo(("ramp", out), || {
        let spec = elementwise(vec![number(out), number(out)], out);
        Ok(if out == DType::I32 {
            ramp_int(&spec)?
        } else {
            ramp(&spec, out)?
        })
    })
}

/// Which factory an operator is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Factory {
    Full,
    Arange,
}

impl Factory {
    pub fn aten(self) -> &'static str {
        match self {
            Factory::Full => "aten.full.default",
            Factory::Arange => "aten.arange.start_step",
        }
    }

    /// Every kernel for results of `dtype`: also the int32 ones (the dtypes served by the
    /// table are the float ones; int32 results ride along with f32).
    pub fn kernels(self, dtype: DType) -> Result<Vec<Prepared>> {
        let make = |d| match self {
            Factory::Full => fill_kernel(d),
            Factory::Arange => ramp_kernel(d),
        };
        let mut k = vec![make(dtype)?];
        if dtype == DType::F32 {
            k.push(make(DType::I32)?);
        }
        Ok(k)
    }

    pub fn run(self, args: &[Value]) -> Result<Vec<HostArray>> {
        let a = Args::new(self.aten(), args);
        match self {
            Factory::Full => {
                let size = a.int_list(0)?;
                let shape = size
                    .iter()
                    .map(|&d| usize::try_from(d).map_err(|_| a.err(format!("negative size {d}"))))
                    .collect::<Result<Vec<usize>>>()?;
                let integral = matches!(a.values.get(1), Some(Value::Int(_)));
                let out = result_dtype(&a, 2, integral)?;
                let v = a.scalar_or(1, f64::NAN)?;
                let value = operand(&a, out, v)?;
                make(&a, &fill_kernel(out)?, &[&value], out, &shape)
            }
            Factory::Arange => {
                let ints = (0..3).all(|i| !matches!(a.values.get(i), Some(Value::Scalar(_))));
                let out = result_dtype(&a, 3, ints)?;
                let (start, end, step) = (
                    a.scalar_or(0, 0.0)?,
                    a.scalar_or(1, 0.0)?,
                    a.scalar_or(2, 1.0)?,
                );
                if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
                    return Err(a.err(format!(
                        "start, end and step must be finite and step non-zero, got {start}, {end}, {step}"
                    )));
                }
                if (end - start) * step < 0.0 {
                    return Err(a.err("upper bound and larger bound inconsistent with step sign"));
                }
                let n = ((end - start) / step).ceil().max(0.0) as usize;
                let (s0, s1) = (operand(&a, out, start)?, operand(&a, out, step)?);
                make(&a, &ramp_kernel(out)?, &[&s0, &s1], out, &[n])
            }
        }
    }
}

/// The result dtype: argument `i` (`ScalarType?`, f32, bf16 or i32), or from the numbers.
fn result_dtype(a: &Args, i: usize, integral: bool) -> Result<DType> {
    match a.values.get(i) {
        None | Some(Value::None) => Ok(if integral { DType::I32 } else { DType::F32 }),
        Some(Value::Str(name)) => match DType::parse(name) {
            Some(d) if MADE.contains(&d) => Ok(d),
            _ => Err(a
                .err(format!("makes f32, bf16 and i32 tensors, not `{name}`"))
                .with_kind(ErrorKind::DType)),
        },
        Some(other) => Err(a.err(format!("argument {i} must be a dtype, got {other:?}"))),
    }
}

/// A run-time scalar operand holding `v` for a factory making `out`; an integer result
/// takes only integers int32 holds.
fn operand(a: &Args, out: DType, v: f64) -> Result<HostArray> {
    if out == DType::I32 && (v.fract() != 0.0 || v.abs() > f64::from(i32::MAX)) {
        return Err(a
            .err(format!("{v} is not an int32 value"))
            .with_kind(ErrorKind::DType));
    }
    Ok(HostArray::from_f64(number_dtype(out), &[1], &[v]))
}

/// A new tensor of `shape` and `out` (f32, bf16 or i32) filled with `v` (for other
/// operators: padding).
pub(crate) fn filled(op: &str, out: DType, shape: &[usize], v: f64) -> Result<HostArray> {
    let a = Args::new(op, &[]);
    let value = operand(&a, out, v)?;
    Ok(make(&a, &fill_kernel(out)?, &[&value], out, shape)?.remove(0))
}

/// Runs a fill kernel into a new tensor of `shape`.
fn make(
    a: &Args,
    kernel: &Prepared,
    inputs: &[&HostArray],
    out: DType,
    shape: &[usize],
) -> Result<Vec<HostArray>> {
    let n = crate::layout::check_size(a.op, shape)?;
    let mut o = HostArray::try_zeros(out, &[n], "the result")
        .map_err(|e| BlasError::new(a.op, e.message).with_kind(e.kind))?;
    if n > 0 {
        crate::launch::into(kernel, inputs, std::slice::from_mut(&mut o))?;
    }
    Ok(vec![o.reshape(shape).expect("same size")])
}
