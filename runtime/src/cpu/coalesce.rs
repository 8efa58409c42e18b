//! Coalescing small blocks: an elementwise kernel whose last grid axis walks the arrays'
//! last dimension in blocks narrower than a row runs `f` of those steps as one, its blocks
//! `f` times wider there (Pallas add kernels in `(8, 128)` blocks of a `(4096, 1024)` array
//! become `(8, 1024)` blocks, a grid of `(512, 1)`).
//!
//! Why: a step of narrow blocks reads each of its rows as a short run and jumps to the next
//! row, so consecutive steps interleave short runs of many rows of every operand, which the
//! hardware prefetchers follow badly, and every step pays its index maps and set-up. `perf`
//! of a bf16 add of `(4096, 1024)` arrays in `(8, 128)` blocks: the vector loop was the
//! kernel, at twice the time of the same add in `(8, 1024)` blocks.
//!
//! When it is exact: the body only loads whole windows, computes elementwise (constants,
//! scalars broadcast, unary and binary ops, comparisons, selects, casts) and stores whole
//! windows, so each element of a result depends on the same element of the inputs alone,
//! wherever the window lies; every operand is a window of one block shape whose last block
//! index is the last grid index (and nothing else in its index map reads that index). The
//! axis may be `arbitrary` as well as `parallel`: its steps read and write disjoint blocks
//! (distinct last block indices) elementwise, so running consecutive ones together is
//! running them in order. The axis' extent is static, `E`, and becomes `E / f` (`f` divides
//! it): the wider windows cover the same elements in the same places.
//!
//! Only where every window of the old grid lies inside its array along the last dimension
//! (`E · b` at most the array's extent), or the kernel's edge steps are clipped (see
//! `codegen::clip`: its operands share one geometry) and every window of the old grid starts
//! inside the array (`E · b < n + b`). An edge window of any other kernel is staged through a
//! buffer, so coalescing the steps before it into it would stage them all (a `(4096, 1000)`
//! add in `(8, 128)` blocks coalesced to `(8, 1024)` ran at 1.5–1.9× its time); a clipped
//! edge step runs on the arrays like any other. A grid of symbolic extent `cdiv(n, b)` may
//! end anywhere at a launch, and is left alone.
//!
//! Only compiled, non-debug launches run the coalesced kernel (debug mode checks the
//! kernel as written, step by step); the compiled code of a kernel is always that of its
//! coalesced form, so its launches use that form's grid (`Compiled::launched`).

use tpukit_dsl::{
    BlockDim, Dim, Extent, Indexer, Kernel, OpKind, Region, Role, Space, Start, ValueId, Window,
};

/// Elements along the last dimension a coalesced block reaches for (4 KiB of f32).
const TARGET_WIDTH: usize = 1024;

/// The most elements a coalesced window may hold (256 KiB of f32): wider windows would
/// only grow the per-thread buffers an edge block is staged into.
const MAX_WINDOW: usize = 1 << 16;

/// `kernel` with `f > 1` steps of its last grid axis run as one (see the module docs), or
/// None where that is not exact or would not widen its blocks.
pub(crate) fn coalesce(kernel: &Kernel) -> Option<Kernel> {
    let axis = kernel.grid.len().checked_sub(1)?;
    let (block, window) = elementwise_windows(kernel)?;
    let clipped = super::codegen::clip::clip(kernel).is_some();
    let f = factor(kernel, axis, block, window.iter().product(), clipped)?;
    let mut out = kernel.clone();
    let Extent::Static(e) = kernel.grid[axis].extent else {
        return None;
    };
    out.grid[axis].extent = Extent::Static(e / f);
    for o in &mut out.operands {
        if let Window::Blocked(spec) = &mut o.window {
            *spec.block.last_mut()? = BlockDim::Blocked(block * f);
        }
    }
    let last = window.len() - 1;
    for ty in &mut out.body.types {
        if !ty.is_scalar() {
            ty.shape[last] *= f;
        }
    }
    widen_accesses(&mut out.body.body, last, f);
    tpukit_dsl::verify(&out).ok()?;
    Some(out)
}

