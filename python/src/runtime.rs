//! The runtime's process-wide state from Python: bundles, the compiled backend's warm-up,
//! and where compiled kernels came from.

use pyo3::prelude::*;
use std::path::Path;
use tpukit::runtime::cpu;

use crate::error;

/// Loads the bundle at `path` (its index only; entries are mapped and checked on first
/// use). Returns false, after a message on stderr, if it was refused (another target or
/// tpukit version, a bad checksum): kernels are then compiled instead.
#[pyfunction]
pub fn register_bundle(path: &str) -> bool {
    cpu::bundle::register(Path::new(path))
}

/// Prepares the compiled backend ahead of the first launch (host target, JIT, worker
/// threads, allocator, the bundles' warm-up kernel; see `tpukit::runtime::cpu::warm_up`).
#[pyfunction]
pub fn warm_up() -> PyResult<()> {
    cpu::warm_up().map_err(error::runtime)
}

/// `(compiled, disk hits, bundle hits, corrupt disk entries)` in this process so far.
#[pyfunction]
pub fn cache_stats() -> (usize, usize, usize, usize) {
    let s = cpu::stats();
    (s.compiled, s.disk_hits, s.bundle_hits, s.corrupt)
}
