//! DLPack (unversioned, capsule name `dltensor`) both ways with torch, in one native call
//! each: a CPU tensor's memory described by `torch.utils.dlpack.to_dlpack` (its address,
//! dtype, shape and strides at once, where reading them one attribute at a time cost ~0.5
//! µs a tensor), and a result [`HostArray`] handed to torch as a tensor over its memory
//! (`torch._C._from_dlpack`: no numpy array, no `Buffer` object in between). Where torch has
//! DLPack's C exchange API, [`crate::exchange`] does both without a capsule or a Python call,
//! on the same structs.
//!
//! Invariants: a read capsule is held (and with it the tensor's storage) as long as the
//! [`Exported`] view of it; an exported array is owned by its `DLManagedTensor` (or
//! `DLManagedTensorVersioned`) until torch calls the deleter (any thread, without the GIL:
//! dropping it touches no Python object), or until the capsule is freed unconsumed.

use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{CStr, c_void};
use tpukit::HostArray;
use tpukit_dsl::DType;

/// `DLDevice`.
#[repr(C)]
pub struct DlDevice {
    pub device_type: i32,
    pub device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
pub struct DlTensor {
    pub data: *mut c_void,
    pub device: DlDevice,
    pub ndim: i32,
    pub dtype: DlDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

impl DlTensor {
    /// An empty description (for a producer to fill).
    pub fn empty() -> DlTensor {
        DlTensor {
            data: std::ptr::null_mut(),
            device: DlDevice {
                device_type: 0,
                device_id: 0,
            },
            ndim: 0,
            dtype: dl_type(DType::F32),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        }
    }
}

/// `DLManagedTensor`.
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// `DLManagedTensorVersioned` (DLPack 1.x).
#[repr(C)]
pub struct DlManagedTensorVersioned {
    pub version: [u32; 2],
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DlTensor,
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
    pub memory: Described,
}

/// What `capsule` (the result of `to_dlpack`) describes, if it is a CPU tensor of a dtype
/// tpukit holds (see [`view`]); else None.
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
    // SAFETY: a producer's description, alive with the capsule.
    let memory = unsafe { view(t) }?;
    Some(Exported {
        capsule: capsule.unbind(),
        memory,
    })
}

/// A CPU tensor's elements as DLPack describes them: where they are, and their strides
/// (in elements) where they are not C-contiguous.
pub struct Described {
    pub ptr: *mut u8,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// None when C-contiguous (strides of extent-1 axes ignored, as torch's
    /// `is_contiguous`).
    pub strides: Option<Vec<i64>>,
}

/// What `t` describes, if it is a CPU tensor of a dtype tpukit holds; else None.
///
/// # Safety
/// `t` is a producer's description: `shape` holds `ndim` extents, `strides` as many or is
/// null (row-major), both readable now.
pub unsafe fn view(t: &DlTensor) -> Option<Described> {
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
    let strided = strides.filter(|strides| {
        let mut step = 1i64;
        !shape.contains(&0)
            && shape.iter().zip(*strides).rev().any(|(&e, &s)| {
                let off = e != 1 && s != step;
                step *= e;
                off
            })
    });
    Some(Described {
        ptr: (t.data as *mut u8).wrapping_add(t.byte_offset as usize),
        dtype,
        shape: shape.iter().map(|&e| e as usize).collect(),
        strides: strided.map(<[i64]>::to_vec),
    })
}

/// A result's memory and the shape and strides a description of it points into (owned,
/// row-major: see [`crate::array::Buffer::new`]). Neither moves when the holder does.
struct Held {
    array: HostArray,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

impl Held {
    fn new(array: HostArray) -> Held {
        let mut array = array.into_owned();
        array.make_standard_layout();
        let shape: Vec<i64> = array.shape().iter().map(|&d| d as i64).collect();
        let mut strides = vec![1i64; shape.len()];
        for i in (1..shape.len()).rev() {
            strides[i - 1] = strides[i] * shape[i].max(1);
        }
        Held {
            array,
            shape,
            strides,
        }
    }

    /// Its description, pointing into it.
    fn dl_tensor(&mut self) -> DlTensor {
        DlTensor {
            data: self.array.data_ptr_mut() as *mut c_void,
            device: DlDevice {
                device_type: CPU,
                device_id: 0,
            },
            ndim: self.shape.len() as i32,
            dtype: dl_type(self.array.dtype()),
            shape: self.shape.as_mut_ptr(),
            strides: self.strides.as_mut_ptr(),
            byte_offset: 0,
        }
    }
}

/// What a `DLManagedTensor` (in a capsule) or a `DLManagedTensorVersioned` (handed to
/// torch) owns: the description `managed` first, so its address is the context's.
#[repr(C)]
struct Context<M> {
    managed: M,
    _held: Held,
}

/// The deleter of a `Context<M>` whose description is `managed`.
unsafe extern "C" fn delete<M>(managed: *mut M) {
    // SAFETY: `managed` is the first field of a boxed `Context<M>` made by `capsule` or
    // `versioned`, deleted once (its consumer calls the deleter once; an unconsumed capsule's
    // destructor calls it instead).
    drop(unsafe { Box::from_raw(managed as *mut Context<M>) });
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

/// A capsule owning `array`.
fn capsule(py: Python<'_>, array: HostArray) -> PyResult<Bound<'_, PyAny>> {
    let mut held = Held::new(array);
    let context = Box::new(Context {
        managed: DlManagedTensor {
            dl_tensor: held.dl_tensor(),
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete::<DlManagedTensor>),
        },
        _held: held,
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

/// A `DLManagedTensorVersioned` (DLPack 1.0) owning `array`, for a consumer to take: it calls
/// the deleter once, when done with it.
pub fn versioned(array: HostArray) -> *mut DlManagedTensorVersioned {
    let mut held = Held::new(array);
    let context = Box::new(Context {
        managed: DlManagedTensorVersioned {
            version: [1, 0],
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete::<DlManagedTensorVersioned>),
            flags: 0,
            dl_tensor: held.dl_tensor(),
        },
        _held: held,
    });
    Box::into_raw(context) as *mut DlManagedTensorVersioned
}

/// A torch tensor over `array`'s memory (it owns the array), made by `from_dlpack`
/// (`torch._C._from_dlpack`, see [`crate::tensor`]).
pub fn to_torch<'py>(
    from_dlpack: &Bound<'py, PyAny>,
    array: HostArray,
) -> PyResult<Bound<'py, PyAny>> {
    from_dlpack.call1((capsule(from_dlpack.py(), array)?,))
}
