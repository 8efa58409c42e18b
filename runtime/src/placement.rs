//! Where in its 4 KiB page a new output starts, so that a kernel streaming through its
//! inputs and the output does not stall on 4K aliasing.
//!
//! A load whose address has the same low 12 bits as a store still in the store buffer is
//! held back as if it read that store's bytes (the core compares page offsets first). A
//! kernel writing `out[i]` while it reads `x[i]` then stalls whenever `out` starts a little
//! ahead of `x` in the page: the store to `out[i]` and the load of `x[j]`, `j` a few vectors
//! past `i`, share a page offset. glibc places consecutive large blocks a header apart, so a
//! new output is often 16–80 bytes ahead of the inputs allocated just before it (so it was
//! in `benches/python_speed.py`). Measured on this project's Zen 5, tpuBLAS `add` of torch
//! tensors, `x` at page offset 0 and `y` at 64, the output placed at each offset in turn in
//! one process: 1024×1024 f32 on two threads 83 µs with the output at 0, 93 / 97 / 92 µs at
//! 64 / 128 / 192 (0 to 128 bytes ahead of `y`), 79–84 µs from 256 on; 256×1024 on one
//! thread 40 against 45 / 47 / 42 µs. (A plain C loop over 16 KiB arrays: 0.42 against
//! 0.78 µs.) An output starting at an input's page offset, or behind it, stalls on nothing:
//! the loads a store could be mistaken for were issued before it.
//!
//! So outputs of at least [`MIN_BYTES`] start at [`page_offset_apart`] of the kernel's input
//! addresses: their memory has a page of slack in front to move the first element there.

/// The size of the page offset the core compares.
pub(crate) const PAGE: usize = 4096;

/// Outputs smaller than this are placed wherever the allocator puts them (the slack would
/// double them, and a kernel's few stores to them barely queue).
pub(crate) const MIN_BYTES: usize = 4096;

/// How far ahead of an input's page offset an output may not start (bytes): the distance up
/// to which stalls were measured (128 bytes still cost 7% at 1 MiB), with a margin.
const AHEAD: usize = 256;

/// Alignment of the offsets chosen: a cache line, so a 512-bit access never straddles two.
const LINE: usize = 64;

/// A page offset (a multiple of [`LINE`]) at which a new output starts no less than
/// [`AHEAD`] bytes ahead of any of `inputs` (addresses) in the page, nor between: the first
/// input's own offset rounded down to a line if it qualifies (behind or at every input is
/// best), else the first line that does. With inputs blocking every line (more than
/// `PAGE / AHEAD` of them, spread out), the first input's line.
pub(crate) fn page_offset_apart(inputs: &[*const u8]) -> usize {
    let offsets = inputs.iter().map(|&a| a as usize % PAGE);
    let clear = |c: usize| {
        offsets
            .clone()
            .all(|a| !(1..AHEAD).contains(&((c + PAGE - a) % PAGE)))
    };
    let own = offsets.clone().map(|a| a / LINE * LINE);
    own.clone()
        .chain((0..PAGE).step_by(LINE))
        .find(|&c| clear(c))
        .or_else(|| own.clone().next())
        .unwrap_or(0)
}

/// The index of the first element of a block of `size`-byte elements starting at `base`
/// (allocated with a page of slack) that lies at page offset `offset`: less than
/// `PAGE / size`.
pub(crate) fn first_element(base: usize, size: usize, offset: usize) -> usize {
    (offset + PAGE - base % PAGE) % PAGE / size
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ahead(out: usize, input: usize) -> usize {
        (out + PAGE - input % PAGE) % PAGE
    }

    fn page_offset_apart(inputs: &[usize]) -> usize {
        let pointers: Vec<*const u8> = inputs.iter().map(|&a| a as *const u8).collect();
        super::page_offset_apart(&pointers)
    }

    #[test]
    fn an_output_starts_at_an_inputs_line_or_behind_it() {
        // Two inputs a line apart, as glibc places torch's tensors.
        let (x, y) = (0x7f00_0000_0ec0, 0x7f00_0100_0f00);
        let c = page_offset_apart(&[x, y]);
        assert_eq!(c, 0xec0);
        assert!(ahead(c, x) == 0 && ahead(c, y) >= PAGE - AHEAD);
        // The first input misaligned: its line, 16 bytes behind it.
        assert_eq!(page_offset_apart(&[0x1010]), 0);
        // The first input's line is just ahead of the second: another line, clear of both.
        let c = page_offset_apart(&[0x2100, 0x2080]);
        assert!(
            [0x2100, 0x2080]
                .iter()
                .all(|&a| !(1..AHEAD).contains(&ahead(c, a)))
        );
    }

    #[test]
    fn every_line_blocked_falls_back_to_the_first_inputs() {
        let spread: Vec<usize> = (0..PAGE)
            .step_by(AHEAD / 2)
            .map(|o| 0x9000 + o + 8)
            .collect();
        assert_eq!(page_offset_apart(&spread), 0);
        assert_eq!(page_offset_apart(&[]), 0);
    }

    #[test]
    fn a_launchs_output_starts_at_the_chosen_offset() {
        use crate::HostArray;
        use crate::array::Contents;
        use tpukit_dsl::DType;
        let input = HostArray::zeros(DType::F32, &[64, 128]);
        let inputs = [input.data_ptr()];
        let what = || "a test output".to_string();
        for (dtype, shape) in [(DType::F32, vec![64, 128]), (DType::BF16, vec![3, 5, 700])] {
            // SAFETY: zeroed elements are initialised.
            let mut out =
                unsafe { HostArray::try_output(dtype, &shape, &what, Contents::Zeros, &inputs) }
                    .unwrap();
            assert_eq!(out.shape(), shape.as_slice());
            assert!(out.is_standard_layout());
            // A kernel writes it where it lies: the storage is not shared, so not copied (a
            // copy would not be at the chosen offset).
            assert_eq!(out.data_ptr_mut() as *const u8, out.data_ptr());
            assert_eq!(
                out.data_ptr() as usize % PAGE,
                super::page_offset_apart(&inputs)
            );
            assert!(out.to_f64_vec().iter().all(|&v| v == 0.0));
        }
        // A small output, wherever the allocator puts it.
        // SAFETY: as above.
        let small =
            unsafe { HostArray::try_output(DType::F32, &[8], &what, Contents::Zeros, &inputs) };
        assert_eq!(small.unwrap().to_f64_vec(), [0.0; 8]);
    }

    #[test]
    fn the_first_element_lies_at_the_offset() {
        for base in [0x1000, 0x1010, 0x1ff0, 0x2a38] {
            for (size, offset) in [(4, 0xec0), (2, 0x40), (1, 0), (4, 0xfc0)] {
                let k = first_element(base, size, offset);
                assert!(k < PAGE / size);
                assert_eq!((base + k * size) % PAGE, offset);
            }
        }
    }
}
