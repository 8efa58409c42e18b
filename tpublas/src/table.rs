//! The operator table: every ATen operator tpuBLAS implements, by its ATen schema, with the
//! kernels it launches (what bundles precompile, `tpukit lower` lowers and the libtpu
//! conformance suite compiles) and its host-side `run` on [`Value`] arguments in the
//! schema's order.
//!
//! Invariant (tested by recording launches, see [`crate::launch::record`]): every kernel an
//! operator's `run` launches for f32 or bf16 tensors is one of [`Op::kernels`] for that
//! dtype, so a bundle built from the table serves every first call.

use crate::BlasError;
use crate::Result;
use crate::cast;
use crate::compare::{self, Compare};
use crate::concat;
use crate::copy::{self, Permute};
use crate::elementwise::{self, Backward, Binary, Unary};
use crate::factory::Factory;
use crate::indexing::Gather;
use crate::launch::Prepared;
use crate::loss;
use crate::matmul::Matmul;
use crate::norm::Norm;
use crate::norm_backward;
use crate::reduction::Reduction;
use crate::scan;
use crate::softmax::Softmax;
use crate::ternary::Ternary;
use crate::triangle::Triangle;
use crate::value::{Args, Value};
use crate::{attention, avg_pool, batch_norm, conv, embedding_backward, pad, pool, random};
use tpukit::catalog::Instance;
use tpukit::dsl::DType;
use tpukit::dsl::ErrorKind;
use tpukit::{HostArray, Launchable as _};

/// Which code serves an operator: its family, and the member of the family.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Family {
    Unary(Unary),
    /// The Tensor overloads of a binary operator.
    Binary(Binary),
    /// The Scalar overloads (a Python number as the second operand).
    Scalar(Binary),
    Where,
    Clamp,
    /// `addcmul`, `addcdiv`, `lerp.Scalar`: three tensors (two for `lerp`) and a number.
    Ternary(Ternary),
    Backward(Backward),
    Reduction(Reduction),
    Softmax(Softmax),
    Norm(Norm),
    NormBackward,
    Cumsum,
    Matmul(Matmul),
    Gather(Gather),
    Permute(Permute),
    Cat,
    // Convolutional networks.
    Conv,
    ConvBackward,
    BatchNorm,
    BatchNormFunctional,
    BatchNormBackward,
    MaxPool,
    MaxPoolBackward,
    AvgPool,
    AvgPoolBackward,
    /// `nll_loss_forward` (false) and `nll_loss_backward` (true).
    NllLoss(bool),
    Factory(Factory),
    /// `clone` (no dtype argument) and `_to_copy` (its dtype at argument 1).
    Copy(Option<usize>),
    EmbeddingBackward,
    Compare(Compare),
    MaskedFill,
    Bernoulli,
    /// Scaled dot-product attention's forward (false) and backward (true).
    Attention(bool),
    Pad,
    Triangle(Triangle),
}

/// One ATen operator.
pub struct Op {
    /// ATen's schema (`add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`):
    /// the operator's name and overload, and the order, types and defaults of the arguments
    /// [`Op::run`] takes. Frontends bind their callers' arguments with it (the Python
    /// package, `torch.library`).
    pub schema: &'static str,
    pub about: &'static str,
    pub family: Family,
}

const fn op(schema: &'static str, family: Family, about: &'static str) -> Op {
    Op {
        schema,
        about,
        family,
    }
}

use Family as F;

