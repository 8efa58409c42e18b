//! Which outputs a kernel writes whole: every element, at every launch, before anything
//! reads it. A launch on the compiled CPU backend hands such outputs memory that is not
//! zero-filled first (zeroing a large output cost a tenth of an elementwise tpuBLAS call);
//! every other output starts zeroed, as [`crate::launch`] promises.
//!
//! The test is structural and conservative (a kernel it cannot prove gets zeros):
//! - the output is in kernel memory, its window the whole array or blocks placed by an index
//!   map that yields grid indices (each grid axis at most once) or constant zeros, and the
//!   grid axes cover the array (`cdiv(n, block)` steps of an extent `n`, or enough static
//!   steps); an axis that places no window must be `arbitrary` with a static, non-zero
//!   extent (a reduction axis revisiting the block: one worker runs all its steps, at least
//!   one, and each stores the whole window; `cdiv(k, b)` steps could be none);
//! - the body's top level (so at every grid step, unconditionally) stores the whole window,
//!   unmasked (at the top level, or in the branch an `if` on a constant takes), and nothing
//!   loads the output before that store (a load after it reads what the step stored, as
//!   tpuBLAS's softmax normalises `exp` in its output); or a top-level
//!   `if program_id(a) == c` does (a phased row kernel's last phase), `a` an `arbitrary` axis
//!   no launch splits among workers with more than `c` steps, the windows of the steps where
//!   `a` is `c` cover the array as above (the index map evaluated with grid index `a` set to
//!   `c`, e.g. `j · (phase / 1)` → `j`), and nothing in the body loads the output;
//! - the body has no DMA or semaphore ops (which could read it).
//!
//! Stores outside the array (an edge window's overhang) are dropped, and windows cover every
//! element, so the output is written whole.

pub(crate) mod term;

use term::{Term, eval};
use tpukit_dsl::{
    BlockDim, CmpOp, Dim, Extent, Indexer, Kernel, Op, OpKind, Operand, OperandId, Region, Role,
    Semantics, Space, Start, Window,
};

/// One flag per output operand (in signature order): whether the kernel writes it whole.
pub(crate) fn whole_outputs(kernel: &Kernel) -> Vec<bool> {
    kernel
        .operands_with_role(Role::Output)
        .map(|(id, o)| writes_whole(kernel, id, o))
        .collect()
}

fn writes_whole(kernel: &Kernel, id: OperandId, o: &Operand) -> bool {
    if o.space != Space::Local {
        return false;
    }
    let body = &kernel.body.body;
    if written_before_read(body, id, o) {
        return windows_cover(kernel, o, None);
    }
    only_stored(body, id)
        && guarded_stores(kernel, id, o).is_some_and(|g| windows_cover(kernel, o, Some(g)))
}

/// The guard `(a, c)` of a top-level `if program_id(a) == c { … }` whose region's top level
/// stores the whole window of `o`, if there is one and every launch runs the guarded steps
/// on one worker in grid order: `a` is `arbitrary`, not a split axis (the leading parallel
/// axes, or axis 0), and has more than `c` steps.
fn guarded_stores(kernel: &Kernel, id: OperandId, o: &Operand) -> Option<(usize, i64)> {
    let body = &kernel.body.body;
    body.ops.iter().find_map(|op| {
        let OpKind::If {
            cond, then_region, ..
        } = &op.kind
        else {
            return None;
        };
        let cmp = body.ops.iter().find(|c| c.results == [*cond])?;
        let OpKind::Compare {
            op: CmpOp::Eq,
            lhs,
            rhs,
        } = cmp.kind
        else {
            return None;
        };
        let (l, r) = (
            eval(body, &kernel.grid, lhs, &[]),
            eval(body, &kernel.grid, rhs, &[]),
        );
        let (a, c) = match (l, r) {
            (Term::Axis(a), Term::Int(c)) | (Term::Int(c), Term::Axis(a)) => (a, c),
            _ => return None,
        };
        let axis = &kernel.grid[a];
        let steps = matches!(axis.extent, Extent::Static(n) if c >= 0 && (c as u64) < n as u64);
        (a > 0
            && axis.semantics == Semantics::Arbitrary
            && steps
            && written_before_read(then_region, id, o))
        .then_some((a, c))
    })
}

