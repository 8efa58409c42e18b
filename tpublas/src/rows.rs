//! The row layout every reduction-like operator runs in: the tensor as a 2-D `[m, n]` array
//! (`m` rows of `n` elements, both symbolic) reduced or normalised along `n`, in windows of
//! [`BM`] × [`BN`] (or × one of [`WIDTHS`] for the operators that choose their [`width`] by
//! `n`).
//!
//! A row operator that needs its row more than once (softmax, norms) runs in *phases*: the
//! grid is `(cdiv(m, BM) parallel, phases arbitrary, cdiv(n, BN) arbitrary)`; the early
//! phases accumulate per-row statistics in `[BM, 1]` f32 scratch, the last phase writes the
//! output. The output's window index along `n` is `j · [phase is last]` so that the window
//! stays on column block 0 until the last phase starts writing (on a TPU a window is written
//! back when its index changes: block 0 is only ever left after the last phase wrote it).
//!
//! Overhanging columns of the last column block read the input's fill value; kernels that
//! must not count them either choose the fill (0 for sums, −∞ for maxima) or mask with
//! `iota + j·BN < dim(x, 1)`. The CPU backend runs an overhanging window on the array itself,
//! its loops cut at the row's end, when it can prove that every sum and maximum over a row
//! then gets the same result (the elements it leaves out are the fill or masked to the
//! reduction's identity: `cpu::codegen::clip`); otherwise it stages the window (copies it
//! into a block-sized buffer), which cost rows of 1000 columns a third of their time. So the
//! kernels mask where only the mask makes it provable (softmax's `exp(x − max)`, which is 0
//! past the row only because the fill is −∞ and the maximum is finite).

use tpukit::dsl::{ArraySpec, BlockDim, DType, Dim, Extent, GridAxis, IndexExpr, grid};

/// Rows per window: bf16's sublane tile (16), a multiple of f32's (8).
pub const BM: usize = 16;
/// Columns per window: four 128-lane vregs.
pub const BN: usize = 512;

/// Columns per window of the row operators that choose their width ([`width`]): eight
/// vregs, a whole 4 KiB page of an f32 row.
pub const WIDE: usize = 1024;

/// The window widths of the row operators that choose their width ([`width`]), widest
/// first: multiples of 128 lanes, each with its kernels in the bundle. Up to 4096 so that
/// rows of up to 4096 elements (GPT-2 large's 1280, XL's 1600, LLaMA's 4096) are one window,
/// read once by softmax and the norms: with 1024 the widest, interleaved, ms per call on
/// `(4 Mi / n, n)` f32 tensors, tpuBLAS / torch, before → after (two runs each, 2026-11-28,
/// 15:20): softmax of 2304 2.95–4.36 / 1.25–1.28 → 1.22–1.29 / 1.47–1.56, of 4096
/// 3.84–4.07 / 1.37–1.44 → 1.12–1.59 / 1.65–1.85; layer norm of 4096 1.49–2.83 / 1.40–1.44
/// → 1.16–1.37 / 1.41–1.62. A `[16, 4096]` f32 window is 256 KiB, well inside a TPU's
/// scoped VMEM with its double buffers.
pub const WIDTHS: [usize; 7] = [4096, 2048, WIDE, 768, BN, 256, 128];

/// The window width for rows of `n` elements: of [`WIDTHS`], the one that covers a row in
/// the fewest windows, the narrowest of those (so a width that divides the row when one
/// needs no more windows); [`BN`] for empty rows. Fewer windows are fewer grid steps and
/// longer contiguous runs (a `[16, 1024]` f32 window of 1024-element rows is one 64 KiB
/// range), and a row in one window is read once by softmax ([`crate::softmax::Reads`]). The
/// CPU backend clips an overhanging window (see the module docs), so the columns past the
/// row cost it nothing; a TPU computes them, at most a window's width less one per row.
///
/// Why not the widest width that divides the row, as before the row kernels were clipped:
/// a row no width divides then overhung a staged window at every step, and rows of 1000
/// columns took two 512-column windows, read twice by softmax. Before that, with only
/// `WIDE` and `BN`, rows of 768 (GPT-2's width) overhung a second 512-column window, and
/// rows of 128 or 256 (attention over short sequences) one 512-column window, at every
/// step: interleaved, ms per call on `(4 Mi / n, n)` f32 tensors, tpuBLAS / torch, 768:
/// layer norm 2.54–2.80 / 1.20–1.47, softmax 3.62–3.71 / 1.41–1.53, sum 0.32–0.35 /
/// 0.11–0.12; 128: layer norm 6.71–6.97 / 1.31–1.38, softmax 6.10–6.13 / 1.50–1.51, sum
/// 1.45–1.68 / 0.15–0.16 (2026-11-28).
pub fn width(n: usize) -> usize {
    if n == 0 {
        return BN;
    }
    WIDTHS
        .into_iter()
        .min_by_key(|&w| (n.div_ceil(w), w))
        .unwrap_or(BN)
}

