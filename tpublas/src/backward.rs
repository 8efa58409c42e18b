//! The cheap backward operators: `threshold_backward`, `gelu_backward` (pointwise) and
//! `_softmax_backward_data` (row-wise), with the same layouts as their forward operators.

use crate::BlasError;
use crate::layout::{self, flat, scalar};
use crate::promote::served;
use tpukit::dsl::{ArraySpec, DType, Dim, Extent, GridAxis, Kernel, grid};
use tpukit::prelude::*;

#[tpu_kernel]
fn threshold_backward_k(g: In, x: In, t: In, o: Out, out: DType) {
    let keep = x[..].cast(f32) > t[..].broadcast_to([4096]);
    o[..] = where_(keep, g[..].cast(f32), 0.0).cast(out);
}

/// d/dx of x·Φ(x) = Φ(x) + x·φ(x).
#[tpu_kernel]
fn gelu_backward_k(g: In, x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    let cdf = ((v * 0.707_106_77).erf() + 1.0) * 0.5;
    let pdf = (v * v * -0.5).exp() * 0.398_942_3;
    o[..] = (g[..].cast(f32) * (cdf + v * pdf)).cast(out);
}

/// d/dx of the tanh approximation: with u = √(2/π)(x + 0.044715x³),
/// 0.5(1 + tanh u) + 0.5x(1 − tanh²u)·√(2/π)(1 + 3·0.044715x²).
#[tpu_kernel]
fn gelu_tanh_backward_k(g: In, x: In, o: Out, out: DType) {
    let v = x[..].cast(f32);
    let th = ((v + v * v * v * 0.044_715) * 0.797_884_6).tanh();
    let du = (v * v * 0.134_145 + 1.0) * 0.797_884_6;
    let d = (th + 1.0) * 0.5 + v * 0.5 * (1.0 - th * th) * du;
    o[..] = (g[..].cast(f32) * d).cast(out);
}

#[tpu_kernel]
fn softmax_backward_rows(g: In, y: In, o: Out, out: DType) {
    let gv = g[..].cast(f32);
    let yv = y[..].cast(f32);
    o[..] = (yv * (gv - (gv * yv).sum_keepdims(-1))).cast(out);
}

fn check(op: &str, a: &HostArray, b: &HostArray) -> Result<DType, BlasError> {
    if a.shape() != b.shape() || a.dtype() != b.dtype() || !served(a.dtype()) {
        return Err(BlasError::new(
            op,
            format!(
                "takes two f32/bf16 tensors of one shape and dtype, got {} {:?} and {} {:?}",
                a.dtype(),
                a.shape(),
                b.dtype(),
                b.shape()
            ),
        ));
    }
    Ok(a.dtype())
}

fn pointwise(k: &Kernel, inputs: &[&HostArray], shape: &[usize]) -> Result<HostArray, BlasError> {
    let flat: Vec<HostArray> = inputs.iter().map(|x| layout::flatten(x)).collect();
    let refs: Vec<&HostArray> = flat.iter().collect();
    Ok(layout::unflatten(
        launch(k, Device::Cpu, &refs)?.remove(0),
        shape,
    ))
}

/// `aten.threshold_backward(grad, self, threshold)`: `grad` where `self > threshold`, else 0.
pub fn threshold_backward(
    grad: &HostArray,
    x: &HostArray,
    threshold: f64,
) -> Result<HostArray, BlasError> {
    let dtype = check("aten.threshold_backward.default", grad, x)?;
    let k = threshold_backward_kernel(dtype)?;
    let t = HostArray::from_f64(DType::F32, &[1], &[threshold]);
    let (g, xf) = (layout::flatten(grad), layout::flatten(x));
    Ok(layout::unflatten(
        launch(&k, Device::Cpu, &[&g, &xf, &t])?.remove(0),
        x.shape(),
    ))
}

pub fn threshold_backward_kernel(dtype: DType) -> Result<Kernel, BlasError> {
    let spec = layout::elementwise(vec![flat(dtype), flat(dtype), scalar()], dtype);
    Ok(threshold_backward_k(&spec, dtype)?)
}

/// `aten.gelu_backward(grad, self, approximate)` (`tanh`: the tanh approximation's
/// derivative).
pub fn gelu_backward(grad: &HostArray, x: &HostArray, tanh: bool) -> Result<HostArray, BlasError> {
    let dtype = check("aten.gelu_backward.default", grad, x)?;
    pointwise(&gelu_backward_kernel(dtype, tanh)?, &[grad, x], x.shape())
}

pub fn gelu_backward_kernel(dtype: DType, tanh: bool) -> Result<Kernel, BlasError> {
    let spec = layout::elementwise(vec![flat(dtype), flat(dtype)], dtype);
    Ok(if tanh {
        gelu_tanh_backward_k(&spec, dtype)?
    } else {
        gelu_backward_k(&spec, dtype)?
    })
}

/// `aten._softmax_backward_data(grad_output, output, dim=-1)`:
/// `output · (grad − Σ grad·output)` along the last dim.
pub fn softmax_backward_data(
    grad: &HostArray,
    output: &HostArray,
    dim: i64,
) -> Result<HostArray, BlasError> {
    let op = "aten._softmax_backward_data.default";
    let dtype = check(op, grad, output)?;
    let rank = output.shape().len() as i64;
    if rank == 0 || (dim != -1 && dim != rank - 1) {
        return Err(BlasError::new(
            op,
            "supports the last dim (other dims: not yet)",
        ));
    }
    let (rows, n) = layout::rows_of(output.shape());
    let k = softmax_backward_kernel(dtype, n)?;
    let g = grad.clone().reshape(&[rows, n]).expect("same size");
    let y = output.clone().reshape(&[rows, n]).expect("same size");
    Ok(launch(&k, Device::Cpu, &[&g, &y])?
        .remove(0)
        .reshape(output.shape())
        .expect("same size"))
}

pub fn softmax_backward_kernel(dtype: DType, n: usize) -> Result<Kernel, BlasError> {
    let rows = ArraySpec::new(dtype, [Dim::sym("rows"), Dim::Static(n)])
        .blocked([8, n], [grid(0), 0.into()]);
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("rows", 8))],
        inputs: vec![rows.clone(), rows.clone()],
        outputs: vec![rows],
        ..Default::default()
    };
    Ok(softmax_backward_rows(&spec, dtype)?)
}
