//! Which staging copies of edge windows change nothing (see `cpu::codegen::window`).
//!
//! A window that overhangs its array's end is staged through a block-sized buffer: copied
//! in before the body (the operand's fill value beyond the array), and an output's copied
//! back after it where it lies inside the array. Two parts of that are unobservable, and a
//! tiny array in large blocks (an (8, 128) tensor in tpuBLAS's 4096-element blocks) is mostly
//! overhang, so they cost most of the launch:
//! - copying in an output that every grid step stores whole, unmasked, at the body's top
//!   level, before anything loads it: the body overwrites all of the buffer before it or the
//!   copy back reads it;
//! - filling the overhang of an input read only elementwise into outputs of the same
//!   geometry (array shape, block, index map) that nothing loads: an element past the end
//!   reaches only the same element of those outputs' windows, which lies past their end too
//!   and is never copied back.

use crate::coverage::{self, whole};
use tpukit_dsl::{Kernel, OpKind, OperandId, Region, Role, ValueId, Window};

/// Whether output `id`'s staged window needs its contents copied in before the body: false
/// when every step stores the whole window before anything reads it.
pub(crate) fn output_needs_copy_in(kernel: &Kernel, id: OperandId) -> bool {
    !coverage::written_before_read(&kernel.body.body, id, kernel.operand(id))
}

/// Whether what input `id`'s overhang holds can reach anything the launch writes to memory
/// (see the module doc): false when its loads are whole windows at the body's top level, and
/// their values flow only through elementwise ops into whole-window stores of outputs with
/// its geometry that nothing loads.
pub(crate) fn input_fill_observable(kernel: &Kernel, id: OperandId) -> bool {
    let input = kernel.operand(id);
    let (Role::Input, Window::Blocked(spec)) = (input.role, &input.window) else {
        return true;
    };
    let shape = spec.ref_shape();
    let body = &kernel.body.body;
    let same_geometry = |out: OperandId| {
        let o = kernel.operand(out);
        let Window::Blocked(out_spec) = &o.window else {
            return false;
        };
        o.role == Role::Output
            && o.shape == input.shape
            && out_spec.block == spec.block
            && out_spec.index_map == spec.index_map
            && coverage::only_stored(body, out)
    };
    let mut tainted: Vec<ValueId> = Vec::new();
    for op in &body.ops {
        let reads_tainted = op.kind.operands().iter().any(|v| tainted.contains(v));
        // Whether the op's results carry values of the input's window, position for position.
        let carries = match &op.kind {
            OpKind::Load { operand, index, .. } if *operand == id => {
                if !whole(index, &shape) || reads_tainted {
                    return true;
                }
                true
            }
            OpKind::Unary { .. }
            | OpKind::Binary { .. }
            | OpKind::Compare { .. }
            | OpKind::Select { .. }
            | OpKind::Cast { .. } => reads_tainted,
            OpKind::Store { operand, index, .. } => {
                if reads_tainted && !(whole(index, &shape) && same_geometry(*operand)) {
                    return true;
                }
                false
            }
            _ => {
                if reads_tainted {
                    return true;
                }
                false
            }
        };
        if carries {
            tainted.extend(&op.results);
        }
        if op
            .kind
            .regions()
            .into_iter()
            .any(|r| touches(r, id, &tainted))
        {
            return true;
        }
    }
    false
}

/// Whether anything in `region` (nested regions too) loads operand `id` or reads a value in
/// `tainted`.
fn touches(region: &Region, id: OperandId, tainted: &[ValueId]) -> bool {
    region.ops.iter().any(|op| {
        matches!(&op.kind, OpKind::Load { operand, .. } if *operand == id)
            || op.kind.operands().iter().any(|v| tainted.contains(v))
            || op
                .kind
                .regions()
                .into_iter()
                .any(|r| touches(r, id, tainted))
    })
}

#[cfg(test)]
mod tests {
    use super::{input_fill_observable, output_needs_copy_in};
    use tpukit_dsl::{Kernel, OperandId, parse_kernel};

