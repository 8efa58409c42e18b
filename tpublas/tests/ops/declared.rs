//! The invariant bundles rest on: every kernel an operator launches is one it declares
//! (`Op::kernels`), for calls that take every path through its host code (broadcast
//! patterns, scalars, moved dims, mixed dtypes, optional arguments).

use crate::common::*;
use std::collections::HashSet;
use tpukit::HostArray;
use tpukit::Launchable as _;
use tpukit::dsl::{DType, KernelHash};
use tpukit_blas::{Value, find, record};

fn t(dtype: DType, shape: &[usize]) -> Value {
    let mut r = rng(shape.iter().sum::<usize>() as u64);
    random(&mut r, dtype, shape, 0.5, 1.5).0.into()
}

fn bools(shape: &[usize]) -> Value {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| (i % 3 == 0) as u8 as f64).collect();
    HostArray::from_f64(DType::Bool, shape, &v).into()
}

fn ints(values: &[f64]) -> Value {
    HostArray::from_f64(DType::I32, &[values.len()], values).into()
}

fn dims(d: &[i64]) -> Value {
    Value::IntList(d.to_vec())
}

/// Calls of every operator, for tensors of `d` (`o` is the other float dtype).
fn calls(d: DType) -> Vec<(&'static str, Vec<Value>)> {
    let o = if d == DType::F32 {
        DType::BF16
    } else {
        DType::F32
    };
    let x = || t(d, &[3, 600]);
    let mut c: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for name in [
        "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu", "gelu",
    ] {
        c.push((name, vec![x()]));
    }
    c.push(("gelu", vec![x(), "tanh".into()]));
    for name in [
        "add.Tensor",
        "sub.Tensor",
        "mul.Tensor",
        "div.Tensor",
        "maximum",
        "minimum",
        "pow.Tensor_Tensor",
    ] {
        for y in [
            t(d, &[3, 600]),    // same shape
            t(d, &[600]),       // a row
            t(d, &[3, 1]),      // a column
            t(d, &[1]),         // one element
            t(d, &[]),          // 0-d
            t(o, &[3, 600]),    // promoted
            t(d, &[2, 1, 600]), // other broadcasts are materialised
        ] {
            c.push((name, vec![x(), y]));
        }
    }
    c.push(("add.Tensor", vec![x(), t(d, &[600]), Value::Scalar(2.0)]));
    c.push(("sub.Tensor", vec![x(), t(d, &[3, 1]), Value::Int(3)]));
    c.push(("add.Tensor", vec![x(), t(d, &[1]), Value::Scalar(-0.5)]));
    for name in [
        "add.Scalar",
        "sub.Scalar",
        "mul.Scalar",
        "div.Scalar",
        "pow.Tensor_Scalar",
    ] {
        c.push((name, vec![x(), Value::Scalar(2.5)]));
    }
    c.push(("add.Scalar", vec![x(), Value::Scalar(2.5), Value::Int(2)]));
    c.push(("where.self", vec![bools(&[3, 600]), x(), t(d, &[600])]));
    c.push(("where.self", vec![bools(&[3, 1]), x(), t(o, &[3, 600])]));
    c.push(("clamp", vec![x(), Value::Scalar(0.7), Value::None]));
    for name in ["addcmul", "addcdiv"] {
        let args = vec![x(), t(d, &[600]), t(o, &[3, 600]), Value::Scalar(0.5)];
        c.push((name, args));
    }
    c.push((
        "lerp.Scalar",
        vec![x(), t(d, &[3, 600]), Value::Scalar(0.7)],
    ));
    c.push(("clamp", vec![x(), Value::None, Value::Scalar(1.2)]));
    c.push(("threshold_backward", vec![x(), x(), Value::Scalar(0.9)]));
    c.push(("gelu_backward", vec![x(), x()]));
    c.push(("gelu_backward", vec![x(), x(), "tanh".into()]));
    for name in ["sum.dim_IntList", "mean.dim", "amax"] {
        for ds in [&[-1][..], &[0], &[0, 2], &[]] {
            c.push((name, vec![t(d, &[2, 3, 130]), dims(ds), true.into()]));
        }
    }
    for name in ["sum.dim_IntList", "mean.dim"] {
        let to = Value::Str(o.name().into());
        c.push((name, vec![x(), dims(&[1]), false.into(), to]));
    }
    for name in ["_softmax", "_log_softmax"] {
        for dim in [-1, 0] {
            for half_to_float in [false, d == DType::BF16] {
                c.push((name, vec![x(), Value::Int(dim), half_to_float.into()]));
            }
        }
    }
    for dim in [1, 0] {
        let y = t(d, &[3, 600]);
        c.push((
            "_softmax_backward_data",
            vec![x(), y.clone(), Value::Int(dim), Value::Str(d.name().into())],
        ));
        if d == DType::F32 {
            let bf16 = Value::Str("bf16".into());
            c.push((
                "_softmax_backward_data",
                vec![x(), y, Value::Int(dim), bf16],
            ));
        }
    }
    let n = || dims(&[600]);
    c.push((
        "native_layer_norm",
        vec![x(), n(), t(d, &[600]), t(d, &[600]), Value::Scalar(1e-6)],
    ));
    c.push((
        "native_layer_norm",
        vec![x(), n(), Value::None, Value::None, Value::Scalar(1e-5)],
    ));
    c.push((
        "native_layer_norm",
        vec![
            x(),
            n(),
            t(DType::F32, &[600]),
            t(DType::F32, &[600]),
            Value::Scalar(1e-5),
        ],
    ));
    c.push(("_fused_rms_norm", vec![x(), n(), t(d, &[600]), Value::None]));
    c.push((
        "_fused_rms_norm",
        vec![x(), n(), t(DType::F32, &[600]), Value::Scalar(1e-6)],
    ));
    for stat in [d, DType::F32] {
        let (mean, rstd) = (t(stat, &[3, 1]), t(stat, &[3, 1]));
        let args = vec![x(), x(), n(), mean, rstd, t(stat, &[600]), t(stat, &[600])];
        c.push(("native_layer_norm_backward", args));
    }
    for dim in [1, 0] {
        c.push(("cumsum", vec![x(), Value::Int(dim)]));
    }
    c.push((
        "cumsum",
        vec![x(), Value::Int(1), Value::Str(o.name().into())],
    ));
    c.push(("mm", vec![t(d, &[30, 20]), t(d, &[20, 10])]));
    c.push(("bmm", vec![t(d, &[2, 30, 20]), t(d, &[2, 20, 10])]));
    let (a, b) = (|| t(d, &[30, 20]), || t(d, &[20, 10]));
    c.push(("addmm", vec![t(d, &[10]), a(), b()]));
    c.push((
        "addmm",
        vec![
            t(d, &[30, 10]),
            a(),
            b(),
            Value::Scalar(0.5),
            Value::Scalar(2.0),
        ],
    ));
    c.push((
        "addmm",
        vec![
            t(d, &[30, 1]),
            a(),
            b(),
            Value::Scalar(0.0),
            Value::Scalar(2.0),
        ],
    ));
    c.push((
        "index_select",
        vec![x(), Value::Int(1), ints(&[5.0, 0.0, 599.0])],
    ));
    c.push(("index_select", vec![x(), Value::Int(0), ints(&[2.0, 2.0])]));
    c.push(("embedding", vec![t(d, &[10, 300]), ints(&[9.0, 0.0, 3.0])]));
    c.push(("permute", vec![t(d, &[2, 3, 130]), dims(&[2, 0, 1])]));
    c.push(("permute", vec![t(d, &[2, 3, 130]), dims(&[1, 0, 2])]));
    c.push(("transpose.int", vec![x(), Value::Int(0), Value::Int(1)]));
    c.push(("cat", vec![x(), t(d, &[2, 600]), Value::Int(0)]));
    c.push(("cat", vec![t(d, &[3, 6]), t(d, &[3, 2]), Value::Int(1)]));
    c.extend(cnn_calls(d, o));
    c.extend(training_calls(d, o));
    c
}

