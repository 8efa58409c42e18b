//! How tpuBLAS launches its kernels: on `Device::Cpu`, through one place that can also
//! record what it launched.
//!
//! Recording is how the tests check the invariant bundles rely on: every kernel an operator
//! launches is one of the kernels it declares ([`crate::Op::kernels`]), so a bundle built
//! from the declarations serves every first call. Outside [`record`] it costs one
//! thread-local read per launch.

use crate::BlasError;
use std::cell::RefCell;
use tpukit::dsl::{Kernel, KernelHash};
use tpukit::prelude::*;

thread_local! {
    static RECORDED: RefCell<Option<Vec<(String, KernelHash)>>> = const { RefCell::new(None) };
}

fn note(kernel: &Kernel) {
    RECORDED.with(|r| {
        if let Some(seen) = r.borrow_mut().as_mut() {
            seen.push((kernel.name.clone(), kernel.structural_hash()));
        }
    });
}

/// Runs `f` and returns its result with the `(name, structural hash)` of every kernel it
/// launched on this thread, in launch order.
pub fn record<T>(f: impl FnOnce() -> T) -> (T, Vec<(String, KernelHash)>) {
    let outer = RECORDED.with(|r| r.replace(Some(Vec::new())));
    let result = f();
    let seen = RECORDED.with(|r| r.replace(outer)).unwrap_or_default();
    (result, seen)
}

/// Runs `kernel` on `inputs` and returns its outputs.
pub(crate) fn all(kernel: &Kernel, inputs: &[&HostArray]) -> Result<Vec<HostArray>, BlasError> {
    note(kernel);
    Ok(launch(kernel, Device::Cpu, inputs)?)
}

/// Runs a kernel with one output and returns it.
pub(crate) fn one(kernel: &Kernel, inputs: &[&HostArray]) -> Result<HostArray, BlasError> {
    Ok(all(kernel, inputs)?.remove(0))
}

/// Runs `kernel` writing into `outputs` (which keep what the kernel does not store).
pub(crate) fn into(
    kernel: &Kernel,
    inputs: &[&HostArray],
    outputs: &mut [HostArray],
) -> Result<(), BlasError> {
    note(kernel);
    Ok(launch_into(kernel, Device::Cpu, inputs, outputs)?)
}
