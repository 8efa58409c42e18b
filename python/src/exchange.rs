//! torch's DLPack C exchange API (DLPack 1.3's `DLPackExchangeAPI`, which torch publishes as
//! the capsule `torch.Tensor.__dlpack_c_exchange_api__`): a tensor's description read by one C
//! call into a struct on the stack, and a result handed to torch as a tensor by another — no
//! capsule, no `to_dlpack`/`from_dlpack` Python call (what [`crate::dlpack`] does where a torch
//! lacks the API).
//!
//! Invariants: the table is torch's, static for the life of the process (the API's
//! contract), and used only where its major version is 1 and the two functions read here
//! are present. A description is read at once (its shape and strides are valid only until
//! control returns to torch); the memory it addresses stays the tensor's, held by the
//! caller's reference to the tensor, as for the capsule path.

use pyo3::prelude::*;
use pyo3::{ffi, intern};
use std::ffi::{CStr, c_void};
use tpukit::HostArray;

use crate::dlpack::{self, DlManagedTensorVersioned, DlTensor};

/// `DLPackExchangeAPI` (DLPack 1.3): a stable header, then the producer's functions.
#[repr(C)]
pub struct ExchangeApi {
    version: [u32; 2],
    _prev_api: *const c_void,
    _managed_tensor_allocator: Option<unsafe extern "C" fn()>,
    _managed_tensor_from_py_object_no_sync: Option<unsafe extern "C" fn()>,
    managed_tensor_to_py_object_no_sync:
        Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned, *mut *mut c_void) -> i32>,
    dltensor_from_py_object_no_sync:
        Option<unsafe extern "C" fn(*mut c_void, *mut DlTensor) -> i32>,
    _current_work_stream: Option<unsafe extern "C" fn()>,
}

// SAFETY: a static table of function pointers that torch never changes (the invariant).
unsafe impl Sync for ExchangeApi {}

const NAME: &CStr = c"dlpack_exchange_api";

/// `tensor_type`'s exchange table, if it has one tpukit can use (see the module docs).
pub fn find(tensor_type: &Bound<'_, PyAny>) -> Option<&'static ExchangeApi> {
    let py = tensor_type.py();
    let capsule = tensor_type
        .getattr(intern!(py, "__dlpack_c_exchange_api__"))
        .ok()?;
    // SAFETY: `capsule` is a live object; a valid capsule of this name points to the static
    // table (the API's contract).
    let api = unsafe {
        let p = ffi::PyCapsule_GetPointer(capsule.as_ptr(), NAME.as_ptr());
        if p.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        &*(p as *const ExchangeApi)
    };
    (api.version[0] == 1
        && api.managed_tensor_to_py_object_no_sync.is_some()
        && api.dltensor_from_py_object_no_sync.is_some())
    .then_some(api)
}

impl ExchangeApi {
    /// What `tensor` (an exact tensor of the type the table came from) holds, if it is a CPU
    /// tensor of a dtype tpukit holds (see [`dlpack::view`]); else None.
    pub fn view(&self, tensor: &Bound<'_, PyAny>) -> PyResult<Option<dlpack::Described>> {
        let read = self
            .dltensor_from_py_object_no_sync
            .expect("checked by `find`");
        let mut t = DlTensor::empty();
        // SAFETY: `tensor` is a live object of the table's type (the caller's contract); the
        // producer fills `t`, which lives on this stack.
        if unsafe { read(tensor.as_ptr() as *mut c_void, &mut t) } != 0 {
            return Err(PyErr::fetch(tensor.py()));
        }
        // SAFETY: filled by the producer, read before control returns to it.
        Ok(unsafe { dlpack::view(&t) })
    }

    /// A torch tensor over `array`'s memory (it owns the array).
    pub fn to_torch<'py>(&self, py: Python<'py>, array: HostArray) -> PyResult<Bound<'py, PyAny>> {
        let wrap = self
            .managed_tensor_to_py_object_no_sync
            .expect("checked by `find`");
        let managed = dlpack::versioned(array);
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: `managed` is a live, owning description the producer takes (on a failure
        // too, when it may leak: torch fails only where it cannot allocate the tensor); it
        // returns a new reference in `out` or sets a Python error.
        if unsafe { wrap(managed, &mut out) } != 0 || out.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: a new reference to the tensor.
        Ok(unsafe { Bound::from_owned_ptr(py, out as *mut ffi::PyObject) })
    }
}
