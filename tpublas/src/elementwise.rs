//! ATen's pointwise operators: one 1-D kernel each over the flattened tensor, computing in
//! f32 (bf16 widens, as ATen's opmath does) and rounding once to the result dtype.
//!
//! Binary operators whose first operand has the result's shape run the canonical broadcasts
//! natively: a one-element second operand as a run-time scalar, a trailing part of the shape
//! (`[b, s, d] + [d]`) as `[m, n] ⊕ [1, n]`, a leading part (`[b, s, d] + [b, s, 1]`) as
//! `[m, n] ⊕ [m, 1]` (2-D kernels, the same bodies on other call specs, see
//! `layout::binary`); any other broadcast is materialised on the host first.
//!
//! Operator arguments that are numbers (`alpha`, a Python scalar, `clamp`'s bounds,
//! `threshold`) are run-time operands — one-element f32 arrays (`layout::scalar`) — never
//! constants of the IR, so one compiled kernel serves every value and a bundle holds it.
//!
//! Every kernel's blocks are `layout::BLOCK` (4096) elements; scalars broadcast to the block
//! (`broadcast_to([4096])` below spells that block size).

use crate::BlasError;
use crate::launch::{Prepared, memo};
use crate::layout::{self, BLOCK, Pattern, flat};
use crate::promote::{promote, served, to};
use tpukit::dsl::ErrorKind;
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
fn add_tt(x: In, y: In, alpha: In, o: Out, out: DType) {
    o[..] = (x[..].cast(f32) + y[..].cast(f32) * alpha[..]).cast(out);
}

