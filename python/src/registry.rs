//! The process-wide table of kernels that custom calls run: Python registers a kernel when it
//! builds a `stablehlo.custom_call @tpukit_kernel` and puts the id it gets back in the call's
//! `kernel` attribute; the FFI handler ([`crate::ffi`]) looks it up on every call.
//!
//! Entries are never removed (a compiled XLA program may call them for the life of the
//! process) and never change: an id always means the same kernel, device and aliasing.
//! Registering the same kernel, device and aliasing again returns the same id.
//!
//! An id does not depend on the process: it is a fingerprint of the kernel's structural
//! hash (SHA-256 of its printed IR), device, aliasing and debug mode ([`fingerprint`]). So
//! a program that outlives the process (`jax.export` serialized, JAX's persistent compilation
//! cache) never runs another kernel than the one it was built with: in another process its id
//! means the same kernel or, until the same kernel is registered there, nothing (the handler's
//! error says so).

use pyo3::ffi as pyffi;
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use tpukit::runtime::RuntimeError;
use tpukit::runtime::{RawArray, launch_raw};
use tpukit::{Device, HostArray, LaunchOptions, Launchable, Prepared};
use tpukit_dsl::{ErrorKind, KernelHash, Role};

use crate::array;
use crate::error::{self, TpukitError, guard};
use crate::ffi;
use crate::in_place;
use crate::kernel::PyKernel;

/// One kernel a custom call runs.
pub struct Entry {
    /// Verified and hashed once, at registration.
    kernel: Prepared,
    hash: KernelHash,
    device: Device,
    /// For each output, the input whose contents it starts with (Pallas'
    /// `input_output_aliases`, outputs indexed in kernel order, inputs counting the prefetch
    /// operands); other outputs start zero-filled, as [`tpukit::launch`] makes them (except
    /// those the compiled kernel provably writes whole, as there).
    aliases: Vec<Option<usize>>,
    /// Debug mode (see `tpukit::LaunchOptions::debug`), also on when `TPUKIT_DEBUG` is set.
    debug: bool,
}

impl Entry {
    /// Runs the kernel on `inputs` (prefetch operands, then inputs) into `outputs`, which it
    /// first sets to their initial contents (their aliased input's, or zeros unless the kernel
    /// writes them whole, see [`tpukit::launch`]). On `cpu` the
    /// kernel reads and writes the arrays in place; the interpreter works on copies.
    ///
    /// An aliased output may be its input's very memory (XLA ran the call in place, see
    /// [`in_place`]): the kernel then reads that input as it was before the call.
    ///
    /// # Safety
    /// As for [`tpukit::launch_raw`]: each array's memory holds its dtype and shape,
    /// row-major, for the call; outputs are writable and overlap nothing else, except that an
    /// aliased output may be exactly its input's memory.
    pub unsafe fn run(
        &self,
        inputs: &[RawArray],
        outputs: &[RawArray],
    ) -> Result<(), RuntimeError> {
        let name = &Launchable::kernel(&self.kernel).name;
        if outputs.len() != self.aliases.len() {
            return Err(RuntimeError::new(
                name,
                format!(
                    "has {} outputs, the custom call {} results",
                    self.aliases.len(),
                    outputs.len()
                ),
            ));
        }
        let options = LaunchOptions {
            debug: self.debug || LaunchOptions::from_env().debug,
        };
        // Outputs the compiled kernel provably writes whole need no zeros (the results are
        // the same, see `tpukit::launch`): a serial pass over them before the launch.
        let whole = match (self.device, options.debug) {
            (Device::Cpu, false) => self.kernel.whole_outputs(),
            _ => Default::default(),
        };
        for (i, (out, alias)) in outputs.iter().zip(&self.aliases).enumerate() {
            let bytes = size_bytes(out);
            match alias.map(|a| inputs.get(a)) {
                // XLA may give an empty array no address: nothing to set.
                _ if bytes == 0 => {}
                None if whole.get(i) == Some(&true) => {}
                // SAFETY: `out` holds `bytes` writable bytes.
                None => unsafe { std::ptr::write_bytes(out.data, 0, bytes) },
                Some(Some(input)) if input.dtype == out.dtype && input.shape == out.shape => {
                    // Run in place by XLA, the output already holds the input.
                    if !in_place::shares(out, input) {
                        // SAFETY: same dtype and shape, so both hold `bytes`; an output shares
                        // no memory with an input but the one it is run in place on.
                        unsafe { std::ptr::copy_nonoverlapping(input.data, out.data, bytes) }
                    }
                }
                Some(_) => {
                    return Err(RuntimeError::new(
                        name,
                        format!("output {i} must have the dtype and shape of the input it aliases"),
                    )
                    .with_kind(ErrorKind::Shape));
                }
            }
        }
        // Inputs an output shares (in place) are read from their contents before the call.
        // SAFETY: the caller's contract.
        let (inputs, _snapshots) = unsafe { in_place::detach(inputs, outputs) };
        let inputs = &inputs[..];
        if self.device == Device::Cpu {
            // SAFETY: the caller's contract; no output overlaps an input any more.
            return unsafe { launch_raw(&self.kernel, inputs, outputs, options) };
        }
        let ins: Vec<HostArray> = inputs.iter().map(|a| unsafe { copy(a) }).collect();
        let mut outs: Vec<HostArray> = outputs.iter().map(|a| unsafe { copy(a) }).collect();
        let refs: Vec<&HostArray> = ins.iter().collect();
        tpukit::launch_into_with(&self.kernel, self.device, &refs, &mut outs, options)?;
        for (out, raw) in outs
            .iter_mut()
            .zip(outputs)
            .filter(|(_, r)| size_bytes(r) > 0)
        {
            out.make_standard_layout();
            // SAFETY: `out` has `raw`'s dtype and shape (checked by the launch), so both hold
            // `size_bytes(raw)` bytes; the host array is tpukit's own.
            unsafe { std::ptr::copy_nonoverlapping(out.data_ptr(), raw.data, size_bytes(raw)) };
        }
        Ok(())
    }
}

