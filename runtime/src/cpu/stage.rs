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
/// As `IN`, but the elements outside the array keep what the stage holds (an output window
/// that stays at its block: its edge is memory, see `tpukit_dsl::BlockSpec`).
pub(crate) const IN_KEEP: i64 = 2;

/// Copies the `block` window starting at `origin` of the row-major `array` (extents `dims`,
/// `rank` of them, elements of `elem` bytes) into `stage` (`dir == IN`; elements outside the
/// array become the `elem` low bytes of `fill`; with `dir == IN_KEEP` they are left as they
/// are) or back (`dir == OUT`; elements outside the array are skipped).
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
    // The longest run of fill elements written so far (its start and length): a later run
    // no longer than it is one copy of its prefix (every row of an overhanging window has
    // the same tail of fill), not a fresh `fill_with`.
    let mut filled: (*const u8, usize) = (std::ptr::null(), 0);
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
                if dir != OUT {
                    std::ptr::copy_nonoverlapping(a, s, inside * elem);
                } else {
                    std::ptr::copy_nonoverlapping(s, a, inside * elem);
                }
                inside
            } else {
                0
            };
            if dir == IN && copied < row {
                let (run, n) = (s.add(copied * elem), row - copied);
                if n <= filled.1 {
                    // Distinct rows of the stage: the runs do not overlap.
                    std::ptr::copy_nonoverlapping(filled.0, run, n * elem);
                } else {
                    fill_with(run, n, &fill_bytes[..elem]);
                    filled = (run, n);
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

/// Writes `n` copies of `value` (one element's bytes) from `at`: the first copied once, then
/// the filled prefix doubled, so a long run of fill elements costs O(log n) `memcpy`s rather
/// than one per element (a block much larger than its array, e.g. a tiny array in 4096-element
/// blocks, is mostly fill).
///
/// # Safety
/// `at` addresses `n * value.len()` writable bytes that `value` does not overlap.
unsafe fn fill_with(at: *mut u8, n: usize, value: &[u8]) {
    let total = n * value.len();
    if total == 0 {
        return;
    }
    // SAFETY: every write stays in `at..at + total` (the caller's contract); the doubling
    // copies read `at..at + done` and write `at + done..`, which do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(value.as_ptr(), at, value.len());
        let mut done = value.len();
        while done < total {
            let step = done.min(total - done);
            std::ptr::copy_nonoverlapping(at, at.add(done), step);
            done += step;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3×5 i16 array staged in a 4×8 block at origin (1, 2): the inside part copied, the
    /// rest the fill value; then copied back, only inside.
    #[test]
    fn stages_an_overhanging_window_with_its_fill() {
        let mut array: Vec<i16> = (0..15).collect();
        let mut staged = vec![0i16; 32];
        let (dims, origin, block) = ([3i64, 5], [1i64, 2], [4i64, 8]);
        let fill = (-7i16) as u16 as u64;
        // SAFETY: sizes as documented: 15 array elements, 32 staged, rank 2, origin inside.
        unsafe {
            stage(
                array.as_mut_ptr().cast(),
                staged.as_mut_ptr().cast(),
                dims.as_ptr(),
                origin.as_ptr(),
                block.as_ptr(),
                2,
                2,
                fill,
                IN,
            );
        }
        for r in 0..4 {
            for c in 0..8 {
                let (i, j) = (1 + r, 2 + c);
                let want = if i < 3 && j < 5 {
                    (i * 5 + j) as i16
                } else {
                    -7
                };
                assert_eq!(staged[r * 8 + c], want, "staged[{r}][{c}]");
            }
        }
        staged.iter_mut().for_each(|v| *v = 100);
        // SAFETY: as above.
        unsafe {
            stage(
                array.as_mut_ptr().cast(),
                staged.as_mut_ptr().cast(),
                dims.as_ptr(),
                origin.as_ptr(),
                block.as_ptr(),
                2,
                2,
                0,
                OUT,
            );
        }
        let want: Vec<i16> = (0..15)
            .map(|k| if k / 5 >= 1 && k % 5 >= 2 { 100 } else { k })
            .collect();
        assert_eq!(array, want);
    }

    #[test]
    fn fills_runs_of_every_length() {
        for n in 0..40 {
            let mut v = vec![0u32; n + 1];
            // SAFETY: `n` elements of 4 bytes, `v` has `n + 1`.
            unsafe { fill_with(v.as_mut_ptr().cast(), n, &0xdead_beefu32.to_le_bytes()) };
            assert!(v[..n].iter().all(|&x| x == 0xdead_beef), "n = {n}");
            assert_eq!(v[n], 0);
        }
    }
}
