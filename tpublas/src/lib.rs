//! tpuBLAS: ATen operators written as `#[tpu_kernel]`s, with ATen's semantics, for f32 and
//! bf16, shape-generic (array extents are symbols bound at launch, edges masked by the IR's
//! edge-block semantics: one compiled kernel serves every shape).
//!
//! - [`elementwise`]: every ATen pointwise op runs as one 1-D kernel over the flattened
//!   (contiguous) tensor, in blocks of 4096 elements. Tensor⊕scalar variants take the scalar
//!   as a one-element operand, a run-time value, so a new scalar never means a new kernel.
//! - [`rows`]: softmax, log-softmax, layer norm, RMS norm and reductions as row-wise kernels.
//! - [`matmul`]: mm, bmm, addmm (blocked matmul with f32 accumulation), embedding and
//!   index_select (row gather through a scalar-prefetch index map).
//!
//! Every kernel computes in f32 whatever the storage dtype (ATen's "opmath") and rounds once.
//! [`ops`] lists what exists, by ATen name.

pub mod backward;
pub mod copies;
pub mod elementwise;
mod error;
mod kernels;
mod layout;
pub mod matmul;
mod promote;
pub mod rows;

pub use backward::{gelu_backward, softmax_backward_data, threshold_backward};
pub use copies::{cumsum, transpose};
pub use elementwise::{Binary, Unary, binary, binary_scalar, clamp, unary, where_};
pub use error::BlasError;
pub use kernels::{OpKernel, kernels};
pub use matmul::{addmm, bmm, embedding, index_select, mm};
pub use rows::{Reduction, fused_rms_norm, log_softmax, native_layer_norm, reduce, softmax};

/// The ATen operators tpuBLAS implements (`aten.<name>.<overload>`).
pub fn ops() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Unary::ALL.iter().map(|u| u.aten()).collect();
    for b in Binary::ALL {
        v.push(b.aten_tensor());
        if let Some(s) = b.aten_scalar() {
            v.push(s);
        }
    }
    v.extend(["aten.where.self", "aten.clamp.default"]);
    v.extend([
        "aten._softmax.default",
        "aten._log_softmax.default",
        "aten.native_layer_norm.default",
        "aten._fused_rms_norm.default",
    ]);
    v.extend([Reduction::Sum, Reduction::Mean, Reduction::Amax].map(Reduction::aten));
    v.extend([
        "aten.mm.default",
        "aten.bmm.default",
        "aten.addmm.default",
        "aten.embedding.default",
        "aten.index_select.default",
        "aten.transpose.int",
        "aten.cumsum.default",
        "aten.threshold_backward.default",
        "aten.gelu_backward.default",
        "aten._softmax_backward_data.default",
    ]);
    v
}