const OPS: &[Op] = &[
    op("neg(Tensor self) -> Tensor", F::Unary(Unary::Neg), "-x"),
    op("abs(Tensor self) -> Tensor", F::Unary(Unary::Abs), "|x|"),
    op("exp(Tensor self) -> Tensor", F::Unary(Unary::Exp), "e^x"),
    op("log(Tensor self) -> Tensor", F::Unary(Unary::Log), "ln x"),
    op("sqrt(Tensor self) -> Tensor", F::Unary(Unary::Sqrt), "√x"),
    op(
        "rsqrt(Tensor self) -> Tensor",
        F::Unary(Unary::Rsqrt),
        "1/√x",
    ),
    op(
        "tanh(Tensor self) -> Tensor",
        F::Unary(Unary::Tanh),
        "tanh x",
    ),
    op(
        "sigmoid(Tensor self) -> Tensor",
        F::Unary(Unary::Sigmoid),
        "1/(1+e^-x)",
    ),
    op(
        "relu(Tensor self) -> Tensor",
        F::Unary(Unary::Relu),
        "max(x, 0)",
    ),
    op(
        "silu(Tensor self) -> Tensor",
        F::Unary(Unary::Silu),
        "x·sigmoid(x)",
    ),
    op(
        "gelu(Tensor self, *, str approximate='none') -> Tensor",
        F::Unary(Unary::Gelu),
        "x·Φ(x), or its tanh approximation",
    ),
    op(
        "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        F::Binary(Binary::Add),
        "x + alpha·y, broadcasting, f32 ⊕ bf16 → f32",
    ),
    op(
        "sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        F::Binary(Binary::Sub),
        "x − alpha·y, broadcasting, f32 ⊕ bf16 → f32",
    ),
    op(
        "mul.Tensor(Tensor self, Tensor other) -> Tensor",
        F::Binary(Binary::Mul),
        "x·y, broadcasting",
    ),
    op(
        "div.Tensor(Tensor self, Tensor other) -> Tensor",
        F::Binary(Binary::Div),
        "x / y, broadcasting",
    ),
    op(
        "maximum(Tensor self, Tensor other) -> Tensor",
        F::Binary(Binary::Maximum),
        "NaN-propagating max, broadcasting",
    ),
    op(
        "minimum(Tensor self, Tensor other) -> Tensor",
        F::Binary(Binary::Minimum),
        "NaN-propagating min, broadcasting",
    ),
    op(
        "pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor",
        F::Binary(Binary::Pow),
        "x^y, broadcasting",
    ),
    op(
        "add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
        F::Scalar(Binary::Add),
        "x + alpha·s, s a run-time scalar",
    ),
    op(
        "sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
        F::Scalar(Binary::Sub),
        "x − alpha·s, s a run-time scalar",
    ),
    op(
        "mul.Scalar(Tensor self, Scalar other) -> Tensor",
        F::Scalar(Binary::Mul),
        "x·s, s a run-time scalar",
    ),
    op(
        "div.Scalar(Tensor self, Scalar other) -> Tensor",
        F::Scalar(Binary::Div),
        "x / s, s a run-time scalar",
    ),
    op(
        "pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor",
        F::Scalar(Binary::Pow),
        "x^s, s a run-time scalar",
    ),
    op(
        "where.self(Tensor condition, Tensor self, Tensor other) -> Tensor",
        F::Where,
        "cond ? a : b, broadcasting",
    ),
    op(
        "clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor",
        F::Clamp,
        "clamp(x, min?, max?) with run-time scalar bounds",
    ),
    op(
        "addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
        F::Ternary(Ternary::Addcmul),
        "x + value·a·b, broadcasting",
    ),
    op(
        "addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
        F::Ternary(Ternary::Addcdiv),
        "x + value·a / b, broadcasting",
    ),
    op(
        "lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor",
        F::Ternary(Ternary::Lerp),
        "x + weight·(end − x), broadcasting",
    ),
    op(
        "threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor",
        F::Backward(Backward::Threshold),
        "grad where x > threshold, else 0",
    ),
    op(
        "gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor",
        F::Backward(Backward::Gelu),
        "gelu's derivative times grad",
    ),
    op(
        "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        F::Reduction(Reduction::Sum),
        "sum over dims (f32 accumulation), keepdim",
    ),
    op(
        "mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
        F::Reduction(Reduction::Mean),
        "mean over dims (f32 accumulation), keepdim",
    ),
    op(
        "amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
        F::Reduction(Reduction::Amax),
        "max over dims, keepdim",
    ),
    op(
        "_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
        F::Softmax(Softmax::Softmax),
        "online softmax along a dim, two passes per row",
    ),
    op(
        "_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
        F::Softmax(Softmax::LogSoftmax),
        "online log-softmax along a dim, two passes per row",
    ),
    op(
        "_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
        F::Softmax(Softmax::Backward),
        "y·(g − Σ g·y) along a dim",
    ),
    op(
        "native_layer_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)",
        F::Norm(Norm::Layer),
        "(out, mean, rstd), one-pass Chan statistics in f32",
    ),
    op(
        "_fused_rms_norm(Tensor input, int[] normalized_shape, Tensor? weight, float? eps) -> (Tensor, Tensor)",
        F::Norm(Norm::Rms),
        "(out, rstd) in f32",
    ),
    op(
        "native_layer_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
        F::NormBackward,
        "(grad_input, grad_weight, grad_bias): a row kernel and a column kernel",
    ),
    op(
        "cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
        F::Cumsum,
        "prefix sums along a dim: a triangular dot per block, f32 carry",
    ),
    op(
        "mm(Tensor self, Tensor mat2) -> Tensor",
        F::Matmul(Matmul::Mm),
        "blocked matmul, f32 scratch accumulator",
    ),
    op(
        "bmm(Tensor self, Tensor mat2) -> Tensor",
        F::Matmul(Matmul::Bmm),
        "batched blocked matmul",
    ),
    op(
        "addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
        F::Matmul(Matmul::Addmm),
        "beta·self + alpha·(a @ b); self a row bias or a full array",
    ),
    op(
        "index_select(Tensor self, int dim, Tensor index) -> Tensor",
        F::Gather(Gather::IndexSelect),
        "gather along a dim, indices prefetched",
    ),
    op(
        "embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
        F::Gather(Gather::Embedding),
        "rows of a [v, d] table by indices",
    ),
    op(
        "permute(Tensor self, int[] dims) -> Tensor",
        F::Permute(Permute::Permute),
        "materialised permutation: ≤ rank−1 batched tile transposes",
    ),
    op(
        "transpose.int(Tensor self, int dim0, int dim1) -> Tensor",
        F::Permute(Permute::Transpose),
        "materialised transpose of two dims",
    ),
    op(
        "cat(Tensor[] tensors, int dim=0) -> Tensor",
        F::Cat,
        "concatenation as prefetch-driven row scatters into one output",
    ),
    // Convolutional networks (conv.rs, batch_norm.rs, pool.rs).
    op(
        "convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
        F::Conv,
        "1-D/2-D convolution: im2col gather + matmul, channels-last; groups one by one",
    ),
    op(
        "convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
        F::ConvBackward,
        "(grad_input, grad_weight, grad_bias) as output_mask asks: matmuls, col2im gather-sum",
    ),
    op(
        "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
        F::BatchNorm,
        "(out, save_mean, save_invstd), channels as rows; no in-place running-stat update",
    ),
    op(
        "_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
        F::BatchNormFunctional,
        "batch norm returning the updated running statistics (unbiased variance)",
    ),
    op(
        "native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool train, float eps, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
        F::BatchNormBackward,
        "(grad_input, grad_weight, grad_bias), training or eval",
    ),
    op(
        "max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
        F::MaxPool,
        "(out, indices) over window taps, NaN-propagating, first maximum wins",
    ),
    op(
        "max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor",
        F::MaxPoolBackward,
        "gradient to each window's saved maximum, as a gather-sum per input pixel",
    ),
    op(
        "avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
        F::AvgPool,
        "window tap sums over ATen's divisor (count_include_pad, divisor_override)",
    ),
    op(
        "avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor",
        F::AvgPoolBackward,
        "grad over the divisor, summed per input pixel over the windows holding it",
    ),
    // Losses, backward and factory operators of a transformer's training step.
    op(
        "nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) -> (Tensor output, Tensor total_weight)",
        F::NllLoss(false),
        "(loss, total_weight): −x[i, t_i] per row, then sum or mean; weight=None",
    ),
    op(
        "nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index, Tensor total_weight) -> Tensor",
        F::NllLoss(true),
        "−grad (/ total_weight for mean) at each row's target column, 0 elsewhere",
    ),
    op(
        "_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor",
        F::Softmax(Softmax::LogBackward),
        "g − exp(y)·Σ g along a dim",
    ),
    op(
        "_safe_softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
        F::Softmax(Softmax::Safe),
        "softmax along a dim, rows −∞ throughout giving 0",
    ),
    op(
        "tanh_backward(Tensor grad_output, Tensor output) -> Tensor",
        F::Backward(Backward::Tanh),
        "grad·(1 − y²)",
    ),
    op(
        "full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
        F::Factory(Factory::Full),
        "a tensor filled with a run-time scalar (f32, bf16, i32); zeros/ones/*_like map here",
    ),
    op(
        "arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
        F::Factory(Factory::Arange),
        "start + i·step (f32, bf16, i32)",
    ),
    op(
        "clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
        F::Copy(None),
        "a row-major copy",
    ),
    op(
        "_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor",
        F::Copy(Some(1)),
        "a row-major copy converted to dtype (f32 ↔ bf16 round to nearest even)",
    ),
    op(
        "embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, bool scale_grad_by_freq) -> Tensor",
        F::EmbeddingBackward,
        "the table's gradient as one-hot(indices)ᵀ @ grad, one-hot blocks made in the kernel",
    ),
    op(
        "eq.Scalar(Tensor self, Scalar other) -> Tensor",
        F::Compare(Compare::Eq),
        "x == s (bool)",
    ),
    op(
        "ne.Scalar(Tensor self, Scalar other) -> Tensor",
        F::Compare(Compare::Ne),
        "x != s (bool)",
    ),
    op(
        "lt.Scalar(Tensor self, Scalar other) -> Tensor",
        F::Compare(Compare::Lt),
        "x < s (bool)",
    ),
    op(
        "le.Scalar(Tensor self, Scalar other) -> Tensor",
        F::Compare(Compare::Le),
        "x <= s (bool)",
    ),
    op(
        "gt.Scalar(Tensor self, Scalar other) -> Tensor",
        F::Compare(Compare::Gt),
        "x > s (bool)",
    ),
    op(
        "ge.Scalar(Tensor self, Scalar other) -> Tensor",
        F::Compare(Compare::Ge),
        "x >= s (bool)",
    ),
    op(
        "masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
        F::MaskedFill,
        "where(mask, value, self), the mask broadcasting",
    ),
    op(
        "masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor",
        F::MaskedFill,
        "where(mask, value, self) with a one-element value",
    ),
    op(
        "bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor",
        F::Bernoulli,
        "1 with probability p (tpukit's counter-based generator, seeded from torch's)",
    ),
    op(
        "_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, float dropout_p=0., bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) -> (Tensor output, Tensor logsumexp)",
        F::Attention(false),
        "(out, logsumexp): bmm, causal mask, softmax, bmm in f32",
    ),
    op(
        "_scaled_dot_product_flash_attention_for_cpu_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, Tensor out, Tensor logsumexp, float dropout_p, bool is_causal, *, Tensor? attn_mask=None, float? scale=None) -> (Tensor grad_query, Tensor grad_key, Tensor grad_value)",
        F::Attention(true),
        "(dq, dk, dv) from the logsumexp: bmm and the softmax backward in f32",
    ),
    op(
        "constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor",
        F::Pad,
        "padding as cat of fills and self (f32, bf16, i32)",
    ),
    op(
        "tril(Tensor self, int diagonal=0) -> Tensor",
        F::Triangle(Triangle::Lower),
        "the lower triangle of the last two dims, the rest 0",
    ),
    op(
        "triu(Tensor self, int diagonal=0) -> Tensor",
        F::Triangle(Triangle::Upper),
        "the upper triangle of the last two dims, the rest 0",
    ),
];

