//! Backends: what a [`Device`](crate::Device) runs kernels with. [`crate::launch`] binds the
//! arrays to the kernel's symbols and checks them, then hands the run to the backend of the
//! device asked for ([`Device::backend`](crate::Device::backend)), the one place a device
//! name meets its implementation.

use crate::{HostArray, LaunchOptions, Launchable, RuntimeError};
use tpukit_dsl::Bindings;

/// A way of running verified kernels on host arrays.
pub trait Backend: Sync {
    /// Runs `kernel` over its whole grid, its symbols bound by `bindings`, reading `inputs`
    /// (the prefetch operands, then the inputs) and writing `outputs` in place. The kernel is
    /// verified and the arrays are checked against its operands and `bindings` (by
    /// [`crate::launch`]).
    fn run(
        &self,
        kernel: &dyn Launchable,
        bindings: &Bindings,
        inputs: &[&HostArray],
        outputs: &mut [HostArray],
        options: LaunchOptions,
    ) -> Result<(), RuntimeError>;
}