/// Rows per window for `m` rows: [`SHORT`] for fewer than [`FEW_ROWS`] rows that [`BM`]
/// does not divide, else `BM`. A window that overhangs its array computes its missing rows
/// on a TPU, and was staged on the CPU backend (copied into a block-sized buffer, the
/// missing rows filled and computed) until its row kernels were clipped (see the module
/// docs): a `[4, 1024]` f32 softmax in `[16, 1024]` windows did four times the work it
/// needed, plus the copies (BENCHMARKS.md, "From Python"), and 120 rows (GPT-2's 12 heads ×
/// 10 positions) staged their last window and computed 8 rows for nothing. In
/// `SHORT` windows a multiple of 8 rows does not overhang at all, and any other count
/// overhangs by fewer rows. `SHORT` is f32's sublane tile, so windows of either height
/// lower to Mosaic.
pub fn height(m: usize) -> usize {
    if m.is_multiple_of(BM) || m >= FEW_ROWS {
        BM
    } else {
        SHORT
    }
}

/// From this many rows on, one overhanging window costs less than twice the grid steps:
/// 4095 bf16 rows of 1024 took 1.49–1.57 ms to softmax in 16-row windows and 1.70–1.78 in
/// 8-row ones, `sum` 157–173 against 193 µs; 24, 100, 120 and 200 rows took 5–25% less in
/// 8-row windows (2026-11-28, alternating processes).
pub const FEW_ROWS: usize = 256;

/// The window height of short arrays ([`height`]).
pub const SHORT: usize = 8;

/// Column block index of the windows read in every phase.
fn col() -> IndexExpr {
    grid(2)
}

/// The grid of a row kernel with `phases` passes over each row.
pub fn phased_grid(phases: usize) -> Vec<GridAxis> {
    phased_grid_by(phases, BN)
}

/// [`phased_grid`] with windows of `bn` columns.
pub fn phased_grid_by(phases: usize, bn: usize) -> Vec<GridAxis> {
    phased_grid_of(phases, BM, bn)
}

/// [`phased_grid`] with windows of `bm` rows and `bn` columns.
pub fn phased_grid_of(phases: usize, bm: usize, bn: usize) -> Vec<GridAxis> {
    vec![
        GridAxis::parallel(Extent::cdiv("m", bm)),
        GridAxis::arbitrary(phases),
        GridAxis::arbitrary(Extent::cdiv("n", bn)),
    ]
}

/// The `[m, n]` input, read in every phase, overhanging columns reading `fill`.
pub fn input(dtype: DType, fill: f64) -> ArraySpec {
    input_by(dtype, fill, BN)
}

/// [`input`] in windows of `bn` columns.
pub fn input_by(dtype: DType, fill: f64, bn: usize) -> ArraySpec {
    input_of(dtype, fill, BM, bn)
}

/// [`input`] in windows of `bm` rows and `bn` columns.
pub fn input_of(dtype: DType, fill: f64, bm: usize, bn: usize) -> ArraySpec {
    ArraySpec::new(dtype, ["m", "n"])
        .blocked([bm, bn], [grid(0), col()])
        .fill(fill)
}

/// The `[m, n]` output, written in the last of `phases` phases.
pub fn output(dtype: DType, phases: usize) -> ArraySpec {
    output_by(dtype, phases, BN)
}

/// [`output`] in windows of `bn` columns.
pub fn output_by(dtype: DType, phases: usize, bn: usize) -> ArraySpec {
    output_of(dtype, phases, BM, bn)
}

/// [`output`] in windows of `bm` rows and `bn` columns.
pub fn output_of(dtype: DType, phases: usize, bm: usize, bn: usize) -> ArraySpec {
    let j = if phases == 1 {
        col()
    } else {
        col() * (grid(1) / (phases as i64 - 1))
    };
    ArraySpec::new(dtype, ["m", "n"]).blocked([bm, bn], [grid(0), j])
}

