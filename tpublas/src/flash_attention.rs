//! Fused scaled dot-product attention (flash attention): the forward and the backward of
//! `_scaled_dot_product_flash_attention_for_cpu` without an `attn_mask`, for head dims in
//! [`HEAD_DIMS`], each direction a pass over `[B·H, L, E]` arrays in `[BQ, E]` query and
//! `[BK, E]` key blocks that never materialises the `[L, S]` scores (the composed path of
//! [`crate::attention`] is ten launches a direction, with its transposes).
//!
//! - forward, grid `(B·H, cdiv(L, BQ), cdiv(S, BK))`, the last axis `arbitrary`: per query
//!   block, the online softmax over the key blocks — `s = q·kᵀ·scale`, masked; the running
//!   row maximum `m`, sum `l` and output `acc` rescaled by `exp(m_old − m_new)` — then
//!   `out = acc / l`, `logsumexp = m + log l`;
//! - backward: `p = exp(s − logsumexp)` recomputed per block, `D = Σ dout·out` per row,
//!   `ds = p·(dout·vᵀ − D)·scale`; one kernel accumulates `dk = Σ dsᵀ·q` and
//!   `dv = Σ pᵀ·dout` over the query blocks of each key block (grid over key blocks, the
//!   query axis `arbitrary`), another `dq = Σ ds·k` over the key blocks of each query block.
//!
//! Masks: a column past `S`, a row past `L`, and with `is_causal` a column past the row
//! (top-left aligned, as ATen), is left out: 0 in `p` and `ds` (the forward's running
//! maximum starts at −3·10³⁸ and masked scores are that, so a block of masked columns
//! leaves it as it was). With `is_causal` (a kernel of its own: the mask's `slack` is a
//! build parameter), a step whose key block lies wholly past its query block's last row
//! does nothing, which halves the work of a square causal attention.
//!
//! Rows of `q`, `dout`, `k` and `v` past the arrays' ends are set to 0 before they enter a
//! product (an overhanging window's contents are unspecified on a TPU, and 0·NaN is NaN).
//! All arithmetic is f32 (bf16 operands are widened as they are loaded, as the composed
//! path); `out` and the gradients are rounded once to the operands' dtype, `logsumexp` is
//! f32 as ATen's.
//!
//! The three kernels repeat their masks and the backward's `p` and `ds`: `#[tpu_kernel]`
//! bodies cannot call helper functions.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::layout;
use tpukit::dsl::{ArraySpec, BlockDim, CallSpec, DType, Dim, Extent, GridAxis, IndexExpr, grid};
use tpukit::prelude::*;

/// The head dims served fused (static extents: a TPU block's last dim must be the array's
/// whole dim or a multiple of 128).
pub const HEAD_DIMS: [usize; 3] = [32, 64, 128];
/// Query rows per block.
pub const BQ: usize = 64;
/// Key rows per block.
pub const BK: usize = 64;

/// Online softmax over the key blocks of one query block (grid axis 2).
#[tpu_kernel]
fn flash_forward(
    q: In,
    k: In,
    v: In,
    scale: In,
    o: Out,
    lse: Out,
    mx: Scratch,
    sm: Scratch,
    acc: Scratch,
    bq: usize,
    bk: usize,
    e: usize,
    slack: i32,
    out: DType,
) {
    if program_id(2) == 0 {
        mx[..] = -3.0e38;
        sm[..] = 0.0;
        acc[..] = 0.0;
    }
    // A key block wholly past the query block's last row (causal) is skipped.
    if program_id(2) * (bk as i32) <= program_id(1) * (bq as i32) + (bq as i32 - 1) + slack {
        let row = iota(i32, [bq, bk], 0) + program_id(1) * (bq as i32);
        let col = iota(i32, [bq, bk], 1) + program_id(2) * (bk as i32);
        let hidden = (col >= dim(k, 1)).cast(f32)
            + (row >= dim(q, 1)).cast(f32)
            + (col > row + slack).cast(f32)
            > 0.5;
        let kr = iota(i32, [bk, e], 0) + program_id(2) * (bk as i32) < dim(k, 1);
        let qr = iota(i32, [bq, e], 0) + program_id(1) * (bq as i32) < dim(q, 1);
        let qv = where_(qr, q[..].cast(f32), 0.0);
        let kv = where_(kr, k[..].cast(f32), 0.0);
        let vv = where_(kr, v[..].cast(f32), 0.0);
        let s = where_(hidden, -3.0e38, dot_t(qv, kv) * scale[..]);
        let old = mx[..];
        let new = old.max(s.reduce_max_keepdims(-1));
        let p = where_(hidden, 0.0, (s - new).exp());
        let alpha = (old - new).exp();
        sm[..] = sm[..] * alpha + p.sum_keepdims(-1);
        acc[..] = acc[..] * alpha + dot(p, vv);
        mx[..] = new;
    }
    if program_id(2) == num_programs(2) - 1 {
        o[..] = (acc[..] / sm[..]).cast(out);
        lse[..] = mx[..] + sm[..].log();
    }
}

