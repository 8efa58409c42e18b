//! The runtime's process-wide state from Python: devices, bundles, the compiled backend's
//! warm-up, and where compiled kernels came from.

use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use tpukit::Device;
use tpukit::runtime::{bundle, cpu};

use crate::error::{self, guard};

/// The names of the devices a kernel runs on, the default first.
#[pyfunction]
pub fn devices() -> PyResult<Vec<&'static str>> {
    guard(None, || Ok(Device::ALL.iter().map(|d| d.name()).collect()))
}

/// The TPU topologies tpukit lowers for, as libtpu names them (`v5e:2x2`), the default first.
#[pyfunction]
pub fn tpu_topologies() -> PyResult<Vec<&'static str>> {
    guard(None, || Ok(tpukit_mosaic::TOPOLOGIES.to_vec()))
}

/// Loads the bundle at `path` (its index only; entries are mapped and checked on first
/// use). Returns false, after a message on stderr, if it was refused (another target or
/// tpukit version, a bad checksum): kernels are then compiled instead.
#[pyfunction]
pub fn register_bundle(path: &str) -> PyResult<bool> {
    guard(None, || Ok(bundle::register(Path::new(path))))
}

/// Loads the first of `paths` this machine can use (the package lists its bundles best
/// first) and returns its path; None, after one message on stderr, if none fits.
#[pyfunction]
pub fn register_first_bundle(paths: Vec<String>) -> PyResult<Option<String>> {
    guard(None, || {
        let paths: Vec<PathBuf> = paths.into_iter().map(PathBuf::from).collect();
        Ok(bundle::register_first(&paths).map(|p| p.display().to_string()))
    })
}

/// The loaded bundles, in load order, as `(path, CPU its code was compiled for)`.
#[pyfunction]
pub fn loaded_bundles() -> PyResult<Vec<(String, String)>> {
    guard(None, || {
        Ok(bundle::loaded_bundles()
            .into_iter()
            .map(|(p, t)| (p.display().to_string(), t.cpu))
            .collect())
    })
}

/// Prepares the compiled backend ahead of the first launch (host target, JIT, worker
/// threads, allocator, the bundles' warm-up kernel; see `tpukit::runtime::cpu::warm_up`).
#[pyfunction]
pub fn warm_up() -> PyResult<()> {
    guard(None, || cpu::warm_up().map_err(error::runtime))
}

/// Sets the work (bytes a launch's windows cover) below which CPU launches run on one
/// thread, returning the previous value; for measurements (see
/// `tpukit::runtime::cpu::MIN_SPLIT_BYTES`): 0 splits every parallel grid, as before.
#[pyfunction]
pub fn set_min_split_bytes(bytes: usize) -> PyResult<usize> {
    guard(None, || Ok(cpu::set_min_split_bytes(bytes)))
}

/// `(compiled, disk hits, bundle hits, corrupt disk entries)` in this process so far.
#[pyfunction]
pub fn cache_stats() -> PyResult<(usize, usize, usize, usize)> {
    guard(None, || {
        let s = cpu::stats();
        Ok((s.compiled, s.disk_hits, s.bundle_hits, s.corrupt))
    })
}
