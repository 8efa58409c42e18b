//! Staging copies of edge windows, called by compiled kernels (see `codegen::window`).
//!
//! A window that overhangs its array's end is copied into a block-sized, row-major buffer
//! before the body runs (reading the fill value outside the array), and an output's buffer is
//! copied back afterwards (only where it lies inside the array). Doing this in one Rust
//! function, rather than emitting copy loops for every operand, keeps the generated code (and
//! the compile time) to the body itself.

/// Copy direction.
pub(crate) const IN: i64 = 0;
pub(crate) const OUT: i64 = 1;

/// Copies the `block` window starting at `origin` of the row-major `array` (extents `dims`,
/// `rank` of them, elements of `elem` bytes) into `stage` (`dir == IN`; elements outside the
/// array become the `elem` low bytes of `fill`) or back (`dir == OUT`; elements outside the
/// array are skipped).
///
/// # Safety
/// `array` holds `prod(dims)` elements, `stage` `prod(block)`; `dims`, `origin` and `block`
/// hold `rank >= 1` values each; `0 <= origin[d] <= dims[d]` (checked by the kernel before the
/// call).
pub(crate) unsafe extern "C" fn stage(
    array: *mut u8,
    stage: *mut u8,
    dims: *const i64,
    origin: *const i64,
    block: *const i64,
    rank: i64,
    elem: i64,
    fill: u64,
    dir: i64,
) {
    let rank = rank as usize;
    let elem = elem as usize;
    // SAFETY: the caller passes `rank` values in each array.
    let (dims, origin, block) = unsafe {
        (
            std::slice::from_raw_parts(dims, rank),
            std::slice::from_raw_parts(origin, rank),
            std::slice::from_raw_parts(block, rank),
        )
    };
    let last = rank - 1;
    let row = block[last] as usize;
    // Elements of each row that lie inside the array (the same for every row).
    let inside = (dims[last] - origin[last]).clamp(0, block[last]) as usize;
    let fill_bytes = fill.to_le_bytes();
    let rows: usize = block[..last].iter().map(|&b| b as usize).product();
    let mut idx = vec![0i64; last];
    for r in 0..rows {
        // The array offset of this row's first element, if the row lies inside the array.
        let mut row_inside = true;
        let mut stride = 1usize;
        let mut offset = origin[last] as usize;
        for d in (0..last).rev() {
            stride *= dims[d + 1] as usize;
            let c = origin[d] + idx[d];
            row_inside &= c < dims[d];
            offset += c as usize * stride;
        }
        let at = row_inside.then_some(offset);
        // SAFETY: rows of the stage are `row` elements; `at..at + inside` lies in the array
        // because the row and its first `inside` columns are inside it.
        unsafe {
            let s = stage.add(r * row * elem);
            let copied = if let Some(a) = at {
                let a = array.add(a * elem);
                if dir == IN {
                    std::ptr::copy_nonoverlapping(a, s, inside * elem);
                } else {
                    std::ptr::copy_nonoverlapping(s, a, inside * elem);
                }
                inside
            } else {
                0
            };
            if dir == IN {
                for j in copied..row {
                    std::ptr::copy_nonoverlapping(fill_bytes.as_ptr(), s.add(j * elem), elem);
                }
            }
        }
        for d in (0..last).rev() {
            idx[d] += 1;
            if idx[d] < block[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}
