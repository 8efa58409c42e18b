//! ATen's pointwise operators: one 1-D kernel each over the flattened tensor, computing in
//! f32 (bf16 widens, as ATen's opmath does) and rounding once to the result dtype.
//!
//! Binary operators whose first operand has the result's shape run the canonical broadcasts
//! natively: a one-element second operand as a run-time scalar, a trailing part of the shape
//! (`[b, s, d] + [d]`) as `[m, n] ⊕ [1, n]`, a leading part (`[b, s, d] + [b, s, 1]`) as
//! `[m, n] ⊕ [m, 1]` (2-D kernels, the same bodies on other call specs, see
//! `layout::binary`); any other broadcast is materialised on the host first.
//!
//! Every kernel's blocks are `layout::BLOCK` (4096) elements; scalars are one-element f32
//! operands broadcast to the block (`broadcast_to([4096])` below spells that block size).

use crate::BlasError;
use crate::layout::{self, BLOCK, flat};
use crate::promote::{promote, served, to};
use tpukit::dsl::{DType, Kernel};
use tpukit::prelude::*;

// --- kernels --------------------------------------------------------------------------------

#[tpu_kernel]
fn neg(x: In, o: Out, out: DType) {
    o[..] = (-x[..].cast(f32)).cast(out);
}

#[tpu_kernel]
fn abs(x: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).abs().cast(out);
}

#[tpu_kernel]
fn exp(x: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).exp().cast(out);
}

#[tpu_kernel]
fn log(x: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).log().cast(out);
}

#[tpu_kernel]
fn sqrt(x: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).sqrt().cast(out);
}

#[tpu_kernel]
fn rsqrt(x: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).rsqrt().cast(out);
}

#[tpu_kernel]
fn tanh(x: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).tanh().cast(out);
}

#[tpu_kernel]
fn sigmoid(x: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).sigmoid().cast(out);
}

#[tpu_kernel]
fn relu(x: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).max(0.0).cast(out);
}

/// `gelu(approximate='none')`: x·Φ(x) = x/2·(1 + erf(x/√2)).
#[tpu_kernel]
fn gelu(x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    o[..] = (v * 0.5 * ((v * 0.707_106_77).erf() + 1.0)).cast(out);
}

/// `gelu(approximate='tanh')`: x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
#[tpu_kernel]
fn gelu_tanh(x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    let inner = (v + v * v * v * 0.044_715) * 0.797_884_6;
    o[..] = (v * 0.5 * (inner.tanh() + 1.0)).cast(out);
}

#[tpu_kernel]
fn silu(x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    o[..] = (v * v.sigmoid()).cast(out);
}

#[tpu_kernel]
fn add_tt(x: In, y: In, o: Out, alpha: f32, out: DType) {
    o[..] = (x[..].cast(f32) + y[..].cast(f32) * alpha).cast(out);
}

#[tpu_kernel]
fn sub_tt(x: In, y: In, o: Out, alpha: f32, out: DType) {
    o[..] = (x[..].cast(f32) - y[..].cast(f32) * alpha).cast(out);
}

#[tpu_kernel]
fn mul_tt(x: In, y: In, o: Out, out: DType) {
    o[..] = (x[..].cast(f32) * y[..].cast(f32)).cast(out);
}

#[tpu_kernel]
fn div_tt(x: In, y: In, o: Out, out: DType) {
    o[..] = (x[..].cast(f32) / y[..].cast(f32)).cast(out);
}

#[tpu_kernel]
fn maximum_tt(x: In, y: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).max(y[..].cast(f32)).cast(out);
}

#[tpu_kernel]
fn minimum_tt(x: In, y: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).min(y[..].cast(f32)).cast(out);
}

#[tpu_kernel]
fn pow_tt(x: In, y: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).pow(y[..].cast(f32)).cast(out);
}

#[tpu_kernel]
fn add_ts(x: In, s: In, o: Out, alpha: f32, out: DType) {
    o[..] = (x[..].cast(f32) + s[..].broadcast_to([4096]) * alpha).cast(out);
}

#[tpu_kernel]
fn sub_ts(x: In, s: In, o: Out, alpha: f32, out: DType) {
    o[..] = (x[..].cast(f32) - s[..].broadcast_to([4096]) * alpha).cast(out);
}

