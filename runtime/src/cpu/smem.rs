//! Private copies of the prefetch operands a kernel writes (see `tpukit_dsl::smem`) and of
//! its semaphore inputs (`tpukit_dsl::dma`): the caller's arrays (XLA's buffers, a user's
//! numpy array) are never written.

use crate::{RuntimeError, alloc};
use tpukit_dsl::{Kernel, OperandId};

/// Copies each operand of `written` (prefetch operands or semaphore inputs, whose extents start at `dims[first]`
/// in the concatenated `dims`) into a new buffer and points `base` at it. The buffers are
/// returned: they must outlive every use of `base`.
///
/// # Safety
/// `base[id]` of each written operand addresses its row-major contents (dtype and extents as
/// in `dims`), readable for the call.
pub(super) unsafe fn private_copies(
    kernel: &Kernel,
    written: &[OperandId],
    dims: &[i64],
    base: &mut [usize],
) -> Result<Vec<Vec<u64>>, RuntimeError> {
    let mut copies = Vec::with_capacity(written.len());
    for &id in written {
        let i = id.0 as usize;
        let o = kernel.operand(id);
        let first: usize = kernel.operands[..i].iter().map(|o| o.shape.len()).sum();
        let shape = dims[first..first + o.shape.len()]
            .iter()
            .map(|&d| d as usize);
        let what = format!("the kernel's copy of {} `{}`", o.role.name(), o.name);
        let bytes = tpukit_dsl::buffer_bytes(o.dtype, shape).ok_or_else(|| {
            RuntimeError::new(&kernel.name, format!("{what} is too large"))
                .with_kind(tpukit_dsl::ErrorKind::Memory)
        })?;
        let mut copy = alloc::zeroed::<u64>(bytes.div_ceil(8).max(1), &what)?;
        // SAFETY: the source holds `bytes` bytes (the caller's contract); the copy at least
        // as many, and the two do not overlap (the copy is new).
        unsafe {
            std::ptr::copy_nonoverlapping(
                base[i] as *const u8,
                copy.as_mut_ptr() as *mut u8,
                bytes,
            );
        }
        base[i] = copy.as_mut_ptr() as usize;
        copies.push(copy);
    }
    Ok(copies)
}
