//! Input arrays read in place: the data of wire triples, borrowed through the buffer protocol
//! for the length of one launch on the compiled CPU backend, so a call copies no input (see
//! `tpukit::runtime::launch_borrowed`).
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

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use tpukit::runtime::RawArray;
use tpukit_dsl::DType;

use crate::array::{self, Wire};
use crate::error::TpukitError;

/// Inputs borrowed for one launch: the held buffers and the arrays over their memory.
pub struct Borrowed<'w> {
    /// Held until dropped: the memory `arrays` point to.
    _buffers: Vec<PyBuffer<u8>>,
    pub arrays: Vec<RawArray<'w>>,
}

// SAFETY: the arrays point into Python objects' memory that the held buffers keep alive and
// unmoved; moving that to another thread (the launch, run with the GIL released) reads the
// same memory. Nothing here touches a Python object off the GIL; the buffers are released
// (dropped) on the thread that holds the GIL again.
unsafe impl Send for Borrowed<'_> {}

/// The wire triples as borrowed arrays, or `None` where any of them cannot be read in place
/// (the caller then copies them all). A malformed triple (unknown dtype, a length that is not
/// the shape's) is an error either way.
pub fn borrow<'w>(wires: &'w [Wire<'_>]) -> PyResult<Option<Borrowed<'w>>> {
    let mut buffers = Vec::with_capacity(wires.len());
    let mut arrays = Vec::with_capacity(wires.len());
    for (name, shape, data) in wires {
        let dtype = array::dtype(name)?;
        let buffer = PyBuffer::<u8>::get(data)?;
        if !buffer.is_c_contiguous() {
            return Err(TpukitError::new_err(
                "array data must be a C-contiguous byte buffer",
            ));
        }
        array::check_len(dtype, shape, buffer.len_bytes())?;
        let ptr = buffer.buf_ptr() as *mut u8;
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
