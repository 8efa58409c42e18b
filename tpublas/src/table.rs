//! The operator table: every ATen operator tpuBLAS implements, by its ATen name, with the
//! kernel it lowers to for a problem shape (what `tpukit lower` and the libtpu conformance
//! suite compile) and its host-side `run` on [`Value`] arguments (ATen's argument order,
//! trailing defaults optional).

use crate::BlasError;
use crate::concat;
use crate::copy::{self, Permute};
use crate::elementwise::{self, Backward, Binary, Unary};
use crate::indexing::Gather;
use crate::matmul::Matmul;
use crate::norm::Norm;
use crate::norm_backward;
use crate::reduction::Reduction;
use crate::scan;
use crate::softmax::Softmax;
use crate::value::{Args, Value};
use tpukit::HostArray;
use tpukit::catalog::Instance;
use tpukit::dsl::{DType, Kernel, Result};

/// One ATen operator.
pub struct Op {
    /// `aten.<name>.<overload>`.
    pub name: &'static str,
    pub about: &'static str,
    /// The meaning of each extent of the problem shape [`Op::instance`] takes.
    pub shape: &'static [&'static str],
    /// The operator's (main) kernel for a problem shape and dtype.
    pub instance: fn(&[usize], DType) -> Result<Instance>,
    /// The operator on host arrays (runs on `Device::Cpu`).
    pub run: fn(&[Value]) -> std::result::Result<Vec<HostArray>, BlasError>,
}

impl Op {
    /// The kernel for `shape` (one extent per [`Op::shape`] name) and `dtype`.
    pub fn instantiate(&self, shape: &[usize], dtype: DType) -> Result<Instance> {
        if shape.len() != self.shape.len() {
            return Err(tpukit::dsl::Error::new(format!(
                "{} takes a shape {} ({} extents), got {} extents",
                self.name,
                self.shape.join("x"),
                self.shape.len(),
                shape.len()
            )));
        }
        if !matches!(dtype, DType::F32 | DType::BF16) {
            return Err(tpukit::dsl::Error::new(format!(
                "{} has no {dtype} variant",
                self.name
            )));
        }
        (self.instance)(shape, dtype)
    }
}

fn flat(kernel: std::result::Result<Kernel, BlasError>, shape: &[usize]) -> Result<Instance> {
    Ok(Instance {
        kernel: kernel.map_err(|e| tpukit::dsl::Error::new(e.message))?,
        bindings: [("n".to_string(), shape[0])].into(),
    })
}

fn one(
    x: std::result::Result<HostArray, BlasError>,
) -> std::result::Result<Vec<HostArray>, BlasError> {
    x.map(|x| vec![x])
}

fn unary(op: Unary, args: &[Value]) -> std::result::Result<Vec<HostArray>, BlasError> {
    let a = Args::new(op.aten(), args);
    let op = match (op, a.str_or(1, "none")?) {
        (Unary::Gelu, "tanh") => Unary::GeluTanh,
        (Unary::Gelu, "none") => Unary::Gelu,
        (Unary::Gelu, other) => return Err(a.err(format!("unknown approximate='{other}'"))),
        (op, _) => op,
    };
    one(elementwise::unary(op, a.tensor(0)?))
}

fn binary(op: Binary, args: &[Value]) -> std::result::Result<Vec<HostArray>, BlasError> {
    let a = Args::new(op.aten_tensor(), args);
    one(elementwise::binary(
        op,
        a.tensor(0)?,
        a.tensor(1)?,
        a.scalar_or(2, 1.0)?,
    ))
}

fn binary_scalar(op: Binary, args: &[Value]) -> std::result::Result<Vec<HostArray>, BlasError> {
    let a = Args::new(op.aten_scalar().unwrap_or(op.aten_tensor()), args);
    let s = a.scalar_or(1, f64::NAN)?;
    if args.len() < 2 {
        return Err(a.err("the scalar operand is missing"));
    }
    one(elementwise::binary_scalar(
        op,
        a.tensor(0)?,
        s,
        a.scalar_or(2, 1.0)?,
    ))
}

macro_rules! unary_ops {
    ($($variant:ident: $about:literal),* $(,)?) => {[$(
        Op {
            name: Unary::$variant.aten(),
            about: $about,
            shape: &["n"],
            instance: |s, d| flat(Unary::$variant.kernel(d), s),
            run: |a| unary(Unary::$variant, a),
        }
    ),*]};
}

macro_rules! binary_ops {
    ($($variant:ident: $about:literal),* $(,)?) => {[$(
        Op {
            name: Binary::$variant.aten_tensor(),
            about: $about,
            shape: &["n"],
            instance: |s, d| flat(elementwise::binary_kernel(Binary::$variant, d, false, 1.0), s),
            run: |a| binary(Binary::$variant, a),
        }
    ),*]};
}

