//! Layout operators: `transpose` copies (tiled, one block transposed per step) and `cumsum`
//! (a row times an upper-triangular ones matrix: a scan written as a matmul, the way a
//! systolic array likes it).

use crate::BlasError;
use crate::promote::served;
use tpukit::dsl::{ArraySpec, DType, Dim, Extent, GridAxis, Kernel, grid};
use tpukit::prelude::*;

/// Tile edge of the transpose kernel.
pub const TILE: usize = 128;

#[tpu_kernel]
fn transpose_k(x: In, o: Out) {
    o[..] = x[..].t();
}

#[tpu_kernel]
fn cumsum_rows(x: In, o: Out, n: usize, out: DType) {
    let upper = (iota(i32, [n, n], 0) <= iota(i32, [n, n], 1)).cast(f32);
    o[..] = dot(x[..].cast(f32), upper).cast(out);
}

/// The 2-D transpose kernel: `[m, n]` → `[n, m]`, both symbolic.
pub fn transpose_kernel(dtype: DType) -> Result<Kernel, BlasError> {
    let tile = |r: &str, c: &str| ArraySpec::new(dtype, [Dim::sym(r), Dim::sym(c)]);
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("n", TILE)),
            GridAxis::parallel(Extent::cdiv("m", TILE)),
        ],
        inputs: vec![tile("m", "n").blocked([TILE, TILE], [grid(1), grid(0)])],
        outputs: vec![tile("n", "m").blocked([TILE, TILE], [grid(0), grid(1)])],
        ..Default::default()
    };
    Ok(transpose_k(&spec)?)
}

/// `x.transpose(d0, d1).contiguous()`: a kernel for the last two dims of a 2-D tensor, a host
/// permutation otherwise.
pub fn transpose(x: &HostArray, d0: i64, d1: i64) -> Result<HostArray, BlasError> {
    let op = "aten.transpose.int";
    let rank = x.shape().len() as i64;
    let norm = |d: i64| if d < 0 { d + rank } else { d };
    let (a, b) = (norm(d0), norm(d1));
    if !(0..rank).contains(&a) || !(0..rank).contains(&b) {
        return Err(BlasError::new(
            op,
            format!("dims ({d0}, {d1}) out of range for rank {rank}"),
        ));
    }
    if rank == 2 && a != b && served(x.dtype()) {
        return Ok(launch(&transpose_kernel(x.dtype())?, Device::Cpu, &[x])?.remove(0));
    }
    let mut perm: Vec<usize> = (0..rank as usize).collect();
    perm.swap(a as usize, b as usize);
    Ok(x.permuted(&perm))
}

/// The cumsum kernel over rows of `n`.
pub fn cumsum_kernel(dtype: DType, n: usize) -> Result<Kernel, BlasError> {
    let rows = |d| {
        ArraySpec::new(d, [Dim::sym("rows"), Dim::Static(n)]).blocked([8, n], [grid(0), 0.into()])
    };
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("rows", 8))],
        inputs: vec![rows(dtype)],
        outputs: vec![rows(dtype)],
        ..Default::default()
    };
    Ok(cumsum_rows(&spec, n, dtype)?)
}

/// `aten.cumsum(x, dim)`, accumulating in f32.
pub fn cumsum(x: &HostArray, dim: i64) -> Result<HostArray, BlasError> {
    let op = "aten.cumsum.default";
    let rank = x.shape().len();
    if rank == 0 || !served(x.dtype()) {
        return Err(BlasError::new(op, "takes an f32/bf16 tensor of rank >= 1"));
    }
    let d = if dim < 0 { dim + rank as i64 } else { dim };
    if d < 0 || d as usize >= rank {
        return Err(BlasError::new(
            op,
            format!("dim {dim} out of range for rank {rank}"),
        ));
    }
    let d = d as usize;
    let last = rank - 1;
    let moved = if d == last {
        x.clone()
    } else {
        transpose(x, d as i64, last as i64)?
    };
    let n = moved.shape()[last];
    let rows = moved.shape().iter().product::<usize>() / n.max(1);
    let flat = moved.clone().reshape(&[rows, n]).expect("same size");
    let out = launch(&cumsum_kernel(x.dtype(), n)?, Device::Cpu, &[&flat])?.remove(0);
    let out = out.reshape(moved.shape()).expect("same size");
    if d == last {
        Ok(out)
    } else {
        transpose(&out, d as i64, last as i64)
    }
}
