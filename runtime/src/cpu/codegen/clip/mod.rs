//! Clipped edge steps: a kernel whose operands share one geometry runs a step whose
//! windows overhang their arrays on views of the arrays, every loop over the window cut at
//! the arrays' ends, instead of staging the windows (see `window`).
//!
//! Why: staging copies each overhanging window into a block-sized buffer (and an output's
//! back), and the body computes the whole block. A tpuBLAS `add` of 1024 f32 elements, one
//! step of its 4096-element blocks, copied 12 KiB and added 4096 pairs for 1024; µs per call
//! from Python (2026-11-28, interleaved): 1024 elements 2.92, 4096 (no overhang) 2.69, 4000
//! 3.60 — the staging of one edge step cost more than the add. A row kernel on rows no window
//! width divides (layer norm of `(4194, 1000)` f32 in `[16, 512]` windows) spent a third of
//! its time in the staging copies (`perf`: `memmove` under `stage`), reading every row
//! twice per phase.
//!
//! When it is exact. The *geometry* is the local input or output window with the most
//! elements (`geometry`); its index map yields a grid index or a constant along each
//! dimension. Every other window lies where it does along each dimension it does not
//! broadcast (extent 1, block 1) wherever the body accesses it: its index map, evaluated
//! with the program ids the `if`s around the access fix (a phased row kernel's output is at
//! column block `j · (phase / 1)`, which is `j` in the last phase, the only one that writes
//! it), yields the same grid index or constant. A whole input holds one element (a run-time
//! scalar); scratch spans only window dimensions whose extent is the same at every step that
//! shares its state (a constant or `parallel` block index). Along each dimension it shares,
//! every window's elements inside its array are then those below `extent[k] = min(block[k],
//! dims[d] − origin[d])`, the same for every operand.
//!
//! The body (`body`) loads and stores whole refs, unmasked, and computes elementwise
//! (broadcasting dimensions of extent 1), in `if`s, and by reductions; every value is a
//! scalar, has the window's rank with each dimension 1 or the window's, or is such a value
//! with reduced dimensions. Element `i` of an elementwise result depends only on the
//! elements at `i` of its operands, so a loop nest whose dimensions of the window's size run
//! to `extent` (see `loops`) computes every element a staged step would copy back, from the
//! same elements, and touches nothing outside the arrays; what a staged step computes past
//! the end is dropped there (or, in scratch, past the end of a steady dimension, read only
//! past it again). A reduction along a window dimension sums (maximises, minimises) only the
//! elements inside the array: exact when the staged step's elements past the extent are the
//! reduction's identity, which `body` proves from the fill values and masks.
//!
//! Not in debug mode, which runs the kernel as written, checking every access.

mod body;
mod geometry;

use super::{Emitter, Result};
use geometry::Geometry;
use inkwell::values::IntValue;
use tpukit_dsl::{Kernel, Window};

/// A kernel whose edge steps are clipped: its window shape and the operand whose window
/// places the step (the geometry).
pub(crate) struct Clip {
    pub window: Vec<usize>,
    pub geometry: usize,
}

/// The clipping of `kernel`'s edge steps, if it is exact (see the module docs).
pub(crate) fn clip(kernel: &Kernel) -> Option<Clip> {
    let geometry = Geometry::of(kernel)?;
    let accesses = body::accesses(kernel, &geometry)?;
    geometry.admits(&accesses).then(|| Clip {
        window: geometry.window.clone(),
        geometry: geometry.operand,
    })
}

