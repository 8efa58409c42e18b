//! An in-place operator's result written into its `self` (`x.add_(y)` in `tpublas.mode()`
//! runs `add(x, y)` from its plan, then this): the bytes of the new tensor copied into the
//! caller's, natively, where the mode's Python code calls `self.copy_(out)`.
//!
//! Only a plain copy is done here: `self` a C-contiguous CPU tensor (its own memory, not a
//! gathered copy) of the result's dtype and shape. A result of another dtype (`bf16.add_(f32)`
//! rounds the f32 sum) or shape (ATen's in-place operators do not broadcast `self`: an error)
//! is left to the Python path, which converts or raises.

use pyo3::prelude::*;

use crate::tensor::Tensor;

/// Copies `out` into `target` if both are tensors read here of one dtype and shape and
/// `target` is C-contiguous; whether it did.
pub fn into_self(target: &Bound<'_, PyAny>, out: &Bound<'_, PyAny>) -> PyResult<bool> {
    let (Some(t), Some(o)) = (Tensor::get(target)?, Tensor::get(out)?) else {
        return Ok(false);
    };
    if !t.in_place() || t.dtype != o.dtype || t.shape != o.shape {
        return Ok(false);
    }
    let n = t.len_bytes();
    if n > 0 {
        // SAFETY: both tensors are held (alive, in place) for the copy; `t.ptr` is the
        // target's own C-contiguous memory of `n` bytes (`in_place`), `o.ptr` `n` readable
        // bytes. A plan's results are new tensors, but `copy` (a memmove) stays right
        // should one ever be its input.
        unsafe { std::ptr::copy(o.ptr.cast_const(), t.ptr, n) };
    }
    Ok(true)
}
