//! A strided tensor's elements gathered into row-major order: how a CPU torch tensor that is
//! not C-contiguous (a transpose, a permutation, a slice, an expansion) reaches a kernel,
//! whose operands are row-major arrays. One copy, made here at the boundary (before, numpy
//! copied a transposed 128 × 512 f32 matrix in 150 µs, a third of the `mm` it fed):
//!
//! - a permutation of a row-major layout that moves the last axis (`t()`,
//!   `transpose(-2, -1)`), f32 or bf16, by tpuBLAS's transposing kernel
//!   ([`tpukit_blas::copy::permute`]: compiled code, bundled). Scalar loops here run under
//!   the debug build's checks (the Python package's dev build), which made a transposing
//!   copy 2–5× torch's time;
//! - anything else: extent-1 axes dropped, axes that are one run in memory merged, then
//!   each row copied whole where its elements are adjacent (attention's head split, a slice
//!   of columns), else element by element (an expanded or stepped last axis; a transpose of
//!   another dtype).
//!
//! Invariant: a [`Gathered`] holds the elements of the shape it was gathered for, row-major,
//! aligned to their size.

use std::mem::MaybeUninit;
use std::sync::Arc;
use tpukit::{Device, HostArray};
use tpukit_dsl::DType;

/// Row-major elements, owned.
pub enum Gathered {
    /// Copied here (8-byte aligned storage, so any element type may be read; allocated
    /// without zeroing, every element then written: a zeroed allocation of this size is
    /// fresh pages from the system, whose first writes fault, at each call).
    Words(Vec<MaybeUninit<u64>>),
    /// Made by a kernel.
    Array(HostArray),
}

impl Gathered {
    /// The address of the first element.
    pub fn ptr(&self) -> *mut u8 {
        match self {
            Gathered::Words(w) => w.as_ptr() as *mut u8,
            Gathered::Array(a) => a.data_ptr() as *mut u8,
        }
    }
}

/// The elements of the strided array of `dtype` at `ptr` (`shape`, `strides` in elements),
/// row-major.
///
/// # Safety
/// Every element `ptr + Σ iᵢ · strides[i] · size` for `i` within `shape` is readable, and
/// stays so, unwritten, for the call.
pub unsafe fn gather(ptr: *const u8, dtype: DType, shape: &[usize], strides: &[i64]) -> Gathered {
    // Rows whose elements are adjacent copy fastest whole, whatever the order of the rows.
    let rows_adjacent = strides.last().is_none_or(|&s| s == 1);
    if matches!(dtype, DType::F32 | DType::BF16)
        && !rows_adjacent
        // SAFETY: this function's contract.
        && let Some(a) = unsafe { permuted(ptr, dtype, shape, strides) }
    {
        return Gathered::Array(a);
    }
    let size = dtype.size_bytes();
    let len: usize = shape.iter().product();
    let mut words = Vec::with_capacity((len * size).div_ceil(8).max(1));
    words.resize(words.capacity(), MaybeUninit::uninit());
    if len > 0 {
        let dst = words.as_mut_ptr() as *mut u8;
        let (shape, strides) = merged(shape, strides);
        // SAFETY: this function's contract, and `dst` holds `len` elements.
        unsafe {
            match size {
                1 => copy::<u8>(ptr.cast(), dst.cast(), &shape, &strides),
                2 => copy::<u16>(ptr.cast(), dst.cast(), &shape, &strides),
                4 => copy::<u32>(ptr.cast(), dst.cast(), &shape, &strides),
                _ => unreachable!("tpukit's dtypes are 1, 2 or 4 bytes"),
            }
        }
    }
    Gathered::Words(words)
}

/// The shape a view's memory has row-major if `strides` lay `shape` out as the transpose of
/// the last two axes of a row-major array (`w.t()`, `x.transpose(-2, -1)`, `x.mT`): that
/// array's shape, `shape` with its last two extents swapped. None for any other layout, and
/// for empty arrays. Strides of extent-1 axes are ignored (torch sets them freely).
pub fn transposed(shape: &[usize], strides: &[i64]) -> Option<Vec<usize>> {
    let r = shape.len();
    if r < 2 || shape.contains(&0) {
        return None;
    }
    let (mut stored, mut steps) = (shape.to_vec(), strides.to_vec());
    stored.swap(r - 2, r - 1);
    steps.swap(r - 2, r - 1);
    let mut step = 1i64;
    for (&e, &s) in stored.iter().zip(&steps).rev() {
        if e != 1 && s != step {
            return None;
        }
        step *= e as i64;
    }
    Some(stored)
}

