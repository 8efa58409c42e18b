//! Flash attention, forward: `o = softmax(q·kᵀ·scale) · v` per batch-head, without ever
//! holding a whole score row. The grid walks (batch-head, query block, key block); the key
//! axis is `arbitrary` and carries, per query row, the running maximum `mx`, the running sum
//! `sm` of `exp(s − mx)` and the unnormalised output `acc` in f32 scratch (online softmax):
//! each key block rescales what came before by `exp(mx_old − mx_new)`. The last key block
//! writes `acc / sm`.
//!
//! Causal attention (query `i` sees keys `j ≤ i`, top-left aligned) skips every key block
//! that starts past the query block's last row — about half the work — and masks the
//! diagonal blocks element by element. Lengths need not divide the blocks: the key blocks
//! overhanging `s` read keys of 0 and are masked by column, and the overhanging query rows
//! are never stored. The running maximum starts at a large finite negative number, not
//! −∞, so a fully masked block never computes `−∞ − (−∞)`.

use super::{Instance, bind};
use crate::prelude::*;
use tpukit_dsl::Result;

/// Query rows per block.
pub const BQ: usize = 128;
/// Key rows per block.
pub const BK: usize = 128;
// The kernel body spells the block sizes as literals.
const _: () = assert!(BQ == 128 && BK == 128);

#[tpu_kernel]
pub fn flash_attention(
    q: In,
    k: In,
    v: In,
    o: Out,
    mx: Scratch,
    sm: Scratch,
    acc: Scratch,
    scale: f32,
    causal: i32,
    out: DType,
) {
    let first_row = program_id(1) * 128;
    let first_col = program_id(2) * 128;
    if program_id(2) == 0 {
        mx[..] = -3.0e38;
        sm[..] = 0.0;
        acc[..] = 0.0;
    }
    // A key block past the query block's last row holds no visible key when causal.
    if first_col <= first_row + 127 + (1 - causal) * 1073741824 {
        let row = iota(i32, [128, 128], 0) + first_row;
        let col = iota(i32, [128, 128], 1) + first_col;
        let hidden = (col >= dim(k, 1)) | ((col - row) * causal > 0);
        let s = where_(hidden, -3.0e38, dot_t(q[..], k[..]) * scale);
        let old = mx[..];
        let new = old.max(s.reduce_max_keepdims(-1));
        let p = (s - new).exp();
        let alpha = (old - new).exp();
        sm[..] = sm[..] * alpha + p.sum_keepdims(-1);
        acc[..] = acc[..] * alpha + dot(p.cast(out), v[..]);
        mx[..] = new;
    }
    if program_id(2) == num_programs(2) - 1 {
        o[..] = (acc[..] / sm[..]).cast(out);
    }
}

/// `[bh, l, d]` queries against `[bh, s, d]` keys and values; `bh`, `l` and `s` symbolic,
/// the head dimension `d` static (a whole block).
pub fn spec(d: usize, dtype: DType) -> CallSpec {
    let rows = |len: &str, block: usize, index| {
        ArraySpec::new(dtype, [Dim::sym("bh"), Dim::sym(len), Dim::from(d)]).blocked(
            [
                BlockDim::Squeezed,
                BlockDim::Blocked(block),
                BlockDim::Blocked(d),
            ],
            [grid(0), index, 0.into()],
        )
    };
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("bh", 1)),
            GridAxis::parallel(Extent::cdiv("l", BQ)),
            GridAxis::arbitrary(Extent::cdiv("s", BK)),
        ],
        inputs: vec![
            rows("l", BQ, grid(1)),
            rows("s", BK, grid(2)),
            rows("s", BK, grid(2)),
        ],
        outputs: vec![rows("l", BQ, grid(1))],
        scratch: vec![
            ArraySpec::new(DType::F32, [BQ, 1]),
            ArraySpec::new(DType::F32, [BQ, 1]),
            ArraySpec::new(DType::F32, [BQ, d]),
        ],
        ..Default::default()
    }
}

/// The causal kernel with `1/√d` scaling at `[bh, l, s, d]` (what the catalog ships).
pub fn instance(shape: &[usize], dtype: DType) -> Result<Instance> {
    let (bh, l, s, d) = (shape[0], shape[1], shape[2], shape[3]);
    let scale = 1.0 / (d as f32).sqrt();
    Ok(Instance {
        kernel: flash_attention(&spec(d, dtype), scale, 1, dtype)?,
        bindings: bind(&[("bh", bh), ("l", l), ("s", s)]),
    })
}
