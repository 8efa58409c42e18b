//! Whether a launch has enough work to be worth splitting over the thread pool.
//!
//! Splitting costs a wake-up of the pool's workers, their hand-back and, for outputs the
//! chunks share, private copies: ~10–15 µs of CPU on a small launch, more than a kernel
//! touching a few hundred kilobytes takes on one thread. A launch is split only when its
//! estimated work, the bytes its windows cover per grid step times its grid steps, plus the
//! multiply-adds of its `dot`s (×2), reaches [`MIN_SPLIT_BYTES`]: a matmul's work is its
//! arithmetic, not the bytes of its tiles (a 256² f32 `mm` covers 1.5 MiB in 128² tiles,
//! and splits to 89 µs wall from 150 on one thread).

use std::sync::atomic::{AtomicUsize, Ordering};
use tpukit_dsl::{BlockDim, Kernel, OpKind, Region, Role, Window};

/// The work (bytes touched, see `step_bytes`, plus `dot` flops) below which a launch runs
/// on the calling thread alone: 3 MiB.
///
/// Measured (2026-11-27, 2 cores shared with other work) with tpuBLAS `add` (work: 3× one
/// input's bytes) and `_softmax` (two passes: 4×) on f32 torch tensors of rows × 1024,
/// splitting forced on (threshold 0) and off (`usize::MAX`) alternately in one process,
/// medians of 15 rounds of wall and process CPU µs per call:
/// - a split costs ~12–16 µs of CPU at any size (add 128 KiB 6.8 → 21.0, 512 KiB
///   19.6 → 33.1; softmax 256 KiB 31.0 → 43.8), most of it on the calling thread;
/// - at load average ~3–4, wall µs one thread / split: add 512 KiB 19.8 / 33.3, 768 KiB
///   29.5 / 43.4, 1 MiB 92.8 / 52.4, 2 MiB 120 / 86; softmax 512 KiB 79.6 / 106,
///   768 KiB 165 / 136, 1 MiB 164 / 130. Splitting starts to pay between 768 KiB and
///   1 MiB of add input (2.25–3 MiB of work) and between 512 and 768 KiB of softmax input
///   (2–3 MiB);
/// - at load average 9–11 the split never won below 2 MiB inputs;
/// - at load average ~0.5 (9 rounds), wall µs one thread / split: add 1 MiB 25.9 / 39.4,
///   2 MiB 46.3 / 59.0; softmax 1 MiB 110 / 141, 2 MiB 221 / 234 (memory-bound: a split
///   did not pay up to 2 MiB); layer norm 768 KiB 70.4 / 75.9, 1 MiB 84.9 / 68.9; but gelu
///   (an `erf` per element, ~8× add's time per byte) 512 KiB 81.9 / 69.2, 1 MiB
///   158 / 108: bytes undercount such bodies, which stay on one thread up to 1.5 MiB of
///   input (2× bytes of work), up to ~50 µs of wall time lost on an idle machine. Counting
///   the body's element operations instead did not help (gelu's `erf` is one op: 2.4M
///   element ops at 1 MiB against softmax's 11M).
pub const MIN_SPLIT_BYTES: usize = 3 << 20;

/// The threshold in force: [`MIN_SPLIT_BYTES`] unless [`set_min_split_bytes`] changed it.
static THRESHOLD: AtomicUsize = AtomicUsize::new(MIN_SPLIT_BYTES);

/// Sets the work below which launches are not split (0: split any parallel grid of more than
/// one step, as before the threshold; `usize::MAX`: never split). For measurements: the
/// crossover above was found with it. Returns the previous value.
#[doc(hidden)]
pub fn set_min_split_bytes(bytes: usize) -> usize {
    THRESHOLD.swap(bytes, Ordering::Relaxed)
}

/// Whether a launch of `kernel` over `grid` (operand shapes `dims`, in operand order), whose
/// body does `flops` of `dot` per step (see [`dot_flops`]), has work enough to split.
pub(crate) fn worth_splitting(kernel: &Kernel, grid: &[i64], dims: &[i64], flops: usize) -> bool {
    let threshold = THRESHOLD.load(Ordering::Relaxed);
    if threshold == 0 {
        return true;
    }
    let steps = grid
        .iter()
        .fold(1usize, |n, &g| n.saturating_mul(g.max(0) as usize));
    let work = step_bytes(kernel, dims)
        .saturating_add(flops)
        .saturating_mul(steps);
    work >= threshold
}

/// The floating-point operations of the `dot`s in one run of `kernel`'s body: 2 × result
/// elements × contracted length each, counted once per op (a `dot` in a loop counts once,
/// an underestimate that only keeps such a launch on one thread longer).
pub(crate) fn dot_flops(kernel: &Kernel) -> usize {
    fn walk(kernel: &Kernel, r: &Region) -> usize {
        let mut flops = 0usize;
        for op in &r.ops {
            if let OpKind::Dot { lhs, dims, .. } = &op.kind
                && let Some(&out) = op.results.first()
            {
                let body = &kernel.body;
                let k = body.ty(*lhs).shape.get(dims.lhs_contract).copied();
                let n = body.ty(out).num_elements();
                flops = flops.saturating_add(n.saturating_mul(k.unwrap_or(1)).saturating_mul(2));
            }
            for sub in op.kind.regions() {
                flops = flops.saturating_add(walk(kernel, sub));
            }
        }
        flops
    }
    walk(kernel, &kernel.body.body)
}

/// The bytes a launch's windows cover in one grid step: for each non-scratch operand, its
/// block (the whole array for [`Window::Whole`]) times its element size, summed
/// (saturating). Times the steps, for an elementwise kernel this is the bytes it reads and
/// writes; a kernel that visits its input in several phases (softmax) counts each visit.
fn step_bytes(kernel: &Kernel, dims: &[i64]) -> usize {
    let mut per_step = 0usize;
    let mut at = 0;
    for o in &kernel.operands {
        let shape = &dims[at..at + o.shape.len()];
        at += o.shape.len();
        if o.role == Role::Scratch {
            continue;
        }
        let elements = match &o.window {
            Window::Whole => shape
                .iter()
                .fold(1usize, |n, &d| n.saturating_mul(d.max(0) as usize)),
            Window::Blocked(spec) => spec
                .block
                .iter()
                .fold(1usize, |n, &b| n.saturating_mul(BlockDim::size(b))),
        };
        per_step = per_step.saturating_add(elements.saturating_mul(o.dtype.size_bytes()));
    }
    per_step
}
