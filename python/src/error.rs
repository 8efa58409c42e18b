//! The exceptions the native module raises.
//!
//! `TpukitError` is the base of every tpukit failure; `UnsupportedError` (a subclass) means
//! an input uses something tpukit does not import — an op, a memory space, a dtype — and
//! names it. Neither is ever raised for a result that might be wrong: that is not an error
//! path tpukit has.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    tpukit,
    TpukitError,
    PyException,
    "A kernel could not be built, imported, lowered or run."
);
create_exception!(
    tpukit,
    UnsupportedError,
    TpukitError,
    "The input uses an op or feature tpukit does not support; the message names it."
);

/// A kernel-IR error (building, verifying, importing) as a Python exception.
pub fn dsl(e: tpukit_dsl::Error) -> PyErr {
    if e.message.starts_with("unsupported") {
        UnsupportedError::new_err(e.to_string())
    } else {
        TpukitError::new_err(e.to_string())
    }
}

pub fn runtime(e: tpukit::runtime::RuntimeError) -> PyErr {
    TpukitError::new_err(e.to_string())
}
