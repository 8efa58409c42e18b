//! tpukit's runtime: host arrays, the launch API, and the devices that run kernels.
//!
//! Today there is one device, [`Device::Interpret`]: the reference interpreter, which executes
//! any verified kernel with the exact semantics written in `tpukit_dsl`'s crate docs, checks
//! every access, and is what every other backend is tested against.

mod array;
mod device;
mod error;
mod interpret;
mod launch;

pub use array::HostArray;
pub use device::Device;
pub use error::RuntimeError;
pub use launch::{launch, launch_into};
