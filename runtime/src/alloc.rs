//! Fallible, zero-filled allocation of the buffers a launch needs (outputs, workspaces,
//! scratch).
//!
//! Their sizes come from the caller's shapes, so an allocation may be larger than the host
//! can give (a `(2^20, 1) + (1, 2^20)` broadcast is 4 TiB): the infallible `vec![0; n]` would
//! abort the process. These return [`ErrorKind::Memory`] instead. Zeroed memory comes from
//! `alloc_zeroed` (`calloc`), so large buffers are mapped lazily, as `vec![0; n]` would be.

use crate::RuntimeError;
use std::alloc::Layout;
use tpukit_dsl::{ErrorKind, bf16, f16};

/// Element types whose all-zero bit pattern is a valid value (zero, or `false`).
///
/// # Safety
/// Implementors must be plain data for which every all-zero byte string is a valid value.
pub(crate) unsafe trait Zeroable: Copy {}

// SAFETY: zero bytes are 0, 0.0 or false for each of these.
unsafe impl Zeroable for u64 {}
unsafe impl Zeroable for f32 {}
unsafe impl Zeroable for bf16 {}
unsafe impl Zeroable for f16 {}
unsafe impl Zeroable for i32 {}
unsafe impl Zeroable for i8 {}
unsafe impl Zeroable for i16 {}
unsafe impl Zeroable for bool {}

/// The error of an allocation of `bytes` (`None`: more than a `usize` counts) that failed,
/// for the buffer described by `what`.
pub(crate) fn out_of_memory(what: &str, bytes: Option<usize>) -> RuntimeError {
    let size = bytes.map_or_else(
        || "more bytes than the address space holds".to_string(),
        |b| format!("{b} bytes"),
    );
    RuntimeError {
        kind: ErrorKind::Memory,
        message: format!("cannot allocate {what}: {size}"),
    }
}

/// `n` zeros, or an [`ErrorKind::Memory`] error naming `what` if the memory cannot be had.
pub(crate) fn zeroed<T: Zeroable>(n: usize, what: &str) -> Result<Vec<T>, RuntimeError> {
    keep_freed_memory();
    let layout =
        Layout::array::<T>(n).map_err(|_| out_of_memory(what, n.checked_mul(size_of::<T>())))?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
    if ptr.is_null() {
        return Err(out_of_memory(what, Some(layout.size())));
    }
    // SAFETY: `ptr` was allocated by the global allocator with `T`'s alignment and room for
    // exactly `n` elements, all initialised (zero bytes are a valid `T`: `Zeroable`).
    Ok(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

/// `n` words left as the allocator hands them out, for memory that only compiled kernels
/// touch, each word written before it is read (a kernel's workspace, see
/// `cpu::codegen`): no pass over it at all. An [`ErrorKind::Memory`] error naming `what`
/// if the memory cannot be had.
pub(crate) fn uninit(
    n: usize,
    what: &str,
) -> Result<Vec<std::mem::MaybeUninit<u64>>, RuntimeError> {
    // SAFETY: `MaybeUninit` needs no initialisation.
    unsafe { uninit_elements(n, what) }
}

/// `n` elements of `T` left as the allocator hands them out (no pass over the memory), or an
/// [`ErrorKind::Memory`] error naming `what`.
///
/// # Safety
/// Unless `T` is a `MaybeUninit`, the elements are uninitialised: the caller writes every
/// one before anything reads it, and drops the vector unread otherwise.
pub(crate) unsafe fn uninit_elements<T>(n: usize, what: &str) -> Result<Vec<T>, RuntimeError> {
    keep_freed_memory();
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| out_of_memory(what, n.checked_mul(size_of::<T>())))?;
    // SAFETY: the capacity is at least `n`; initialisation is the caller's contract.
    unsafe { v.set_len(n) };
    Ok(v)
}

/// glibc's `mallopt` parameters (`malloc.h`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    use std::ffi::c_int;
    pub const M_TRIM_THRESHOLD: c_int = -1;
    pub const M_MMAP_THRESHOLD: c_int = -3;
    unsafe extern "C" {
        pub fn mallopt(param: c_int, value: c_int) -> c_int;
    }
}

/// The largest block glibc's `malloc` serves from its heap rather than a fresh `mmap`
/// (`mallopt` refuses more: half its 64 MiB heap limit).
pub(crate) const HEAP_BLOCK_MAX: usize = 32 << 20;

/// Freed heap memory glibc keeps for reuse before it returns the top of the heap to the OS.
pub(crate) const KEEP_FREED: usize = 256 << 20;

/// Sets, once per process, glibc's allocator to keep freed memory for the next launch
/// rather than return it to the OS at every `free`.
///
/// Why: a launch allocates its outputs (and copies of inputs it cannot read in place) and
/// frees the previous call's. With glibc's defaults (a dynamic mmap threshold that
/// settles at the largest block freed, and a trim threshold of twice that), freeing three
/// 16 MiB arrays trims the heap, so the next call's arrays are fresh pages again: an
/// elementwise op on 4096×1024 f32 tensors paid 12 000 page faults per call, six times its
/// kernel's time (measured with `getrusage`; `perf` shows `exc_page_fault` and
/// `clear_page_erms` on top). Blocks up to [`HEAP_BLOCK_MAX`] now come from the heap and up to
/// [`KEEP_FREED`] of freed memory is kept. Larger arrays are mapped per call unless the host
/// installs [`crate::LargeBlocks`] (the Python extension does). A no-op on other C libraries.
pub(crate) fn keep_freed_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: `mallopt` only sets allocator parameters; any values are accepted or
        // refused (returning 0), never unsafe.
        unsafe {
            glibc::mallopt(glibc::M_MMAP_THRESHOLD, HEAP_BLOCK_MAX as i32);
            glibc::mallopt(glibc::M_TRIM_THRESHOLD, KEEP_FREED as i32);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_allocations_are_errors() {
        let e = zeroed::<f32>(1 << 60, "a test buffer").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Memory);
        let e = zeroed::<u64>(usize::MAX / 4, "a test buffer").unwrap_err();
        assert!(e.message.contains("more bytes than"), "{e}");
        assert_eq!(zeroed::<i32>(5, "x").unwrap(), vec![0; 5]);
        assert!(zeroed::<bool>(0, "x").unwrap().is_empty());
        assert_eq!(uninit(4, "x").unwrap().len(), 4);
        assert!(uninit(usize::MAX / 4, "a test buffer").is_err());
    }
}