/// The array made row-major by tpuBLAS's permutation, if `strides` order a row-major layout
/// of the axes of extent above 1 (every stride the product of the extents of the axes whose
/// strides are smaller); None for any other layout, or if the launch fails.
///
/// # Safety
/// As for [`gather`].
unsafe fn permuted(
    ptr: *const u8,
    dtype: DType,
    shape: &[usize],
    strides: &[i64],
) -> Option<HostArray> {
    let kept: Vec<usize> = (0..shape.len()).filter(|&i| shape[i] > 1).collect();
    let mut order = kept.clone();
    order.sort_by_key(|&i| std::cmp::Reverse(strides[i]));
    let mut step = 1i64;
    for &i in order.iter().rev() {
        if strides[i] != step {
            return None;
        }
        step *= shape[i] as i64;
    }
    let base: Vec<usize> = order.iter().map(|&i| shape[i]).collect();
    let perm: Vec<usize> = kept
        .iter()
        .map(|i| order.iter().position(|o| o == i).expect("a kept axis"))
        .collect();
    // SAFETY: `base` row-major from `ptr` holds exactly the tensor's elements (checked
    // above); the borrowed array is dropped before this returns (the permutation's result
    // is a new array: `perm` is no identity, or the tensor would be contiguous).
    let x = unsafe { HostArray::borrowed(dtype, &base, ptr, Arc::new(())) };
    let out = tpukit_blas::on_device(Device::Cpu, || tpukit_blas::copy::permute(&x, &perm));
    drop(x);
    out.ok()?.reshape(shape)
}

/// `shape` and `strides` without extent-1 axes, each run of axes that is one run in memory
/// (`strides[i] == strides[i + 1] · shape[i + 1]`) merged into one; at least one axis.
fn merged(shape: &[usize], strides: &[i64]) -> (Vec<usize>, Vec<isize>) {
    let mut out: Vec<(usize, isize)> = Vec::with_capacity(shape.len());
    for (&e, &s) in shape.iter().zip(strides) {
        if e == 1 {
            continue;
        }
        let s = s as isize;
        match out.last_mut() {
            Some((pe, ps)) if *ps == s * e as isize => {
                *pe *= e;
                *ps = s;
            }
            _ => out.push((e, s)),
        }
    }
    if out.is_empty() {
        out.push((1, 1));
    }
    out.into_iter().unzip()
}

