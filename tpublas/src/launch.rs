//! How tpuBLAS makes and launches its kernels: each kernel is built, verified and hashed
//! once per process ([`memo`]), and launched through one place that can also record what it
//! launched, on `Device::Cpu` unless the caller chose another device ([`on_device`]).
//!
//! Recording is how the tests check the invariant bundles rely on: every kernel an operator
//! launches is one of the kernels it declares ([`crate::Op::kernels`]), so a bundle built
//! from the declarations serves every first call. Outside [`record`] it costs one
//! thread-local read per launch.

use crate::BlasError;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, OnceLock};
use tpukit::dsl::{DType, Kernel, KernelHash};
use tpukit::prelude::*;

/// A kernel ready to launch many times.
pub type Prepared = Arc<tpukit::Prepared>;

/// The kernel `build` makes, prepared once per process for `recipe`: the constructor's name
/// and arguments (`("softmax", Softmax::Softmax, dtype, out)`), which must decide the kernel.
/// Building, verifying and hashing a kernel costs up to a few hundred microseconds, more than
/// launching a small one.
pub(crate) fn memo(
    recipe: impl Debug,
    build: impl FnOnce() -> Result<Kernel, BlasError>,
) -> Result<Prepared, BlasError> {
    static MADE: OnceLock<Mutex<HashMap<String, Prepared>>> = OnceLock::new();
    let made = MADE.get_or_init(Default::default);
    let key = format!("{recipe:?}");
    if let Some(k) = made.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(k.clone());
    }
    let clock = std::time::Instant::now();
    let kernel = build()?;
    let built = clock.elapsed();
    let k = Arc::new(tpukit::Prepared::new(kernel)?);
    if std::env::var_os("TPUKIT_TIMINGS").is_some() {
        eprintln!(
            "tpublas: `{}`: built in {built:?}, verified and hashed in {:?}",
            k.kernel().name,
            clock.elapsed() - built
        );
    }
    let mut made = made.lock().unwrap_or_else(|e| e.into_inner());
    Ok(made.entry(key).or_insert(k).clone())
}

thread_local! {
    static RECORDED: RefCell<Option<Vec<(String, KernelHash)>>> = const { RefCell::new(None) };
    static TRACED: RefCell<Option<Vec<Traced>>> = const { RefCell::new(None) };
    static DEVICE: Cell<Device> = const { Cell::new(Device::Cpu) };
}

/// The device operators called on this thread launch their kernels on.
pub fn device() -> Device {
    DEVICE.with(Cell::get)
}

/// Runs `f` with the operators it calls on this thread launching their kernels on `device`
/// (`Device::Interpret` computes exactly and checks every access: for checking an operator
/// against the compiled backend). Outside, operators run on `Device::Cpu`.
pub fn on_device<T>(device: Device, f: impl FnOnce() -> T) -> T {
    /// Puts the outer device back, also when `f` panics.
    struct Restore(Device);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEVICE.with(|d| d.set(self.0));
        }
    }
    let _outer = Restore(DEVICE.with(|d| d.replace(device)));
    f()
}

fn note(kernel: &Prepared) {
    RECORDED.with(|r| {
        if let Some(seen) = r.borrow_mut().as_mut() {
            seen.push((kernel.kernel().name.clone(), kernel.hash()));
        }
    });
}

/// Builds, verifies and hashes one small kernel, so the first call of an operator does not
/// also pay for the first use of that code in the process (about 0.15 ms).
pub fn warm_up() -> Result<(), BlasError> {
    crate::Unary::Neg.kernel(DType::F32).map(drop)
}

/// Runs `f` and returns its result with the `(name, structural hash)` of every kernel it
/// launched on this thread, in launch order.
pub fn record<T>(f: impl FnOnce() -> T) -> (T, Vec<(String, KernelHash)>) {
    let outer = RECORDED.with(|r| r.replace(Some(Vec::new())));
    let result = f();
    let seen = RECORDED.with(|r| r.replace(outer)).unwrap_or_default();
    (result, seen)
}

/// One launch seen by [`trace`]: the kernel, its inputs and its outputs as the launch left
/// them (clones: they share the caller's storage, so a trace must be dropped before borrowed
/// memory is released; an output held here keeps its memory from being reused by a later
/// array of the traced call, and a later write to it copies it first), and, for a launch
/// into outputs the caller passed ([`into`]), what those held before it.
pub struct Traced {
    pub kernel: Prepared,
    pub inputs: Vec<HostArray>,
    pub outputs: Vec<HostArray>,
    pub into: Option<Vec<Before>>,
}

/// What an output a launch wrote into ([`into`]) held before the launch: its memory's
/// address and size, and whether every byte of it was zero.
#[derive(Copy, Clone, Debug)]
pub struct Before {
    pub address: usize,
    pub size: usize,
    pub zero: bool,
}

impl Before {
    fn of(a: &HostArray) -> Before {
        let size = a.size_bytes();
        // SAFETY: a row-major array's `size` bytes from its first element are its elements
        // (not read when there are none: the address may then be null).
        let zero = size == 0
            || a.is_standard_layout()
                && unsafe { std::slice::from_raw_parts(a.data_ptr(), size) }
                    .iter()
                    .all(|&b| b == 0);
        Before {
            address: a.data_ptr() as usize,
            size,
            zero,
        }
    }
}

/// Runs `f` and returns its result with every launch it made on this thread, in order.
pub fn trace<T>(f: impl FnOnce() -> T) -> (T, Vec<Traced>) {
    let outer = TRACED.with(|t| t.replace(Some(Vec::new())));
    let result = f();
    let seen = TRACED.with(|t| t.replace(outer)).unwrap_or_default();
    (result, seen)
}

/// Whether a [`trace`] is active on this thread.
fn tracing() -> bool {
    TRACED.with(|t| t.borrow().is_some())
}

/// Notes a launch in the active [`trace`], if any.
fn traced(
    kernel: &Prepared,
    inputs: &[&HostArray],
    outputs: &[HostArray],
    into: Option<Vec<Before>>,
) {
    TRACED.with(|t| {
        if let Some(seen) = t.borrow_mut().as_mut() {
            seen.push(Traced {
                kernel: kernel.clone(),
                inputs: inputs.iter().map(|&a| a.clone()).collect(),
                outputs: outputs.to_vec(),
                into,
            });
        }
    });
}

/// Runs `kernel` on `inputs` and returns its outputs.
pub(crate) fn all(kernel: &Prepared, inputs: &[&HostArray]) -> Result<Vec<HostArray>, BlasError> {
    note(kernel);
    let outs = launch(&**kernel, device(), inputs)?;
    traced(kernel, inputs, &outs, None);
    Ok(outs)
}

/// Runs a kernel with one output and returns it.
pub(crate) fn one(kernel: &Prepared, inputs: &[&HostArray]) -> Result<HostArray, BlasError> {
    Ok(all(kernel, inputs)?.remove(0))
}

/// Runs `kernel` writing into `outputs` (which keep what the kernel does not store).
pub(crate) fn into(
    kernel: &Prepared,
    inputs: &[&HostArray],
    outputs: &mut [HostArray],
) -> Result<(), BlasError> {
    note(kernel);
    let before = tracing().then(|| outputs.iter().map(Before::of).collect());
    launch_into(&**kernel, device(), inputs, outputs)?;
    if before.is_some() {
        traced(kernel, inputs, outputs, before);
    }
    Ok(())
}