impl<'ctx> Emitter<'ctx, '_> {
    /// Where the current step's windows end inside their arrays, per kept dimension (see
    /// the module docs): read from the geometry's window, placed by `place_window` (every
    /// window starts where it does along the dimensions it does not broadcast).
    pub(super) fn window_extents(&self) -> Result<Vec<IntValue<'ctx>>> {
        let clip = self.clip.as_ref().expect("a clipped kernel");
        let Window::Blocked(spec) = &self.kernel.operands[clip.geometry].window else {
            unreachable!("a clipped kernel's geometry is a window");
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
        assert_eq!(clip(&k).map(|c| (c.window, c.geometry)), Some((vec![8], 0)));
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
    }

    /// `x`'s window summed after `pre` (`%4` summed), broadcast into the output.
    fn summed(pre: &str) -> Kernel {
        kernel(
            "yield %0",
            "f32[1]",
            &format!(
                "%1 = load %s[ds(0, 1)] : f32[1]
  {pre}
  %3 = reduce_sum %4 [0] : f32[]
  %2 = broadcast %3 : f32[8]"
            ),
        )
    }

    #[test]
    fn reductions_clip_where_the_elements_past_the_end_are_their_identity() {
        // `x` overhangs with its fill, 0.
        assert!(clip(&summed("%4 = mul %0, %0 : f32[8]")).is_some());
        // exp(0) = 1: a staged step adds 1 for every element past the end.
        assert!(clip(&summed("%4 = exp %0 : f32[8]")).is_none());
        // ... unless a mask `iota + program_id · 8 < n` selects 0 there.
        let masked = "%5 = exp %0 : f32[8]
  %6 = program_id 0 : i32[]
  %7 = const 8 : i32[]
  %8 = mul %6, %7 : i32[]
  %9 = broadcast %8 : i32[8]
  %10 = iota 0 : i32[8]
  %11 = add %10, %9 : i32[8]
  %12 = array_dim %x 0 : i32[]
  %13 = broadcast %12 : i32[8]
  %14 = lt %11, %13 : bool[8]
  %15 = const 0.0 : f32[8]
  %4 = select %14, %5, %15 : f32[8]";
        assert!(clip(&summed(masked)).is_some());
        // A mask with another block size tests something else.
        let other = masked.replace("const 8 : i32[]", "const 16 : i32[]");
        assert!(clip(&summed(&other)).is_none());
        // `x` read where its fill is not the sum's identity.
        let text = "%4 = mul %0, %0 : f32[8]";
        let mut k = summed(text);
        if let Window::Blocked(s) = &mut k.operands[0].window {
            s.fill = tpukit_dsl::Literal::Float(1.0);
        }
        assert!(clip(&k).is_none());
    }

    #[test]
    fn a_load_after_a_whole_store_reads_what_was_stored() {
        // The output stored with 0 past the end, loaded back and summed (tpuBLAS's softmax
        // normalises `exp` in its output so).
        let forwarded = |value: &str| {
            format!(
                "%5 = {value} %0, %0 : f32[8]
  store %o[ds(0, 8)], %5
  %4 = load %o[ds(0, 8)] : f32[8]"
            )
        };
        assert!(clip(&summed(&forwarded("mul"))).is_some());
        // 0 + 0 is 0 too, but x − x past the end is −∞ − −∞ with fill −∞.
        let mut k = summed(&forwarded("sub"));
        if let Window::Blocked(s) = &mut k.operands[0].window {
            s.fill = tpukit_dsl::Literal::Float(f64::NEG_INFINITY);
        }
        assert!(clip(&k).is_none());
    }

    /// `x: [b, c, d]` copied in `[8, 8]` windows of rows into `o`, declared by `out` (the
    /// row swap `[c, b, d]` with `yield %1, %0, %2`: its first array dimension kept where
    /// the input keeps its second).
    fn swap(out: &str) -> Kernel {
        parse(&format!(
            "kernel @swap grid(parallel cdiv(b, 1), parallel cdiv(c, 8), parallel cdiv(d, 8)) {{
  input %x: f32[b,c,d] block[sq,8,8] fill 0.0 map(%0, %1, %2) {{
    yield %0, %1, %2
  }}
  output %o: {out}
  }}
body {{
  %0 = load %x[ds(0, 8), ds(0, 8)] : f32[8,8]
  store %o[ds(0, 8), ds(0, 8)], %0
  yield
}}
"
        ))
    }

    #[test]
    fn windows_pair_by_their_kept_dimensions() {
        let rows = "f32[c,b,d] block[8,sq,8] fill 0.0 map(%0, %1, %2) {";
        let k = swap(&format!("{rows}\n    yield %1, %0, %2"));
        assert_eq!(
            clip(&k).map(|c| (c.window, c.geometry)),
            Some((vec![8, 8], 0))
        );
        // Rows of another `b` than the input's.
        let first = "%3 = const 0 : i32[]\n    yield %1, %3, %2";
        assert!(clip(&swap(&format!("{rows}\n    {first}"))).is_none());
        // The input's next column block.
        let ahead = "%3 = const 1 : i32[]\n    %4 = add %2, %3 : i32[]\n    yield %1, %0, %4";
        assert!(clip(&swap(&format!("{rows}\n    {ahead}"))).is_none());
        // The kept dimensions crossed: `o`'s first runs along `x`'s columns.
        let crossed = "f32[d,b,c] block[8,sq,8] fill 0.0 map(%0, %1, %2) {\n    yield %2, %0, %1";
        assert!(clip(&swap(crossed)).is_none());
    }

    /// A two-phase row kernel over `f32[m, n]` in `[8, 128]` windows (phase 0 sums each row
    /// into scratch, phase 1 writes `x − sum` and the sums), its output's map yielding
    /// `(i, out_col)` and `body1` the phase-1 body.
    fn rows(out_col: &str, body1: &str, grid0: &str) -> Kernel {
        parse(&rows_text(out_col, body1, grid0))
    }

    fn parse(text: &str) -> Kernel {
        parse_kernel(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    fn rows_text(out_col: &str, body1: &str, grid0: &str) -> String {
        format!(
            "kernel @rows grid({grid0} cdiv(m, 8), arbitrary 2, arbitrary cdiv(n, 128)) {{
  input %x: f32[m,n] block[8,128] fill 0.0 map(%0, %1, %2) {{
    yield %0, %2
  }}
  output %o: f32[m,n] block[8,128] fill 0.0 map(%0, %1, %2) {{
    %3 = const 1 : i32[]
    %4 = div %1, %3 : i32[]
    %5 = mul %2, %4 : i32[]
    yield %0, {out_col}
  }}
  output %s: f32[m,1] block[8,1] fill 0.0 map(%0, %1, %2) {{
    %3 = const 0 : i32[]
    yield %0, %3
  }}
  scratch %acc: f32[8,1]
body {{
  %0 = load %x[ds(0, 8), ds(0, 128)] : f32[8,128]
  %1 = program_id 1 : i32[]
  %2 = const 0 : i32[]
  %3 = eq %1, %2 : bool[]
  if %3 : () {{
    %4 = reduce_sum %0 [1] : f32[8]
    %5 = reshape %4 : f32[8,1]
    %6 = load %acc[ds(0, 8), ds(0, 1)] : f32[8,1]
    %7 = add %6, %5 : f32[8,1]
    store %acc[ds(0, 8), ds(0, 1)], %7
    yield
  }} else {{
    yield
  }}
  %8 = program_id 1 : i32[]
  %9 = const 1 : i32[]
  %10 = eq %8, %9 : bool[]
  if %10 : () {{
    %11 = load %acc[ds(0, 8), ds(0, 1)] : f32[8,1]
    %12 = broadcast %11 : f32[8,128]
    %13 = sub %0, %12 : f32[8,128]
    {body1}
    store %s[ds(0, 8), ds(0, 1)], %11
    yield
  }} else {{
    yield
  }}
  yield
}}
"
        )
    }

    const WRITE: &str = "store %o[ds(0, 8), ds(0, 128)], %13";

    #[test]
    fn phased_row_kernels_clip() {
        // The output is at column block `j · (phase / 1)`: `j` in phase 1, where it is
        // written; the statistic broadcasts along the row.
        let k = rows("%5", WRITE, "parallel");
        assert_eq!(
            clip(&k).map(|c| (c.window, c.geometry)),
            Some((vec![8, 128], 0))
        );
        // Written in every phase, it is at column block 0 in phase 0.
        let every = rows_text("%5", WRITE, "parallel").replace(
            "  %1 = program_id 1",
            "  store %o[ds(0, 8), ds(0, 128)], %0\n  %1 = program_id 1",
        );
        assert!(clip(&parse(&every)).is_none());
        // An output that stays at column block 0.
        assert!(clip(&rows("%3", WRITE, "parallel")).is_none());
        // Scratch rows carried between steps of an `arbitrary` row axis.
        assert!(clip(&rows("%5", WRITE, "arbitrary")).is_none());
    }
}