#[tpu_kernel]
fn mul_ts(x: In, s: In, o: Out, out: DType) {
    o[..] = (x[..].cast(f32) * s[..].broadcast_to([4096])).cast(out);
}

#[tpu_kernel]
fn div_ts(x: In, s: In, o: Out, out: DType) {
    o[..] = (x[..].cast(f32) / s[..].broadcast_to([4096])).cast(out);
}

#[tpu_kernel]
fn pow_ts(x: In, s: In, o: Out, out: DType) {
    o[..] = x[..].cast(f32).pow(s[..].broadcast_to([4096])).cast(out);
}

#[tpu_kernel]
fn where_k(c: In, a: In, b: In, o: Out, out: DType) {
    o[..] = where_(c[..], a[..].cast(f32), b[..].cast(f32)).cast(out);
}

#[tpu_kernel]
fn clamp_k(x: In, lo: In, hi: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    o[..] = v
        .max(lo[..].broadcast_to([4096]))
        .min(hi[..].broadcast_to([4096]))
        .cast(out);
}

/// `threshold_backward(grad, x, threshold)`: 0 where `x <= threshold`, else `grad` (so a
/// NaN `x` passes `grad` through, as in ATen).
#[tpu_kernel]
fn threshold_backward_k(g: In, x: In, o: Out, threshold: f32, out: DType) {
    o[..] = where_(x[..].cast(f32) <= threshold, 0.0, g[..].cast(f32)).cast(out);
}

/// `gelu_backward(grad, x, approximate='none')`: `grad · (Φ(x) + x·φ(x))`.
#[tpu_kernel]
fn gelu_backward_k(g: In, x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    let cdf = ((v * 0.707_106_77).erf() + 1.0) * 0.5;
    let pdf = (v * v * -0.5).exp() * 0.398_942_3;
    o[..] = (g[..].cast(f32) * (cdf + v * pdf)).cast(out);
}

/// `gelu_backward(grad, x, approximate='tanh')`, ATen's formula.
#[tpu_kernel]
fn gelu_tanh_backward_k(g: In, x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    let t = ((v + v * v * v * 0.044_715) * 0.797_884_6).tanh();
    let left = v * 0.5;
    let right = t + 1.0;
    let dright = left * (1.0 - t * t) * 0.797_884_6 * (v * v * 0.134_145 + 1.0);
    o[..] = (g[..].cast(f32) * (right * 0.5 + dright)).cast(out);
}

// --- operators ------------------------------------------------------------------------------

/// ATen's unary pointwise operators.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Unary {
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Tanh,
    Sigmoid,
    Relu,
    /// `gelu(approximate='none')`
    Gelu,
    /// `gelu(approximate='tanh')`
    GeluTanh,
    Silu,
}

impl Unary {
    pub const ALL: [Unary; 12] = [
        Unary::Neg,
        Unary::Abs,
        Unary::Exp,
        Unary::Log,
        Unary::Sqrt,
        Unary::Rsqrt,
        Unary::Tanh,
        Unary::Sigmoid,
        Unary::Relu,
        Unary::Gelu,
        Unary::GeluTanh,
        Unary::Silu,
    ];

    pub const fn aten(self) -> &'static str {
        match self {
            Unary::Neg => "aten.neg.default",
            Unary::Abs => "aten.abs.default",
            Unary::Exp => "aten.exp.default",
            Unary::Log => "aten.log.default",
            Unary::Sqrt => "aten.sqrt.default",
            Unary::Rsqrt => "aten.rsqrt.default",
            Unary::Tanh => "aten.tanh.default",
            Unary::Sigmoid => "aten.sigmoid.default",
            Unary::Relu => "aten.relu.default",
            Unary::Gelu => "aten.gelu.default",
            Unary::GeluTanh => "aten.gelu.default(approximate='tanh')",
            Unary::Silu => "aten.silu.default",
        }
    }

    /// The kernel for tensors of `dtype`.
    pub fn kernel(self, dtype: DType) -> Result<Kernel, BlasError> {
        let spec = layout::elementwise(vec![flat(dtype)], dtype);
        let build = match self {
            Unary::Neg => neg,
            Unary::Abs => abs,
            Unary::Exp => exp,
            Unary::Log => log,
            Unary::Sqrt => sqrt,
            Unary::Rsqrt => rsqrt,
            Unary::Tanh => tanh,
            Unary::Sigmoid => sigmoid,
            Unary::Relu => relu,
            Unary::Gelu => gelu,
            Unary::GeluTanh => gelu_tanh,
            Unary::Silu => silu,
        };
        Ok(build(&spec, dtype)?)
    }
}

