//! CPU torch tensors read in place, without `Tensor.numpy()` (0.6 µs a tensor): what torch
//! itself reports of a tensor — its exact type, its DLPack description (device, dtype, shape,
//! strides and address in one call: by torch's C exchange API where it has one, see
//! [`crate::exchange`], else a capsule, see [`crate::dlpack`]) and its lazy negation (which
//! DLPack does not carry) — stands in for the buffer a numpy array exports.
//!
//! Only an exact `torch.Tensor` or `torch.nn.Parameter` (not another subclass, which may
//! override any of these) on the CPU, without a lazy negation, of a dtype tpukit holds, is
//! read; any other tensor is an error here (the Python side sends only such tensors, or
//! copies through numpy). A C-contiguous tensor is read in place; any other (a transpose, a
//! slice, an expansion) is gathered into a row-major copy here ([`crate::strided`]), with
//! the GIL held — except where a product reads its operand transposed: a `w.t()` view is
//! then read in place as it lies ([`Tensor::transposed`]). The tensor is held (a strong
//! reference) while its memory is read. As with numpy arrays, a second Python thread
//! resizing the tensor during a launch (which runs without the GIL), or giving it other
//! storage (`set_`, `.data =`; the capsule path holds the storage itself, the exchange path
//! only the tensor), races with the kernel's reads.

use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use tpukit::HostArray;

use crate::dlpack;
use crate::exchange::{self, ExchangeApi};
use crate::strided::{self, Gathered};
use pyo3::{ffi, intern};
use std::sync::Arc;
use tpukit_dsl::DType;

/// A tensor's memory, held (the tensor, and its DLPack capsule where one was made), or for
/// a tensor that is not C-contiguous, a row-major copy of its elements.
pub struct Tensor {
    _object: Py<PyAny>,
    _capsule: Option<Py<PyAny>>,
    _gathered: Option<Arc<Gathered>>,
    pub ptr: *mut u8,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// torch's tensor type and DLPack converters, once torch is imported.
pub struct Torch {
    tensor: Py<PyType>,
    /// `torch.nn.Parameter`: a model's weights, a subclass that overrides nothing read here.
    parameter: Py<PyType>,
    /// `torch.utils.dlpack.to_dlpack` (the native `torch._C._to_dlpack`).
    to_dlpack: Py<PyAny>,
    /// `torch._C._from_dlpack` (a capsule to a tensor, natively), or where a torch lacks
    /// it, the public `torch.utils.dlpack.from_dlpack`.
    from_dlpack: Py<PyAny>,
    /// torch's DLPack C exchange table, where it has one tpukit can use.
    exchange: Option<&'static ExchangeApi>,
}

static TORCH: PyOnceLock<Torch> = PyOnceLock::new();

/// torch's types, if torch has been imported (never importing it).
pub fn torch(py: Python<'_>) -> PyResult<Option<&'static Torch>> {
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
        let dlpack = module.getattr("utils")?.getattr("dlpack")?;
        let from_dlpack = match module.getattr("_C")?.getattr("_from_dlpack") {
            Ok(f) => f,
            Err(_) => dlpack.getattr("from_dlpack")?,
        };
        let tensor = module.getattr("Tensor")?;
        let parameter = module.getattr("nn")?.getattr("Parameter")?;
        // `TPUKIT_TORCH_EXCHANGE=0`: the capsule path, as for a torch without the table.
        let capsules = std::env::var_os("TPUKIT_TORCH_EXCHANGE").is_some_and(|v| v == "0");
        Ok(Torch {
            exchange: (!capsules).then(|| exchange::find(&tensor)).flatten(),
            tensor: tensor.cast_into::<PyType>()?.unbind(),
            parameter: parameter.cast_into::<PyType>()?.unbind(),
            to_dlpack: dlpack.getattr("to_dlpack")?.unbind(),
            from_dlpack: from_dlpack.unbind(),
        })
    })?;
    Ok(Some(torch))
}

/// How torch tensors cross into tpukit and back: `"exchange"` (torch's DLPack C exchange
/// table) or `"capsule"` (`to_dlpack`/`from_dlpack`); None before torch is imported.
#[pyfunction]
pub fn torch_interop(py: Python<'_>) -> PyResult<Option<&'static str>> {
    crate::error::guard(None, || {
        Ok(torch(py)?.map(|t| match t.exchange {
            Some(_) => "exchange",
            None => "capsule",
        }))
    })
}

impl Torch {
    /// Whether `obj` is a tensor read here: an exact `torch.Tensor`, or an exact
    /// `torch.nn.Parameter` (whose data, strides and DLPack export are the tensor's own).
    pub fn reads(&self, obj: &Bound<'_, PyAny>) -> bool {
        let (py, t) = (obj.py(), obj.get_type());
        t.is(self.tensor.bind(py)) || t.is(self.parameter.bind(py))
    }

    /// A torch tensor over `array`'s memory (it owns the array): by the exchange table where
    /// torch has one, else through a capsule and `from_dlpack`.
    pub fn wrap<'py>(&self, py: Python<'py>, array: HostArray) -> PyResult<Bound<'py, PyAny>> {
        match self.exchange {
            Some(api) => api.to_torch(py, array),
            None => dlpack::to_torch(self.from_dlpack.bind(py), array),
        }
    }
}

