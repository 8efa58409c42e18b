//! A Python object's buffer, held raw (`PyObject_GetBuffer`): any exporter, any element
//! format, C-contiguous by request — or a CPU torch tensor's memory ([`crate::tensor`]),
//! which exports none. What reads arrays in place whatever their numpy dtype (pyo3's
//! `PyBuffer<u8>` takes only byte-formatted buffers, so callers had to view every array as
//! bytes first) and tensors without a numpy view.
//!
//! Invariant: the view stays valid, and the memory it describes alive and unmoved (numpy
//! refuses to resize an array with an exported buffer), until the `Held` is dropped.

use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{CStr, c_int};
use std::mem::MaybeUninit;
use tpukit_dsl::DType;

use crate::tensor::Tensor;

/// A held buffer view (released with the GIL when dropped), or a held tensor.
pub struct Held(Inner);

enum Inner {
    /// Boxed: the view's address does not change while it is held.
    View(Box<ffi::Py_buffer>),
    Tensor(Tensor),
}

// SAFETY: the view is plain data describing memory kept alive by the exporter until the view
// is released; releasing takes the GIL (see `Drop`). pyo3's `PyBuffer` is `Send + Sync` on
// the same grounds. A `Tensor` is `Send + Sync` likewise.
unsafe impl Send for Held {}
unsafe impl Sync for Held {}

/// `PyBUF_SIMPLE`: C-contiguous memory read as bytes.
pub const SIMPLE: c_int = 0;
/// `PyBUF_ND | PyBUF_FORMAT`: C-contiguous memory with its shape and element format.
pub const SHAPED: c_int = 0x0008 | 0x0004;
/// `PyBUF_STRIDES` (which includes `PyBUF_ND`): the consumer reads strides.
pub const STRIDES: c_int = 0x0010 | 0x0008;

impl Held {
    /// `obj`'s buffer with `flags` (`SIMPLE` or `SHAPED`: C-contiguous either way), or a
    /// torch tensor's memory; else the exporter's error (a `BufferError` for a non-contiguous
    /// numpy array or tensor, a `TypeError` for an object exporting none).
    pub fn get(obj: &Bound<'_, PyAny>, flags: c_int) -> PyResult<Held> {
        // SAFETY: `obj` is a live object; the check only reads its type's slots.
        if unsafe { ffi::PyObject_CheckBuffer(obj.as_ptr()) } == 0
            && let Some(t) = Tensor::get(obj)?
        {
            return Ok(Held(Inner::Tensor(t)));
        }
        let mut view: Box<MaybeUninit<ffi::Py_buffer>> = Box::new(MaybeUninit::zeroed());
        // SAFETY: `obj` is a live object (the GIL is held through `obj`'s token) and `view`
        // points to writable memory for one `Py_buffer`.
        if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), view.as_mut_ptr(), flags) } == -1 {
            return Err(PyErr::fetch(obj.py()));
        }
        // SAFETY: a successful `PyObject_GetBuffer` filled the view.
        Ok(Held(Inner::View(unsafe { view.assume_init() })))
    }

    /// The memory's address (never null: a dangling, well-aligned-for-bytes address for an
    /// empty tensor whose `data_ptr()` is 0).
    pub fn ptr(&self) -> *mut u8 {
        let p = match &self.0 {
            Inner::View(v) => v.buf as *mut u8,
            Inner::Tensor(t) => t.ptr,
        };
        if p.is_null() {
            std::ptr::NonNull::dangling().as_ptr()
        } else {
            p
        }
    }

    pub fn len_bytes(&self) -> usize {
        match &self.0 {
            Inner::View(v) => v.len as usize,
            Inner::Tensor(t) => t.len_bytes(),
        }
    }

    /// A tensor's dtype (None for a buffer, whose format the wire's dtype name stands for).
    pub fn tensor_dtype(&self) -> Option<DType> {
        match &self.0 {
            Inner::View(_) => None,
            Inner::Tensor(t) => Some(t.dtype),
        }
    }

    /// Whether the view (taken `SHAPED`) holds elements of `dtype` (bf16 as int16, its bits)
    /// in exactly `shape`, at an address aligned to the element size: what a launch plan
    /// reads in place. Never for `bool` (whose bytes only a copy normalises to 0 and 1).
    pub fn is(&self, dtype: DType, shape: &[usize]) -> bool {
        let v = match &self.0 {
            Inner::View(v) => &**v,
            Inner::Tensor(t) => {
                return t.dtype == dtype
                    && t.shape == shape
                    && (self.ptr() as usize).is_multiple_of(dtype.size_bytes());
            }
        };
        if v.itemsize as usize != dtype.size_bytes()
            || v.ndim as usize != shape.len()
            || v.format.is_null()
            || !(self.ptr() as usize).is_multiple_of(dtype.size_bytes())
        {
            return false;
        }
        // SAFETY: a `SHAPED` view has a valid NUL-terminated format and `ndim` extents.
        let (format, extents) = unsafe {
            let extents: &[isize] = if v.ndim == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(v.shape, v.ndim as usize)
            };
            (CStr::from_ptr(v.format).to_bytes(), extents)
        };
        let format = match format {
            [b'<' | b'=' | b'@', rest @ ..] => rest,
            f => f,
        };
        format == element_format(dtype).to_bytes()
            && extents.iter().zip(shape).all(|(&e, &s)| e as usize == s)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Inner::View(view) = &mut self.0 {
            // SAFETY: the view was filled by `PyObject_GetBuffer` and is released once.
            Python::attach(|_| unsafe { ffi::PyBuffer_Release(&mut **view) });
        }
    }
}

/// The buffer-protocol (`struct`) format of `dtype`'s elements: bf16 as int16 (`h`), which
/// numpy and torch view back as bf16.
pub fn element_format(dtype: DType) -> &'static CStr {
    match dtype {
        DType::F32 => c"f",
        DType::BF16 | DType::I16 => c"h",
        DType::F16 => c"e",
        DType::I32 => c"i",
        DType::I8 => c"b",
        DType::Bool => c"?",
    }
}
