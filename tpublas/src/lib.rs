//! tpuBLAS: ATen operators written as `#[tpu_kernel]`s, with ATen's semantics, for f32 and
//! bf16, shape-generic (array extents are symbols bound at launch, edges masked by the IR's
//! edge-block semantics: one compiled kernel serves every shape).
//!
//! This first slice holds the elementwise operators ([`elementwise`]): every ATen pointwise
//! op runs as one 1-D kernel over the flattened (contiguous) tensor, in blocks of
//! [`layout::BLOCK`] elements, computing in f32 whatever the storage dtype (ATen's "opmath")
//! and rounding once. Tensor⊕scalar variants take the scalar as a one-element operand, a run
//! time value, so a new scalar never means a new kernel. [`ops`] lists what exists, by ATen
//! name.

pub mod elementwise;
mod error;
mod layout;
mod promote;

pub use elementwise::{Binary, Unary, binary, binary_scalar, clamp, unary, where_};
pub use error::BlasError;

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
    v
}
