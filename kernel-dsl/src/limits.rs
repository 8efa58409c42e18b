//! The size limit of the buffers a kernel's body works on, and the checked arithmetic that
//! computes their sizes.
//!
//! Backends allocate one buffer per block window (a staging copy of edge blocks), scratch
//! operand and materialised value, per worker thread, sized from the kernel's static shapes.
//! Those shapes come from users (a `BlockSpec`, a `broadcast_to`), so their byte sizes are
//! computed here with checked arithmetic — a size that wraps would let a backend copy past a
//! buffer — and bounded by [`MAX_BUFFER_BYTES`], which the verifier enforces: a kernel it
//! accepts has no buffer whose size overflows, and none a backend would fill for minutes or
//! fail to allocate. A TPU core's VMEM holds at most 128 MiB, so no kernel that runs on a TPU
//! comes near the limit.

use crate::DType;

/// The largest block, scratch buffer or value a kernel may have, in bytes (2 GiB).
pub const MAX_BUFFER_BYTES: usize = 1 << 31;

/// The byte size of a row-major buffer of `dtype` with extents `shape`, or `None` if it does
/// not fit in a `usize`.
pub fn buffer_bytes(dtype: DType, shape: impl IntoIterator<Item = usize>) -> Option<usize> {
    shape
        .into_iter()
        .try_fold(dtype.size_bytes(), |n, d| n.checked_mul(d))
}

/// Checks that a buffer of `dtype` and `shape` is within [`MAX_BUFFER_BYTES`]; the error
/// names it as `what`.
pub(crate) fn check_buffer(what: &str, dtype: DType, shape: &[usize]) -> Result<(), String> {
    match buffer_bytes(dtype, shape.iter().copied()) {
        Some(n) if n <= MAX_BUFFER_BYTES => Ok(()),
        size => Err(format!(
            "{what} of shape {shape:?} ({dtype}) is {}; blocks, scratch buffers and values are \
             limited to {MAX_BUFFER_BYTES} bytes (2 GiB)",
            size.map_or_else(
                || "more bytes than a usize holds".to_string(),
                |n| format!("{n} bytes")
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_that_overflow_are_none() {
        assert_eq!(buffer_bytes(DType::F32, [10, 20]), Some(800));
        assert_eq!(buffer_bytes(DType::F32, [1 << 31, 1 << 31]), None);
        assert_eq!(buffer_bytes(DType::I8, []), Some(1));
        assert!(check_buffer("block", DType::F32, &[65536, 65536]).is_err());
        assert!(check_buffer("block", DType::F32, &[1 << 31, 1 << 31]).is_err());
        assert!(check_buffer("block", DType::BF16, &[1 << 15, 1 << 15]).is_ok());
    }
}
