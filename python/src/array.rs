//! Arrays across the boundary, in *wire form*: `(dtype name, shape, data)` with row-major,
//! little-endian element data.
//!
//! - In, `data` is any object exporting a C-contiguous buffer, of any element format (the
//!   Python side passes the numpy array itself): its bytes are copied once, straight into the
//!   host array's storage, or read in place (`crate::borrow`).
//! - Out, `data` is a [`Buffer`] owning the host array and exporting it, typed and shaped
//!   (`numpy.asarray(data)` views it without a copy; bf16 as int16) or as bytes
//!   (`numpy.frombuffer(data, dtype)`).
//!
//! Plain buffers keep the native side free of numpy's C API and its versions;
//! `tpukit/_arrays.py` does the numpy, torch and JAX conversions.

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_int, c_void};
use tpukit::HostArray;
use tpukit_dsl::{DType, bf16, f16};

use crate::buffer::{self, Held};
use crate::error::{DTypeError, ShapeError, TpukitError, guard};

const _: () = assert!(
    cfg!(target_endian = "little"),
    "wire data is little-endian and copied as is"
);

/// `(dtype name, shape, data)`: the wire form of one array.
pub type Wire<'py> = (String, Vec<usize>, Bound<'py, PyAny>);

/// The dtype called `name` (`f32`, `bf16`, `f16`, `i32`, `i16`, `i8`, `bool`).
pub fn dtype(name: &str) -> PyResult<DType> {
    DType::parse(name).ok_or_else(|| {
        DTypeError::new_err(format!(
            "unsupported dtype `{name}` (tpukit supports f32, bf16, f16, i32, i16, i8, bool)"
        ))
    })
}

/// The elements of `bytes` as a `Vec<T>`: one copy. `T` is a plain number type whose every
/// bit pattern is a value, so any bytes are valid.
fn elements<T: Copy>(bytes: &[u8]) -> Vec<T> {
    let n = bytes.len() / size_of::<T>();
    let mut v: Vec<T> = Vec::with_capacity(n);
    // SAFETY: `v` has room for `n` elements, i.e. `bytes.len()` bytes (a multiple of the
    // element size, checked by the caller); every bit pattern is a valid `T`, so the
    // elements are initialised once copied.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, bytes.len());
        v.set_len(n);
    }
    v
}

/// Builds a host array from row-major little-endian bytes.
///
/// Invariant checked here: `data.len() == product(shape) * dtype.size_bytes()`.
pub fn from_bytes(dtype: DType, shape: &[usize], data: &[u8]) -> PyResult<HostArray> {
    check_len(dtype, shape, data.len())?;
    Ok(from_sized_bytes(dtype, shape, data))
}

/// Checks that `len` bytes are `product(shape) * dtype.size_bytes()`, the size of a
/// row-major `dtype` array of `shape` (an error naming both otherwise).
pub fn check_len(dtype: DType, shape: &[usize], len: usize) -> PyResult<()> {
    // An array's non-zero extents multiply to at most `isize::MAX` (ndarray's rule); a
    // zero-size shape may have any others, so the element count is `want / size`, checked.
    let nonzero = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(dtype.size_bytes(), |n, &d| n.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize);
    let Some(nonzero) = nonzero else {
        return Err(ShapeError::new_err(format!(
            "a {dtype} array of shape {shape:?} is larger than memory can address"
        )));
    };
    let want = if shape.contains(&0) { 0 } else { nonzero };
    if len != want {
        return Err(ShapeError::new_err(format!(
            "a {dtype} array of shape {shape:?} needs {want} bytes, got {len}"
        )));
    }
    Ok(())
}

/// [`from_bytes`] without the check: `data.len()` must be `product(shape) * dtype.size_bytes()`
/// (callers that computed the length from the shape, as the FFI handler does).
pub fn from_sized_bytes(dtype: DType, shape: &[usize], data: &[u8]) -> HostArray {
    debug_assert_eq!(
        data.len(),
        shape.iter().product::<usize>() * dtype.size_bytes()
    );
    let shape = ndarray::IxDyn(shape);
    macro_rules! build {
        ($variant:ident, $v:expr) => {
            HostArray::$variant(
                ndarray::ArcArray::from_shape_vec(shape, $v).expect("length checked"),
            )
        };
    }
    match dtype {
        DType::F32 => build!(F32, elements::<f32>(data)),
        DType::BF16 => build!(BF16, elements::<bf16>(data)),
        DType::F16 => build!(F16, elements::<f16>(data)),
        DType::I32 => build!(I32, elements::<i32>(data)),
        DType::I16 => build!(I16, elements::<i16>(data)),
        DType::I8 => build!(I8, elements::<i8>(data)),
        // Any non-zero byte is true (a bool is one byte, 0 or 1, in Rust).
        DType::Bool => build!(Bool, data.iter().map(|&b| b != 0).collect()),
    }
}