/// Whether the windows of `o` over the grid cover its array; with `fixed` = `(a, c)`, the
/// windows of the steps whose index along `a` is `c`.
fn windows_cover(kernel: &Kernel, o: &Operand, fixed: Option<(usize, i64)>) -> bool {
    let Window::Blocked(spec) = &o.window else {
        return true; // the whole array at every step
    };
    let map = &spec.index_map.body;
    let Some(yield_op) = map.ops.last() else {
        return false;
    };
    let OpKind::Yield { values } = &yield_op.kind else {
        return false;
    };
    if values.len() != o.shape.len() || spec.block.len() != o.shape.len() {
        return false;
    }
    let mut axes_used = Vec::new();
    for ((&v, &block), dim) in values.iter().zip(&spec.block).zip(&o.shape) {
        let size = match block {
            BlockDim::Blocked(b) => b,
            BlockDim::Squeezed => 1,
            BlockDim::Element(_) => return false,
        };
        match eval(map, &kernel.grid, v, fixed.as_slice()) {
            Term::Axis(axis) => {
                if axes_used.contains(&axis) || !covers(&kernel.grid[axis].extent, size, dim) {
                    return false;
                }
                axes_used.push(axis);
            }
            Term::Int(0) if matches!(dim, Dim::Static(n) if size >= *n) => {}
            _ => return false,
        }
    }
    // Every other axis but the fixed one is `arbitrary` with at least one step: steps that
    // write one block differ only along axes the CPU backend never splits between workers, so
    // one worker writes the block, whole, at each of them (a `parallel` axis could be split;
    // workers that share a block get private copies, see `cpu::shared`). An axis of no steps
    // (a zero-length contraction) would leave the block unwritten.
    kernel.grid.iter().enumerate().all(|(axis, a)| {
        axes_used.contains(&axis)
            || fixed.is_some_and(|(f, _)| f == axis)
            || (a.semantics == Semantics::Arbitrary
                && matches!(a.extent, Extent::Static(n) if n > 0))
    })
}

/// Whether `extent` steps of windows of `size` elements cover an array extent `dim`.
fn covers(extent: &Extent, size: usize, dim: &Dim) -> bool {
    match (extent, dim) {
        (Extent::CeilDiv { sym, block }, Dim::Sym(s)) => sym == s && *block == size,
        (Extent::Static(k), Dim::Static(n)) => k.checked_mul(size).is_some_and(|c| c >= *n),
        _ => false,
    }
}

/// Whether every op in `region` (nested ones too) that may touch output `id` is a store:
/// no load of it, and no DMA or semaphore op at all.
pub(crate) fn only_stored(region: &Region, id: OperandId) -> bool {
    region.ops.iter().all(|op| only_stores(op, id))
}

/// [`only_stored`] of one op and its regions.
fn only_stores(op: &Op, id: OperandId) -> bool {
    !matches!(&op.kind, OpKind::Load { operand, .. } if *operand == id)
        && !op.kind.is_dma()
        && op.kind.regions().into_iter().all(|r| only_stored(r, id))
}

/// Whether every run of the body stores the whole window of `o`, unmasked, before anything
/// reads it: its top level (or the branch a constant condition takes there) stores the whole
/// window with no load of `o` before that store (a load after it reads what this step
/// stored), and the body has no DMA or semaphore op (which could read it).
pub(crate) fn written_before_read(body: &Region, id: OperandId, o: &Operand) -> bool {
    let shape: Option<Vec<usize>> = o.ref_shape().iter().map(Dim::as_static).collect();
    let Some(shape) = shape else {
        return false; // a whole symbolic array: no store of a static shape covers it
    };
    !body.has_dma() && stored_first(body, id, &shape)
}

/// Whether the top level of `region`, or the branch a constant condition takes there (an
/// `if` on a kernel's compile-time flag), stores the whole window (of static `shape`) of
/// operand `id`, unmasked, before any op loads `id`.
fn stored_first(region: &Region, id: OperandId, shape: &[usize]) -> bool {
    for op in &region.ops {
        let stores = match &op.kind {
            OpKind::If {
                cond,
                then_region,
                else_region,
            } => region.bool_constant(*cond).is_some_and(|b| {
                stored_first(if b { then_region } else { else_region }, id, shape)
            }),
            OpKind::Store {
                operand,
                index,
                mask: None,
                ..
            } => *operand == id && whole(index, shape),
            _ => false,
        };
        if stores {
            return true;
        }
        if !only_stores(op, id) {
            return false;
        }
    }
    false
}

/// Whether `index` takes the whole of a ref of static `shape`, in order.
pub(crate) fn whole(index: &[Indexer], shape: &[usize]) -> bool {
    index.len() == shape.len()
        && index.iter().zip(shape).all(|(ix, &n)| {
            matches!(ix, Indexer::Slice { start: Start::Static(0), size, stride: 1 } if *size == n)
        })
}

#[cfg(test)]
mod tests {
    use super::whole_outputs;
    use tpukit_dsl::parse_kernel;

