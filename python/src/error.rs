//! The exceptions the native module raises, and the guard every entry point runs in.
//!
//! Errors cross the boundary by kind, never by message: each [`ErrorKind`] of tpukit's error
//! types is one Python class ([`raise`]), every one a subclass of `TpukitError` (itself an
//! `Exception`). `UnsupportedError` means the input uses something tpukit does not support (an
//! op, a memory space, a dtype) and names it; `ShapeError`, `DTypeError` and `BoundsError`
//! mean the caller's shapes, dtypes or indices are wrong; `OutOfMemoryError` that an
//! allocation failed (never an abort); `InternalError` is a bug in tpukit.
//! Other failures (a malformed kernel or call) raise `TpukitError` itself. None is ever raised
//! for a result that might be wrong: that is not an error path tpukit has.
//!
//! A Rust panic must never reach Python as pyo3's `PanicException`, which derives from
//! `BaseException` and so escapes `except Exception`: every entry point runs its body in
//! [`guard`], which turns a panic into `InternalError` naming the kernel.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use tpukit_dsl::ErrorKind;

create_exception!(
    tpukit,
    TpukitError,
    PyException,
    "A kernel could not be built, imported, lowered or run; the base of every tpukit error."
);
create_exception!(
    tpukit,
    UnsupportedError,
    TpukitError,
    "The input uses an op or feature tpukit does not support; the message names it."
);
create_exception!(
    tpukit,
    ShapeError,
    TpukitError,
    "Shapes do not fit: ranks, extents, broadcasting, or a symbolic extent bound twice or not \
     at all."
);
create_exception!(
    tpukit,
    DTypeError,
    TpukitError,
    "A dtype is wrong where it is used, or not one the operation serves."
);
create_exception!(
    tpukit,
    BoundsError,
    TpukitError,
    "A kernel accessed outside an array or a block (an index map, a dynamic slice, a gather \
     index); the message names the op, its source line and the grid step."
);
create_exception!(
    tpukit,
    OutOfMemoryError,
    TpukitError,
    "Memory the call needs could not be allocated: a result, block or buffer larger than the \
     host can give (where torch raises `RuntimeError`). The message names the buffer and its \
     size."
);
create_exception!(
    tpukit,
    InternalError,
    TpukitError,
    "A bug in tpukit (a Rust panic or a broken invariant), not in the caller's input; please \
     report it with the message."
);

/// Adds every exception class to the module `m`.
pub fn add_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("TpukitError", py.get_type::<TpukitError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("ShapeError", py.get_type::<ShapeError>())?;
    m.add("DTypeError", py.get_type::<DTypeError>())?;
    m.add("BoundsError", py.get_type::<BoundsError>())?;
    m.add("OutOfMemoryError", py.get_type::<OutOfMemoryError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}

/// The Python exception of an error of `kind`.
pub fn raise(kind: ErrorKind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    match kind {
        ErrorKind::Invalid => TpukitError::new_err(message),
        ErrorKind::Unsupported => UnsupportedError::new_err(message),
        ErrorKind::Shape => ShapeError::new_err(message),
        ErrorKind::DType => DTypeError::new_err(message),
        ErrorKind::Bounds => BoundsError::new_err(message),
        ErrorKind::Memory => OutOfMemoryError::new_err(message),
        ErrorKind::Internal => InternalError::new_err(message),
    }
}

/// A kernel-IR error (building, verifying, importing, lowering).
pub fn dsl(e: tpukit_dsl::Error) -> PyErr {
    raise(e.kind, e.to_string())
}

/// A launch failure.
pub fn runtime(e: tpukit::runtime::RuntimeError) -> PyErr {
    raise(e.kind, e.message)
}

/// A tpuBLAS failure.
pub fn blas(e: tpukit_blas::BlasError) -> PyErr {
    raise(e.kind, e.message)
}

/// Runs the body of one entry point of the native module: a panic inside it (on this thread,
/// or on a worker whose panic the runtime passes on) becomes `InternalError`, naming `subject`
/// (the kernel, or the tpuBLAS operator) where the call has one. The body's state is not
/// reused after a panic: process-wide caches recover from poisoned locks, and a compilation
/// that panicked is attempted again.
///
/// pyo3's generated field getters and comparisons (of `Operand`) run no tpukit code and are
/// the only entry points outside a guard.
pub fn guard<T>(subject: Option<&str>, body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(|| {
        panic_if_armed();
        body()
    }))
    .unwrap_or_else(|payload| Err(internal(subject, payload.as_ref())))
}

fn internal(subject: Option<&str>, payload: &(dyn Any + Send)) -> PyErr {
    let within = subject.map_or_else(String::new, |s| format!(" in `{s}`"));
    InternalError::new_err(format!(
        "tpukit internal error{within}: {}",
        panic_message(payload)
    ))
}

/// What a panic's payload says, and that it is a bug in tpukit.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    format!("{what} (a bug in tpukit, not in your code: please report it with this message)")
}

/// Set by [`arm_test_panic`]: the next entry point to run panics inside its guard.
static ARMED: AtomicBool = AtomicBool::new(false);

/// Panics if a test armed it (see [`arm_test_panic`]); called first inside every guard, and
/// by the FFI handler inside its own.
pub fn panic_if_armed() {
    if ARMED.load(Ordering::Relaxed) && ARMED.swap(false, Ordering::Relaxed) {
        panic!("a panic the tests asked for (tpukit._native._arm_test_panic)");
    }
}

/// For the tests of [`guard`]: makes the next call of any entry point panic inside its guard,
/// as a bug would. Refused unless `TPUKIT_TEST_HOOKS=1`, so no user arms it by accident.
#[pyfunction]
#[pyo3(name = "_arm_test_panic")]
pub fn arm_test_panic() -> PyResult<()> {
    if std::env::var("TPUKIT_TEST_HOOKS").as_deref() != Ok("1") {
        return Err(TpukitError::new_err(
            "_arm_test_panic is a test hook: set TPUKIT_TEST_HOOKS=1 to use it",
        ));
    }
    ARMED.store(true, Ordering::Relaxed);
    Ok(())
}