    /// Input `%x` and output `%o` over `f32[n]` in blocks of 128 (the output's index map
    /// yielding `out_map`), `%y` an input of 128-blocks read nowhere unless `body` does;
    /// `body` follows `%0 = load %x[…]`.
    fn kernel(out_map: &str, body: &str) -> Kernel {
        let text = format!(
            "kernel @k grid(parallel cdiv(n, 128)) {{
  input %x: f32[n] block[128] fill 0.0 map(%0) {{
    yield %0
  }}
  input %y: f32[n] block[128] fill 1.0 map(%0) {{
    yield %0
  }}
  output %o: f32[n] block[128] fill 0.0 map(%0) {{
{out_map}
  }}
body {{
  %0 = load %x[ds(0, 128)] : f32[128]
{body}
  yield
}}
"
        );
        parse_kernel(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    const SAME: &str = "    yield %0";
    const X: OperandId = OperandId(0);
    const O: OperandId = OperandId(2);

    #[test]
    fn elementwise_kernels_need_neither_fill_nor_copy_in() {
        let k = kernel(
            SAME,
            "  %1 = load %y[ds(0, 128)] : f32[128]
  %2 = exp %0 : f32[128]
  %3 = add %2, %1 : f32[128]
  %4 = const 0.0 : f32[128]
  %5 = gt %3, %4 : bool[128]
  %6 = select %5, %3, %4 : f32[128]
  %7 = cast %6 : bf16[128]
  %8 = cast %7 : f32[128]
  store %o[ds(0, 128)], %8",
        );
        assert!(!input_fill_observable(&k, X));
        assert!(!input_fill_observable(&k, OperandId(1)));
        assert!(!output_needs_copy_in(&k, O));
    }

    #[test]
    fn a_fill_that_can_reach_the_array_is_kept() {
        // Reduced over the window: the fill is part of every sum.
        let sum = "  %1 = reduce_sum %0 [0] : f32[]
  %2 = broadcast %1 : f32[128]
  store %o[ds(0, 128)], %2";
        // Moved along the window: an element past the end lands inside it.
        let rolled = "  %1 = const 1 : i32[]
  %2 = roll %0, %1 axis 0 : f32[128]
  store %o[ds(0, 128)], %2";
        // Stored into part of the window.
        let part = "  %1 = load %x[ds(0, 64)] : f32[64]
  store %o[ds(0, 64)], %1";
        // Read inside a loop.
        let looped = "  %1 = const 0 : i32[]
  %2 = const 1 : i32[]
  %3 = for %4 = %1 to %2 step %2 iter(%5 = %0) : (f32[128]) {
    %6 = add %5, %0 : f32[128]
    yield %6
  }
  store %o[ds(0, 128)], %3";
        // An output that is also read (an accumulation).
        let acc = "  %1 = load %o[ds(0, 128)] : f32[128]
  %2 = add %0, %1 : f32[128]
  store %o[ds(0, 128)], %2";
        for body in [sum, rolled, part, looped, acc] {
            assert!(input_fill_observable(&kernel(SAME, body), X), "{body}");
        }
        // Stored into a window placed elsewhere (the block after the input's).
        let store = "  store %o[ds(0, 128)], %0";
        let next = "    %1 = const 1 : i32[]\n    %2 = add %0, %1 : i32[]\n    yield %2";
        assert!(input_fill_observable(&kernel(next, store), X));
        assert!(!input_fill_observable(&kernel(SAME, store), X));
    }

    #[test]
    fn outputs_read_or_stored_in_part_are_copied_in() {
        let acc = "  %1 = load %o[ds(0, 128)] : f32[128]
  %2 = add %0, %1 : f32[128]
  store %o[ds(0, 128)], %2";
        let part = "  %1 = load %x[ds(0, 64)] : f32[64]
  store %o[ds(0, 64)], %1";
        for body in [acc, part] {
            assert!(output_needs_copy_in(&kernel(SAME, body), O), "{body}");
        }
    }

    /// A window stored whole and then read (normalised in place) holds what the step stored
    /// wherever it is read.
    #[test]
    fn outputs_stored_whole_before_they_are_read_are_not_copied_in() {
        let in_place = "  store %o[ds(0, 128)], %0
  %1 = load %o[ds(0, 128)] : f32[128]
  %2 = add %1, %1 : f32[128]
  store %o[ds(0, 128)], %2";
        assert!(!output_needs_copy_in(&kernel(SAME, in_place), O));
    }
}