pub(crate) fn size_bytes(a: &RawArray) -> usize {
    a.shape.iter().product::<usize>() * a.dtype.size_bytes()
}

/// A host array holding a copy of `a`.
///
/// # Safety
/// `a`'s memory holds its dtype and shape, row-major.
pub(crate) unsafe fn copy(a: &RawArray) -> HostArray {
    let len = size_bytes(a);
    let bytes: &[u8] = if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(a.data, len) }
    };
    array::from_sized_bytes(a.dtype, a.shape, bytes)
}

/// The entries, by id.
static ENTRIES: RwLock<BTreeMap<u64, Arc<Entry>>> = RwLock::new(BTreeMap::new());

/// The entry with id `id`.
pub fn get(id: u64) -> Option<Arc<Entry>> {
    let entries = ENTRIES.read().unwrap_or_else(|e| e.into_inner());
    entries.get(&id).cloned()
}

/// The id of an entry: 64-bit FNV-1a over the kernel's SHA-256, the device's name, the
/// aliasing and the debug flag, its top bit cleared (the custom call carries it as an i64).
/// Deterministic across processes and builds; a collision is refused at registration.
fn fingerprint(hash: &KernelHash, device: Device, aliases: &[Option<usize>], debug: bool) -> u64 {
    let mut bytes = hash.0.to_vec();
    bytes.extend_from_slice(device.name().as_bytes());
    for a in aliases {
        let code = a.map_or(u64::MAX, |i| i as u64);
        bytes.extend_from_slice(&code.to_le_bytes());
    }
    bytes.push(u8::from(debug));
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h & (u64::MAX >> 1)
}

/// Registers `kernel` to run on `device` (`cpu` or `interpret`) from custom calls, with
/// `aliases` (output index → input index: outputs that start as a copy of an input), in
/// debug mode if `debug`, and returns its id (the same id for the same arguments).
#[pyfunction]
#[pyo3(signature = (kernel, device, aliases=BTreeMap::new(), debug=false))]
pub fn ffi_register(
    kernel: &PyKernel,
    device: &str,
    aliases: BTreeMap<usize, usize>,
    debug: bool,
) -> PyResult<u64> {
    guard(Some(&kernel.kernel.name), || {
        let device: Device = device.parse().map_err(TpukitError::new_err)?;
        let k = &kernel.kernel;
        let n_in = k.operands_with_role(Role::Prefetch).count()
            + k.operands_with_role(Role::Input).count();
        let n_out = k.operands_with_role(Role::Output).count();
        if let Some((o, i)) = aliases.iter().find(|(o, i)| **o >= n_out || **i >= n_in) {
            return Err(error::raise(
                ErrorKind::Invalid,
                format!(
                    "kernel `{}`: alias of output {o} to input {i}: it has {n_out} outputs and \
                     {n_in} inputs",
                    k.name
                ),
            ));
        }
        let aliases: Vec<Option<usize>> = (0..n_out).map(|o| aliases.get(&o).copied()).collect();
        let prepared = Prepared::new(k.clone()).map_err(error::runtime)?;
        let hash = Launchable::hash(&prepared);
        let id = fingerprint(&hash, device, &aliases, debug);
        let mut entries = ENTRIES.write().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.get(&id) {
            if e.hash == hash && e.device == device && e.aliases == aliases && e.debug == debug {
                return Ok(id);
            }
            return Err(error::raise(
                ErrorKind::Internal,
                format!(
                    "kernel `{}`: its custom-call id {id} is another kernel's",
                    k.name
                ),
            ));
        }
        entries.insert(
            id,
            Arc::new(Entry {
                kernel: prepared,
                hash,
                device,
                aliases,
                debug,
            }),
        );
        Ok(id)
    })
}

/// The FFI handler as a `PyCapsule` (unnamed, as `jax.ffi.register_ffi_target` takes it).
#[pyfunction]
pub fn ffi_handler(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    guard(None, || {
        let handler: unsafe extern "C" fn(*mut ffi::CallFrame) -> *mut ffi::XlaError = ffi::handler;
        // SAFETY: a capsule of a function pointer that lives as long as the module; no name,
        // no destructor (nothing to free).
        unsafe {
            let capsule =
                pyffi::PyCapsule_New(handler as *mut std::ffi::c_void, std::ptr::null(), None);
            Bound::from_owned_ptr_or_err(py, capsule)
        }
    })
}