impl Op {
    /// Whether argument `i` may be given as a [`crate::Value::Transposed`] (read in place as
    /// it lies): a product's operands.
    pub fn reads_transposed(&self, i: usize) -> bool {
        matches!(self.family, F::Matmul(m) if m.operands().contains(&i))
    }

    /// `aten.<name>.<overload>` (`.default` when the schema names none).
    pub fn name(&self) -> String {
        let head = &self.schema[..self.schema.find('(').expect("a schema has arguments")];
        if head.contains('.') {
            format!("aten.{head}")
        } else {
            format!("aten.{head}.default")
        }
    }

    /// The meaning of each extent of the problem shape [`Op::instantiate`] takes: the
    /// symbols of the operator's main kernel.
    pub fn shape(&self) -> &'static [&'static str] {
        match self.family {
            F::Reduction(_)
            | F::Softmax(_)
            | F::Norm(_)
            | F::NormBackward
            | F::Cumsum
            | F::NllLoss(_)
            | F::Attention(_) => &["m", "n"],
            F::Matmul(Matmul::Bmm) => &["b", "m", "k", "n"],
            F::Matmul(_) => &["m", "k", "n"],
            F::Gather(_) => &["rows", "inner", "k"],
            F::Permute(_) => &["a", "b", "c"],
            F::Cat => &["rows", "inner", "total"],
            F::Conv
            | F::ConvBackward
            | F::MaxPool
            | F::MaxPoolBackward
            | F::AvgPool
            | F::AvgPoolBackward => &["p", "t", "r", "c"],
            F::BatchNorm | F::BatchNormFunctional | F::BatchNormBackward => &["m", "n"],
            _ => &["n"],
        }
    }

    /// Every kernel the operator launches on tensors of `dtype` (f32 or bf16), its main
    /// kernel first.
    pub fn kernels(&self, dtype: DType) -> Result<Vec<Prepared>> {
        if !crate::promote::served(dtype) {
            return Err(BlasError::new(
                &self.name(),
                format!("has no {dtype} variant (tpuBLAS serves f32 and bf16)"),
            )
            .with_kind(ErrorKind::DType));
        }
        match self.family {
            F::Unary(u) => u.kernels(dtype),
            F::Binary(b) => b.kernels(dtype),
            F::Scalar(b) => b.scalar_kernels(dtype),
            F::Where => Ok(vec![elementwise::where_kernel(dtype)?]),
            F::Clamp => Ok(vec![elementwise::clamp_kernel(dtype)?]),
            F::Ternary(t) => Ok(vec![t.kernel(dtype)?]),
            F::Backward(b) => b.kernels(dtype),
            F::Reduction(r) => r.kernels(dtype),
            F::Softmax(s) => s.kernels(dtype),
            F::Norm(n) => n.kernels(dtype),
            F::NormBackward => norm_backward::kernels(dtype),
            F::Cumsum => scan::kernels(dtype),
            F::Matmul(m) => m.kernels(dtype),
            F::Gather(_) => Ok(vec![crate::indexing::kernel(dtype)?]),
            F::Permute(_) => copy::kernels(dtype),
            F::Cat => concat::kernels(dtype),
            F::Conv => conv::kernels(dtype),
            F::ConvBackward => conv::backward_kernels(dtype),
            F::BatchNorm | F::BatchNormFunctional => batch_norm::kernels(dtype),
            F::BatchNormBackward => batch_norm::backward_kernels(dtype),
            F::MaxPool => pool::kernels(dtype),
            F::MaxPoolBackward => pool::backward_kernels(dtype),
            F::AvgPool | F::AvgPoolBackward => avg_pool::kernels(dtype),
            F::NllLoss(false) => loss::forward_kernels(dtype),
            F::NllLoss(true) => loss::backward_kernels(dtype),
            F::Factory(f) => f.kernels(dtype),
            F::Copy(_) => cast::kernels(dtype),
            F::EmbeddingBackward => Ok(vec![embedding_backward::kernel(dtype)?]),
            F::Compare(c) => Ok(vec![c.kernel(dtype)?]),
            F::MaskedFill => Ok(vec![elementwise::where_kernel(dtype)?]),
            F::Bernoulli => Ok(vec![random::kernel(dtype)?]),
            F::Attention(_) => attention::kernels(dtype),
            F::Pad => pad::kernels(dtype),
            F::Triangle(_) => Triangle::kernels(dtype),
        }
    }

    /// The main kernel for a problem `shape` (one extent per [`Op::shape`] name) and
    /// `dtype`, with the bindings of its symbols (what `tpukit lower` lowers).
    pub fn instantiate(&self, shape: &[usize], dtype: DType) -> tpukit::dsl::Result<Instance> {
        let names = self.shape();
        if shape.len() != names.len() {
            return Err(tpukit::dsl::Error::new(format!(
                "{} takes a shape {} ({} extents), got {} extents",
                self.name(),
                names.join("x"),
                names.len(),
                shape.len()
            ))
            .with_kind(ErrorKind::Shape));
        }
        let main = self.kernels(dtype)?;
        let kernel = main[0].kernel().clone();
        let bindings = names
            .iter()
            .map(|s| s.to_string())
            .zip(shape.iter().copied())
            .collect();
        Ok(Instance { kernel, bindings })
    }

    /// The operator on host arrays (on `Device::Cpu`, or the device of [`crate::on_device`]),
    /// arguments in the schema's order.
    pub fn run(&self, args: &[Value]) -> Result<Vec<HostArray>> {
        let one = |x: Result<HostArray>| x.map(|x| vec![x]);
        let name = self.name();
        let a = Args::new(&name, args);
        match self.family {
            F::Unary(u) => {
                let u = match (u, a.str_or(1, "none")?) {
                    (Unary::Gelu, "tanh") => Unary::GeluTanh,
                    (Unary::Gelu, "none") => Unary::Gelu,
                    (Unary::Gelu, other) => {
                        return Err(a.err(format!("unknown approximate='{other}'")));
                    }
                    (u, _) => u,
                };
                one(elementwise::unary(u, a.tensor(0)?))
            }
            F::Binary(b) => one(elementwise::binary(
                b,
                a.tensor(0)?,
                a.tensor(1)?,
                a.scalar_or(2, 1.0)?,
            )),
            F::Scalar(b) => {
                if args.len() < 2 || args[1] == Value::None {
                    return Err(a.err("the scalar operand is missing"));
                }
                one(elementwise::binary_scalar(
                    b,
                    a.tensor(0)?,
                    a.scalar_or(1, f64::NAN)?,
                    a.scalar_or(2, 1.0)?,
                ))
            }
            F::Where => one(elementwise::where_(
                a.tensor(0)?,
                a.tensor(1)?,
                a.tensor(2)?,
            )),
            F::Ternary(t) => {
                let n = t.tensors();
                let tensors = (0..n).map(|i| a.tensor(i)).collect::<Result<Vec<_>>>()?;
                one(t.run(&tensors, a.scalar_or(n, 1.0)?))
            }
            F::Clamp => one(elementwise::clamp(
                a.tensor(0)?,
                a.opt_scalar(1)?,
                a.opt_scalar(2)?,
            )),
            F::Backward(Backward::Threshold) => one(elementwise::backward(
                Backward::Threshold,
                a.tensor(0)?,
                a.tensor(1)?,
                a.scalar_or(2, 0.0)?,
            )),
            F::Backward(Backward::Tanh) => one(elementwise::backward(
                Backward::Tanh,
                a.tensor(0)?,
                a.tensor(1)?,
                0.0,
            )),
            F::Backward(_) => {
                let form = match a.str_or(2, "none")? {
                    "none" => Backward::Gelu,
                    "tanh" => Backward::GeluTanh,
                    other => return Err(a.err(format!("unknown approximate='{other}'"))),
                };
                one(elementwise::backward(form, a.tensor(0)?, a.tensor(1)?, 0.0))
            }
            F::Reduction(r) => r.run(args),
            F::Softmax(s) => s.run(args),
            F::Norm(n) => n.run(args),
            F::NormBackward => norm_backward::run(args),
            F::Cumsum => scan::run(args),
            F::Matmul(m) => m.run(args),
            F::Gather(g) => g.run(args),
            F::Permute(p) => p.run(args),
            F::Cat => concat::run(args),
            F::Conv => conv::run(args),
            F::ConvBackward => conv::run_backward(args),
            F::BatchNorm => batch_norm::run(args),
            F::BatchNormFunctional => batch_norm::run_functional(args),
            F::BatchNormBackward => batch_norm::run_backward(args),
            F::MaxPool => pool::run(args),
            F::MaxPoolBackward => pool::run_backward(args),
            F::AvgPool => avg_pool::run(args),
            F::AvgPoolBackward => avg_pool::run_backward(args),
            F::NllLoss(false) => loss::forward(args),
            F::NllLoss(true) => loss::backward(args),
            F::Factory(f) => f.run(args),
            F::Copy(dtype_arg) => cast::run(&name, args, dtype_arg),
            F::EmbeddingBackward => embedding_backward::run(args),
            F::Compare(c) => c.run(args),
            F::MaskedFill => compare::masked_fill(&name, args),
            F::Bernoulli => random::run(args),
            F::Attention(false) => attention::forward(args),
            F::Attention(true) => attention::backward(args),
            F::Pad => pad::run(args),
            F::Triangle(t) => t.run(args),
        }
    }
}

