//! Transposing a matrix in memory, `w × w` tiles at a time in vector registers: what a
//! `dot` packs from a swapped operand, and what a `store` of a loaded window's transpose
//! (`o[...] = x[...].T`) writes.
//!
//! Element by element, a transposed copy reads down the source's columns: one scalar load
//! and store per element, which LLVM leaves scalar (a vector would need a gather). Here each
//! tile is `w` row vectors of the source, transposed by `log2(w)` rounds of two-input
//! shuffles (round `d` swaps the off-diagonal `d × d` blocks of every `2d × 2d` block; all
//! rounds together transpose the tile), and stored as `w` row vectors of the destination:
//! `w` loads, `w·log2(w)` shuffles and `w` stores per `w²` elements. Rows and columns left
//! over after whole tiles are copied element by element.

use super::dot::{Mat, VecOf, transposed_source};
use super::value::Env;
use super::{Emitter, Result};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValue, IntValue, VectorValue};
use tpukit_dsl::{DType, Func, Indexer, OperandId, ValueId};

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// `dst[r][c] = src[c][r]` for `r < rows`, `c < cols`: `dst` is `rows × cols`, `src`
    /// `cols × rows`, both f32 with contiguous columns, not overlapping.
    pub(super) fn transpose_f32(
        &mut self,
        src: Mat<'ctx>,
        dst: Mat<'ctx>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        self.transpose(src, dst, rows, cols, DType::F32)
    }

    /// Emits a rank-2 `store` of `value` to `operand` through `index` as a tiled transpose
    /// when `value` is the transpose of a window loaded whole from another ref of the same
    /// dtype and both windows lie in memory with contiguous columns; returns whether it did.
    /// The store's access must have been checked (the load's was, where it was defined).
    /// An element-wise copy is exact, so this one is too, for every dtype.
    pub(super) fn store_transposed(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        operand: OperandId,
        index: &[Indexer],
        value: ValueId,
    ) -> Result<bool> {
        let dtype = self.kernel.operand(operand).dtype;
        let (&[rows, cols], true) = (&f.ty(value).shape[..], f.ty(value).dtype == dtype) else {
            return Ok(false);
        };
        let Some(x) = transposed_source(f, env, value) else {
            return Ok(false);
        };
        let Some(src) = self.loaded_window(f, env, x, dtype)? else {
            return Ok(false);
        };
        let Some(dst) = self.window_mat(env, operand, index, [rows, cols])? else {
            return Ok(false);
        };
        self.transpose(src, dst, rows, cols, dtype)?;
        Ok(true)
    }

    /// [`Self::transpose_f32`] for elements of `dtype` (as they lie in memory).
    fn transpose(
        &mut self,
        src: Mat<'ctx>,
        dst: Mat<'ctx>,
        rows: usize,
        cols: usize,
        dtype: DType,
    ) -> Result<()> {
        let elem = Elem {
            t: self.mem_type(dtype),
            align: dtype.size_bytes() as u32,
        };
        let w = self.options.vector_lanes.max(4) as usize;
        let (full_r, full_c) = (rows / w, cols / w);
        let (lo, hi) = (self.i64(0), self.i64(full_r as i64));
        self.counted(lo, hi, &mut |e, tr| {
            let r0 = e.b.build_int_nsw_mul(tr, e.i64(w as i64), "r0")?;
            let (lo, hi) = (e.i64(0), e.i64(full_c as i64));
            e.counted(lo, hi, &mut |e, tc| {
                let c0 = e.b.build_int_nsw_mul(tc, e.i64(w as i64), "c0")?;
                e.transpose_tile(src, dst, r0, c0, w, elem)
            })
        })?;
        // Leftovers: the columns past the whole tiles of the tiled rows, then the rows past
        // them (all columns).
        let (tiled_r, tiled_c) = (full_r * w, full_c * w);
        self.copy_transposed(src, dst, (0, tiled_r), (tiled_c, cols), elem)?;
        self.copy_transposed(src, dst, (tiled_r, rows), (0, cols), elem)
    }

    /// One `w × w` tile: source rows `c0..c0+w`, columns `r0..r0+w`.
    fn transpose_tile(
        &mut self,
        src: Mat<'ctx>,
        dst: Mat<'ctx>,
        r0: IntValue<'ctx>,
        c0: IntValue<'ctx>,
        w: usize,
        elem: Elem<'ctx>,
    ) -> Result<()> {
        let vt = elem.t.vec_type_of(w);
        let mut v: Vec<VectorValue<'ctx>> = Vec::with_capacity(w);
        for i in 0..w {
            let c = self.b.build_int_nsw_add(c0, self.i64(i as i64), "c")?;
            let at = self.mat_offset(src, c, r0)?;
            let q = unsafe { self.b.build_in_bounds_gep(elem.t, src.ptr, &[at], "tq")? };
            let x = self.b.build_load(vt, q, "row")?;
            if let Some(i) = x.as_instruction_value() {
                i.set_alignment(elem.align).map_err(|er| er.to_string())?;
            }
            v.push(x.into_vector_value());
        }
        let mut d = 1;
        while d < w {
            // Lanes of the first input are 0..w, of the second w..2w.
            let keep: Vec<u32> = (0..w)
                .map(|l| if l & d == 0 { l } else { w + l - d })
                .map(|x| x as u32)
                .collect();
            let swap: Vec<u32> = (0..w)
                .map(|l| if l & d == 0 { l + d } else { w + l })
                .map(|x| x as u32)
                .collect();
            let i32t = self.ctx.i32_type();
            let mask = |m: &[u32]| {
                let c: Vec<_> = m.iter().map(|&x| i32t.const_int(x as u64, false)).collect();
                inkwell::types::VectorType::const_vector(&c)
            };
            let (keep, swap) = (mask(&keep), mask(&swap));
            let mut next = v.clone();
            for i in (0..w).filter(|i| i & d == 0) {
                next[i] = self.b.build_shuffle_vector(v[i], v[i + d], keep, "lo")?;
                next[i + d] = self.b.build_shuffle_vector(v[i], v[i + d], swap, "hi")?;
            }
            v = next;
            d *= 2;
        }
        for (l, x) in v.into_iter().enumerate() {
            let r = self.b.build_int_nsw_add(r0, self.i64(l as i64), "r")?;
            let at = self.mat_offset(dst, r, c0)?;
            let q = unsafe { self.b.build_in_bounds_gep(elem.t, dst.ptr, &[at], "tq")? };
            let st = self.b.build_store(q, x)?;
            st.set_alignment(elem.align).map_err(|er| er.to_string())?;
        }
        Ok(())
    }

    /// `dst[r][c] = src[c][r]` element by element over `r0..r1 × c0..c1`.
    fn copy_transposed(
        &mut self,
        src: Mat<'ctx>,
        dst: Mat<'ctx>,
        (r0, r1): (usize, usize),
        (c0, c1): (usize, usize),
        elem: Elem<'ctx>,
    ) -> Result<()> {
        if r0 >= r1 || c0 >= c1 {
            return Ok(());
        }
        let (lo, hi) = (self.i64(r0 as i64), self.i64(r1 as i64));
        self.counted(lo, hi, &mut |e, r| {
            let (lo, hi) = (e.i64(c0 as i64), e.i64(c1 as i64));
            e.counted(lo, hi, &mut |e, c| {
                let x = e.load_at(elem.t, src.ptr, e.mat_offset(src, c, r)?)?;
                e.store_at(elem.t, dst.ptr, e.mat_offset(dst, r, c)?, x)
            })
        })
    }
}

/// A matrix element as it lies in memory: its type, and the alignment vector loads and
/// stores of it may assume (its own size: rows start anywhere).
#[derive(Copy, Clone)]
struct Elem<'ctx> {
    t: BasicTypeEnum<'ctx>,
    align: u32,
}
