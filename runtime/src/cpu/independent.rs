//! Independent steps: a kernel whose every step writes its own blocks of every output and
//! keeps nothing between steps may run its steps in any order and on any thread, whatever its
//! `dimension_semantics` say. Pallas's default is `arbitrary` (a launch runs such axes in
//! order, on one thread), so a softmax or an add written without `dimension_semantics` ran on
//! one core; its CPU form marks every axis `parallel`, and a launch with work enough splits
//! the grid over the pool (`worth`). A TPU runs the kernel as written.
//!
//! Independent means: every output is a window of non-overlapping blocks whose index map
//! yields each grid index as the block index of a `Blocked` or squeezed dimension (so two
//! steps never share an output block); no scratch (it persists between the steps a worker
//! runs: accumulators, the PRNG's state); no prefetch operand the body writes, no DMA,
//! semaphores or prints (whose order a TPU defines). A step then reads its inputs, which no
//! step writes (the compiled backend never runs an input over an output's memory: an input
//! XLA aliases to an output is read from a snapshot), and its own output blocks only.

use tpukit_dsl::{BlockDim, Kernel, OpKind, Role, Semantics, Space, Window};

/// `kernel` with every grid axis `parallel`, where its steps are independent (see the module
/// docs) and some axis is not yet; else None.
pub(crate) fn parallel_steps(kernel: &Kernel) -> Option<Kernel> {
    let all_parallel = kernel
        .grid
        .iter()
        .all(|a| a.semantics == Semantics::Parallel);
    let body = &kernel.body.body;
    if all_parallel
        || !operands_allow(kernel)
        || !kernel.written_prefetch().is_empty()
        || body.has_dma()
        || body.has_op(&|kind| matches!(kind, OpKind::Print { .. }))
    {
        return None;
    }
    let mut out = kernel.clone();
    for axis in &mut out.grid {
        axis.semantics = Semantics::Parallel;
    }
    Some(out)
}

/// Whether the operands are inputs, prefetch operands and outputs (no scratch), none a DMA
/// target or semaphore, and every output's blocks are its own at each step.
fn operands_allow(kernel: &Kernel) -> bool {
    kernel.operands.iter().all(|o| {
        matches!(o.space, Space::Local | Space::Smem)
            && match o.role {
                Role::Prefetch | Role::Input => true,
                Role::Scratch => false,
                Role::Output => own_blocks(&o.window),
            }
    })
}

/// Whether an output's window is a different block at every grid step: a `Blocked` window
/// whose index map yields each grid index as the block index of a `Blocked` or squeezed
/// dimension. (A whole window is the same at every step; a kernel without grid axes never
/// gets here: it has no axis to mark.)
fn own_blocks(window: &Window) -> bool {
    let Window::Blocked(spec) = window else {
        return false;
    };
    let map = &spec.index_map.body;
    let Some(OpKind::Yield { values }) = map.ops.last().map(|op| &op.kind) else {
        return false;
    };
    map.args.iter().all(|g| {
        values
            .iter()
            .zip(&spec.block)
            .any(|(v, b)| v == g && matches!(b, BlockDim::Blocked(_) | BlockDim::Squeezed))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpukit_dsl::parse_kernel;

    /// A row sum `o[i] = sum(x[i, :])` over `[8, 256]` blocks, grid `grid`, the output's
    /// index map body `out_map`, and `extra` operands.
    fn row_sums(grid: &str, out_map: &str, extra: &str) -> Kernel {
        let text = format!(
            "kernel @row_sums grid({grid}) {{
  input %x: f32[64,256] block[8,256] fill 0.0 map(%0, %1) {{
    %2 = const 0 : i32[]
    yield %0, %2
  }}
  output %o: f32[64,128] block[8,128] fill 0.0 map(%0, %1) {{
    {out_map}
  }}{extra}
body {{
  %0 = load %x[ds(0, 8), ds(0, 256)] : f32[8,256]
  %1 = reduce_sum %0 [1] : f32[8]
  %2 = reshape %1 : f32[8,1]
  %3 = broadcast %2 : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %3
  yield
}}
"
        );
        parse_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn steps_writing_their_own_blocks_run_parallel() {
        let k = parallel_steps(&row_sums("arbitrary 8, arbitrary 1", "yield %0, %1", ""))
            .expect("independent");
        assert!(k.grid.iter().all(|a| a.semantics == Semantics::Parallel));
        // Already parallel: nothing to change.
        assert!(parallel_steps(&row_sums("parallel 8, parallel 1", "yield %0, %1", "")).is_none());
    }

    #[test]
    fn revisited_blocks_and_kept_state_keep_their_order() {
        // Every step of axis 0 writes row block 0: the last one wins.
        let revisited = row_sums(
            "arbitrary 8, arbitrary 1",
            "%2 = const 0 : i32[]\n    yield %2, %1",
            "",
        );
        assert!(parallel_steps(&revisited).is_none());
        // Scratch persists from one step to the next.
        let scratch = row_sums(
            "arbitrary 8, arbitrary 1",
            "yield %0, %1",
            "\n  scratch %acc: f32[8,128]",
        );
        assert!(parallel_steps(&scratch).is_none());
    }
}
