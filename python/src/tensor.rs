//! CPU torch tensors read in place, without `Tensor.numpy()` (0.6 µs a tensor): what torch
//! itself reports of a tensor — its exact type, device, contiguity, lazy negation, dtype,
//! shape and `data_ptr()` — stands in for the buffer a numpy array exports.
//!
//! Only an exact `torch.Tensor` (not a subclass, which may override any of these) on the CPU,
//! C-contiguous, without a lazy negation, of a dtype tpukit holds, is read; any other tensor
//! is an error here (the Python side sends only such tensors, or copies through numpy). The
//! tensor is held (a strong reference) while its memory is read. As with numpy arrays, a
//! second Python thread resizing the tensor during a launch (which runs without the GIL)
//! races with the kernel's reads.

use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use pyo3::{ffi, intern};
use tpukit_dsl::DType;

/// A tensor's memory, held.
pub struct Tensor {
    _object: Py<PyAny>,
    pub ptr: *mut u8,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// torch's tensor type and the dtypes tpukit holds, once torch is imported.
struct Torch {
    tensor: Py<PyType>,
    dtypes: Vec<(Py<PyAny>, DType)>,
}

static TORCH: PyOnceLock<Torch> = PyOnceLock::new();

/// torch's types, if torch has been imported (never importing it).
fn torch(py: Python<'_>) -> PyResult<Option<&'static Torch>> {
    if let Some(t) = TORCH.get(py) {
        return Ok(Some(t));
    }
    // SAFETY: the GIL is held; the module dict is borrowed, never null in a running
    // interpreter.
    let modules = unsafe { Bound::from_borrowed_ptr(py, ffi::PyImport_GetModuleDict()) };
    let Some(module) = modules.cast::<PyDict>()?.get_item("torch")? else {
        return Ok(None);
    };
    let torch = TORCH.get_or_try_init(py, || -> PyResult<Torch> {
        let dtype = |name: &str| module.getattr(name).map(Bound::unbind);
        Ok(Torch {
            tensor: module.getattr("Tensor")?.cast_into::<PyType>()?.unbind(),
            dtypes: vec![
                (dtype("float32")?, DType::F32),
                (dtype("bfloat16")?, DType::BF16),
                (dtype("float16")?, DType::F16),
                (dtype("int32")?, DType::I32),
                (dtype("int16")?, DType::I16),
                (dtype("int8")?, DType::I8),
                (dtype("bool")?, DType::Bool),
            ],
        })
    })?;
    Ok(Some(torch))
}

// SAFETY: the pointer addresses memory the held tensor keeps alive (see the module docs);
// the reference itself is `Send + Sync`.
unsafe impl Send for Tensor {}
unsafe impl Sync for Tensor {}

impl Tensor {
    /// `obj`'s memory if it is a `torch.Tensor` (None for any other object); an error for a
    /// tensor that cannot be read in place (see the module docs).
    pub fn get(obj: &Bound<'_, PyAny>) -> PyResult<Option<Tensor>> {
        let py = obj.py();
        let Some(torch) = torch(py)? else {
            return Ok(None);
        };
        if !obj.get_type().is(torch.tensor.bind(py)) {
            return Ok(None);
        }
        let refuse = |why: &str| Err(PyBufferError::new_err(format!("a torch tensor {why}")));
        if !obj.getattr(intern!(py, "is_cpu"))?.is_truthy()? {
            return refuse("not on the CPU");
        }
        if !obj
            .call_method0(intern!(py, "is_contiguous"))?
            .is_truthy()?
        {
            return refuse("that is not C-contiguous");
        }
        if obj.call_method0(intern!(py, "is_neg"))?.is_truthy()? {
            return refuse("with a lazy negation");
        }
        let dtype = obj.getattr(intern!(py, "dtype"))?;
        let Some(&(_, dtype)) = torch.dtypes.iter().find(|(d, _)| d.bind(py).is(&dtype)) else {
            return refuse(&format!("of dtype {dtype}, which tpukit does not hold"));
        };
        let shape: Vec<usize> = obj.getattr(intern!(py, "shape"))?.extract()?;
        let ptr: usize = obj.call_method0(intern!(py, "data_ptr"))?.extract()?;
        Ok(Some(Tensor {
            _object: obj.clone().unbind(),
            ptr: ptr as *mut u8,
            dtype,
            shape,
        }))
    }

    /// The same tensor held once more (the memory `get` read, without asking torch again).
    pub fn again(&self, py: Python<'_>) -> Tensor {
        Tensor {
            _object: self._object.clone_ref(py),
            ptr: self.ptr,
            dtype: self.dtype,
            shape: self.shape.clone(),
        }
    }

    /// Whether this is the tensor `obj`.
    pub fn is(&self, obj: &Bound<'_, PyAny>) -> bool {
        self._object.bind(obj.py()).is(obj)
    }

    /// The number of bytes of its elements (C-contiguous: all of them, from `ptr`).
    pub fn len_bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size_bytes()
    }
}
