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
    }
}