/// `dk` and `dv` of one key block (grid axis 1), summed over the query blocks (axis 2).
#[tpu_kernel]
fn flash_backward_kv(
    q: In,
    k: In,
    v: In,
    dout: In,
    out_: In,
    lse: In,
    scale: In,
    dk: Out,
    dv: Out,
    dk_acc: Scratch,
    dv_acc: Scratch,
    bq: usize,
    bk: usize,
    e: usize,
    slack: i32,
    out: DType,
) {
    if program_id(2) == 0 {
        dk_acc[..] = 0.0;
        dv_acc[..] = 0.0;
    }
    // A query block wholly before the key block's first column (causal) is skipped.
    if program_id(1) * (bk as i32) <= program_id(2) * (bq as i32) + (bq as i32 - 1) + slack {
        let row = iota(i32, [bq, bk], 0) + program_id(2) * (bq as i32);
        let col = iota(i32, [bq, bk], 1) + program_id(1) * (bk as i32);
        let hidden = (col >= dim(k, 1)).cast(f32)
            + (row >= dim(q, 1)).cast(f32)
            + (col > row + slack).cast(f32)
            > 0.5;
        let kr = iota(i32, [bk, e], 0) + program_id(1) * (bk as i32) < dim(k, 1);
        let qr = iota(i32, [bq, e], 0) + program_id(2) * (bq as i32) < dim(q, 1);
        let qv = where_(qr, q[..].cast(f32), 0.0);
        let gv = where_(qr, dout[..].cast(f32), 0.0);
        let ov = where_(qr, out_[..].cast(f32), 0.0);
        let kv = where_(kr, k[..].cast(f32), 0.0);
        let vv = where_(kr, v[..].cast(f32), 0.0);
        let sc = scale[..];
        let p = where_(hidden, 0.0, (dot_t(qv, kv) * sc - lse[..]).exp());
        let d = (gv * ov).sum_keepdims(-1);
        let ds = where_(hidden, 0.0, p * (dot_t(gv, vv) - d) * sc);
        dk_acc[..] += dot(ds.t(), qv);
        dv_acc[..] += dot(p.t(), gv);
    }
    if program_id(2) == num_programs(2) - 1 {
        dk[..] = dk_acc[..].cast(out);
        dv[..] = dv_acc[..].cast(out);
    }
}

/// `dq` of one query block (grid axis 1), summed over the key blocks (axis 2).
#[tpu_kernel]
fn flash_backward_q(
    q: In,
    k: In,
    v: In,
    dout: In,
    out_: In,
    lse: In,
    scale: In,
    dq: Out,
    dq_acc: Scratch,
    bq: usize,
    bk: usize,
    e: usize,
    slack: i32,
    out: DType,
) {
    if program_id(2) == 0 {
        dq_acc[..] = 0.0;
    }
    if program_id(2) * (bk as i32) <= program_id(1) * (bq as i32) + (bq as i32 - 1) + slack {
        let row = iota(i32, [bq, bk], 0) + program_id(1) * (bq as i32);
        let col = iota(i32, [bq, bk], 1) + program_id(2) * (bk as i32);
        let hidden = (col >= dim(k, 1)).cast(f32)
            + (row >= dim(q, 1)).cast(f32)
            + (col > row + slack).cast(f32)
            > 0.5;
        let kr = iota(i32, [bk, e], 0) + program_id(2) * (bk as i32) < dim(k, 1);
        let qr = iota(i32, [bq, e], 0) + program_id(1) * (bq as i32) < dim(q, 1);
        let qv = where_(qr, q[..].cast(f32), 0.0);
        let gv = where_(qr, dout[..].cast(f32), 0.0);
        let ov = where_(qr, out_[..].cast(f32), 0.0);
        let kv = where_(kr, k[..].cast(f32), 0.0);
        let vv = where_(kr, v[..].cast(f32), 0.0);
        let sc = scale[..];
        let p = where_(hidden, 0.0, (dot_t(qv, kv) * sc - lse[..]).exp());
        let d = (gv * ov).sum_keepdims(-1);
        let ds = where_(hidden, 0.0, p * (dot_t(gv, vv) - d) * sc);
        dq_acc[..] += dot(ds, kv);
    }
    if program_id(2) == num_programs(2) - 1 {
        dq[..] = dq_acc[..].cast(out);
    }
}