/// A per-row statistic `[m, 1]` (reduction results, mean, rstd).
pub fn stat(dtype: DType) -> ArraySpec {
    stat_of(dtype, BM)
}

/// [`stat`] in windows of `bm` rows.
pub fn stat_of(dtype: DType, bm: usize) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::sym("m"), Dim::Static(1)]).blocked([bm, 1], [grid(0), 0.into()])
}

/// A per-column vector `[1, n]` (a norm's weight or bias), read in every phase.
pub fn column_vector(dtype: DType) -> ArraySpec {
    column_vector_by(dtype, BN)
}

/// [`column_vector`] in windows of `bn` columns.
pub fn column_vector_by(dtype: DType, bn: usize) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::Static(1), Dim::sym("n")]).blocked(
        [BlockDim::Blocked(1), BlockDim::Blocked(bn)],
        [0.into(), col()],
    )
}

/// `[BM, 1]` f32 scratch for one per-row running value.
pub fn acc() -> ArraySpec {
    acc_of(BM)
}

/// [`acc`] for windows of `bm` rows.
pub fn acc_of(bm: usize) -> ArraySpec {
    ArraySpec::new(DType::F32, [bm, 1])
}

/// The call spec of a kernel over a batch of matrices `[b, m, n]` in `[BM, BN]` tiles (batch
/// dim squeezed), grid `(b, m, n)`, input and output of `dtype` and `out`, followed by
/// `scalars` run-time scalars (`[1, 1]` f32): kernels that need each element's row and
/// column (`program_id(1)·BM + iota`, `program_id(2)·BN + iota`), as triangles and masks.
pub fn matrices(dtype: DType, out: DType, scalars: usize) -> tpukit::dsl::CallSpec {
    let block = [
        BlockDim::Squeezed,
        BlockDim::Blocked(BM),
        BlockDim::Blocked(BN),
    ];
    let tiles =
        |d: DType| ArraySpec::new(d, ["b", "m", "n"]).blocked(block, [grid(0), grid(1), grid(2)]);
    let mut inputs = vec![tiles(dtype)];
    inputs.extend((0..scalars).map(|_| crate::layout::scalar(2)));
    tpukit::dsl::CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("b", 1)),
            GridAxis::parallel(Extent::cdiv("m", BM)),
            GridAxis::parallel(Extent::cdiv("n", BN)),
        ],
        inputs,
        outputs: vec![tiles(out)],
        ..Default::default()
    }
}

/// Where a row kernel's weight and bias vary: along the row (a layer norm's, `[1, n]`) or
/// from row to row (a batch norm's, `[m, 1]`: channels as rows). Both are f32 and broadcast
/// against the `[BM, BN]` window alike, so one kernel body serves both.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Weights {
    PerColumn,
    PerRow,
}

impl Weights {
    pub fn spec(self) -> ArraySpec {
        self.spec_by(BN)
    }

    /// [`Weights::spec`] for windows of `bn` columns.
    pub fn spec_by(self, bn: usize) -> ArraySpec {
        match self {
            Weights::PerColumn => column_vector_by(DType::F32, bn),
            Weights::PerRow => stat(DType::F32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_get_the_fewest_windows_the_narrowest_of_those() {
        for (n, w) in [
            // One window.
            (1, 128),
            (100, 128),
            (128, 128),
            (200, 256),
            (256, 256),
            (300, 512),
            (384, 512),
            (512, 512),
            (768, 768),
            (1000, 1024),
            (1024, 1024),
            // Up to 4096: one window, the narrowest that holds the row.
            (1280, 2048),
            (2048, 2048),
            (2304, 4096),
            (4096, 4096),
            (4000, 4096),
            // Several: a width that divides the row where it needs no more windows.
            (6144, 4096),
            (8192, 4096),
            // 50257 (GPT-2's vocabulary): 13 windows, the last one partial.
            (50257, 4096),
            (0, 512),
        ] {
            assert_eq!(width(n), w, "{n} columns");
        }
    }

    #[test]
    fn few_rows_that_16_does_not_divide_get_8_row_windows() {
        for m in [1, 3, 8, 9, 17, 24, 120, 255] {
            assert_eq!(height(m), SHORT, "{m} rows");
        }
        for m in [16, 32, 240, 256, 257, 1000, 4095, 4096] {
            assert_eq!(height(m), BM, "{m} rows");
        }
    }
}