/// The host array a wire triple describes (its data copied once).
pub fn from_wire((name, shape, data): &Wire<'_>) -> PyResult<HostArray> {
    let buffer = contiguous(data)?;
    // SAFETY: the buffer is C-contiguous and held (and so alive and unmoved) until dropped
    // below; the GIL is held, so no Python code mutates it while it is read.
    let bytes = unsafe { std::slice::from_raw_parts(buffer.ptr(), buffer.len_bytes()) };
    let array = from_bytes(dtype(name)?, shape, bytes);
    drop(buffer);
    array
}

/// Wire data's buffer, held as C-contiguous bytes: an error naming the requirement otherwise.
pub fn contiguous(data: &Bound<'_, PyAny>) -> PyResult<Held> {
    Held::get(data, buffer::SIMPLE).map_err(|e| {
        let err = TpukitError::new_err("array data must be a C-contiguous buffer");
        err.set_cause(data.py(), Some(e));
        err
    })
}

/// A host array in wire form: no copy, the bytes are exported by a [`Buffer`] (a copy of a
/// borrowed array, which must not alias the memory it reads nor outlive the call).
pub fn to_wire<'py>(py: Python<'py>, a: HostArray) -> PyResult<Wire<'py>> {
    let (name, shape) = (a.dtype().name().to_string(), a.shape().to_vec());
    Ok((name, shape, Bound::new(py, Buffer::new(a))?.into_any()))
}

/// A host array's storage, exported as a writable, C-contiguous buffer: typed and shaped to
/// a consumer asking for the format and shape (`numpy.asarray(buffer)`, bf16 as int16),
/// else as bytes (format `B`: `numpy.frombuffer(buffer, dtype)`). The arrays over it keep
/// it alive.
#[pyclass(module = "tpukit._native")]
pub struct Buffer {
    /// Row-major contiguous (made so when the buffer is created).
    array: HostArray,
    /// The element format ([`buffer::element_format`]) and size.
    format: &'static std::ffi::CStr,
    itemsize: isize,
    /// The extents and row-major byte strides, which typed views point to.
    shape: Vec<isize>,
    strides: Vec<isize>,
}

impl Buffer {
    /// The buffer of a host array (made owned and row-major: a copy of a borrowed one, which
    /// must not alias the memory it reads nor outlive the call).
    pub fn new(array: HostArray) -> Buffer {
        let mut array = array.into_owned();
        array.make_standard_layout();
        let itemsize = array.dtype().size_bytes() as isize;
        let shape: Vec<isize> = array.shape().iter().map(|&d| d as isize).collect();
        let mut strides = vec![itemsize; shape.len()];
        for i in (1..shape.len()).rev() {
            strides[i - 1] = strides[i] * shape[i].max(1);
        }
        Buffer {
            format: buffer::element_format(array.dtype()),
            array,
            itemsize,
            shape,
            strides,
        }
    }
}

#[pymethods]
impl Buffer {
    /// # Safety
    /// Called by Python's buffer protocol with a valid `view`.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        guard(None, || {
            if view.is_null() {
                return Err(PyBufferError::new_err("no view to fill"));
            }
            // Typed only for a consumer that reads both the format and the shape.
            let typed = flags & buffer::SHAPED == buffer::SHAPED;
            let (ptr, len, format, itemsize, ndim, shape, strides) = {
                let mut this = slf.borrow_mut();
                let ptr = this.array.data_ptr_mut();
                let len = this.array.size_bytes() as isize;
                let this = &mut *this;
                if typed {
                    let ndim = this.shape.len() as c_int;
                    // Strides only to a consumer asking for them (else they must be NULL:
                    // row-major is implied).
                    let strides = if flags & buffer::STRIDES == buffer::STRIDES {
                        this.strides.as_mut_ptr()
                    } else {
                        std::ptr::null_mut()
                    };
                    let shape = this.shape.as_mut_ptr();
                    (ptr, len, this.format, this.itemsize, ndim, shape, strides)
                } else {
                    let null = std::ptr::null_mut();
                    (ptr, len, c"B", 1, 1, null, null)
                }
            };
            // SAFETY: `view` is valid (checked non-null, provided by Python); the data lives
            // as long as this object, which the view owns a reference to (`obj`), and does not
            // move (the host array is never reallocated after construction), nor do the
            // shape and strides (never changed after construction). A one-dimensional byte
            // buffer needs no shape or strides beyond `len` and `itemsize`.
            unsafe {
                (*view).obj = slf.into_any().into_ptr();
                (*view).buf = ptr as *mut c_void;
                (*view).len = len;
                (*view).readonly = 0;
                (*view).itemsize = itemsize;
                (*view).format = format.as_ptr() as *mut _;
                (*view).ndim = ndim;
                if typed {
                    (*view).shape = shape;
                    (*view).strides = strides;
                } else {
                    (*view).shape = &mut (*view).len;
                    (*view).strides = &mut (*view).itemsize;
                }
                (*view).suboffsets = std::ptr::null_mut();
                (*view).internal = std::ptr::null_mut();
            }
            Ok(())
        })
    }

    /// The number of bytes.
    fn __len__(&self) -> PyResult<usize> {
        guard(None, || Ok(self.array.size_bytes()))
    }
}
