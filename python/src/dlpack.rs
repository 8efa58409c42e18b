//! DLPack (unversioned, capsule name `dltensor`) both ways with torch, in one native call
//! each: a CPU tensor's memory described by `torch.utils.dlpack.to_dlpack` (its address,
//! dtype, shape and strides at once, where reading them one attribute at a time cost ~0.5
//! µs a tensor), and a result [`HostArray`] handed to torch as a tensor over its memory
//! (`torch._C._from_dlpack`: no numpy array, no `Buffer` object in between).
//!
//! Invariants: a read capsule is held (and with it the tensor's storage) as long as the
//! [`Exported`] view of it; an exported array is owned by its `DLManagedTensor` until torch
//! calls the deleter (any thread, without the GIL: dropping it touches no Python object), or
//! until the capsule is freed unconsumed.

use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{CStr, c_void};
use tpukit::HostArray;
use tpukit_dsl::DType;

/// `DLDevice`.
#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// `DLManagedTensor`.
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

const NAME: &CStr = c"dltensor";
const CPU: i32 = 1;

/// The DLPack type of `dtype`'s elements.
fn dl_type(dtype: DType) -> DlDataType {
    let (code, bits) = match dtype {
        DType::F32 => (2, 32),
        DType::F16 => (2, 16),
        DType::BF16 => (4, 16),
        DType::I32 => (0, 32),
        DType::I16 => (0, 16),
        DType::I8 => (0, 8),
        DType::Bool => (6, 8),
    };
    DlDataType {
        code,
        bits,
        lanes: 1,
    }
}

/// The tpukit dtype of a DLPack type, if tpukit holds it.
fn dtype_of(t: DlDataType) -> Option<DType> {
    DType::ALL.into_iter().find(|&d| dl_type(d) == t)
}

/// A CPU tensor's memory as DLPack describes it, the capsule held.
pub struct Exported {
    pub capsule: Py<PyAny>,
    pub ptr: *mut u8,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// What `capsule` (the result of `to_dlpack`) describes, if it is a CPU tensor of a dtype
/// tpukit holds, C-contiguous (strides of extent-1 axes ignored, as torch's
/// `is_contiguous`); else None.
pub fn read(capsule: Bound<'_, PyAny>) -> Option<Exported> {
    // SAFETY: `capsule` is a live object; a valid capsule named `dltensor` points to a
    // `DLManagedTensor` that lives until the capsule is freed (we hold it in `Exported`).
    let t = unsafe {
        let p = ffi::PyCapsule_GetPointer(capsule.as_ptr(), NAME.as_ptr());
        if p.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        &(*(p as *const DlManagedTensor)).dl_tensor
    };
    if t.device.device_type != CPU || t.ndim < 0 {
        return None;
    }
    let dtype = dtype_of(t.dtype)?;
    let ndim = t.ndim as usize;
    // SAFETY: `shape` has `ndim` extents, and `strides` too unless null (row-major).
    let (shape, strides) = unsafe {
        if ndim == 0 {
            (&[][..], None)
        } else {
            let shape = std::slice::from_raw_parts(t.shape, ndim);
            let strides =
                (!t.strides.is_null()).then(|| std::slice::from_raw_parts(t.strides, ndim));
            (shape, strides)
        }
    };
    if shape.iter().any(|&e| e < 0) {
        return None;
    }
    if let Some(strides) = strides
        && !shape.contains(&0)
    {
        let mut step = 1i64;
        for (&e, &s) in shape.iter().zip(strides).rev() {
            if e != 1 && s != step {
                return None;
            }
            step *= e;
        }
    }
    Some(Exported {
        ptr: (t.data as *mut u8).wrapping_add(t.byte_offset as usize),
        dtype,
        shape: shape.iter().map(|&e| e as usize).collect(),
        capsule: capsule.unbind(),
    })
}

/// A result's memory and what its `DLManagedTensor` points into, owned by the capsule or
/// torch (see the module docs). `managed` is first: its address is the context's.
#[repr(C)]
struct Context {
    managed: DlManagedTensor,
    _array: HostArray,
    _shape: Vec<i64>,
    _strides: Vec<i64>,
}

unsafe extern "C" fn delete(managed: *mut DlManagedTensor) {
    // SAFETY: `managed` is the first field of a boxed `Context` made by `capsule`, deleted
    // once (torch calls the deleter once; an unconsumed capsule's destructor calls it
    // instead).
    drop(unsafe { Box::from_raw(managed as *mut Context) });
}

unsafe extern "C" fn destruct(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with our capsule; a consumer renames a consumed one, whose
    // context is then torch's to delete.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()) as *mut DlManagedTensor;
            delete(p);
        }
    }
}

/// A capsule owning `array` (owned, row-major: see [`crate::array::Buffer::new`]).
fn capsule(py: Python<'_>, array: HostArray) -> PyResult<Bound<'_, PyAny>> {
    let mut array = array.into_owned();
    array.make_standard_layout();
    let mut shape: Vec<i64> = array.shape().iter().map(|&d| d as i64).collect();
    let mut strides = vec![1i64; shape.len()];
    for i in (1..shape.len()).rev() {
        strides[i - 1] = strides[i] * shape[i].max(1);
    }
    let data = array.data_ptr_mut() as *mut c_void;
    let context = Box::new(Context {
        managed: DlManagedTensor {
            dl_tensor: DlTensor {
                data,
                device: DlDevice {
                    device_type: CPU,
                    device_id: 0,
                },
                ndim: shape.len() as i32,
                dtype: dl_type(array.dtype()),
                shape: shape.as_mut_ptr(),
                strides: strides.as_mut_ptr(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete),
        },
        _array: array,
        _shape: shape,
        _strides: strides,
    });
    // The vectors' heap buffers do not move with the box (nor does the array's memory).
    let managed = Box::into_raw(context) as *mut c_void;
    // SAFETY: `managed` points to a live `Context`; the capsule's destructor deletes it
    // unless a consumer took it.
    let obj = unsafe { ffi::PyCapsule_New(managed, NAME.as_ptr(), Some(destruct)) };
    if obj.is_null() {
        // SAFETY: not handed to any capsule: ours to delete.
        unsafe { delete(managed as *mut DlManagedTensor) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference.
    Ok(unsafe { Bound::from_owned_ptr(py, obj) })
}

/// A torch tensor over `array`'s memory (it owns the array), made by `from_dlpack`
/// (`torch._C._from_dlpack`, see [`crate::tensor`]).
pub fn to_torch<'py>(
    from_dlpack: &Bound<'py, PyAny>,
    array: HostArray,
) -> PyResult<Bound<'py, PyAny>> {
    from_dlpack.call1((capsule(from_dlpack.py(), array)?,))
}