    /// A kernel over `shape` in blocks of `block` on `grid` (parallel axes), its index map yielding `map`,
    /// whose body is `body` (after `%0 = load` of the input's window).
    fn kernel(grid: &str, shape: &str, block: &str, map: &str, body: &str) -> String {
        let window = block
            .split(',')
            .map(|b| format!("ds(0, {b})"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "kernel @k grid({grid}) {{
  input %x: f32[{shape}] block[{block}] fill 0.0 map({args}) {{
    yield {map}
  }}
  output %o: f32[{shape}] block[{block}] fill 0.0 map({args}) {{
    yield {map}
  }}
body {{
  %0 = load %x[{window}] : f32[{block}]
{body}
  yield
}}
",
            args = (0..grid.matches("parallel").count())
                .map(|i| format!("%{i}"))
                .collect::<Vec<_>>()
                .join(", "),
        )
    }

    fn whole(text: &str) -> bool {
        let k = parse_kernel(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        whole_outputs(&k) == [true]
    }

    const STORE: &str = "  store %o[ds(0, 128)], %0";

    #[test]
    fn an_elementwise_output_is_written_whole() {
        assert!(whole(&kernel(
            "parallel cdiv(n, 128)",
            "n",
            "128",
            "%0",
            STORE
        )));
        // Enough static steps for a static extent, and the edge block overhanging it.
        assert!(whole(&kernel("parallel 8", "1000", "128", "%0", STORE)));
        let tiles = "  store %o[ds(0, 8), ds(0, 128)], %0";
        let grid = "parallel cdiv(m, 8), parallel cdiv(n, 128)";
        assert!(whole(&kernel(grid, "m,n", "8,128", "%0, %1", tiles)));
    }

    /// A blocked matmul's output: `(i, j)` blocks over `parallel` axes, stored whole at every
    /// step of the reduction axis `k` (`axis`), which places no window.
    fn reduction(axis: &str, x: &str) -> String {
        format!(
            "kernel @mm grid(parallel 4, parallel 4, {axis}) {{
  input %x: f32[{x}] block[128,128] fill 0.0 map(%0, %1, %2) {{
    yield %0, %2
  }}
  output %o: f32[512,512] block[128,128] fill 0.0 map(%0, %1, %2) {{
    yield %0, %1
  }}
body {{
  %0 = load %x[ds(0, 128), ds(0, 128)] : f32[128,128]
  store %o[ds(0, 128), ds(0, 128)], %0
  yield
}}
"
        )
    }

    #[test]
    fn a_block_revisited_along_an_arbitrary_axis_is_written_whole() {
        assert!(whole(&reduction("arbitrary 4", "512,512")));
        // A parallel axis placing no window may be split between workers sharing the block.
        assert!(!whole(&reduction("parallel 4", "512,512")));
        // `cdiv(k, 128)` steps are none for k = 0: the block is never written.
        assert!(!whole(&reduction("arbitrary cdiv(k, 128)", "512,k")));
    }

    #[test]
    fn outputs_not_provably_written_whole_start_zeroed() {
        // Too few steps.
        assert!(!whole(&kernel("parallel 7", "1000", "128", "%0", STORE)));
        // Windows placed crosswise (dim 0 by the axis covering dim 1).
        let tiles = "  store %o[ds(0, 8), ds(0, 128)], %0";
        let grid = "parallel cdiv(m, 8), parallel cdiv(n, 128)";
        assert!(!whole(&kernel(grid, "m,n", "8,128", "%1, %0", tiles)));
        // Part of the window; a read of the output (an accumulation).
        let part = "  %1 = load %x[ds(0, 64)] : f32[64]\n  store %o[ds(0, 64)], %1";
        assert!(!whole(&kernel(
            "parallel cdiv(n, 128)",
            "n",
            "128",
            "%0",
            part
        )));
        let acc = "  %1 = load %o[ds(0, 128)] : f32[128]\n  %2 = add %0, %1 : f32[128]\n  store %o[ds(0, 128)], %2";
        assert!(!whole(&kernel(
            "parallel cdiv(n, 128)",
            "n",
            "128",
            "%0",
            acc
        )));
        // No store at all.
        assert!(!whole(&kernel(
            "parallel cdiv(n, 128)",
            "n",
            "128",
            "%0",
            ""
        )));
        // A grid sized by an operand's value (it may leave blocks unvisited).
        let value_grid = "kernel @first_blocks grid(arbitrary value(0), parallel 2) {
  prefetch %n: i32[]
  input %x: f32[m,256] block[8,128] fill 0.0 map(%0, %1) {
    yield %0, %1
  }
  output %o: f32[m,256] block[8,128] fill 0.0 map(%0, %1) {
    yield %0, %1
  }
body {
  %0 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  store %o[ds(0, 8), ds(0, 128)], %0
  yield
}
";
        assert!(!whole(value_grid));
    }

    /// A phased row kernel (as tpuBLAS's softmax): grid `(rows parallel, 2 phases, column
    /// blocks)`, the output window at column block `j · (phase / 1)`, stored under
    /// `if program_id(guard_axis) <cmp> guard`.
    fn phased(grid: &str, guard_axis: usize, cmp: &str, guard: i64, map: &str) -> String {
        format!(
            "kernel @phased grid({grid}) {{
  input %x: f32[m,n] block[8,128] fill 0.0 map(%0, %1, %2) {{
    yield %0, %2
  }}
  output %o: f32[m,n] block[8,128] fill 0.0 map(%0, %1, %2) {{
    %3 = const 1 : i32[]
    %4 = div %1, %3 : i32[]
    %5 = mul %2, %4 : i32[]
    yield {map}
  }}
body {{
  %0 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  %1 = program_id {guard_axis} : i32[]
  %2 = const {guard} : i32[]
  %3 = {cmp} %1, %2 : bool[]
  if %3 : () {{
    store %o[ds(0, 8), ds(0, 128)], %0
    yield
  }} else {{
    yield
  }}
  yield
}}
"
        )
    }

    #[test]
    fn a_phased_output_written_whole_by_its_last_phase_is_proven() {
        let grid = "parallel cdiv(m, 8), arbitrary 2, arbitrary cdiv(n, 128)";
        assert!(whole(&phased(grid, 1, "eq", 1, "%0, %5")));
        // Fixing the phase at 0 leaves column block 0 only.
        assert!(!whole(&phased(grid, 1, "eq", 0, "%0, %5")));
        // A guard that never holds (2 phases: 0 and 1), or holds at other steps too.
        assert!(!whole(&phased(grid, 1, "eq", 2, "%0, %5")));
        assert!(!whole(&phased(grid, 1, "ne", 0, "%0, %5")));
        // A guard on the split (parallel, leading) axis: workers would each write a part.
        assert!(!whole(&phased(grid, 0, "eq", 0, "%1, %2")));
        // The guarded steps place the window by one axis only.
        assert!(!whole(&phased(grid, 1, "eq", 1, "%0, %0")));
        // A parallel phase axis could be split among workers.
        let parallel = "parallel cdiv(m, 8), parallel 2, arbitrary cdiv(n, 128)";
        assert!(!whole(&phased(parallel, 1, "eq", 1, "%0, %5")));
    }

    #[test]
    fn a_load_after_the_whole_store_reads_what_the_step_stored() {
        let body = |lines: &[&str]| {
            let body = lines.join("\n");
            whole(&kernel("parallel cdiv(n, 128)", "n", "128", "%0", &body))
        };
        let normalise = |v: usize| {
            format!(
                "  %{v} = load %o[ds(0, 128)] : f32[128]\n  %{w} = add %{v}, %0 : f32[128]\n  store %o[ds(0, 128)], %{w}",
                w = v + 1
            )
        };
        // Normalised in place (as tpuBLAS's softmax): every element stored before it is read.
        assert!(body(&[STORE, &normalise(1)]));
        // Stored whole in the branch a constant flag takes, then read.
        let flagged = "  %1 = const true : bool[]\n  if %1 : () {\n  store %o[ds(0, 128)], %0\n    yield\n  } else {\n    yield\n  }";
        assert!(body(&[flagged, &normalise(2)]));
        // Read before the step stores it: what the launch handed over would be read.
        let read_first = "  %1 = load %o[ds(0, 128)] : f32[128]";
        assert!(!body(&[
            read_first,
            STORE,
            "  %2 = add %1, %0 : f32[128]\n  store %o[ds(0, 128)], %2"
        ]));
        // Only part of the window stored before the read.
        let part = "  %1 = load %x[ds(0, 64)] : f32[64]\n  store %o[ds(0, 64)], %1";
        assert!(!body(&[part, &normalise(2)]));
    }

    #[test]
    fn a_store_in_the_branch_a_constant_flag_takes_counts() {
        let flagged = |flag: bool, store_in_then: bool| {
            let store = "    store %o[ds(0, 128)], %0\n";
            let (t, e) = if store_in_then {
                (store, "")
            } else {
                ("", store)
            };
            let body = format!(
                "  %1 = const {flag} : bool[]\n  if %1 : () {{\n{t}    yield\n  }} else {{\n{e}    yield\n  }}"
            );
            whole(&kernel("parallel cdiv(n, 128)", "n", "128", "%0", &body))
        };
        assert!(flagged(true, true));
        assert!(flagged(false, false));
        // The branch that does not run stores.
        assert!(!flagged(false, true));
        assert!(!flagged(true, false));
    }
}