/// The `slack` of the kernels: how far past a row its columns are kept — 0 with
/// `is_causal` (a column past the row is masked), else more than any column (2³⁰).
fn slack(causal: bool) -> i32 {
    if causal { 0 } else { 1 << 30 }
}

/// Which blocks a grid axis walks.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Walk {
    /// Axis 1 over query blocks, axis 2 over key blocks (the forward, `dq`).
    Queries,
    /// Axis 1 over key blocks, axis 2 over query blocks (`dk`, `dv`).
    Keys,
}

/// `[b, rows, e]` of `dtype` (`rows` the symbol `l` or `s`) in `[rows_block, e]` windows at
/// grid axis `axis`.
fn heads(dtype: DType, rows: &str, block: usize, e: usize, axis: usize) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::sym("b"), Dim::sym(rows), Dim::Static(e)]).blocked(
        [
            BlockDim::Squeezed,
            BlockDim::Blocked(block),
            BlockDim::Blocked(e),
        ],
        [grid(0), grid(axis), IndexExpr::from(0)],
    )
}

/// The `[b, l, 1]` f32 row logsumexp in `[BQ, 1]` windows at grid axis `axis`.
fn row_stat(axis: usize) -> ArraySpec {
    ArraySpec::new(DType::F32, [Dim::sym("b"), Dim::sym("l"), Dim::Static(1)]).blocked(
        [
            BlockDim::Squeezed,
            BlockDim::Blocked(BQ),
            BlockDim::Blocked(1),
        ],
        [grid(0), grid(axis), IndexExpr::from(0)],
    )
}

fn spec(
    walk: Walk,
    inputs: Vec<ArraySpec>,
    outputs: Vec<ArraySpec>,
    scratch: Vec<ArraySpec>,
) -> CallSpec {
    let (first, second) = match walk {
        Walk::Queries => (Extent::cdiv("l", BQ), Extent::cdiv("s", BK)),
        Walk::Keys => (Extent::cdiv("s", BK), Extent::cdiv("l", BQ)),
    };
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("b", 1)),
            GridAxis::parallel(first),
            GridAxis::arbitrary(second),
        ],
        inputs,
        outputs,
        scratch,
        ..Default::default()
    }
}

/// The axis query blocks and key blocks take in `walk`.
fn axes(walk: Walk) -> (usize, usize) {
    match walk {
        Walk::Queries => (1, 2),
        Walk::Keys => (2, 1),
    }
}

/// The operands every kernel reads: `q`, `k`, `v` (and `dout`, `out`, `logsumexp` for the
/// backward), then the `scale` run-time scalar.
fn operands(dtype: DType, e: usize, walk: Walk, backward: bool) -> Vec<ArraySpec> {
    let (qa, ka) = axes(walk);
    let mut v = vec![
        heads(dtype, "l", BQ, e, qa),
        heads(dtype, "s", BK, e, ka),
        heads(dtype, "s", BK, e, ka),
    ];
    if backward {
        v.extend([
            heads(dtype, "l", BQ, e, qa),
            heads(dtype, "l", BQ, e, qa),
            row_stat(qa),
        ]);
    }
    v.push(layout::scalar(2));
    v
}

/// The forward kernel for operands of `dtype` and head dim `e` (one of [`HEAD_DIMS`]).
pub fn forward_kernel(dtype: DType, e: usize, causal: bool) -> Result<Prepared> {
    memo(("flash_forward", dtype, e, causal), || {
        let walk = Walk::Queries;
        let spec = spec(
            walk,
            operands(dtype, e, walk, false),
            vec![heads(dtype, "l", BQ, e, 1), row_stat(1)],
            vec![
                ArraySpec::new(DType::F32, [BQ, 1]),
                ArraySpec::new(DType::F32, [BQ, 1]),
                ArraySpec::new(DType::F32, [BQ, e]),
            ],
        );
        Ok(flash_forward(&spec, BQ, BK, e, slack(causal), dtype)?)
    })
}

