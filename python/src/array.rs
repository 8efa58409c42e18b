//! Arrays across the boundary: Python hands over `(dtype, shape, bytes)` triples of row-major,
//! little-endian element data (what `numpy.ascontiguousarray(x).tobytes()` gives) and gets
//! the same back. Plain bytes keep the native side free of numpy's C API and its versions;
//! `tpukit/_arrays.py` does the numpy, torch and jax conversions.

use pyo3::prelude::*;
use pyo3::types::PyByteArray;
use tpukit::HostArray;
use tpukit_dsl::{DType, bf16, f16};

use crate::error::TpukitError;

/// `(dtype name, shape, data)`: the wire form of one array.
pub type Wire<'py> = (String, Vec<usize>, Bound<'py, PyByteArray>);

/// The dtype called `name` (`f32`, `bf16`, `f16`, `i32`, `i8`, `bool`).
pub fn dtype(name: &str) -> PyResult<DType> {
    DType::parse(name).ok_or_else(|| {
        TpukitError::new_err(format!(
            "unsupported dtype `{name}` (tpukit supports f32, bf16, f16, i32, i8, bool)"
        ))
    })
}

/// Builds a host array from row-major little-endian bytes.
///
/// Invariant checked here: `data.len() == product(shape) * dtype.size_bytes()`.
pub fn from_bytes(dtype: DType, shape: &[usize], data: &[u8]) -> PyResult<HostArray> {
    let n: usize = shape.iter().product();
    let want = n * dtype.size_bytes();
    if data.len() != want {
        return Err(TpukitError::new_err(format!(
            "a {dtype} array of shape {shape:?} needs {want} bytes, got {}",
            data.len()
        )));
    }
    let shape = ndarray::IxDyn(shape);
    macro_rules! build {
        ($variant:ident, $t:ty, $size:expr, $conv:expr) => {{
            let v: Vec<$t> = data.chunks_exact($size).map($conv).collect();
            HostArray::$variant(ndarray::ArrayD::from_shape_vec(shape, v).expect("length checked"))
        }};
    }
    Ok(match dtype {
        DType::F32 => build!(F32, f32, 4, |c| f32::from_le_bytes(c.try_into().unwrap())),
        DType::BF16 => build!(BF16, bf16, 2, |c| bf16::from_bits(u16::from_le_bytes(
            c.try_into().unwrap()
        ))),
        DType::F16 => build!(F16, f16, 2, |c| f16::from_bits(u16::from_le_bytes(
            c.try_into().unwrap()
        ))),
        DType::I32 => build!(I32, i32, 4, |c| i32::from_le_bytes(c.try_into().unwrap())),
        DType::I8 => build!(I8, i8, 1, |c| c[0] as i8),
        DType::Bool => build!(Bool, bool, 1, |c| c[0] != 0),
    })
}

/// The row-major little-endian bytes of a host array.
pub fn to_bytes(a: &HostArray) -> Vec<u8> {
    macro_rules! bytes {
        ($a:expr, $f:expr) => {
            $a.as_standard_layout().iter().flat_map($f).collect()
        };
    }
    match a {
        HostArray::F32(a) => bytes!(a, |x: &f32| x.to_le_bytes()),
        HostArray::BF16(a) => bytes!(a, |x: &bf16| x.to_bits().to_le_bytes()),
        HostArray::F16(a) => bytes!(a, |x: &f16| x.to_bits().to_le_bytes()),
        HostArray::I32(a) => bytes!(a, |x: &i32| x.to_le_bytes()),
        HostArray::I8(a) => bytes!(a, |x: &i8| x.to_le_bytes()),
        HostArray::Bool(a) => bytes!(a, |x: &bool| [*x as u8]),
    }
}

/// A host array in wire form.
pub fn to_wire<'py>(py: Python<'py>, a: &HostArray) -> Wire<'py> {
    (
        a.dtype().name().to_string(),
        a.shape().to_vec(),
        PyByteArray::new(py, &to_bytes(a)),
    )
}
