//! Grouped convolutions (`groups > 1`, depthwise included) as one ungrouped convolution per
//! group ([`crate::conv`]): each group's input channels, weights and bias are gathered with
//! `index_select` (a tpuBLAS kernel), and the results are joined with `cat` (another). Input
//! gradients join along channels, weight gradients along output channels; the bias gradient
//! is the ungrouped one of the whole `grad_output`.

use crate::Result;
use crate::indexing::Gather;
use crate::reduction::Reduction;
use crate::value::{Args, Value};
use crate::{concat, conv};
use tpukit::HostArray;
use tpukit::dsl::{DType, ErrorKind};

/// `t`'s slice `[g·size, (g+1)·size)` along `dim`.
fn slice(t: &HostArray, dim: i64, g: usize, size: usize) -> Result<HostArray> {
    let idx: Vec<f64> = (g * size..(g + 1) * size).map(|i| i as f64).collect();
    let idx = HostArray::from_f64(DType::I32, &[size], &idx);
    let args = [t.clone().into(), Value::Int(dim), idx.into()];
    Ok(Gather::IndexSelect.run(&args)?.remove(0))
}

fn cat(parts: Vec<HostArray>, dim: i64) -> Result<HostArray> {
    let mut args: Vec<Value> = parts.into_iter().map(Value::from).collect();
    args.push(Value::Int(dim));
    Ok(concat::run(&args)?.remove(0))
}

/// The group count and the per-group input and output channel counts, checked.
fn split(a: &Args, x: &HostArray, w: &HostArray, groups: i64) -> Result<(usize, usize, usize)> {
    let (c, oc) = (x.shape().get(1).copied(), w.shape().first().copied());
    match (c, oc, usize::try_from(groups)) {
        (Some(c), Some(oc), Ok(g)) if g > 0 && c % g == 0 && oc % g == 0 => Ok((g, c / g, oc / g)),
        _ => Err(a
            .err(format!(
                "groups={groups} must divide the input channels and the weight's output \
                 channels (input {:?}, weight {:?})",
                x.shape(),
                w.shape()
            ))
            .with_kind(ErrorKind::Shape)),
    }
}

/// The call's arguments with `groups=1` at `index`, and `replace`d tensors.
fn ungrouped(args: &[Value], index: usize, replace: &[(usize, Value)]) -> Vec<Value> {
    let mut v = args.to_vec();
    v[index] = Value::Int(1);
    for (i, t) in replace {
        v[*i] = t.clone();
    }
    v
}

/// `convolution(...)` with `groups` (argument 8) > 1.
pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(conv::ATEN, args);
    let (x, w) = (a.tensor(0)?, a.tensor(1)?);
    let (g, cg, ocg) = split(&a, x, w, a.int(8)?)?;
    let bias = a.opt_tensor(2)?;
    let mut outs = Vec::new();
    for i in 0..g {
        let b = match bias {
            Some(b) => slice(b, 0, i, ocg)?.into(),
            None => Value::None,
        };
        let part = [
            (0, slice(x, 1, i, cg)?.into()),
            (1, slice(w, 0, i, ocg)?.into()),
            (2, b),
        ];
        outs.push(conv::run(&ungrouped(args, 8, &part))?.remove(0));
    }
    Ok(vec![cat(outs, 1)?])
}

/// `convolution_backward(...)` with `groups` (argument 9) > 1.
pub fn run_backward(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(conv::ATEN_BACKWARD, args);
    let (grad, x, w) = (a.tensor(0)?, a.tensor(1)?, a.tensor(2)?);
    let (g, cg, ocg) = split(&a, x, w, a.int(9)?)?;
    let mask = a.int_list(10)?;
    let want = |i: usize| mask.get(i).is_none_or(|&m| m != 0);
    let (mut gx, mut gw) = (Vec::new(), Vec::new());
    for i in 0..g {
        let part = [
            (0, slice(grad, 1, i, ocg)?.into()),
            (1, slice(x, 1, i, cg)?.into()),
            (2, slice(w, 0, i, ocg)?.into()),
            (
                10,
                Value::IntList(vec![i64::from(want(0)), i64::from(want(1)), 0]),
            ),
        ];
        let mut r = conv::run_backward(&ungrouped(args, 9, &part))?;
        gw.push(r.remove(1));
        gx.push(r.remove(0));
    }
    let empty = || HostArray::zeros(x.dtype(), &[0]);
    let mut out = vec![empty(), empty(), empty()];
    if want(0) {
        out[0] = cat(gx, 1)?;
    }
    if want(1) {
        out[1] = cat(gw, 0)?;
    }
    if want(2) {
        // The bias gradient does not depend on the groups: Σ grad over all but channels.
        let mut dims = vec![0];
        dims.extend(2..grad.shape().len() as i64);
        let sum = [grad.clone().into(), Value::IntList(dims), false.into()];
        out[2] = Reduction::Sum.run(&sum)?.remove(0);
    }
    Ok(out)
}