/// Attention's forward and backward, causal and not, on heads of `e` elements.
fn attention_calls(c: &mut Vec<(&'static str, Vec<Value>)>, d: DType, e: usize) {
    let (q, k) = (|| t(d, &[2, 3, 70, e]), || t(d, &[2, 3, 90, e]));
    for causal in [false, true] {
        let fwd = vec![q(), k(), k(), Value::Scalar(0.0), causal.into()];
        c.push(("_scaled_dot_product_flash_attention_for_cpu", fwd));
        let lse = t(DType::F32, &[2, 3, 70]);
        let bwd = vec![
            q(),
            q(),
            k(),
            k(),
            q(),
            lse,
            Value::Scalar(0.0),
            causal.into(),
        ];
        c.push(("_scaled_dot_product_flash_attention_for_cpu_backward", bwd));
    }
}

/// Calls of the loss, backward, factory and copy operators of a training step.
fn training_calls(d: DType, o: DType) -> Vec<(&'static str, Vec<Value>)> {
    let x = || t(d, &[3, 600]);
    let target = || ints(&[5.0, -100.0, 599.0]);
    let mut c: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for reduction in [0, 1, 2] {
        let r = Value::Int(reduction);
        let ignore = Value::Int(-100);
        c.push((
            "nll_loss_forward",
            vec![x(), target(), Value::None, r.clone(), ignore.clone()],
        ));
        let g = if reduction == 0 {
            t(d, &[3])
        } else {
            t(d, &[])
        };
        let args = vec![g, x(), target(), Value::None, r, ignore, t(d, &[])];
        c.push(("nll_loss_backward", args));
    }
    for dtype in [d, o] {
        let args = vec![x(), x(), Value::Int(1), Value::Str(dtype.name().into())];
        c.push(("_log_softmax_backward_data", args));
    }
    c.push(("tanh_backward", vec![x(), x()]));
    for dtype in [d, DType::I32] {
        let dt = Value::Str(dtype.name().into());
        c.push(("full", vec![dims(&[3, 5000]), Value::Int(2), dt.clone()]));
        let args = vec![Value::Int(1), Value::Int(9000), Value::Int(2), dt];
        c.push(("arange.start_step", args));
    }
    c.push(("clone", vec![x()]));
    c.push(("_to_copy", vec![x(), Value::Str(o.name().into())]));
    let embedding = vec![
        t(d, &[3, 600]),
        ints(&[5.0, 0.0, 5.0]),
        Value::Int(7),
        Value::Int(0),
    ];
    c.push(("embedding_dense_backward", embedding));
    for name in [
        "eq.Scalar",
        "ne.Scalar",
        "lt.Scalar",
        "le.Scalar",
        "gt.Scalar",
        "ge.Scalar",
    ] {
        c.push((name, vec![x(), Value::Scalar(1.0)]));
    }
    c.push((
        "masked_fill.Scalar",
        vec![x(), bools(&[600]), Value::Scalar(-1.0)],
    ));
    c.push(("masked_fill.Tensor", vec![x(), bools(&[3, 600]), t(d, &[])]));
    c.push(("bernoulli.p", vec![x(), Value::Scalar(0.3), Value::Int(7)]));
    // A head dim of 40 takes the composed path, 64 the fused kernels.
    for e in [40, 64] {
        attention_calls(&mut c, d, e);
    }
    let (q, k) = (|| t(d, &[2, 3, 70, 40]), || t(d, &[2, 3, 90, 40]));
    for mask in [bools(&[70, 90]), t(d, &[2, 1, 70, 90])] {
        let fwd = vec![q(), k(), k(), Value::Scalar(0.0), false.into(), mask];
        c.push(("_scaled_dot_product_flash_attention_for_cpu", fwd));
    }
    c.push((
        "constant_pad_nd",
        vec![x(), dims(&[1, 2, 0, 3]), Value::Scalar(-1.0)],
    ));
    c.push((
        "constant_pad_nd",
        vec![ints(&[1.0, 2.0]), dims(&[0, 1]), Value::Int(-100)],
    ));
    c.push(("add.Scalar", vec![ints(&[1.0, 2.0]), Value::Int(3)]));
    c.push(("clone", vec![ints(&[1.0, 2.0])]));
    c.push(("tril", vec![t(d, &[2, 30, 600]), Value::Int(-1)]));
    c.push(("triu", vec![t(d, &[30, 600])]));
    c.push(("tril", vec![bools(&[30, 600])]));
    c.push(("_safe_softmax", vec![x(), Value::Int(1)]));
    if d == DType::BF16 {
        let to = Value::Str("f32".into());
        c.push(("_safe_softmax", vec![x(), Value::Int(0), to]));
    }
    c
}

/// Calls of the convolutional-network operators for inputs of `d` (`o` the other dtype).
fn cnn_calls(d: DType, o: DType) -> Vec<(&'static str, Vec<Value>)> {
    let pair = |a: i64, b: i64| dims(&[a, b]);
    let (x, w) = (|| t(d, &[2, 3, 9, 7]), || t(d, &[4, 3, 3, 2]));
    let window = || {
        vec![
            pair(2, 1),
            pair(1, 0),
            pair(1, 2),
            false.into(),
            dims(&[0, 0]),
            Value::Int(1),
        ]
    };
    let mut c: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for bias in [t(d, &[4]), Value::None] {
        let mut args = vec![x(), w(), bias];
        args.extend(window());
        c.push(("convolution", args));
    }
    let mut args = vec![t(d, &[2, 4, 5, 5]), x(), w(), dims(&[4])];
    args.extend(window());
    args.push(dims(&[1, 1, 1]));
    c.push(("convolution_backward", args));
    // Grouped: per-group index_select, convolution and cat.
    let grouped = |last: i64| {
        vec![
            pair(1, 1),
            pair(0, 0),
            pair(1, 1),
            false.into(),
            dims(&[0, 0]),
            Value::Int(last),
        ]
    };
    let mut args = vec![t(d, &[2, 4, 6, 5]), t(d, &[6, 2, 3, 3]), t(d, &[6])];
    args.extend(grouped(2));
    c.push(("convolution", args));
    let mut args = vec![
        t(d, &[2, 6, 4, 3]),
        t(d, &[2, 4, 6, 5]),
        t(d, &[6, 2, 3, 3]),
        dims(&[6]),
    ];
    args.extend(grouped(2));
    args.push(dims(&[1, 1, 1]));
    c.push(("convolution_backward", args));
    let v = |dt: DType| t(dt, &[3]);
    // Parameters of the input's dtype, and f32 ones for a bf16 input (ATen's mixed type).
    let params = if d == DType::BF16 {
        vec![d, o]
    } else {
        vec![d]
    };
    for p in params {
        for training in [true, false] {
            let stats = || vec![v(p), v(p), v(p), v(p)];
            let tail = || vec![training.into(), Value::Scalar(0.1), Value::Scalar(1e-5)];
            let mut functional = vec![t(d, &[2, 3, 5, 5])];
            functional.extend(stats());
            functional.extend(tail());
            c.push(("_native_batch_norm_legit_functional", functional));
            let mut backward = vec![t(d, &[2, 3, 5, 5]), t(d, &[2, 3, 5, 5])];
            backward.extend([v(p), v(p), v(p), v(p), v(p)]);
            backward.extend([training.into(), Value::Scalar(1e-5), dims(&[1, 1, 1])]);
            c.push(("native_batch_norm_backward", backward));
        }
    }
    let mut plain = vec![
        t(d, &[2, 3, 5, 5]),
        Value::None,
        Value::None,
        Value::None,
        Value::None,
    ];
    plain.extend([true.into(), Value::Scalar(0.1), Value::Scalar(1e-5)]);
    c.push(("native_batch_norm", plain));
    c.push((
        "max_pool2d_with_indices",
        vec![t(d, &[2, 3, 9, 7]), pair(3, 2), pair(2, 1), pair(1, 1)],
    ));
    let pooled = tpukit_blas::run(
        "max_pool2d_with_indices",
        &[t(d, &[2, 3, 9, 7]), pair(3, 2), pair(2, 1), pair(1, 1)],
    )
    .expect("max pool");
    let avg = || vec![pair(3, 2), pair(2, 1), pair(1, 1)];
    let mut args = vec![t(d, &[2, 3, 9, 7])];
    args.extend(avg());
    c.push(("avg_pool2d", args));
    let mut args = vec![t(d, &[2, 3, 5, 8]), t(d, &[2, 3, 9, 7])];
    args.extend(avg());
    args.extend([false.into(), false.into(), Value::None]);
    c.push(("avg_pool2d_backward", args));
    c.push((
        "max_pool2d_with_indices_backward",
        vec![
            t(d, &[2, 3, 5, 8]),
            t(d, &[2, 3, 9, 7]),
            pair(3, 2),
            pair(2, 1),
            pair(1, 1),
            pair(1, 1),
            false.into(),
            pooled[1].clone().into(),
        ],
    ));
    c
}

#[test]
fn every_kernel_an_operator_launches_is_declared() {
    let mut untested: HashSet<String> = tpukit_blas::ops().iter().map(|o| o.name()).collect();
    for d in DTYPES {
        for (name, args) in calls(d) {
            let op = find(name).unwrap_or_else(|| panic!("no operator {name}"));
            let declared: HashSet<KernelHash> = DTYPES
                .iter()
                .flat_map(|&d| op.kernels(d).unwrap())
                .map(|k| k.hash())
                .collect();
            let (result, launched) = record(|| op.run(&args));
            result.unwrap_or_else(|e| panic!("{name} {d}: {e}"));
            assert!(!launched.is_empty(), "{name} {d} launched nothing");
            for (kernel, hash) in launched {
                assert!(
                    declared.contains(&hash),
                    "{name} on {d} launched `{kernel}`, which it does not declare"
                );
            }
            untested.remove(&op.name());
        }
    }
    assert!(untested.is_empty(), "no calls of {untested:?}");
}