/// ATen's binary pointwise operators (Tensor and Scalar overloads).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Binary {
    /// `add(x, y, alpha)`: x + alpha·y
    Add,
    /// `sub(x, y, alpha)`: x − alpha·y
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
    Pow,
}

impl Binary {
    pub const ALL: [Binary; 7] = [
        Binary::Add,
        Binary::Sub,
        Binary::Mul,
        Binary::Div,
        Binary::Maximum,
        Binary::Minimum,
        Binary::Pow,
    ];

    pub const fn aten_tensor(self) -> &'static str {
        match self {
            Binary::Add => "aten.add.Tensor",
            Binary::Sub => "aten.sub.Tensor",
            Binary::Mul => "aten.mul.Tensor",
            Binary::Div => "aten.div.Tensor",
            Binary::Maximum => "aten.maximum.default",
            Binary::Minimum => "aten.minimum.default",
            Binary::Pow => "aten.pow.Tensor_Tensor",
        }
    }

    pub fn aten_scalar(self) -> Option<&'static str> {
        Some(match self {
            Binary::Add => "aten.add.Scalar",
            Binary::Sub => "aten.sub.Scalar",
            Binary::Mul => "aten.mul.Scalar",
            Binary::Div => "aten.div.Scalar",
            Binary::Pow => "aten.pow.Tensor_Scalar",
            Binary::Maximum | Binary::Minimum => return None,
        })
    }
}

fn check_dtype(op: &str, x: &HostArray) -> Result<(), BlasError> {
    if served(x.dtype()) {
        Ok(())
    } else {
        Err(BlasError::new(
            op,
            format!("tpuBLAS serves f32 and bf16 tensors, got {}", x.dtype()),
        ))
    }
}

/// Runs an elementwise kernel on flattened inputs; the output takes `shape`.
fn run(kernel: &Kernel, inputs: &[&HostArray], shape: &[usize]) -> Result<HostArray, BlasError> {
    let flat: Vec<HostArray> = inputs.iter().map(|x| layout::flatten(x)).collect();
    let refs: Vec<&HostArray> = flat.iter().collect();
    let out = launch(kernel, Device::Cpu, &refs)?.remove(0);
    Ok(layout::unflatten(out, shape))
}

fn scalar_operand(x: f64) -> HostArray {
    HostArray::from_f64(DType::F32, &[1], &[x])
}

/// `op(x)`.
pub fn unary(op: Unary, x: &HostArray) -> Result<HostArray, BlasError> {
    check_dtype(op.aten(), x)?;
    run(&op.kernel(x.dtype())?, &[x], x.shape())
}

/// `op(x, y)` on tensors, with ATen's broadcasting and type promotion; `alpha` scales `y`
/// for `Add` and `Sub` (and must be 1 otherwise).
pub fn binary(
    op: Binary,
    x: &HostArray,
    y: &HostArray,
    alpha: f64,
) -> Result<HostArray, BlasError> {
    let name = op.aten_tensor();
    check_dtype(name, x)?;
    check_dtype(name, y)?;
    if alpha != 1.0 && !matches!(op, Binary::Add | Binary::Sub) {
        return Err(BlasError::new(
            name,
            "alpha is only defined for add and sub",
        ));
    }
    let shape = layout::broadcast_shape(x.shape(), y.shape()).ok_or_else(|| {
        BlasError::new(
            name,
            format!(
                "shapes {:?} and {:?} do not broadcast",
                x.shape(),
                y.shape()
            ),
        )
    })?;
    // ATen: a 0-d tensor with a dimensioned one does not decide the dtype.
    let dtype = match (x.shape().is_empty(), y.shape().is_empty()) {
        (false, true) => x.dtype(),
        (true, false) => y.dtype(),
        _ => promote(x.dtype(), y.dtype()),
    };
    let (x, y) = (to(x, dtype), to(y, dtype));
    // `x` of the result's shape and `y` one of the canonical broadcasts run as they are;
    // a one-element `y` is a run-time scalar; anything else is materialised on the host.
    if x.shape() == shape.as_slice() {
        if y.shape().iter().product::<usize>() == 1
            && let Ok(k) = binary_kernel(op, dtype, true, alpha)
        {
            let s = HostArray::from_f64(DType::F32, &[1], &y.to_f64_vec());
            let out = launch(&k, Device::Cpu, &[&layout::flatten(&x), &s])?.remove(0);
            return Ok(layout::unflatten(out, &shape));
        }
        if let Some((p, m, n)) = layout::pattern(&shape, y.shape()) {
            let kernel = broadcast_kernel(op, dtype, p, alpha)?;
            if p == layout::Pattern::Same {
                return run(&kernel, &[&x, &y], &shape);
            }
            let y_shape = if p == layout::Pattern::Row {
                [1, n]
            } else {
                [m, 1]
            };
            let y2 = to(&y, DType::F32).reshape(&y_shape).expect("same size");
            let x2 = x.reshape(&[m, n]).expect("same size");
            let out = launch(&kernel, Device::Cpu, &[&x2, &y2])?.remove(0);
            return Ok(layout::unflatten(out, &shape));
        }
    }
    let (x, y) = (
        layout::expand(&x, &shape).expect("broadcast checked"),
        layout::expand(&y, &shape).expect("broadcast checked"),
    );
    let kernel = binary_kernel(op, dtype, false, alpha)?;
    run(&kernel, &[&x, &y], &shape)
}