/// Copies the array (`shape`, `strides` in elements, merged) at `src` to `dst`, row-major,
/// row by row.
///
/// # Safety
/// As for [`gather`]; `dst` holds `product(shape)` elements.
unsafe fn copy<T: Copy>(src: *const T, dst: *mut T, shape: &[usize], strides: &[isize]) {
    let last = shape.len() - 1;
    let (row, step) = (shape[last], strides[last]);
    // The index of the row over the axes before the last, last axis fastest.
    let mut index = vec![0usize; last];
    for r in 0..shape[..last].iter().product::<usize>() {
        let s: isize = index
            .iter()
            .zip(strides)
            .map(|(&i, &s)| i as isize * s)
            .sum();
        // SAFETY: row `index` of both arrays: this function's contract.
        unsafe {
            let (src, dst) = (src.offset(s), dst.add(r * row));
            match step {
                1 => std::ptr::copy_nonoverlapping(src, dst, row),
                _ => strided_run(src, step, dst, row),
            }
        }
        for k in (0..last).rev() {
            index[k] += 1;
            if index[k] < shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
}

/// Copies `n` elements `src[j · stride]` to `dst[j]`. Wrapping address arithmetic: the
/// checks debug builds (the Python package's dev build among them) add to `offset` and
/// `add` cost several times the copy, and the caller vouches for every address.
///
/// # Safety
/// The `n` source and destination elements are readable and writable.
#[inline(always)]
unsafe fn strided_run<T: Copy>(mut src: *const T, stride: isize, mut dst: *mut T, n: usize) {
    for _ in 0..n {
        // SAFETY: the caller's contract.
        unsafe { *dst = *src };
        src = src.wrapping_offset(stride);
        dst = dst.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_views_are_recognised() {
        // `w.t()` of a [512, 128] array, and `x.transpose(-2, -1)` of a [3, 40, 150] one.
        assert_eq!(transposed(&[128, 512], &[1, 128]), Some(vec![512, 128]));
        assert_eq!(
            transposed(&[3, 150, 40], &[6000, 1, 150]),
            Some(vec![3, 40, 150])
        );
        // An extent-1 batch axis's stride is free.
        assert_eq!(transposed(&[1, 5, 4], &[7, 1, 5]), Some(vec![1, 4, 5]));
        // A transpose of a column slice (rows 200 apart), a permutation that moves a batch
        // axis, a transpose of other axes, an empty view: not a transposed row-major array.
        assert_eq!(transposed(&[128, 512], &[1, 200]), None);
        assert_eq!(transposed(&[4, 3, 5], &[5, 20, 1]), None);
        assert_eq!(transposed(&[4, 3, 5], &[1, 20, 4]), None);
        assert_eq!(transposed(&[0, 5], &[1, 0]), None);
        assert_eq!(transposed(&[7], &[2]), None);
    }

    /// The elements of `data` viewed with `shape` and `strides` from `offset`, gathered as
    /// `dtype`, beside the same read index by index.
    fn check(data: &[u32], dtype: DType, shape: &[usize], strides: &[i64], offset: usize) {
        // SAFETY: the callers' views stay inside `data`.
        let g = unsafe { gather(data.as_ptr().add(offset).cast(), dtype, shape, strides) };
        let len: usize = shape.iter().product();
        // SAFETY: `g` holds `len` u32s.
        let got = unsafe { std::slice::from_raw_parts(g.ptr() as *const u32, len) };
        let mut want = Vec::with_capacity(len);
        let mut index = vec![0usize; shape.len()];
        for _ in 0..len {
            let at: i64 = index.iter().zip(strides).map(|(&i, &s)| i as i64 * s).sum();
            want.push(data[(offset as i64 + at) as usize]);
            for k in (0..shape.len()).rev() {
                index[k] += 1;
                if index[k] < shape[k] {
                    break;
                }
                index[k] = 0;
            }
        }
        assert_eq!(
            got,
            &want[..],
            "{dtype} shape {shape:?} strides {strides:?}"
        );
    }

    #[test]
    fn gathers_transposes_permutations_slices_and_expansions() {
        // f32 values (their bits, so the 4-byte copy and the f32 kernel see the same data).
        let data: Vec<u32> = (0..70_000).map(|i| (i as f32 - 3e4).to_bits()).collect();
        for dtype in [DType::I32, DType::F32] {
            check(&data, dtype, &[128, 512], &[1, 128], 0); // a transpose
            check(&data, dtype, &[37, 45], &[1, 37], 0); // blocks that overhang
            check(&data, dtype, &[2, 4, 64, 32], &[8192, 32, 128, 1], 0); // heads: rows
            check(&data, dtype, &[2, 32, 64, 4], &[8192, 1, 128, 32], 5); // a permutation
            check(&data, dtype, &[3, 1, 5, 7], &[1, 9, 21, 3], 0); // and an extent-1 axis
            check(&data, dtype, &[6, 10], &[20, 1], 3); // a slice of columns
            check(&data, dtype, &[40, 9], &[1, 80], 0); // a transposed slice
            check(&data, dtype, &[4, 1, 9], &[0, 77, 1], 0); // an expanded axis
            check(&data, dtype, &[5, 6], &[1, 0], 0); // an expanded last axis
            check(&data, dtype, &[7, 5], &[10, 2], 1); // a stepped last axis
            check(&data, dtype, &[1, 1], &[0, 0], 9); // one element
            check(&data, dtype, &[0, 3], &[3, 1], 0); // none
        }
    }

    #[test]
    fn permutations_of_f32_and_bf16_take_the_kernel() {
        let data = vec![0u32; 4096];
        for dtype in [DType::F32, DType::BF16] {
            // SAFETY: 64 × 64 elements of at most 4 bytes.
            let g = unsafe { gather(data.as_ptr().cast(), dtype, &[64, 64], &[1, 64]) };
            assert!(matches!(g, Gathered::Array(_)), "{dtype}");
        }
        // SAFETY: as above; a slice is no permutation.
        let g = unsafe { gather(data.as_ptr().cast(), DType::F32, &[32, 32], &[64, 1]) };
        assert!(matches!(g, Gathered::Words(_)));
    }

    #[test]
    fn merges_runs_and_drops_unit_axes() {
        assert_eq!(merged(&[2, 3, 4], &[12, 4, 1]), (vec![24], vec![1]));
        assert_eq!(merged(&[2, 1, 4], &[4, 99, 1]), (vec![8], vec![1]));
        assert_eq!(merged(&[2, 3, 4], &[1, 8, 2]), (vec![2, 12], vec![1, 2]));
        assert_eq!(merged(&[1], &[5]), (vec![1], vec![1]));
    }
}