// SAFETY: the pointer addresses memory the held tensor keeps alive (see the module docs);
// the reference itself is `Send + Sync`.
unsafe impl Send for Tensor {}
unsafe impl Sync for Tensor {}

impl Tensor {
    /// `obj`'s memory if it is a `torch.Tensor` (None for any other object); an error for a
    /// tensor that cannot be read in place (see the module docs).
    pub fn get(obj: &Bound<'_, PyAny>) -> PyResult<Option<Tensor>> {
        let Some((capsule, memory)) = describe(obj)? else {
            return Ok(None);
        };
        let dlpack::Described {
            mut ptr,
            dtype,
            shape,
            strides,
        } = memory;
        let gathered = strides.map(|strides| {
            // SAFETY: torch's description of the tensor's elements, which the held tensor
            // keeps alive and in place for the copy (with the GIL held, as now).
            let g = unsafe { strided::gather(ptr, dtype, &shape, &strides) };
            ptr = g.ptr();
            Arc::new(g)
        });
        Ok(Some(Tensor {
            _object: obj.clone().unbind(),
            _capsule: capsule,
            _gathered: gathered,
            ptr,
            dtype,
            shape,
        }))
    }

    /// `obj`'s memory if it is a `torch.Tensor` lying as the transpose of the last two axes
    /// of a row-major array ([`strided::transposed`]: a `w.t()` view), read in place with
    /// `shape` that array's; None for any other object or layout (never gathered), an error
    /// as for [`Tensor::get`].
    pub fn transposed(obj: &Bound<'_, PyAny>) -> PyResult<Option<Tensor>> {
        let Some((capsule, memory)) = describe(obj)? else {
            return Ok(None);
        };
        let Some(stored) = memory
            .strides
            .as_deref()
            .and_then(|strides| strided::transposed(&memory.shape, strides))
        else {
            return Ok(None);
        };
        Ok(Some(Tensor {
            _object: obj.clone().unbind(),
            _capsule: capsule,
            _gathered: None,
            ptr: memory.ptr,
            dtype: memory.dtype,
            shape: stored,
        }))
    }

    /// The same tensor held once more (the memory `get` read, without asking torch again).
    pub fn again(&self, py: Python<'_>) -> Tensor {
        Tensor {
            _object: self._object.clone_ref(py),
            _capsule: self._capsule.as_ref().map(|c| c.clone_ref(py)),
            _gathered: self._gathered.clone(),
            ptr: self.ptr,
            dtype: self.dtype,
            shape: self.shape.clone(),
        }
    }

    /// Whether this is the tensor `obj`.
    pub fn is(&self, obj: &Bound<'_, PyAny>) -> bool {
        self._object.bind(obj.py()).is(obj)
    }

    /// Whether `ptr` is the tensor's own memory (it is C-contiguous), not a gathered copy:
    /// what a write through `ptr` needs.
    pub fn in_place(&self) -> bool {
        self._gathered.is_none()
    }

    /// The number of bytes of its elements (C-contiguous: all of them, from `ptr`).
    pub fn len_bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size_bytes()
    }
}

/// The DLPack description of `obj` (and the capsule holding it, on the capsule path) if it
/// is a tensor read here ([`Torch::reads`]); None for any other object (or before torch is
/// imported), an error for a tensor tpukit cannot read (see the module docs).
fn describe(obj: &Bound<'_, PyAny>) -> PyResult<Option<(Option<Py<PyAny>>, dlpack::Described)>> {
    let py = obj.py();
    let Some(torch) = torch(py)? else {
        return Ok(None);
    };
    if !torch.reads(obj) {
        return Ok(None);
    }
    let refuse = || {
        Err(PyBufferError::new_err(
            "a torch tensor not on the CPU, of a dtype tpukit does not hold, or with a lazy \
             negation",
        ))
    };
    let (capsule, memory) = match torch.exchange {
        Some(api) => match api.view(obj)? {
            Some(memory) => (None, memory),
            None => return refuse(),
        },
        None => match dlpack::read(torch.to_dlpack.bind(py).call1((obj,))?) {
            Some(e) => (Some(e.capsule), e.memory),
            None => return refuse(),
        },
    };
    if obj.call_method0(intern!(py, "is_neg"))?.is_truthy()? {
        return refuse();
    }
    Ok(Some((capsule, memory)))
}