/// `op(x, s)` with a Python scalar `s` (no type promotion: the result has `x`'s dtype).
pub fn binary_scalar(
    op: Binary,
    x: &HostArray,
    s: f64,
    alpha: f64,
) -> Result<HostArray, BlasError> {
    let name = op
        .aten_scalar()
        .ok_or_else(|| BlasError::new(op.aten_tensor(), "has no Scalar overload"))?;
    check_dtype(name, x)?;
    if alpha != 1.0 && !matches!(op, Binary::Add | Binary::Sub) {
        return Err(BlasError::new(
            name,
            "alpha is only defined for add and sub",
        ));
    }
    let kernel = binary_kernel(op, x.dtype(), true, alpha)?;
    let s = scalar_operand(s);
    let flat_x = layout::flatten(x);
    let out = launch(&kernel, Device::Cpu, &[&flat_x, &s])?.remove(0);
    Ok(layout::unflatten(out, x.shape()))
}

/// `where(cond, a, b)` (`aten.where.self`), broadcasting all three.
pub fn where_(cond: &HostArray, a: &HostArray, b: &HostArray) -> Result<HostArray, BlasError> {
    let name = "aten.where.self";
    if cond.dtype() != DType::Bool {
        return Err(BlasError::new(
            name,
            format!("the condition must be bool, got {}", cond.dtype()),
        ));
    }
    check_dtype(name, a)?;
    check_dtype(name, b)?;
    let shape = layout::broadcast_shape(cond.shape(), a.shape())
        .and_then(|s| layout::broadcast_shape(&s, b.shape()))
        .ok_or_else(|| BlasError::new(name, "shapes do not broadcast"))?;
    let dtype = promote(a.dtype(), b.dtype());
    let expand = |x: &HostArray, d| layout::expand(&to(x, d), &shape).expect("broadcast checked");
    let (c, a, b) = (
        expand(cond, DType::Bool),
        expand(a, dtype),
        expand(b, dtype),
    );
    run(&where_kernel(dtype)?, &[&c, &a, &b], &shape)
}

/// `clamp(x, min, max)` with scalar bounds (`aten.clamp.default`; `None` is unbounded).
pub fn clamp(x: &HostArray, min: Option<f64>, max: Option<f64>) -> Result<HostArray, BlasError> {
    let name = "aten.clamp.default";
    check_dtype(name, x)?;
    let dtype = x.dtype();
    let lo = scalar_operand(min.unwrap_or(f64::NEG_INFINITY));
    let hi = scalar_operand(max.unwrap_or(f64::INFINITY));
    let flat_x = layout::flatten(x);
    let out = launch(&clamp_kernel(dtype)?, Device::Cpu, &[&flat_x, &lo, &hi])?.remove(0);
    Ok(layout::unflatten(out, x.shape()))
}

const _: () = assert!(
    BLOCK == 4096,
    "the kernels above spell the block size as 4096"
);