#[tpu_kernel]
fn sub_tt(x: In, y: In, alpha: In, o: Out, out: DType) {
    o[..] = (x[..].cast(f32) - y[..].cast(f32) * alpha[..]).cast(out);
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
fn add_ts(x: In, s: In, o: Out, out: DType) {
    o[..] = (x[..].cast(f32) + s[..].broadcast_to([4096])).cast(out);
}

#[tpu_kernel]
fn sub_ts(x: In, s: In, o: Out, out: DType) {
    o[..] = (x[..].cast(f32) - s[..].broadcast_to([4096])).cast(out);
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

/// `pow(x, 2)` as ATen's CPU kernel computes it: `x·x`.
#[tpu_kernel]
fn square(x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    o[..] = (v * v).cast(out);
}

/// `pow(x, 3)` as ATen's CPU kernel computes it: `x·x·x`, each product rounded to the
/// result's dtype (`powf` rounds the cube once, so the two can differ in the last bit; in
/// bf16 by more).
#[tpu_kernel]
fn cube(x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    let square = (v * v).cast(out).cast(f32);
    o[..] = (square * v).cast(out);
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
fn threshold_backward_k(g: In, x: In, threshold: In, o: Out, out: DType) {
    let t = threshold[..].broadcast_to([4096]);
    o[..] = where_(x[..].cast(f32) <= t, 0.0, g[..].cast(f32)).cast(out);
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

/// `tanh_backward(grad, y)` with `y = tanh(x)`: `grad · (1 − y²)`.
#[tpu_kernel]
fn tanh_backward_k(g: In, y: In, o: Out, out: DType) {
    let v = y[..].cast(f32);
    o[..] = (g[..].cast(f32) * (1.0 - v * v)).cast(out);
}

/// int32 arithmetic with an int32 scalar (wrapping, as int32 tensors do in ATen).
#[tpu_kernel]
fn add_int(x: In, s: In, o: Out) {
    o[..] = x[..] + s[..].broadcast_to([4096]);
}

#[tpu_kernel]
fn sub_int(x: In, s: In, o: Out) {
    o[..] = x[..] - s[..].broadcast_to([4096]);
}

#[tpu_kernel]
fn mul_int(x: In, s: In, o: Out) {
    o[..] = x[..] * s[..].broadcast_to([4096]);
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
    pub fn kernel(self, dtype: DType) -> Result<Prepared, BlasError> {
        memo(("unary", self, dtype), || self.build(dtype))
    }

    fn build(self, dtype: DType) -> Result<Kernel, BlasError> {
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

    /// Every kernel the operator launches for tensors of `dtype` (`gelu` has two forms).
    pub fn kernels(self, dtype: DType) -> Result<Vec<Prepared>, BlasError> {
        match self {
            Unary::Gelu | Unary::GeluTanh => Ok(vec![
                Unary::Gelu.kernel(dtype)?,
                Unary::GeluTanh.kernel(dtype)?,
            ]),
            op => Ok(vec![op.kernel(dtype)?]),
        }
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

    /// Whether the operator scales its second operand by `alpha`.
    fn has_alpha(self) -> bool {
        matches!(self, Binary::Add | Binary::Sub)
    }

    /// The patterns of `y` the operator has kernels for: a run-time scalar only where ATen has
    /// a Scalar overload.
    fn patterns(self) -> Vec<Pattern> {
        let mut p = vec![Pattern::Same, Pattern::Row, Pattern::Column];
        if self.aten_scalar().is_some() {
            p.push(Pattern::Scalar);
        }
        p
    }

    /// The kernels of the Tensor overload: one per broadcast pattern, and for bf16 the
    /// conversion of a broadcast row or column to f32.
    pub fn kernels(self, dtype: DType) -> Result<Vec<Prepared>, BlasError> {
        let mut k: Vec<Prepared> = self
            .patterns()
            .into_iter()
            .map(|p| binary_kernel(self, dtype, p))
            .collect::<Result<_, _>>()?;
        if dtype == DType::BF16 {
            k.push(crate::cast::kernel(DType::BF16, DType::F32)?);
        }
        Ok(k)
    }

    /// The kernels of the Scalar overload (with f32: also the int32 one of add, sub, mul).
    pub fn scalar_kernels(self, dtype: DType) -> Result<Vec<Prepared>, BlasError> {
        let mut k = vec![binary_kernel(self, dtype, Pattern::Scalar)?];
        if dtype == DType::F32 && matches!(self, Binary::Add | Binary::Sub | Binary::Mul) {
            k.push(int_scalar_kernel(self)?);
        }
        if self == Binary::Pow {
            for p in Power::ALL {
                k.push(p.kernel(dtype)?);
            }
        }
        Ok(k)
    }

    /// `alpha · y` exactly (integers), for the int32 kernels.
    fn fold_alpha_exact(self, y: f64, alpha: f64) -> f64 {
        if self.has_alpha() { alpha * y } else { y }
    }

    /// `alpha · y` as the kernel sees a scalar `y` (a Python number or a one-element tensor)
    /// beside a tensor of `dtype`: both rounded to f32 and multiplied in f32, as ATen's
    /// opmath does it per element (so folding it on the host changes no bit). For a bf16
    /// result ATen's CPU kernels of `add`, `sub` and `pow` first round the scalar and `alpha`
    /// to bf16 (`mul` and `div` keep it in f32); so does this (checked against ATen).
    fn fold_alpha(self, y: f64, alpha: f64, dtype: DType) -> f64 {
        let rounded = |v: f64| HostArray::from_f64(DType::BF16, &[1], &[v]).to_f64_vec()[0];
        let (y, alpha) = match self {
            Binary::Add | Binary::Sub | Binary::Pow if dtype == DType::BF16 => {
                (rounded(y), rounded(alpha))
            }
            _ => (y, alpha),
        };
        if self.has_alpha() {
            f64::from(alpha as f32 * y as f32)
        } else {
            y
        }
    }
}

pub(crate) fn check_dtype(op: &str, x: &HostArray) -> Result<(), BlasError> {
    if served(x.dtype()) {
        Ok(())
    } else {
        Err(BlasError::new(
            op,
            format!("tpuBLAS serves f32 and bf16 tensors, got {}", x.dtype()),
        )
        .with_kind(ErrorKind::DType))
    }
}

fn check_alpha(op: Binary, name: &'static str, alpha: f64) -> Result<(), BlasError> {
    if alpha != 1.0 && !op.has_alpha() {
        return Err(BlasError::new(
            name,
            "alpha is only defined for add and sub",
        ));
    }
    Ok(())
}

/// Runs an elementwise kernel on flattened inputs; the output takes `shape`.
pub(crate) fn run(
    kernel: &Prepared,
    inputs: &[&HostArray],
    shape: &[usize],
) -> Result<HostArray, BlasError> {
    let flat: Vec<HostArray> = inputs.iter().map(|x| layout::flatten(x)).collect();
    let refs: Vec<&HostArray> = flat.iter().collect();
    let out = crate::launch::one(kernel, &refs)?;
    Ok(layout::unflatten(out, shape))
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
    check_alpha(op, name, alpha)?;
    let shape = layout::broadcast_shape(x.shape(), y.shape()).ok_or_else(|| {
        BlasError::new(
            name,
            format!(
                "shapes {:?} and {:?} do not broadcast",
                x.shape(),
                y.shape()
            ),
        )
        .with_kind(ErrorKind::Shape)
    })?;
    layout::check_size(name, &shape)?;
    // ATen: a 0-d tensor with a dimensioned one does not decide the dtype.
    let dtype = match (x.shape().is_empty(), y.shape().is_empty()) {
        (false, true) => x.dtype(),
        (true, false) => y.dtype(),
        _ => promote(x.dtype(), y.dtype()),
    };
    // A one-element `y` runs as a run-time f32 scalar, with its own value: a 0-d f32 `y`
    // beside a bf16 `x` is not rounded to bf16 first (ATen computes with it in f32).
    let one_element = y.shape().iter().product::<usize>() == 1;
    if x.shape() == shape.as_slice() && one_element && op.aten_scalar().is_some() {
        let s = op.fold_alpha(y.to_f64_vec()[0], alpha, dtype);
        let k = binary_kernel(op, dtype, Pattern::Scalar)?;
        return run(&k, &[&to(x, dtype), &scalar(s)], &shape);
    }
    let (x, y) = (to(x, dtype), to(y, dtype));
    // `x` of the result's shape and `y` one of the canonical broadcasts run as they are;
    // anything else is materialised on the host.
    if x.shape() == shape.as_slice()
        && let Some((p, m, n)) = layout::pattern(&shape, y.shape())
    {
        let kernel = binary_kernel(op, dtype, p)?;
        // A row or column is read as f32, converted on the device (`cast::to`): a plan of
        // the call converts the next call's (a host conversion would make it a constant).
        let (x2, y2) = match p {
            Pattern::Row => (
                x.reshape(&[m, n]),
                crate::cast::to(&y, DType::F32)?.reshape(&[1, n]),
            ),
            Pattern::Column => (
                x.reshape(&[m, n]),
                crate::cast::to(&y, DType::F32)?.reshape(&[m, 1]),
            ),
            _ => (x.reshape(&[m * n]), y.reshape(&[m * n])),
        };
        let (x2, y2) = (x2.expect("same size"), y2.expect("same size"));
        let alpha = layout::scalar_operand(alpha, x2.shape().len());
        let mut inputs = vec![&x2, &y2];
        if op.has_alpha() {
            inputs.push(&alpha);
        }
        let out = crate::launch::one(&kernel, &inputs)?;
        return Ok(layout::unflatten(out, &shape));
    }
    let (x, y) = (
        layout::expand(name, &x, &shape)?.expect("broadcast checked"),
        layout::expand(name, &y, &shape)?.expect("broadcast checked"),
    );
    let kernel = binary_kernel(op, dtype, Pattern::Same)?;
    let alpha = scalar(alpha);
    let mut inputs = vec![&x, &y];
    if op.has_alpha() {
        inputs.push(&alpha);
    }
    run(&kernel, &inputs, &shape)
}

/// The integer exponents `pow(x, s)` computes by multiplying, as ATen's CPU kernel does
/// (`pow_tensor_scalar_optimized_kernel`): exact where `powf` is, and without a `powf` call
/// per element, which the CPU backend cannot vectorise (`x ** 3` in GPT-2's tanh GELU took
/// 0.6 ms on 65536 elements, torch 0.02).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Power {
    Square,
    Cube,
}

impl Power {
    pub const ALL: [Power; 2] = [Power::Square, Power::Cube];

    /// The power for exponent `s`, if it is one of these.
    pub fn of(s: f64) -> Option<Power> {
        match s {
            2.0 => Some(Power::Square),
            3.0 => Some(Power::Cube),
            _ => None,
        }
    }

    pub fn kernel(self, dtype: DType) -> Result<Prepared, BlasError> {
        memo(("power", self, dtype), || {
            let spec = layout::elementwise(vec![flat(dtype)], dtype);
            Ok(match self {
                Power::Square => square(&spec, dtype)?,
                Power::Cube => cube(&spec, dtype)?,
            })
        })
    }
}

/// A one-element f32 operand of a flat kernel.
fn scalar(x: f64) -> HostArray {
    layout::scalar_operand(x, 1)
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
    if x.dtype() == DType::I32 {
        return int_scalar(op, name, x, s, alpha);
    }
    check_dtype(name, x)?;
    check_alpha(op, name, alpha)?;
    // ATen computes `pow(x, ±0.5)` as `sqrt`/`rsqrt`, which differ from `powf` at -inf
    // (NaN, not inf or 0) and at -0 (-0 and -inf, not 0 and inf).
    match (op, s) {
        (Binary::Pow, 0.5) => return unary(Unary::Sqrt, x),
        (Binary::Pow, -0.5) => return unary(Unary::Rsqrt, x),
        (Binary::Pow, s) => {
            if let Some(p) = Power::of(s) {
                return run(&p.kernel(x.dtype())?, &[x], x.shape());
            }
        }
        _ => {}
    }
    let kernel = binary_kernel(op, x.dtype(), Pattern::Scalar)?;
    run(
        &kernel,
        &[x, &scalar(op.fold_alpha(s, alpha, x.dtype()))],
        x.shape(),
    )
}

/// The int32 kernel of `x ⊕ s` (add, sub, mul).
fn int_scalar_kernel(op: Binary) -> Result<Prepared, BlasError> {
    memo(("int_scalar", op), || {
        let spec = layout::elementwise(
            vec![flat(DType::I32), ArraySpec::new(DType::I32, [1])],
            DType::I32,
        );
        Ok(match op {
            Binary::Add => add_int(&spec)?,
            Binary::Sub => sub_int(&spec)?,
            Binary::Mul => mul_int(&spec)?,
            _ => return Err(BlasError::new(op.aten_tensor(), "has no int32 kernel")),
        })
    })
}

/// `x ⊕ alpha·s` on an int32 tensor with integer numbers (the result int32, as ATen keeps
/// an integer tensor's dtype with an integer scalar).
fn int_scalar(
    op: Binary,
    name: &str,
    x: &HostArray,
    s: f64,
    alpha: f64,
) -> Result<HostArray, BlasError> {
    let folded = op.fold_alpha_exact(s, alpha);
    let fits = matches!(op, Binary::Add | Binary::Sub | Binary::Mul)
        && folded.fract() == 0.0
        && folded.abs() <= f64::from(i32::MAX);
    if !fits {
        return Err(BlasError::new(
            name,
            format!("on int32 tensors, serves add, sub and mul by int32 numbers, got {s}·{alpha}"),
        )
        .with_kind(ErrorKind::DType));
    }
    let s = HostArray::from_f64(DType::I32, &[1], &[folded]);
    run(&int_scalar_kernel(op)?, &[x, &s], x.shape())
}

/// `where(cond, a, b)` (`aten.where.self`), broadcasting all three.
pub fn where_(cond: &HostArray, a: &HostArray, b: &HostArray) -> Result<HostArray, BlasError> {
    let name = "aten.where.self";
    if cond.dtype() != DType::Bool {
        return Err(BlasError::new(
            name,
            format!("the condition must be bool, got {}", cond.dtype()),
        )
        .with_kind(ErrorKind::DType));
    }
    check_dtype(name, a)?;
    check_dtype(name, b)?;
    let shape = layout::broadcast_all(name, &[cond, a, b])?;
    let dtype = promote(a.dtype(), b.dtype());
    let expand = |x: &HostArray, d| {
        layout::expand(name, &to(x, d), &shape).map(|e| e.expect("broadcast checked"))
    };
    let (c, a, b) = (
        expand(cond, DType::Bool)?,
        expand(a, dtype)?,
        expand(b, dtype)?,
    );
    run(&where_kernel(dtype)?, &[&c, &a, &b], &shape)
}

/// `clamp(x, min, max)` with scalar bounds (`aten.clamp.default`; `None` is unbounded).
pub fn clamp(x: &HostArray, min: Option<f64>, max: Option<f64>) -> Result<HostArray, BlasError> {
    check_dtype("aten.clamp.default", x)?;
    let lo = scalar(min.unwrap_or(f64::NEG_INFINITY));
    let hi = scalar(max.unwrap_or(f64::INFINITY));
    run(&clamp_kernel(x.dtype())?, &[x, &lo, &hi], x.shape())
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
    /// `gelu_backward(grad, x, approximate='none')`.
    Gelu,
    /// `gelu_backward(grad, x, approximate='tanh')`.
    GeluTanh,
    /// `tanh_backward(grad, output)`.
    Tanh,
}

impl Backward {
    pub fn aten(self) -> &'static str {
        match self {
            Backward::Threshold => "aten.threshold_backward.default",
            Backward::Gelu | Backward::GeluTanh => "aten.gelu_backward.default",
            Backward::Tanh => "aten.tanh_backward.default",
        }
    }

    /// The kernel (`threshold_backward`'s takes the threshold as a run-time scalar).
    pub fn kernel(self, dtype: DType) -> Result<Prepared, BlasError> {
        memo(("backward", self, dtype), || self.build(dtype))
    }

    fn build(self, dtype: DType) -> Result<Kernel, BlasError> {
        let mut inputs = vec![flat(dtype), flat(dtype)];
        if self == Backward::Threshold {
            inputs.push(layout::scalar(1));
        }
        let spec = layout::elementwise(inputs, dtype);
        Ok(match self {
            Backward::Threshold => threshold_backward_k(&spec, dtype)?,
            Backward::Gelu => gelu_backward_k(&spec, dtype)?,
            Backward::GeluTanh => gelu_tanh_backward_k(&spec, dtype)?,
            Backward::Tanh => tanh_backward_k(&spec, dtype)?,
        })
    }

    /// Every kernel the operator launches for tensors of `dtype`.
    pub fn kernels(self, dtype: DType) -> Result<Vec<Prepared>, BlasError> {
        match self {
            Backward::Threshold | Backward::Tanh => Ok(vec![self.kernel(dtype)?]),
            Backward::Gelu | Backward::GeluTanh => Ok(vec![
                Backward::Gelu.kernel(dtype)?,
                Backward::GeluTanh.kernel(dtype)?,
            ]),
        }
    }
}

/// `op(grad, x)` on same-shape, same-dtype tensors; `threshold` is `threshold_backward`'s.
pub fn backward(
    op: Backward,
    grad: &HostArray,
    x: &HostArray,
    threshold: f64,
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
    let t = scalar(threshold);
    let mut inputs = vec![grad, x];
    if op == Backward::Threshold {
        inputs.push(&t);
    }
    run(&op.kernel(x.dtype())?, &inputs, x.shape())
}

/// The kernel of a binary operator on `x` and a `y` presented by `pattern` (see
/// `layout::binary`); add and sub also take `alpha` as a run-time scalar, except with a
/// scalar `y`, which the host has already multiplied by it.
pub fn binary_kernel(op: Binary, dtype: DType, pattern: Pattern) -> Result<Prepared, BlasError> {
    memo(("binary", op, dtype, pattern), || {
        build_binary(op, dtype, pattern)
    })
}

fn build_binary(op: Binary, dtype: DType, pattern: Pattern) -> Result<Kernel, BlasError> {
    let unsupported = || BlasError::new(op.aten_tensor(), "has no Scalar overload");
    let spec = layout::binary(pattern, dtype, op.has_alpha());
    Ok(match (op, pattern) {
        (Binary::Add, Pattern::Scalar) => add_ts(&spec, dtype)?,
        (Binary::Sub, Pattern::Scalar) => sub_ts(&spec, dtype)?,
        (Binary::Mul, Pattern::Scalar) => mul_ts(&spec, dtype)?,
        (Binary::Div, Pattern::Scalar) => div_ts(&spec, dtype)?,
        (Binary::Pow, Pattern::Scalar) => pow_ts(&spec, dtype)?,
        (Binary::Maximum | Binary::Minimum, Pattern::Scalar) => return Err(unsupported()),
        (Binary::Add, _) => add_tt(&spec, dtype)?,
        (Binary::Sub, _) => sub_tt(&spec, dtype)?,
        (Binary::Mul, _) => mul_tt(&spec, dtype)?,
        (Binary::Div, _) => div_tt(&spec, dtype)?,
        (Binary::Maximum, _) => maximum_tt(&spec, dtype)?,
        (Binary::Minimum, _) => minimum_tt(&spec, dtype)?,
        (Binary::Pow, _) => pow_tt(&spec, dtype)?,
    })
}

/// The kernel of `where.self` with values of `dtype`.
pub fn where_kernel(dtype: DType) -> Result<Prepared, BlasError> {
    memo(("where", dtype), || {
        let spec = layout::elementwise(vec![flat(DType::Bool), flat(dtype), flat(dtype)], dtype);
        Ok(where_k(&spec, dtype)?)
    })
}

/// The kernel of `clamp` with run-time scalar bounds.
pub fn clamp_kernel(dtype: DType) -> Result<Prepared, BlasError> {
    memo(("clamp", dtype), || {
        let scalar = layout::scalar(1);
        let spec = layout::elementwise(vec![flat(dtype), scalar.clone(), scalar], dtype);
        Ok(clamp_k(&spec, dtype)?)
    })
}
