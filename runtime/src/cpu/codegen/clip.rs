//! Clipped edge steps: an elementwise kernel whose operands share one geometry runs a step
//! whose windows overhang their arrays on views of the arrays, every loop over the window cut
//! at the arrays' ends, instead of staging the windows (see `window`).
//!
//! Why: staging copies each overhanging window into a block-sized buffer (and an output's
//! back), and the body computes the whole block. A tpuBLAS `add` of 1024 f32 elements, one
//! step of its 4096-element blocks, copied 12 KiB and added 4096 pairs for 1024; µs per call
//! from Python (2026-11-28, interleaved): 1024 elements 2.92, 4096 (no overhang) 2.69, 4000
//! 3.60 — the staging of one edge step cost more than the add.
//!
//! When it is exact: the outputs are local windows of one array shape, block and index map
//! (their *geometry*); every input is such a window too, or one that broadcasts along some
//! dimensions (extent 1, block 1) and has the outputs' extent, block and grid index along
//! the others, or a whole array of one element (a run-time scalar); and the body only loads
//! and stores whole refs and computes elementwise, with explicit broadcasts of dimensions of
//! extent 1. Every value is then a scalar or has the window's rank, each dimension 1 or the
//! window's, and element `i` of a result depends only on the elements of the loaded refs at
//! `i` (index 0 along a broadcast dimension). At a step, every window's elements inside its
//! array are those below `extent[k] = min(block[k], dims[d] − origin[d])` along each
//! dimension it shares with the outputs, the same for every operand (a shared symbol is bound
//! to one extent); so a loop nest whose dimensions of the window's size run to `extent` (see
//! `loops`) computes every element a staged step would copy back, from the same elements, and
//! touches nothing outside the arrays. What a staged step computes past the end (from the
//! fill value) is dropped there.
//!
//! Not in debug mode, which runs the kernel as written, checking every access.

use super::{Emitter, Result};
use crate::coverage;
use inkwell::values::IntValue;
use tpukit_dsl::{
    BlockSpec, Dim, Func, Indexer, Kernel, OpKind, Operand, Region, Role, Space, Window,
};

/// A kernel whose edge steps are clipped: its window shape and the operand whose window
/// places the step (the first output).
pub(crate) struct Clip {
    pub window: Vec<usize>,
    pub geometry: usize,
}

/// The clipping of `kernel`'s edge steps, if it is exact (see the module docs).
pub(crate) fn clip(kernel: &Kernel) -> Option<Clip> {
    let geometry = kernel
        .operands
        .iter()
        .position(|o| o.role == Role::Output)?;
    let g = &kernel.operands[geometry];
    let Window::Blocked(gs) = &g.window else {
        return None;
    };
    let fits = kernel.operands.iter().all(|o| {
        o.space == Space::Local
            && match (o.role, &o.window) {
                (Role::Output, Window::Blocked(s)) => {
                    o.shape == g.shape && s.block == gs.block && s.index_map == gs.index_map
                }
                (Role::Input, Window::Blocked(s)) => follows(o, s, g, gs),
                (Role::Input, Window::Whole) => o.shape.iter().all(|d| *d == Dim::Static(1)),
                _ => false,
            }
    });
    let window = gs.ref_shape();
    (fits && elementwise(&kernel.body, &window, kernel)).then_some(Clip { window, geometry })
}

/// Whether input `o`'s window (`s`) lies where the outputs' (`g`, `gs`) does along every
/// dimension but those it broadcasts (extent 1, block 1, kept or squeezed as theirs).
fn follows(o: &Operand, s: &BlockSpec, g: &Operand, gs: &BlockSpec) -> bool {
    if o.shape == g.shape && s.block == gs.block && s.index_map == gs.index_map {
        return true;
    }
    let (Some(at), Some(gat)) = (grid_indices(&s.index_map), grid_indices(&gs.index_map)) else {
        return false;
    };
    o.shape.len() == g.shape.len()
        && (0..o.shape.len()).all(|d| {
            let broadcast = o.shape[d] == Dim::Static(1)
                && s.block[d].size() == 1
                && s.block[d].kept() == gs.block[d].kept();
            let shared = o.shape[d] == g.shape[d]
                && s.block[d] == gs.block[d]
                && at[d].is_some()
                && at[d] == gat[d];
            broadcast || shared
        })
}

/// Per block index an index map yields, the grid axis it is (the map's argument yielded as
/// it is), or None for any other value; None for a map that computes anything else.
fn grid_indices(map: &Func) -> Option<Vec<Option<usize>>> {
    let (last, ops) = map.body.ops.split_last()?;
    let OpKind::Yield { values } = &last.kind else {
        return None;
    };
    ops.iter()
        .all(|op| matches!(op.kind, OpKind::Const { .. }))
        .then(|| {
            values
                .iter()
                .map(|v| map.body.args.iter().position(|a| a == v))
                .collect()
        })
}