/// The backward pointwise operators (same-shape, same-dtype operands).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Backward {
    /// `threshold_backward(grad, x, threshold)` (relu's backward with threshold 0).
    Threshold,
    /// `gelu_backward(grad, x, approximate)`.
    Gelu,
}

impl Backward {
    pub fn aten(self) -> &'static str {
        match self {
            Backward::Threshold => "aten.threshold_backward.default",
            Backward::Gelu => "aten.gelu_backward.default",
        }
    }

    /// The kernel; `param` is the threshold, or 1 for `approximate='tanh'` gelu.
    pub fn kernel(self, dtype: DType, param: f64) -> Result<Kernel, BlasError> {
        let spec = layout::elementwise(vec![flat(dtype), flat(dtype)], dtype);
        Ok(match self {
            Backward::Threshold => threshold_backward_k(&spec, param as f32, dtype)?,
            Backward::Gelu if param != 0.0 => gelu_tanh_backward_k(&spec, dtype)?,
            Backward::Gelu => gelu_backward_k(&spec, dtype)?,
        })
    }
}

/// `op(grad, x, param)` on same-shape, same-dtype tensors.
pub fn backward(
    op: Backward,
    grad: &HostArray,
    x: &HostArray,
    param: f64,
) -> Result<HostArray, BlasError> {
    check_dtype(op.aten(), grad)?;
    check_dtype(op.aten(), x)?;
    if grad.shape() != x.shape() || grad.dtype() != x.dtype() {
        return Err(BlasError::new(
            op.aten(),
            format!(
                "grad and input must match: {} {:?} vs {} {:?}",
                grad.dtype(),
                grad.shape(),
                x.dtype(),
                x.shape()
            ),
        ));
    }
    run(&op.kernel(x.dtype(), param)?, &[grad, x], x.shape())
}

/// The kernel of a binary operator on two tensors (`scalar = false`) or a tensor and a
/// run-time scalar, with `alpha` for add/sub.
pub fn binary_kernel(
    op: Binary,
    dtype: DType,
    scalar: bool,
    alpha: f64,
) -> Result<Kernel, BlasError> {
    let a = alpha as f32;
    if scalar {
        let spec = layout::elementwise(vec![flat(dtype), layout::scalar()], dtype);
        return Ok(match op {
            Binary::Add => add_ts(&spec, a, dtype)?,
            Binary::Sub => sub_ts(&spec, a, dtype)?,
            Binary::Mul => mul_ts(&spec, dtype)?,
            Binary::Div => div_ts(&spec, dtype)?,
            Binary::Pow => pow_ts(&spec, dtype)?,
            Binary::Maximum | Binary::Minimum => {
                return Err(BlasError::new(op.aten_tensor(), "has no Scalar overload"));
            }
        });
    }
    broadcast_kernel(op, dtype, layout::Pattern::Same, alpha)
}

/// The kernel of a binary operator on `x` and a `y` broadcast by `pattern`.
pub fn broadcast_kernel(
    op: Binary,
    dtype: DType,
    pattern: layout::Pattern,
    alpha: f64,
) -> Result<Kernel, BlasError> {
    let spec = layout::binary(pattern, dtype);
    let a = alpha as f32;
    Ok(match op {
        Binary::Add => add_tt(&spec, a, dtype)?,
        Binary::Sub => sub_tt(&spec, a, dtype)?,
        Binary::Mul => mul_tt(&spec, dtype)?,
        Binary::Div => div_tt(&spec, dtype)?,
        Binary::Maximum => maximum_tt(&spec, dtype)?,
        Binary::Minimum => minimum_tt(&spec, dtype)?,
        Binary::Pow => pow_tt(&spec, dtype)?,
    })
}

/// The kernel of `where.self` with values of `dtype`.
pub fn where_kernel(dtype: DType) -> Result<Kernel, BlasError> {
    let spec = layout::elementwise(vec![flat(DType::Bool), flat(dtype), flat(dtype)], dtype);
    Ok(where_k(&spec, dtype)?)
}

/// The kernel of `clamp` with run-time scalar bounds.
pub fn clamp_kernel(dtype: DType) -> Result<Kernel, BlasError> {
    let spec = layout::elementwise(vec![flat(dtype), layout::scalar(), layout::scalar()], dtype);
    Ok(clamp_k(&spec, dtype)?)
}
