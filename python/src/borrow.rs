//! Input arrays read in place: the data of wire triples, borrowed through the buffer protocol
//! for the length of one launch on the compiled CPU backend, so a call copies no input (see
//! `tpukit::runtime::launch_borrowed`), or for one tpuBLAS operator call, as borrowed host
//! arrays ([`host_array`]).
//!
//! An input is borrowed only where the kernel can read it as it is: C-contiguous bytes of the
//! right length, aligned to its element size, and not `bool` (a byte buffer labelled bool may
//! hold values other than 0 and 1, which only a copy normalises). Anything else is copied, as
//! before ([`crate::array::from_wire`]).
//!
//! The buffers stay held (their exporters may not resize or free the memory) until the launch
//! returns. The launch runs without the GIL, as numpy's own operations do: another Python
//! thread writing an input during the call races with the kernel's reads, as it would with
//! numpy's.

use pyo3::prelude::*;
use std::sync::Arc;
use tpukit::HostArray;
use tpukit::runtime::RawArray;
use tpukit_dsl::DType;

use crate::array::{self, Wire};
use crate::buffer::Held;
use crate::error::DTypeError;
use crate::tensor::Tensor;

/// Inputs borrowed for one launch: the held buffers and the arrays over their memory.
pub struct Borrowed<'w> {
    /// Held until dropped: the memory `arrays` point to.
    pub _buffers: Vec<Held>,
    pub arrays: Vec<RawArray<'w>>,
}

// SAFETY: the arrays point into Python objects' memory that the held buffers keep alive and
// unmoved; moving that to another thread (the launch, run with the GIL released) reads the
// same memory. Nothing here touches a Python object off the GIL; the buffers are released
// (dropped) on the thread that holds the GIL again.
unsafe impl Send for Borrowed<'_> {}
// SAFETY: as for `Send`: shared, the arrays are only read.
unsafe impl Sync for Borrowed<'_> {}

/// The wire triples as borrowed arrays, or `None` where any of them cannot be read in place
/// (the caller then copies them all). A malformed triple (unknown dtype, a length that is not
/// the shape's) is an error either way.
pub fn borrow<'w>(wires: &'w [Wire<'_>]) -> PyResult<Option<Borrowed<'w>>> {
    let mut buffers = Vec::with_capacity(wires.len());
    let mut arrays = Vec::with_capacity(wires.len());
    for wire @ (_, shape, _) in wires {
        let (dtype, buffer) = wire_buffer(wire)?;
        let ptr = buffer.ptr();
        if dtype == DType::Bool || !(ptr as usize).is_multiple_of(dtype.size_bytes()) {
            return Ok(None);
        }
        arrays.push(RawArray {
            dtype,
            shape,
            data: ptr,
        });
        buffers.push(buffer);
    }
    Ok(Some(Borrowed {
        _buffers: buffers,
        arrays,
    }))
}

/// The host array of one wire triple, over its memory where it can be read in place
/// ([`HostArray::borrowed`], holding the buffer), else a copy ([`array::from_wire`]): what
/// tpuBLAS's operators read, so a contiguous CPU tensor argument is not copied.
///
/// The caller must drop every array made from the result (or make it owned, as
/// [`array::to_wire`] does for results) before it returns to Python: the buffer's memory is
/// only promised unwritten for the call.
pub fn host_array(wire: &Wire<'_>) -> PyResult<HostArray> {
    let (dtype, buffer) = wire_buffer(wire)?;
    let shape = &wire.1;
    let ptr = buffer.ptr() as *const u8;
    let aligned = (ptr as usize).is_multiple_of(dtype.size_bytes());
    if dtype == DType::Bool || !aligned || ptr.is_null() || buffer.len_bytes() == 0 {
        drop(buffer);
        return array::from_wire(wire);
    }
    // SAFETY: the buffer is C-contiguous, `check_len` checked its length against the shape,
    // the address is aligned and the dtype is not bool (whose bytes only a copy
    // normalises); the held buffer keeps the memory alive and unmoved while the array (the
    // owner) lives, and the caller drops every array made from it before returning to
    // Python (this function's contract), which cannot write it before then except from
    // another thread racing the call, as with numpy's own operations (see the module docs).
    Ok(unsafe { HostArray::borrowed(dtype, shape, ptr, Arc::new(buffer)) })
}

/// The host array of a wire triple whose data is a torch tensor lying as a transposed
/// row-major array (a `w.t()` view, [`Tensor::transposed`]): that array's memory, in place,
/// in its own shape (the tensor's last two extents swapped); None for any other data. The
/// caller's contract is [`host_array`]'s.
pub fn transposed(wire: &Wire<'_>) -> PyResult<Option<HostArray>> {
    let (name, shape, data) = wire;
    let Some(t) = Tensor::transposed(data)? else {
        return Ok(None);
    };
    let mut logical = t.shape.clone();
    let r = logical.len();
    logical.swap(r - 2, r - 1);
    if t.dtype != array::dtype(name)?
        || logical != *shape
        || t.dtype == DType::Bool
        || !(t.ptr as usize).is_multiple_of(t.dtype.size_bytes())
    {
        return Ok(None);
    }
    let (dtype, stored, ptr) = (t.dtype, t.shape.clone(), t.ptr);
    // SAFETY: the held tensor keeps its memory alive and in place while the array (the
    // owner) lives; `stored` row-major from `ptr` is exactly the tensor's elements
    // (`strided::transposed`); aligned, not bool. The caller's contract is `host_array`'s.
    Ok(Some(unsafe {
        HostArray::borrowed(dtype, &stored, ptr, Arc::new(t))
    }))
}

/// A wire triple's dtype and its data's buffer, held: an error unless the data is a
/// C-contiguous buffer of the length the dtype and shape need.
fn wire_buffer(wire: &Wire<'_>) -> PyResult<(DType, Held)> {
    let (name, shape, data) = wire;
    let dtype = array::dtype(name)?;
    let buffer = array::contiguous(data)?;
    if let Some(t) = buffer.tensor_dtype()
        && t != dtype
    {
        return Err(DTypeError::new_err(format!(
            "a {t} tensor given as a {dtype} array"
        )));
    }
    array::check_len(dtype, shape, buffer.len_bytes())?;
    Ok((dtype, buffer))
}
