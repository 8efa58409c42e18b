//! Whether a launch has enough work to be worth splitting over the thread pool.
//!
//! Splitting costs a wake-up of the pool's workers, their hand-back and, for outputs the
//! chunks share, private copies: ~10–15 µs of CPU on a small launch, more than a kernel
//! touching a few hundred kilobytes takes on one thread. A launch is split only when its
//! estimated work reaches [`MIN_SPLIT_BYTES`]: per grid step, the bytes its windows cover,
//! plus its arithmetic in byte-equivalents ([`step_compute`]: the multiply-adds of its
//! `dot`s ×2, [`TRANSCENDENTAL_COST`] per element of an `exp`, `erf`, `log`, … result),
//! times its grid steps. A matmul's work is its arithmetic, not the bytes of its tiles (a
//! 256² f32 `mm` covers 1.5 MiB in 128² tiles, and splits to 89 µs wall from 150 on one
//! thread); a softmax or gelu does far more per byte than an add.

use std::sync::atomic::{AtomicUsize, Ordering};
use tpukit_dsl::{BlockDim, Kernel, OpKind, Region, Role, UnaryOp, Window};

/// The work (bytes touched, see `step_bytes`, plus `step_compute`) below which a launch
/// runs on the calling thread alone: 768 KiB (the last measurement below).
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
///
/// Measured again (2026-11-27, 13:22, load average ~0.65, after softmax became one pass
/// per row and `erf` one rational), tpuBLAS on f32 torch tensors of rows × 1024, wall µs
/// per call one thread / split (threshold `usize::MAX` / 0 alternately in one process, 9
/// rounds of 200 calls, medians): add 256 KiB 6.1 / 6.9, 512 KiB 13.0 / 9.0, 1 MiB
/// 25.6 / 15.3; softmax 256 KiB 21.5 / 14.7, 512 KiB 42.4 / 23.5; gelu 256 KiB
/// 14.7 / 10.9, 512 KiB 26.4 / 16.6. On free cores a split pays from an add of 512 KiB
/// (1.5 MiB of work) and, counting its arithmetic, a softmax or gelu of 256 KiB (0.5 MiB
/// of bytes, 64 Ki `exp`s or `erf`s: 2 MiB of work), but not an add of 256 KiB (0.75 MiB).
/// Under load (above) splits pay later; the threshold is set for a machine whose cores are
/// the user's: 1.5 MiB (3 MiB until then, counting bytes and `dot`s only).
///
/// Then the pool's helpers began to linger after a batch and each thread to run its own
/// share first (`pool`): back-to-back launches find their helper awake and their share in
/// cache. Measured again (2026-11-27, 17:12, load ~1, thresholds interleaved in one process,
/// 7 rounds of 50 ms, medians, wall µs at 1.5 MiB / 768 KiB): add 256 KiB 9.0 / 6.8 (0.75 MiB
/// of work), 512 KiB 11.4 / 11.4 (split either way); gelu 128 KiB 8.3 / 7.2; an add of
/// 128 KiB (0.375 MiB) split at a threshold of 384 KiB: 5.9 / 5.7 without. So 768 KiB. (A
/// launch after an idle spell still pays the helper's wake-up.)
pub const MIN_SPLIT_BYTES: usize = 3 << 18;

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
/// body does `compute` of arithmetic per step (see [`step_compute`]), has work enough to
/// split.
pub(crate) fn worth_splitting(kernel: &Kernel, grid: &[i64], dims: &[i64], compute: usize) -> bool {
    let threshold = THRESHOLD.load(Ordering::Relaxed);
    threshold == 0 || launch_work(kernel, grid, dims, compute) >= threshold
}

/// The work of a launch of `kernel` over `grid` (operand shapes `dims`) whose body does
/// `compute` per step: per grid step, the bytes its windows cover plus `compute`, times
/// the steps (saturating; see the module docs).
pub(crate) fn launch_work(kernel: &Kernel, grid: &[i64], dims: &[i64], compute: usize) -> usize {
    let steps = grid
        .iter()
        .fold(1usize, |n, &g| n.saturating_mul(g.max(0) as usize));
    step_bytes(kernel, dims)
        .saturating_add(compute)
        .saturating_mul(steps)
}

/// The work (as `launch_work` counts it: the bytes its windows cover and its arithmetic, see
/// the module docs) below which a launch bound once ([`crate::BoundLaunch`]) is brief: a
/// few microseconds on one thread, never split. A host may run such a launch without
/// releasing its own lock (Python's GIL): releasing it for so short a time gains other
/// threads nothing and, when one is waiting, hands it the lock for up to a switch interval;
/// numpy keeps the GIL for small loops the same way. 256 KiB of work: an add of two 64 KiB
/// f32 arrays (~4 µs), a softmax of ~8 K elements.
pub const BRIEF_WORK: usize = 256 << 10;