/// The backward's `(dk, dv)` kernel.
pub fn backward_kv_kernel(dtype: DType, e: usize, causal: bool) -> Result<Prepared> {
    memo(("flash_backward_kv", dtype, e, causal), || {
        let walk = Walk::Keys;
        let spec = spec(
            walk,
            operands(dtype, e, walk, true),
            vec![heads(dtype, "s", BK, e, 1), heads(dtype, "s", BK, e, 1)],
            vec![
                ArraySpec::new(DType::F32, [BK, e]),
                ArraySpec::new(DType::F32, [BK, e]),
            ],
        );
        Ok(flash_backward_kv(&spec, BQ, BK, e, slack(causal), dtype)?)
    })
}

/// The backward's `dq` kernel.
pub fn backward_q_kernel(dtype: DType, e: usize, causal: bool) -> Result<Prepared> {
    memo(("flash_backward_q", dtype, e, causal), || {
        let walk = Walk::Queries;
        let spec = spec(
            walk,
            operands(dtype, e, walk, true),
            vec![heads(dtype, "l", BQ, e, 1)],
            vec![ArraySpec::new(DType::F32, [BQ, e])],
        );
        Ok(flash_backward_q(&spec, BQ, BK, e, slack(causal), dtype)?)
    })
}

/// Every fused kernel for operands of `dtype`.
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let mut k = Vec::new();
    for e in HEAD_DIMS {
        for causal in [false, true] {
            k.extend([
                forward_kernel(dtype, e, causal)?,
                backward_kv_kernel(dtype, e, causal)?,
                backward_q_kernel(dtype, e, causal)?,
            ]);
        }
    }
    Ok(k)
}

/// The `[b, rows, e]` operands of one call, their scale and causality.
pub(crate) struct Fused {
    pub q: HostArray,
    pub k: HostArray,
    pub v: HostArray,
    pub scale: f64,
    pub causal: bool,
}

impl Fused {
    /// Whether the fused kernels serve these operands: a head dim of [`HEAD_DIMS`] shared by
    /// `q`, `k` and `v`, f32 or bf16, and no empty extent (ATen's results for an empty
    /// key sequence, NaN rows, are the composed path's).
    pub fn serves(q: &HostArray, k: &HostArray, v: &HostArray) -> bool {
        let e = q.shape()[2];
        HEAD_DIMS.contains(&e)
            && k.shape()[2] == e
            && v.shape()[2] == e
            && matches!(q.dtype(), DType::F32 | DType::BF16)
            && q.shape().iter().chain(k.shape()).all(|&d| d > 0)
    }

    fn scale(&self) -> HostArray {
        layout::scalar_operand(self.scale, 2)
    }

    /// `(out [b, l, e], logsumexp [b, l, 1] f32)`.
    pub fn forward(&self) -> Result<Vec<HostArray>> {
        let (dtype, e) = (self.q.dtype(), self.q.shape()[2]);
        let kernel = forward_kernel(dtype, e, self.causal)?;
        crate::launch::all(&kernel, &[&self.q, &self.k, &self.v, &self.scale()])
    }

    /// `(dq, dk, dv)` of `dout` given the forward's `out` and `logsumexp` (`[b, l, 1]` f32).
    pub fn backward(
        &self,
        dout: &HostArray,
        out: &HostArray,
        lse: &HostArray,
    ) -> Result<Vec<HostArray>> {
        let (dtype, e, causal) = (self.q.dtype(), self.q.shape()[2], self.causal);
        let scale = self.scale();
        let inputs = [&self.q, &self.k, &self.v, dout, out, lse, &scale];
        let dq = crate::launch::one(&backward_q_kernel(dtype, e, causal)?, &inputs)?;
        let mut kv = crate::launch::all(&backward_kv_kernel(dtype, e, causal)?, &inputs)?;
        let dv = kv.pop().expect("dk, dv");
        let dk = kv.pop().expect("dk, dv");
        Ok(vec![dq, dk, dv])
    }
}