macro_rules! scalar_ops {
    ($($variant:ident: $name:literal),* $(,)?) => {[$(
        Op {
            name: $name,
            about: "tensor ⊕ Python scalar (a run-time operand), no promotion",
            shape: &["n"],
            instance: |s, d| flat(elementwise::binary_kernel(Binary::$variant, d, true, 1.0), s),
            run: |a| binary_scalar(Binary::$variant, a),
        }
    ),*]};
}

const UNARY: [Op; 11] = unary_ops![
    Neg: "-x", Abs: "|x|", Exp: "e^x", Log: "ln x", Sqrt: "√x", Rsqrt: "1/√x", Tanh: "tanh x",
    Sigmoid: "1/(1+e^-x)", Relu: "max(x, 0)", Silu: "x·sigmoid(x)",
    Gelu: "x·Φ(x); approximate='tanh' as a string argument",
];

const BINARY: [Op; 7] = binary_ops![
    Add: "x + alpha·y, broadcasting, f32 ⊕ bf16 → f32",
    Sub: "x − alpha·y, broadcasting, f32 ⊕ bf16 → f32",
    Mul: "x·y, broadcasting", Div: "x / y, broadcasting",
    Maximum: "NaN-propagating max, broadcasting", Minimum: "NaN-propagating min, broadcasting",
    Pow: "x^y, broadcasting",
];

const SCALAR: [Op; 5] = scalar_ops![
    Add: "aten.add.Scalar", Sub: "aten.sub.Scalar", Mul: "aten.mul.Scalar",
    Div: "aten.div.Scalar", Pow: "aten.pow.Tensor_Scalar",
];

const ROWS: &[&str] = &["m", "n"];