/// For a kernel of the kind the module docs describe (whole-window loads and stores,
/// elementwise ops, one block shape whose last dimension the last grid index alone places):
/// the last block dimension and the window (ref) shape its operands share.
pub(super) fn elementwise_windows(kernel: &Kernel) -> Option<(usize, Vec<usize>)> {
    let axis = kernel.grid.len().checked_sub(1)?;
    let (block, window) = common_block(kernel, axis)?;
    elementwise(kernel, &kernel.body.body, &window, axis).then_some((block, window))
}

/// The last block dimension `b` every operand shares and the window (ref) shape they
/// share, when each is a local window of one block shape whose last dimension is blocked
/// and placed by grid index `axis` alone.
fn common_block(kernel: &Kernel, axis: usize) -> Option<(usize, Vec<usize>)> {
    let mut shared: Option<(Vec<BlockDim>, Vec<usize>)> = None;
    for o in &kernel.operands {
        if !matches!(o.role, Role::Input | Role::Output) || o.space != Space::Local {
            return None;
        }
        let Window::Blocked(spec) = &o.window else {
            return None;
        };
        if !matches!(spec.block.last(), Some(BlockDim::Blocked(_)))
            || !last_index_is_axis(&spec.index_map.body, axis)
        {
            return None;
        }
        match &shared {
            Some((block, _)) if *block != spec.block => return None,
            Some(_) => {}
            None => shared = Some((spec.block.clone(), spec.ref_shape())),
        }
    }
    let (block, window) = shared?;
    match block.last() {
        Some(BlockDim::Blocked(b)) => Some((*b, window)),
        _ => None,
    }
}

/// Whether an index map yields grid index `axis` (its argument) as its last block index
/// and reads that index nowhere else.
fn last_index_is_axis(map: &Region, axis: usize) -> bool {
    let Some(&g) = map.args.get(axis) else {
        return false;
    };
    let Some((yield_op, ops)) = map.ops.split_last() else {
        return false;
    };
    let OpKind::Yield { values } = &yield_op.kind else {
        return false;
    };
    values.last() == Some(&g)
        && !values[..values.len() - 1].contains(&g)
        && ops
            .iter()
            .all(|op| !op.kind.operands().contains(&g) && op.kind.regions().is_empty())
}

/// Whether `region` (the body) only loads and stores whole windows of shape `window` and
/// computes elementwise on values of that shape or scalars, ending in an empty yield. It may
/// read the other grid axes' indices and extents (coalescing keeps them), and read those of
/// grid axis `axis` into values nothing uses (importers leave such reads).
fn elementwise(kernel: &Kernel, region: &Region, window: &[usize], axis: usize) -> bool {
    let body = &kernel.body;
    let used: std::collections::HashSet<ValueId> = region
        .ops
        .iter()
        .flat_map(|op| op.kind.operands())
        .collect();
    let unused = |results: &[ValueId]| results.iter().all(|v| !used.contains(v));
    let shaped = |v: &ValueId| {
        let ty = body.ty(*v);
        ty.is_scalar() || ty.shape == window
    };
    let whole = |index: &[Indexer]| {
        index.len() == window.len()
            && index.iter().zip(window).all(|(i, &n)| {
                *i == Indexer::Slice {
                    start: Start::Static(0),
                    size: n,
                    stride: 1,
                }
            })
    };
    region.ops.iter().all(|op| {
        let values_ok = op.results.iter().chain(&op.kind.operands()).all(shaped);
        values_ok
            && match &op.kind {
                OpKind::Load {
                    index,
                    mask: None,
                    other: None,
                    ..
                } => whole(index),
                OpKind::Store {
                    index, mask: None, ..
                } => whole(index),
                OpKind::Const { .. }
                | OpKind::Unary { .. }
                | OpKind::Binary { .. }
                | OpKind::Compare { .. }
                | OpKind::Select { .. }
                | OpKind::Cast { .. } => true,
                OpKind::Broadcast { x } => body.ty(*x).is_scalar(),
                OpKind::ProgramId { axis: a } | OpKind::NumPrograms { axis: a } => {
                    *a != axis || unused(&op.results)
                }
                OpKind::Yield { values } => values.is_empty(),
                _ => false,
            }
    })
}