/// Whether the body only loads and stores whole refs and computes elementwise, broadcasting
/// only dimensions of extent 1, on scalars and values of the window's rank whose every
/// dimension is 1 or the window's, ending in an empty yield.
fn elementwise(f: &Func, window: &[usize], kernel: &Kernel) -> bool {
    let shaped = |v: &tpukit_dsl::ValueId| {
        let ty = f.ty(*v);
        ty.is_scalar()
            || (ty.shape.len() == window.len()
                && ty.shape.iter().zip(window).all(|(&n, &w)| n == 1 || n == w))
    };
    let whole = |operand: tpukit_dsl::OperandId, index: &[Indexer]| {
        let shape: Option<Vec<usize>> = kernel
            .operand(operand)
            .ref_shape()
            .iter()
            .map(Dim::as_static)
            .collect();
        shape.is_some_and(|shape| coverage::whole(index, &shape))
    };
    let region: &Region = &f.body;
    region.ops.iter().all(|op| {
        op.results.iter().chain(&op.kind.operands()).all(shaped)
            && match &op.kind {
                OpKind::Load {
                    operand,
                    index,
                    mask: None,
                    other: None,
                    ..
                } => whole(*operand, index),
                OpKind::Store {
                    operand,
                    index,
                    mask: None,
                    ..
                } => whole(*operand, index),
                OpKind::Const { .. }
                | OpKind::Unary { .. }
                | OpKind::Binary { .. }
                | OpKind::Compare { .. }
                | OpKind::Select { .. }
                | OpKind::Cast { .. }
                | OpKind::Broadcast { .. }
                | OpKind::ProgramId { .. }
                | OpKind::NumPrograms { .. } => true,
                OpKind::Yield { values } => values.is_empty(),
                _ => false,
            }
    })
}

impl<'ctx> Emitter<'ctx, '_> {
    /// Where the current step's windows end inside their arrays, per kept dimension (see
    /// the module docs): read from the first output's window, placed by `place_window`
    /// (every window starts where it does along the dimensions it does not broadcast).
    pub(super) fn window_extents(&self) -> Result<Vec<IntValue<'ctx>>> {
        let clip = self.clip.as_ref().expect("a clipped kernel");
        let Window::Blocked(spec) = &self.kernel.operands[clip.geometry].window else {
            unreachable!("a clipped kernel's outputs are windows");
        };
        let st = &self.operands[clip.geometry];
        let mut extents = Vec::new();
        for (d, bd) in spec.block.iter().enumerate() {
            if bd.kept() {
                let left = self.b.build_int_nsw_sub(st.dims[d], st.origin[d], "left")?;
                extents.push(self.min_i64(left, self.i64(bd.size() as i64))?);
            }
        }
        Ok(extents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpukit_dsl::parse_kernel;

    /// A kernel over `f32[n]` in blocks of 8: `x`'s map yields `x_map`, the body `body`
    /// (`%0` is `x`'s window, `%1` `s`'s, and it stores `%2`).
    fn kernel(x_map: &str, s: &str, body: &str) -> Kernel {
        let text = format!(
            "kernel @k grid(parallel cdiv(n, 8)) {{
  input %x: f32[n] block[8] fill 0.0 map(%0) {{
    {x_map}
  }}
  input %s: {s}
  output %o: f32[n] block[8] fill 0.0 map(%0) {{
    yield %0
  }}
body {{
  %0 = load %x[ds(0, 8)] : f32[8]
  {body}
  store %o[ds(0, 8)], %2
  yield
}}
"
        );
        parse_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    const SCALED: &str = "%1 = load %s[ds(0, 1)] : f32[1]
  %3 = broadcast %1 : f32[8]
  %2 = mul %0, %3 : f32[8]";

    #[test]
    fn elementwise_kernels_of_one_geometry_clip() {
        let k = kernel("yield %0", "f32[1]", SCALED);
        assert_eq!(clip(&k).map(|c| (c.window, c.geometry)), Some((vec![8], 2)));
        let same = "f32[n] block[8] fill 0.0 map(%0) {
    yield %0
  }";
        let body = "%1 = load %s[ds(0, 8)] : f32[8]
  %2 = add %0, %1 : f32[8]";
        assert!(clip(&kernel("yield %0", same, body)).is_some());
    }

    #[test]
    fn other_kernels_are_staged() {
        // `x`'s window is a block ahead of the output's.
        let ahead = "%1 = const 1 : i32[]
    %2 = add %0, %1 : i32[]
    yield %2";
        assert!(clip(&kernel(ahead, "f32[1]", SCALED)).is_none());
        // A whole operand of more than one element.
        let table = "%1 = load %s[ds(0, 8)] : f32[8]
  %2 = add %0, %1 : f32[8]";
        assert!(clip(&kernel("yield %0", "f32[8]", table)).is_none());
        // A reduction: an element of the result reads the whole window.
        let sum = "%1 = load %s[ds(0, 1)] : f32[1]
  %3 = reduce_sum %0 [0] : f32[]
  %2 = broadcast %3 : f32[8]";
        assert!(clip(&kernel("yield %0", "f32[1]", sum)).is_none());
    }
}