const OTHERS: [Op; 22] = [
    Op {
        name: "aten.where.self",
        about: "cond ? a : b, broadcasting",
        shape: &["n"],
        instance: |s, d| flat(elementwise::where_kernel(d), s),
        run: |a| {
            let g = Args::new("aten.where.self", a);
            one(elementwise::where_(
                g.tensor(0)?,
                g.tensor(1)?,
                g.tensor(2)?,
            ))
        },
    },
    Op {
        name: "aten.clamp.default",
        about: "clamp(x, min?, max?) with run-time scalar bounds",
        shape: &["n"],
        instance: |s, d| flat(elementwise::clamp_kernel(d), s),
        run: |a| {
            let g = Args::new("aten.clamp.default", a);
            one(elementwise::clamp(
                g.tensor(0)?,
                g.opt_scalar(1)?,
                g.opt_scalar(2)?,
            ))
        },
    },
    Op {
        name: "aten.threshold_backward.default",
        about: "grad where x > threshold, else 0",
        shape: &["n"],
        instance: |s, d| flat(Backward::Threshold.kernel(d, 0.0), s),
        run: |a| {
            let g = Args::new("aten.threshold_backward.default", a);
            let t = g.scalar_or(2, 0.0)?;
            one(elementwise::backward(
                Backward::Threshold,
                g.tensor(0)?,
                g.tensor(1)?,
                t,
            ))
        },
    },
    Op {
        name: "aten.gelu_backward.default",
        about: "gelu's derivative times grad; approximate 'none' or 'tanh'",
        shape: &["n"],
        instance: |s, d| flat(Backward::Gelu.kernel(d, 0.0), s),
        run: |a| {
            let g = Args::new("aten.gelu_backward.default", a);
            let tanh = match g.str_or(2, "none")? {
                "none" => 0.0,
                "tanh" => 1.0,
                other => return Err(g.err(format!("unknown approximate='{other}'"))),
            };
            one(elementwise::backward(
                Backward::Gelu,
                g.tensor(0)?,
                g.tensor(1)?,
                tanh,
            ))
        },
    },
    Op {
        name: "aten.sum.dim_IntList",
        about: "sum over dims (f32 accumulation), keepdim",
        shape: ROWS,
        instance: |s, d| Reduction::Sum.instance(s, d),
        run: |a| Reduction::Sum.run(a),
    },
    Op {
        name: "aten.mean.dim",
        about: "mean over dims (f32 accumulation), keepdim",
        shape: ROWS,
        instance: |s, d| Reduction::Mean.instance(s, d),
        run: |a| Reduction::Mean.run(a),
    },
    Op {
        name: "aten.amax.default",
        about: "max over dims, keepdim",
        shape: ROWS,
        instance: |s, d| Reduction::Amax.instance(s, d),
        run: |a| Reduction::Amax.run(a),
    },
    Op {
        name: "aten._softmax.default",
        about: "online softmax along a dim, two passes per row",
        shape: ROWS,
        instance: |s, d| Softmax::Softmax.instance(s, d),
        run: |a| Softmax::Softmax.run(a),
    },
    Op {
        name: "aten._log_softmax.default",
        about: "online log-softmax along a dim, two passes per row",
        shape: ROWS,
        instance: |s, d| Softmax::LogSoftmax.instance(s, d),
        run: |a| Softmax::LogSoftmax.run(a),
    },
    Op {
        name: "aten._softmax_backward_data.default",
        about: "y·(g − Σ g·y) along a dim",
        shape: ROWS,
        instance: |s, d| Softmax::Backward.instance(s, d),
        run: |a| Softmax::Backward.run(a),
    },
    Op {
        name: "aten.native_layer_norm.default",
        about: "(out, mean, rstd), one-pass Chan statistics in f32",
        shape: ROWS,
        instance: |s, d| Norm::Layer.instance(s, d),
        run: |a| Norm::Layer.run(a),
    },
    Op {
        name: "aten._fused_rms_norm.default",
        about: "(out, rstd) in f32",
        shape: ROWS,
        instance: |s, d| Norm::Rms.instance(s, d),
        run: |a| Norm::Rms.run(a),
    },
    Op {
        name: "aten.native_layer_norm_backward.default",
        about: "(grad_input, grad_weight, grad_bias): a row kernel and a column kernel",
        shape: ROWS,
        instance: norm_backward::instance,
        run: norm_backward::run,
    },
    Op {
        name: "aten.cumsum.default",
        about: "prefix sums along a dim: a triangular dot per block, f32 carry",
        shape: ROWS,
        instance: scan::instance,
        run: scan::run,
    },
    Op {
        name: "aten.mm.default",
        about: "blocked matmul, f32 scratch accumulator",
        shape: &["m", "k", "n"],
        instance: |s, d| Matmul::Mm.instance(s, d),
        run: |a| Matmul::Mm.run(a),
    },
    Op {
        name: "aten.bmm.default",
        about: "batched blocked matmul",
        shape: &["b", "m", "k", "n"],
        instance: |s, d| Matmul::Bmm.instance(s, d),
        run: |a| Matmul::Bmm.run(a),
    },
    Op {
        name: "aten.addmm.default",
        about: "beta·self + alpha·(a @ b); self a row bias or a full array",
        shape: &["m", "k", "n"],
        instance: |s, d| Matmul::Addmm.instance(s, d),
        run: |a| Matmul::Addmm.run(a),
    },
    Op {
        name: "aten.index_select.default",
        about: "gather along a dim, i32 indices prefetched",
        shape: &["rows", "inner", "k"],
        instance: |s, d| Gather::IndexSelect.instance(s, d),
        run: |a| Gather::IndexSelect.run(a),
    },
    Op {
        name: "aten.embedding.default",
        about: "rows of a [v, d] table by i32 indices",
        shape: &["rows", "inner", "k"],
        instance: |s, d| Gather::Embedding.instance(s, d),
        run: |a| Gather::Embedding.run(a),
    },
    Op {
        name: "aten.permute.default",
        about: "materialised permutation: ≤ rank−1 batched tile transposes",
        shape: &["a", "b", "c"],
        instance: copy::instance,
        run: |a| Permute::Permute.run(a),
    },
    Op {
        name: "aten.transpose.int",
        about: "materialised transpose of two dims",
        shape: &["a", "b", "c"],
        instance: copy::instance,
        run: |a| Permute::Transpose.run(a),
    },
    Op {
        name: "aten.cat.default",
        about: "concatenation as prefetch-driven row scatters into one output",
        shape: &["rows", "inner", "total"],
        instance: concat::instance,
        run: concat::run,
    },
];

/// Every operator, by family.
pub fn ops() -> Vec<&'static Op> {
    static ALL: std::sync::OnceLock<Vec<Op>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut v: Vec<Op> = Vec::new();
        v.extend(UNARY);
        v.extend(BINARY);
        v.extend(SCALAR);
        v.extend(OTHERS);
        v
    })
    .iter()
    .collect()
}

/// The operator called `name` (`aten.add.Tensor`; the `aten.` prefix and a `.default`
/// overload may be left out).
pub fn find(name: &str) -> Option<&'static Op> {
    let full = |n: &str| {
        let n = n.strip_prefix("aten.").unwrap_or(n);
        if n.contains('.') {
            n.to_string()
        } else {
            format!("{n}.default")
        }
    };
    let want = full(name);
    ops().into_iter().find(|o| full(o.name) == want)
}

/// Runs the operator `name` on `args`.
pub fn run(name: &str, args: &[Value]) -> std::result::Result<Vec<HostArray>, BlasError> {
    let op = find(name).ok_or_else(|| BlasError::new(name, "no such tpuBLAS operator"))?;
    (op.run)(args)
}