/// The arithmetic of one run of `kernel`'s body in byte-equivalents of work: 2 × result
/// elements × contracted length for each `dot` (its flops), and [`TRANSCENDENTAL_COST`]
/// per result element of each `exp`, `erf`, `log`, `tanh`, … (a polynomial of 10–30 vector
/// instructions each, where a byte of an add is a fraction of one). Each op is counted once
/// (one in a loop counts once, an underestimate that only keeps such a launch on one thread
/// longer).
pub(crate) fn step_compute(kernel: &Kernel) -> usize {
    fn walk(kernel: &Kernel, r: &Region) -> usize {
        let body = &kernel.body;
        let mut work = 0usize;
        for op in &r.ops {
            let out = op.results.first().map(|&out| body.ty(out).num_elements());
            match (&op.kind, out) {
                (OpKind::Dot { lhs, dims, .. }, Some(n)) => {
                    let k = body.ty(*lhs).shape.get(dims.lhs_contract).copied();
                    work = work.saturating_add(n.saturating_mul(k.unwrap_or(1)).saturating_mul(2));
                }
                (OpKind::Unary { op, .. }, Some(n)) if transcendental(*op) => {
                    work = work.saturating_add(n.saturating_mul(TRANSCENDENTAL_COST));
                }
                _ => {}
            }
            for sub in op.kind.regions() {
                work = work.saturating_add(walk(kernel, sub));
            }
        }
        work
    }
    walk(kernel, &kernel.body.body)
}

/// The work of one element of a transcendental function's result, in bytes of an
/// elementwise kernel's: 24. On one thread a 256 KiB f32 softmax (an `exp` per element,
/// 0.5 MiB of windows) took 21.5 µs and gelu (an `erf`) 14.7, where an add of 1.5 MiB of
/// windows took 13: 20–30 bytes' time per element (measured with [`MIN_SPLIT_BYTES`]).
pub const TRANSCENDENTAL_COST: usize = 24;

/// The unary ops computed by a polynomial or rational of many instructions on the CPU.
fn transcendental(op: UnaryOp) -> bool {
    use UnaryOp::*;
    match op {
        Exp | Exp2 | Log | Log1p | Tanh | Erf | Logistic | Sin | Cos => true,
        Neg | Abs | Sqrt | Rsqrt | Floor | Ceil | RoundEven | Round | Not => false,
    }
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

#[cfg(test)]
mod tests {
    use super::{TRANSCENDENTAL_COST, step_compute};
    use tpukit_dsl::parse_kernel;

    /// A kernel over f32[256, 1024] in [16, 1024] windows whose body is `body` after
    /// `%0 = load` of the window.
    fn compute(body: &str) -> usize {
        let text = format!(
            "kernel @k grid(parallel 16) {{
  input %x: f32[256, 1024] block[16, 1024] fill 0.0 map(%0) {{
    %1 = const 0 : i32[]
    yield %0, %1
  }}
  output %o: f32[256, 1024] block[16, 1024] fill 0.0 map(%0) {{
    %1 = const 0 : i32[]
    yield %0, %1
  }}
body {{
  %0 = load %x[ds(0, 16), ds(0, 1024)] : f32[16,1024]
{body}
  yield
}}
"
        );
        step_compute(&parse_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}")))
    }

    const STORE: &str = "  store %o[ds(0, 16), ds(0, 1024)], %1";

    #[test]
    fn transcendentals_count_per_element_and_cheap_ops_not_at_all() {
        let exp = compute(&format!("  %1 = exp %0 : f32[16,1024]\n{STORE}"));
        assert_eq!(exp, 16 * 1024 * TRANSCENDENTAL_COST);
        let erf = compute(&format!("  %1 = erf %0 : f32[16,1024]\n{STORE}"));
        assert_eq!(erf, exp);
        assert_eq!(
            compute(&format!("  %1 = neg %0 : f32[16,1024]\n{STORE}")),
            0
        );
        assert_eq!(
            compute(&format!("  %1 = sqrt %0 : f32[16,1024]\n{STORE}")),
            0
        );
    }

    #[test]
    fn a_dot_counts_its_flops() {
        let body = "  %1 = load %x[ds(0, 16), ds(0, 16)] : f32[16,16]
  %2 = dot %0, %1 contract(0, 0) : f32[1024,16]
  %3 = exp %2 : f32[1024,16]";
        assert_eq!(
            compute(body),
            2 * 1024 * 16 * 16 + 1024 * 16 * TRANSCENDENTAL_COST
        );
    }
}
