//! tpukit's runtime: host arrays, the launch API, and the devices that run kernels.
//!
//! Two devices, each run by a [`Backend`]: [`Device::Interpret`], the reference
//! interpreter, which executes any verified kernel with the exact semantics written in
//! `tpukit_dsl`'s crate docs, checks every access, and is what every other backend is tested
//! against; and [`Device::Cpu`], the same kernels compiled for the host through LLVM
//! ([`cpu`]). [`bundle`]s hold kernels precompiled for every backend.

mod alloc;
mod array;
mod backend;
mod borrowed;
mod bound;
pub mod bundle;
mod coverage;
pub mod cpu;
mod device;
mod error;
mod fork;
mod interpret;
mod large_blocks;
mod launch;
mod overhang;
mod placement;
mod prepared;
mod print;
mod raw;

pub use array::HostArray;
pub use backend::Backend;
pub use bound::BoundLaunch;
pub use device::{Device, LaunchOptions};
pub use error::RuntimeError;
pub use large_blocks::LargeBlocks;
pub use launch::{launch, launch_into, launch_into_with, launch_with};
pub use prepared::{Launchable, Prepared};
pub use raw::{RawArray, launch_borrowed, launch_raw};
