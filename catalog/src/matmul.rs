//! A blocked matmul with an f32 scratch accumulator over an `arbitrary` k axis: the
//! accumulator is zeroed on the first k step and written out on the last. No dimension need
//! divide its block: the overhanging parts of `a` and `b` read zeros along k, so they add
//! nothing, and the overhanging rows and columns of `o` are never stored.

use super::{Instance, bind};
use crate::prelude::*;
use tpukit_dsl::Result;

#[tpu_kernel]
pub fn matmul(a: In, b: In, o: Out, acc: Scratch, out: DType) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    if program_id(2) == num_programs(2) - 1 {
        o[..] = acc[..].cast(out);
    }
}

pub const BLOCK: usize = 128;

/// `(m, k) @ (k, n)`, all extents symbolic, in blocks of [`BLOCK`]³.
pub fn spec(dtype: DType) -> CallSpec {
    let array = |r: &str, c: &str| ArraySpec::new(dtype, [Dim::sym(r), Dim::sym(c)]);
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", BLOCK)),
            GridAxis::parallel(Extent::cdiv("n", BLOCK)),
            GridAxis::arbitrary(Extent::cdiv("k", BLOCK)),
        ],
        inputs: vec![
            array("m", "k").blocked([BLOCK, BLOCK], [grid(0), grid(2)]),
            array("k", "n").blocked([BLOCK, BLOCK], [grid(2), grid(1)]),
        ],
        outputs: vec![array("m", "n").blocked([BLOCK, BLOCK], [grid(0), grid(1)])],
        scratch: vec![ArraySpec::new(DType::F32, [BLOCK, BLOCK])],
        ..Default::default()
    }
}

pub fn instance(shape: &[usize], dtype: DType) -> Result<Instance> {
    Ok(Instance {
        kernel: matmul(&spec(dtype), dtype)?,
        bindings: bind(&[("m", shape[0]), ("k", shape[1]), ("n", shape[2])]),
    })
}