/// How many steps of grid axis `axis` (of blocks `block` wide, windows of `window`
/// elements) to run as one: a divisor of its static extent, enough to reach
/// [`TARGET_WIDTH`], within [`MAX_WINDOW`], taken only when every window the old grid
/// placed lies inside its array along the last dimension, or (`clipped`: the kernel's edge
/// steps are clipped) starts inside it. None below 2.
fn factor(
    kernel: &Kernel,
    axis: usize,
    block: usize,
    window: usize,
    clipped: bool,
) -> Option<usize> {
    let Extent::Static(e) = kernel.grid[axis].extent else {
        return None;
    };
    let inside = kernel.operands.iter().all(|o| match o.shape.last() {
        Some(Dim::Static(d)) => e
            .checked_mul(block)
            .is_some_and(|w| w <= *d || (clipped && w < d + block)),
        _ => false,
    });
    if !inside {
        return None;
    }
    let wanted = TARGET_WIDTH.div_ceil(block).min(MAX_WINDOW / window.max(1));
    let f = (1..=wanted.min(e)).rev().find(|f| e % f == 0)?;
    (f > 1).then_some(f)
}

/// Widens dimension `last` of every load's and store's slice in `region` `f` times.
fn widen_accesses(region: &mut Region, last: usize, f: usize) {
    for op in &mut region.ops {
        if let OpKind::Load { index, .. } | OpKind::Store { index, .. } = &mut op.kind
            && let Some(Indexer::Slice { size, .. }) = index.get_mut(last)
        {
            *size *= f;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpukit_dsl::parse_kernel;

    fn add(grid: &str, map: &str, block: &str, shape: &str) -> String {
        format!(
            "kernel @add grid({grid}) {{
  input %x: f32[{shape}] block[{block}] fill 0.0 map(%0, %1) {{
    yield {map}
  }}
  input %y: f32[{shape}] block[{block}] fill 0.0 map(%0, %1) {{
    yield {map}
  }}
  output %o: f32[{shape}] block[{block}] fill 0.0 map(%0, %1) {{
    yield {map}
  }}
body {{
  %0 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  %1 = load %y[ds(0, 8), ds(0, 128)] : f32[8,128]
  %2 = add %0, %1 : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %2
  yield
}}
"
        )
    }

    fn coalesced(text: &str) -> Option<Kernel> {
        coalesce(&parse_kernel(text).expect("parses"))
    }

    #[test]
    fn narrow_blocks_of_a_static_grid_become_rows() {
        let k = coalesced(&add(
            "parallel 512, parallel 8",
            "%0, %1",
            "8,128",
            "4096,1024",
        ))
        .expect("coalesced");
        assert_eq!(k.grid[1].extent, Extent::Static(1));
        let text = k.to_string();
        assert!(text.contains("block[8,1024]"), "{text}");
        assert!(text.contains("ds(0, 1024)] : f32[8,1024]"), "{text}");
    }

    #[test]
    fn arbitrary_axes_coalesce_too() {
        // Pallas's default semantics: the steps still write disjoint blocks.
        let k = coalesced(&add(
            "arbitrary 512, arbitrary 8",
            "%0, %1",
            "8,128",
            "4096,1024",
        ))
        .expect("coalesced");
        assert_eq!(k.grid[1].extent, Extent::Static(1));
    }

    #[test]
    fn symbolic_grids_and_staged_edge_blocks_are_left_alone() {
        // A launch may end in an edge block anywhere.
        let symbolic = add(
            "parallel cdiv(m, 8), parallel cdiv(n, 128)",
            "%0, %1",
            "8,128",
            "m,n",
        );
        assert!(coalesced(&symbolic).is_none());
        // Operands of one geometry: the edge step is clipped, so it may be widened.
        let edge = add("parallel 512, parallel 8", "%0, %1", "8,128", "4096,1000");
        let k = coalesced(&edge).expect("coalesced");
        assert!(k.to_string().contains("block[8,1024]"), "{k}");
        // `y` wider than `x` and `o`: the edge step is staged (coalescing would stage its
        // neighbours too).
        let staged = edge.replacen("input %y: f32[4096,1000]", "input %y: f32[4096,1024]", 1);
        assert!(staged.contains("%y: f32[4096,1024]"), "{staged}");
        assert!(coalesced(&staged).is_none());
        // Rows may end in an edge block: only the last dimension's windows are widened.
        let rows = add("parallel 513, parallel 8", "%0, %1", "8,128", "4100,1024");
        assert!(coalesced(&rows).is_some());
    }

    #[test]
    fn static_extents_take_a_divisor() {
        // 6 steps of 128: 6 divides by 6 (768 wide, under the 1024 aimed for).
        let k = coalesced(&add("parallel 4, parallel 6", "%0, %1", "8,128", "32,768"))
            .expect("coalesced");
        assert_eq!(k.grid[1].extent, Extent::Static(1));
        // 7 steps: all of them (7 ≤ 1024 / 128).
        let k = coalesced(&add("parallel 4, parallel 7", "%0, %1", "8,128", "32,896"))
            .expect("coalesced");
        assert_eq!(k.grid[1].extent, Extent::Static(1));
    }

    #[test]
    fn what_is_not_exact_is_left_alone() {
        // A transposed index map, a grid reaching past the array (a launch would refuse its
        // last windows), and blocks already a row wide.
        for text in [
            add("parallel 8, parallel 512", "%1, %0", "8,128", "1024,4096"),
            add("parallel 512, parallel 9", "%0, %1", "8,128", "4096,1024"),
        ] {
            assert!(coalesced(&text).is_none(), "{text}");
        }
        let wide = add("parallel 512, parallel 1", "%0, %1", "8,128", "4096,128");
        assert!(coalesced(&wide).is_none());
    }

    #[test]
    fn unused_reads_of_the_grid_are_no_obstacle() {
        let text = add("parallel 512, parallel 8", "%0, %1", "8,128", "4096,1024").replace(
            "%2 = add %0, %1 : f32[8,128]",
            "%3 = program_id 1 : i32[]\n  %4 = num_programs 1 : i32[]\n  %2 = add %0, %1 : f32[8,128]",
        );
        assert!(coalesced(&text).is_some(), "{text}");
    }

    #[test]
    fn bodies_that_see_their_place_are_left_alone() {
        // program_id, iota and reductions see where a window lies or its width.
        let base = add("parallel 512, parallel 8", "%0, %1", "8,128", "4096,1024");
        for (from, to) in [
            (
                "%2 = add %0, %1 : f32[8,128]",
                "%3 = program_id 1 : i32[]\n  %4 = cast %3 : f32[]\n  %5 = broadcast %4 : f32[8,128]\n  %2 = add %0, %5 : f32[8,128]",
            ),
            (
                "%2 = add %0, %1 : f32[8,128]",
                "%3 = iota 1 : i32[8,128]\n  %4 = cast %3 : f32[8,128]\n  %2 = add %0, %4 : f32[8,128]",
            ),
            (
                "%2 = add %0, %1 : f32[8,128]",
                "%3 = reduce_sum %1 [0, 1] : f32[]\n  %4 = broadcast %3 : f32[8,128]\n  %2 = add %0, %4 : f32[8,128]",
            ),
        ] {
            let text = base.replace(from, to);
            let k = parse_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert!(coalesce(&k).is_none(), "{text}");
        }
    }
}
