//! `mm`, `bmm`, `addmm`, `embedding`, `index_select`: the catalog's blocked matmul (f32
//! accumulation in VMEM-style scratch over an `arbitrary` k axis) and row gather, plus a
//! batched matmul whose batch dim is squeezed out of the blocks.

use crate::BlasError;
use crate::elementwise::{Binary, binary, binary_scalar};
use crate::promote::served;
use tpukit::catalog;
use tpukit::dsl::{ArraySpec, BlockDim, DType, Dim, Extent, GridAxis, Kernel, grid};
use tpukit::prelude::*;

/// Block edge of the matmul kernels.
pub const BLOCK: usize = 128;

#[tpu_kernel]
fn bmm_k(a: In, b: In, o: Out, acc: Scratch, out: DType) {
    if program_id(3) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    if program_id(3) == num_programs(3) - 1 {
        o[..] = acc[..].cast(out);
    }
}

fn check2(op: &str, a: &HostArray, b: &HostArray, rank: usize) -> Result<(), BlasError> {
    for x in [a, b] {
        if !served(x.dtype()) || x.shape().len() != rank {
            return Err(BlasError::new(
                op,
                format!(
                    "takes rank-{rank} f32/bf16 tensors, got {} {:?}",
                    x.dtype(),
                    x.shape()
                ),
            ));
        }
    }
    if a.dtype() != b.dtype() {
        return Err(BlasError::new(
            op,
            format!("dtypes differ: {} and {}", a.dtype(), b.dtype()),
        ));
    }
    let (sa, sb) = (a.shape(), b.shape());
    if sa[rank - 1] != sb[rank - 2] || (rank == 3 && sa[0] != sb[0]) {
        return Err(BlasError::new(
            op,
            format!("shapes {sa:?} and {sb:?} do not multiply"),
        ));
    }
    Ok(())
}

/// `aten.mm(a, b)`: `[m, k] @ [k, n]`, f32 accumulation, result in the inputs' dtype.
pub fn mm(a: &HostArray, b: &HostArray) -> Result<HostArray, BlasError> {
    check2("aten.mm.default", a, b, 2)?;
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let inst = catalog::find("matmul")
        .expect("the catalog's matmul")
        .instantiate(&[m, k, n], a.dtype())?;
    Ok(launch(&inst.kernel, Device::Cpu, &[a, b])?.remove(0))
}

/// `aten.bmm(a, b)`: `[batch, m, k] @ [batch, k, n]`.
pub fn bmm(a: &HostArray, b: &HostArray) -> Result<HostArray, BlasError> {
    check2("aten.bmm.default", a, b, 3)?;
    Ok(launch(&bmm_kernel(a.dtype())?, Device::Cpu, &[a, b])?.remove(0))
}

/// The batched matmul kernel: `[b, m, k] @ [b, k, n]` (all symbolic) in 128-blocks.
pub fn bmm_kernel(dtype: DType) -> Result<Kernel, BlasError> {
    let tile = |r: &str, c: &str| ArraySpec::new(dtype, [Dim::sym("b"), Dim::sym(r), Dim::sym(c)]);
    let blocks = [
        BlockDim::Squeezed,
        BlockDim::Blocked(BLOCK),
        BlockDim::Blocked(BLOCK),
    ];
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("b", 1)),
            GridAxis::parallel(Extent::cdiv("m", BLOCK)),
            GridAxis::parallel(Extent::cdiv("n", BLOCK)),
            GridAxis::arbitrary(Extent::cdiv("k", BLOCK)),
        ],
        inputs: vec![
            tile("m", "k").blocked(blocks, [grid(0), grid(1), grid(3)]),
            tile("k", "n").blocked(blocks, [grid(0), grid(3), grid(2)]),
        ],
        outputs: vec![tile("m", "n").blocked(blocks, [grid(0), grid(1), grid(2)])],
        scratch: vec![ArraySpec::new(DType::F32, [BLOCK, BLOCK])],
        ..Default::default()
    };
    Ok(bmm_k(&spec, dtype)?)
}

/// `aten.addmm(input, a, b, beta, alpha)`: `beta·input + alpha·(a @ b)`, `input`
/// broadcasting to `[m, n]`.
pub fn addmm(
    input: &HostArray,
    a: &HostArray,
    b: &HostArray,
    beta: f64,
    alpha: f64,
) -> Result<HostArray, BlasError> {
    let product = mm(a, b)?;
    let scaled = if alpha == 1.0 {
        product
    } else {
        binary_scalar(Binary::Mul, &product, alpha, 1.0)?
    };
    if beta == 0.0 {
        return Ok(scaled); // ATen: with beta = 0, `input` is ignored (even NaNs in it).
    }
    binary(Binary::Add, &scaled, input, beta)
}

/// `aten.embedding(weight, indices)`: rows of `weight` (`[num, d]`) picked by `indices`
/// (i32, any shape); the result has shape `indices.shape + [d]`. An index outside
/// `0..num` is an error naming the kernel and grid step, not a wrong read.
pub fn embedding(weight: &HostArray, indices: &HostArray) -> Result<HostArray, BlasError> {
    let op = "aten.embedding.default";
    if indices.dtype() != DType::I32 || weight.shape().len() != 2 || !served(weight.dtype()) {
        return Err(BlasError::new(
            op,
            format!(
                "takes a 2-D f32/bf16 weight and i32 indices, got {} {:?} and {} indices",
                weight.dtype(),
                weight.shape(),
                indices.dtype()
            ),
        ));
    }
    let k: usize = indices.shape().iter().product();
    let (num, d) = (weight.shape()[0], weight.shape()[1]);
    let inst = catalog::find("row_gather")
        .expect("the catalog's row gather")
        .instantiate(&[num, d, k], weight.dtype())?;
    let flat = indices.clone().reshape(&[k]).expect("same size");
    let rows = launch(&inst.kernel, Device::Cpu, &[&flat, weight])?.remove(0);
    let mut shape = indices.shape().to_vec();
    shape.push(d);
    Ok(rows.reshape(&shape).expect("same size"))
}

/// `aten.index_select(x, 0, index)` for 2-D `x`.
pub fn index_select(x: &HostArray, dim: i64, index: &HostArray) -> Result<HostArray, BlasError> {
    if dim != 0 || x.shape().len() != 2 || index.shape().len() != 1 {
        return Err(BlasError::new(
            "aten.index_select.default",
            "supports dim 0 of a 2-D tensor with a 1-D index (other dims: not yet)",
        ));
    }
    embedding(x, index)
}
