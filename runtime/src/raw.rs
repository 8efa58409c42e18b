//! Launching on memory the caller owns: an embedding runtime's buffers (XLA's, for tpukit's
//! FFI custom call) read and written in place, without copying them into [`HostArray`]s.
//!
//! Only the compiled CPU backend runs on borrowed memory (it needs nothing but addresses);
//! the interpreter works on [`HostArray`]s, so callers copy for it.
//!
//! [`HostArray`]: crate::HostArray

use crate::launch::{Signature, bind, bind_values, new_outputs};
use crate::{HostArray, LaunchOptions, Launchable, RuntimeError, cpu};
use tpukit_dsl::{Bindings, DType, Kernel};

/// An array in memory the caller owns: `shape` elements of `dtype`, row-major and
/// contiguous, at `data`.
#[derive(Clone, Copy, Debug)]
pub struct RawArray<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub data: *mut u8,
}

impl RawArray<'_> {
    fn signature(&self) -> Signature<'_> {
        (self.dtype, self.shape)
    }
}

/// The bindings of `kernel`'s symbols to the extents of `inputs` (and of the outputs with the
/// signatures `outputs`, where given), checked as for any launch, and to the grid values read
/// from `inputs`.
///
/// # Safety
/// As for [`launch_raw`]'s inputs.
unsafe fn bindings(
    kernel: &Kernel,
    inputs: &[RawArray],
    outputs: Option<&[Signature]>,
) -> Result<Bindings, RuntimeError> {
    let ins: Vec<Signature> = inputs.iter().map(RawArray::signature).collect();
    let mut bindings = bind(kernel, &ins, outputs)?;
    // SAFETY: `bind` checked that a grid-value input is a one-element i32 array at `data`.
    bind_values(kernel, &mut bindings, |i| unsafe {
        (inputs[i].data as *const i32).read_unaligned() as i64
    })?;
    Ok(bindings)
}

/// [`crate::launch_into_with`] on the compiled CPU backend, on borrowed memory: reads
/// `inputs` (the prefetch operands, then the inputs) and writes `outputs` in place, whose
/// contents are the outputs' initial values (zero them for [`crate::launch`]'s semantics).
/// Dtypes and shapes are checked against the kernel and bind its symbols, as for any launch.
///
/// # Safety
/// Every array's `data` addresses `product(shape) * dtype.size_bytes()` bytes of row-major
/// elements, valid for the call (for a `bool` array, bytes that are 0 or 1); outputs are
/// writable and overlap no other array, and nothing else accesses them during the call.
pub unsafe fn launch_raw<K: Launchable>(
    kernel: &K,
    inputs: &[RawArray],
    outputs: &[RawArray],
    options: LaunchOptions,
) -> Result<(), RuntimeError> {
    kernel.verify()?;
    let outs: Vec<Signature> = outputs.iter().map(RawArray::signature).collect();
    // SAFETY: the caller's contract.
    let bindings = unsafe { bindings(kernel.kernel(), inputs, Some(&outs))? };
    let in_ptrs: Vec<*const u8> = inputs.iter().map(|a| a.data as *const u8).collect();
    let out_ptrs: Vec<*mut u8> = outputs.iter().map(|a| a.data).collect();
    // SAFETY: the caller's contract, the shapes checked against the kernel by `bind`.
    unsafe {
        cpu::run_at(
            kernel.kernel(),
            kernel.hash(),
            &bindings,
            &in_ptrs,
            &out_ptrs,
            options.debug,
        )
    }
}

/// [`crate::launch_with`] on the compiled CPU backend with borrowed inputs: reads `inputs`
/// (the prefetch operands, then the inputs) in place and returns new outputs, zero-filled
/// before the kernel runs (except those it writes whole, outside debug mode: see
/// [`crate::launch()`]). What a caller holding its arrays in its own memory (Python's
/// buffers) uses to launch without copying them; the outputs are new, so they alias no input.
///
/// # Safety
/// As for [`launch_raw`]'s inputs: each `data` addresses `product(shape) *
/// dtype.size_bytes()` bytes of row-major elements (for `bool`, bytes that are 0 or 1), valid
/// and not written by anyone else for the call.
pub unsafe fn launch_borrowed<K: Launchable>(
    kernel: &K,
    inputs: &[RawArray],
    options: LaunchOptions,
) -> Result<Vec<HostArray>, RuntimeError> {
    kernel.verify()?;
    // SAFETY: the caller's contract.
    let bindings = unsafe { bindings(kernel.kernel(), inputs, None)? };
    let whole = if options.debug {
        Default::default()
    } else {
        kernel.whole_outputs()
    };
    let in_ptrs: Vec<*const u8> = inputs.iter().map(|a| a.data as *const u8).collect();
    let mut outputs = new_outputs(kernel.kernel(), &bindings, &whole, &in_ptrs)?;
    let out_ptrs: Vec<*mut u8> = outputs.iter_mut().map(HostArray::data_ptr_mut).collect();
    // SAFETY: the caller's contract for the inputs; the outputs are new, row-major (made by
    // `try_zeros`) and of the bound shapes.
    unsafe {
        cpu::run_at(
            kernel.kernel(),
            kernel.hash(),
            &bindings,
            &in_ptrs,
            &out_ptrs,
            options.debug,
        )?;
    }
    Ok(outputs)
}