/// Every operator, by family.
pub fn ops() -> &'static [Op] {
    OPS
}

/// The operator called `name` (`aten.add.Tensor`; the `aten.` prefix and a `.default`
/// overload may be left out).
pub fn find(name: &str) -> Option<&'static Op> {
    let n = name.strip_prefix("aten.").unwrap_or(name);
    let by_name = by_name();
    if n.contains('.') {
        by_name.get(n).copied()
    } else {
        by_name.get(format!("{n}.default").as_str()).copied()
    }
}

/// Every operator by its name without the `aten.` prefix (`add.Tensor`, `neg.default`),
/// made once: [`find`] runs at every call from a host.
fn by_name() -> &'static std::collections::HashMap<&'static str, &'static Op> {
    static BY_NAME: std::sync::OnceLock<std::collections::HashMap<&'static str, &'static Op>> =
        std::sync::OnceLock::new();
    BY_NAME.get_or_init(|| {
        OPS.iter()
            .map(|o| {
                let name: &'static str = o.name().leak();
                (&name["aten.".len()..], o)
            })
            .collect()
    })
}

/// Every distinct kernel the operators launch on tensors of `dtype`, each named `OP#I` after
/// the first operator declaring it (kernel `I` of [`Op::kernels`]), in table order: what
/// bundles precompile and the conformance suite compiles.
pub fn kernel_ids(dtype: DType) -> Result<Vec<(String, Prepared)>> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for op in OPS {
        for (i, kernel) in op.kernels(dtype)?.into_iter().enumerate() {
            if seen.insert(kernel.hash()) {
                out.push((format!("{}#{i}", op.name()), kernel));
            }
        }
    }
    Ok(out)
}

/// Runs the operator `name` on `args`.
pub fn run(name: &str, args: &[Value]) -> Result<Vec<HostArray>> {
    let op = find(name).ok_or_else(|| BlasError::new(name, "no such tpuBLAS operator"))?;
    op.run(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_schemas() {
        assert_eq!(find("add.Tensor").unwrap().name(), "aten.add.Tensor");
        assert_eq!(find("aten.neg").unwrap().name(), "aten.neg.default");
        assert_eq!(find("_softmax").unwrap().shape(), ["m", "n"]);
        let mut names: Vec<String> = OPS.iter().map(Op::name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), OPS.len(), "operator names are unique");
    }
}
