//! Independent steps: an elementwise kernel (the kind `coalesce` widens: whole-window loads
//! and stores, elementwise ops, one block shape whose last dimension the last grid index
//! places) whose outputs' index maps each yield every grid index as a block index writes a
//! different block of each output at every step, and reads only its own blocks: of its
//! inputs, which no step writes (the compiled backend never runs an input over an output's
//! memory: an input XLA aliases to an output is read from a snapshot), and of its outputs.
//! Its steps may then run in any order and on any thread, whatever the kernel's
//! `dimension_semantics` say — Pallas's default is `arbitrary`, which a launch runs in
//! order on one thread — so its CPU form marks every axis `parallel`, and a launch with work
//! enough splits the grid over the pool (`worth`). A TPU runs the kernel as written.

use tpukit_dsl::{Kernel, OpKind, Role, Semantics, Window};

/// `kernel` with every grid axis `parallel`, where its steps are independent (see the module
/// docs) and some axis is not yet; else None.
pub(crate) fn parallel_steps(kernel: &Kernel) -> Option<Kernel> {
    if kernel
        .grid
        .iter()
        .all(|a| a.semantics == Semantics::Parallel)
    {
        return None;
    }
    super::coalesce::elementwise_windows(kernel)?;
    let injective = kernel
        .operands_with_role(Role::Output)
        .all(|(_, o)| match &o.window {
            Window::Blocked(spec) => {
                let map = &spec.index_map.body;
                let yielded = match map.ops.last().map(|op| &op.kind) {
                    Some(OpKind::Yield { values }) => values,
                    _ => return false,
                };
                map.args.iter().all(|g| yielded.contains(g))
            }
            Window::Whole => false,
        });
    if !injective {
        return None;
    }
    let mut out = kernel.clone();
    for axis in &mut out.grid {
        axis.semantics = Semantics::Parallel;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpukit_dsl::parse_kernel;

    /// `o = x + 1` over `[8, 128]` blocks of `[64, 1024]` arrays, grid `grid`, the output's
    /// index map yielding `out_map`.
    fn add_one(grid: &str, out_map: &str) -> Kernel {
        let text = format!(
            "kernel @add_one grid({grid}) {{
  input %x: f32[64,1024] block[8,128] fill 0.0 map(%0, %1) {{
    yield %0, %1
  }}
  output %o: f32[64,1024] block[8,128] fill 0.0 map(%0, %1) {{
    {out_map}
  }}
body {{
  %0 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  %1 = const 1.0 : f32[8,128]
  %2 = add %0, %1 : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %2
  yield
}}
"
        );
        parse_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn disjoint_output_blocks_make_every_axis_parallel() {
        let k = parallel_steps(&add_one("arbitrary 8, arbitrary 8", "yield %0, %1"))
            .expect("independent");
        assert!(k.grid.iter().all(|a| a.semantics == Semantics::Parallel));
    }

    #[test]
    fn revisited_output_blocks_keep_their_order() {
        // Every step of axis 0 writes row block 0: the last one wins, so the order matters.
        let k = add_one(
            "arbitrary 8, arbitrary 8",
            "%2 = const 0 : i32[]\n    yield %2, %1",
        );
        assert!(parallel_steps(&k).is_none());
        // Already parallel: nothing to change.
        assert!(parallel_steps(&add_one("parallel 8, parallel 8", "yield %0, %1")).is_none());
    }
}
