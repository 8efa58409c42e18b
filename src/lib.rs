//! tpukit: write a TPU kernel once, lower it to Mosaic, run and test it on the CPU.
//!
//! This facade re-exports the three layers a user touches:
//! - [`dsl`]: the kernel IR, its builder and call specs (`tpukit-dsl`);
//! - [`tpu_kernel`]: the attribute macro that turns a Rust function into an IR builder;
//! - [`runtime`]: host arrays and [`launch`] on a [`Device`] (`tpukit-runtime`);
//! - [`catalog`]: the kernels tpukit ships, each with the call spec it is launched with
//!   (`tpukit-catalog`).
//!
//! `use tpukit::prelude::*;` brings in what kernels and their call sites need.

pub use tpukit_catalog as catalog;
pub mod random_kernel;
pub use tpukit_dsl as dsl;
pub use tpukit_macros::tpu_kernel;
pub use tpukit_runtime as runtime;
pub use tpukit_runtime::{
    Device, HostArray, LaunchOptions, Launchable, Prepared, launch, launch_into, launch_into_with,
    launch_with,
};

/// What a kernel file needs: the macro, call-spec types, dtypes, and the launch API.
pub mod prelude {
    pub use crate::dsl::{
        ArraySpec, BlockDim, CallSpec, DType, Dim, Extent, GridAxis, Kernel, SemaphoreKind, bf16,
        f16, grid, prefetch,
    };
    pub use crate::tpu_kernel;
    pub use crate::{
        Device, HostArray, LaunchOptions, Launchable, Prepared, launch, launch_into,
        launch_into_with, launch_with,
    };
}
