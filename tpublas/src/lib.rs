//! tpuBLAS: ATen operators written as `#[tpu_kernel]`s, with ATen's semantics, for f32 and
//! bf16, shape-generic: array extents are symbols bound at launch and edge blocks are masked
//! by the IR, so one compiled kernel serves every shape of its layout class. Numbers among
//! the arguments (`alpha`, `beta`, `eps`, a Python scalar, a threshold) are run-time
//! operands, so they do not make new kernels either.
//!
//! [`ops`] lists the operators by their ATen schema ([`Op`]): each declares every kernel
//! it may launch ([`Op::kernels`], what bundles precompile and the conformance suite
//! compiles — [`kernel_ids`] names them) and has a host-side `run` on [`Value`] arguments
//! that presents the host arrays to its kernels (flattening, collapsing to rows, moving
//! reduced dims last) and launches them, on `Device::Cpu` unless [`on_device`] says
//! otherwise.
//!
//! Families, one file each: pointwise ([`elementwise`]: 1-D kernels over the flattened
//! tensor), reductions ([`reduction`]), the softmax family ([`softmax`]), norms ([`norm`],
//! [`norm_backward`]), products ([`matmul`]), scans ([`scan`]), gathers ([`indexing`]),
//! permutation copies ([`copy`]) and concatenation ([`mod@concat`]); and what a transformer's
//! training step adds: losses ([`loss`]), attention ([`attention`]), the embedding backward
//! ([`embedding_backward`]), comparisons and `masked_fill` ([`compare`]), triangles
//! ([`triangle`]), padding ([`pad`]), copies and conversions ([`cast`]), factories
//! ([`factory`]) and random masks ([`random`]). Row operators share the
//! `[m, n]` layout of [`rows`]. Every kernel computes in f32 whatever the storage dtype
//! (ATen's opmath) and rounds once.

pub mod attention;
pub mod avg_pool;
pub mod batch_norm;
pub mod cast;
pub mod compare;
pub mod concat;
pub mod conv;
pub mod conv_groups;
pub mod copy;
pub mod elementwise;
pub mod embedding_backward;
mod error;
pub mod factory;
pub mod flash_attention;
pub mod indexing;
mod launch;
mod layout;
pub mod loss;
pub mod matmul;
pub mod norm;
pub mod norm_backward;
pub mod pad;
pub mod plan;
pub mod pool;
mod promote;
pub mod random;
pub mod reduction;
pub mod rows;
pub mod scan;
pub mod softmax;
mod source;
pub mod table;
pub mod taps;
pub mod ternary;
pub mod triangle;
mod value;

pub use elementwise::{Binary, Unary, binary, binary_scalar, clamp, unary, where_};
pub use error::{BlasError, Result};
pub use launch::{Prepared, device, on_device, record, warm_up};
pub use plan::{Init, Plan, Source, run_planned};
pub use source::TpuBlas;
pub use table::{Family, Op, find, kernel_ids, ops, run};
pub use value::Value;
