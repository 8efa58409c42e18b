//! bf16 × bf16 `dot` with AVX-512 BF16: `vdpbf16ps` multiplies 16 pairs of bf16 by 16 pairs
//! and adds both products of each pair to one f32 lane.
//!
//! The operands are packed so that a pair is two bf16 adjacent along k: `A` as row-major
//! `[m, 2·kh]` (kh = ⌈k/2⌉, a zero appended to each row when k is odd) and `B` as
//! `[kh, n, 2]` (row pairs interleaved, a zero row appended when k is odd). A pair is then
//! one 4-byte element, and the micro-kernel is [`Emitter::gemm`]'s with kh steps: it
//! broadcasts one pair of `A` and multiplies it by `W` pairs of `B` per instruction, twice
//! the f32 path's multiplies per instruction, from half the bytes. A bf16 ref with k last
//! and even already holds `A`'s pairs in its rows and is read where it lies; a bf16 ref
//! with k first is interleaved 16 columns at a time in registers (see
//! [`Emitter::interleave_rows`]); anything else is packed an element at a time.
//!
//! **Rounding.** Each product of two bf16 is exact in f32 (8-bit significands); the
//! instruction adds the two products of a pair to the accumulator in f32 with round-to-
//! nearest-even, as the f32 path's FMAs do, but (Intel SDM, `VDPBF16PS`) with denormal
//! inputs read as zero and denormal results flushed to zero (DAZ/FTZ), and in its own order
//! within a pair. So results agree with the widened f32 path to f32 rounding, except where
//! values are below f32's normal range (|x| < 2⁻¹²⁶ ≈ 1.2e-38), which read and sum as 0.
//! Columns left over after whole vectors use a scalar loop of f32 FMAs on the same packed
//! pairs (no flushing there).

use super::access::TRANSPOSE_TILE;
use super::dot::{Gemm, Mat, Step};
use super::value::Env;
use super::{Emitter, Result};
use inkwell::types::VectorType;
use inkwell::values::{BasicValue, BasicValueEnum, IntValue, PointerValue};
use tpukit_dsl::{DType, DotDims, Func, ValueId};

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// `C = lhs·rhs` (or from C's values, see `dest.init`; C copied to `dest.copy`) for bf16
    /// operands, `batch` products of geometry `g`; `c` is the first product's result (the others
    /// follow at `m·n`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dot_bf16(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        (lhs, rhs, dims): (ValueId, ValueId, DotDims),
        g: Gemm,
        batch: usize,
        c: Mat<'ctx>,
        dest: super::dot::Dest<'ctx>,
    ) -> Result<()> {
        let rank = f.ty(lhs).rank();
        let kh = g.k.div_ceil(2);
        let i16t = self.ctx.i16_type();
        let zero: BasicValueEnum = i16t.const_zero().into();
        let a_in_place = match (batch, lhs_k_last_even(dims, rank, g.k)) {
            (1, true) => self.bf16_in_place(f, env, lhs)?,
            _ => None,
        };
        let a = self.alloc(Some(batch * g.m * kh * 4))?;
        let b = self.alloc(Some(batch * kh * g.n * 4))?;
        let lhs_k_last = dims.lhs_contract == rank - 1;
        let rhs_k_first = dims.rhs_contract == rank - 2;
        // The operand's element (bi, r, c) of its [batch,] rows × cols view.
        let at = |bi: IntValue<'ctx>, r, c, swap: bool| -> Vec<IntValue<'ctx>> {
            let (r, c) = if swap { (c, r) } else { (r, c) };
            if rank == 3 {
                vec![bi, r, c]
            } else {
                vec![r, c]
            }
        };
        // A[bi, r, q] → a[(bi·m + r)·2kh + q], unless it lies in memory with whole pairs.
        if a_in_place.is_none() {
            let mut each = |e: &mut Self, idx: &[IntValue<'ctx>]| {
                let x = e.elem(f, env, lhs, &at(idx[0], idx[1], idx[2], !lhs_k_last))?;
                let bits = e.memory_form(DType::BF16, x)?;
                let to = e.linear(&[batch, g.m, 2 * kh], idx)?;
                e.store_at(i16t.into(), a, to, bits)
            };
            match lhs_k_last {
                true => self.nest(&[batch, g.m, g.k], &mut each)?,
                false => self.tiled_nest(&[batch, g.m, g.k], TRANSPOSE_TILE, &mut each)?,
            }
        }
        // B[bi, q, j] → b[((bi·kh + q/2)·n + j)·2 + q%2].
        let pair_of = |e: &Self, bi, q: IntValue<'ctx>, j| -> Result<IntValue<'ctx>> {
            let half = e.b.build_right_shift(q, e.i64(1), false, "half")?;
            let odd = e.b.build_and(q, e.i64(1), "odd")?;
            let p = e.linear(&[batch, kh, g.n], &[bi, half, j])?;
            let p = e.b.build_int_nsw_mul(p, e.i64(2), "pair")?;
            Ok(e.b.build_int_nsw_add(p, odd, "el")?)
        };
        let in_place = match (batch, rhs_k_first) {
            (1, true) => self.bf16_in_place(f, env, rhs)?,
            _ => None,
        };
        // Rows `rows` × columns `cols.0..cols.1` of B, one element at a time.
        let scalar = |e: &mut Self, rows: (usize, usize), cols: (usize, usize)| {
            let (r0, c0) = (e.i64(rows.0 as i64), e.i64(cols.0 as i64));
            let shape = [batch, rows.1 - rows.0, cols.1 - cols.0];
            let mut each = |e: &mut Self, idx: &[IntValue<'ctx>]| {
                let q = e.b.build_int_nsw_add(idx[1], r0, "q")?;
                let j = e.b.build_int_nsw_add(idx[2], c0, "j")?;
                let bits = match in_place {
                    Some(src) => e.load_at(i16t.into(), src.ptr, e.mat_offset(src, q, j)?)?,
                    None => {
                        let x = e.elem(f, env, rhs, &at(idx[0], q, j, !rhs_k_first))?;
                        e.memory_form(DType::BF16, x)?
                    }
                };
                let to = pair_of(e, idx[0], q, j)?;
                e.store_at(i16t.into(), b, to, bits)
            };
            // B with k last is read down its columns: in tiles, which stay in L1.
            match rhs_k_first {
                true => e.nest(&shape, &mut each),
                false => e.tiled_nest(&shape, TRANSPOSE_TILE, &mut each),
            }
        };
        match in_place {
            Some(src) => {
                // Whole pairs of rows × whole vectors of columns in registers, the rest
                // (columns after the last whole vector; the last row if k is odd) by element.
                let n16 = g.n / 16 * 16;
                self.interleave_rows(src, b, g, n16)?;
                scalar(self, (0, g.k), (n16, g.n))?;
                if g.k % 2 == 1 {
                    scalar(self, (g.k - 1, g.k), (0, n16))?;
                }
            }
            None => scalar(self, (0, g.k), (0, g.n))?,
        }
        if g.k % 2 == 1 {
            // The second half of the last pair: zeros, which add nothing.
            let last = self.i64(g.k as i64);
            // (k odd: A is packed.)
            self.nest(&[batch, g.m], &mut |e, idx| {
                let to = e.linear(&[batch, g.m, 2 * kh], &[idx[0], idx[1], last])?;
                e.store_at(i16t.into(), a, to, zero)
            })?;
            self.nest(&[batch, g.n], &mut |e, idx| {
                let to = pair_of(e, idx[0], last, idx[1])?;
                e.store_at(i16t.into(), b, to, zero)
            })?;
        }
        let (lo, hi) = (self.i64(0), self.i64(batch as i64));
        let a = a_in_place.unwrap_or(self.buffer_mat(a, 2 * kh));
        let b = self.buffer_mat(b, g.n);
        self.counted(lo, hi, &mut |e, bi| {
            let at = |m: Mat<'ctx>, stride: usize| -> Result<Mat<'ctx>> {
                let off = e.b.build_int_nsw_mul(bi, e.i64(stride as i64), "boff")?;
                let t = e.ctx.i32_type();
                let ptr = unsafe { e.b.build_in_bounds_gep(t, m.ptr, &[off], "bp")? };
                Ok(Mat { ptr, ld: m.ld })
            };
            let (a, b, c) = (at(a, g.m * kh)?, at(b, kh * g.n)?, at(c, g.m * g.n)?);
            e.gemm(g, kh, a, b, c, dest, Step::Bf16Pairs)
        })
    }

    /// `v`, a rank-2 bf16 value, where it lies in memory with contiguous columns: an
    /// unmasked load of a bf16 operand's ref (see [`Emitter::window_mat`]). `None` otherwise
    /// and in debug mode.
    fn bf16_in_place(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        v: ValueId,
    ) -> Result<Option<Mat<'ctx>>> {
        if self.options.debug || f.ty(v).rank() != 2 {
            return Ok(None);
        }
        self.loaded_window(f, env, v, DType::BF16)
    }

    /// Packs rows `0..2·⌊k/2⌋` × columns `0..n16` of `src` (bf16 in memory) as `dot_bf16`'s
    /// B pairs into `dst`: per pair of rows, 16 columns of each loaded and interleaved.
    fn interleave_rows(
        &mut self,
        src: Mat<'ctx>,
        dst: PointerValue<'ctx>,
        g: Gemm,
        n16: usize,
    ) -> Result<()> {
        let i16t = self.ctx.i16_type();
        let v16 = i16t.vec_type(16);
        let mask: Vec<IntValue<'ctx>> = (0..32)
            .map(|t| {
                self.ctx
                    .i32_type()
                    .const_int((t / 2 + 16 * (t % 2)) as u64, false)
            })
            .collect();
        let mask = VectorType::const_vector(&mask);
        let (lo, pairs, vecs) = (
            self.i64(0),
            self.i64(g.k as i64 / 2),
            self.i64(n16 as i64 / 16),
        );
        self.counted(lo, pairs, &mut |e, p| {
            let q0 = e.b.build_int_nsw_mul(p, e.i64(2), "q0")?;
            let q1 = e.b.build_int_nsw_add(q0, e.i64(1), "q1")?;
            e.counted(lo, vecs, &mut |e, jv| {
                let j = e.b.build_int_nsw_mul(jv, e.i64(16), "j")?;
                let mut rows = [v16.get_poison(); 2];
                for (row, q) in rows.iter_mut().zip([q0, q1]) {
                    let at = e.mat_offset(src, q, j)?;
                    let ptr = unsafe { e.b.build_in_bounds_gep(i16t, src.ptr, &[at], "row")? };
                    let x = e.b.build_load(v16, ptr, "half")?;
                    x.as_instruction_value()
                        .map(|i| i.set_alignment(2))
                        .transpose()
                        .map_err(|er| er.to_string())?;
                    *row = x.into_vector_value();
                }
                let pairs = e.b.build_shuffle_vector(rows[0], rows[1], mask, "pairs")?;
                let at = e.b.build_int_nsw_mul(p, e.i64(g.n as i64), "prow")?;
                let at = e.b.build_int_nsw_add(at, j, "pj")?;
                let at = e.b.build_int_nsw_mul(at, e.i64(2), "el")?;
                let ptr = unsafe { e.b.build_in_bounds_gep(i16t, dst, &[at], "to")? };
                let st = e.b.build_store(ptr, pairs)?;
                st.set_alignment(2).map_err(|er| er.to_string())?;
                Ok(())
            })
        })?;
        Ok(())
    }

    /// `acc + a₀·b₀ + a₁·b₁` per f32 lane: `vdpbf16ps` on 16 lanes, `a` and `b` 32 bf16.
    pub(super) fn dpbf16ps(
        &self,
        acc: BasicValueEnum<'ctx>,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        const NAME: &str = "llvm.x86.avx512bf16.dpbf16ps.512";
        let decl = self.module.get_function(NAME).unwrap_or_else(|| {
            let f32v = self.ctx.f32_type().vec_type(16);
            let bf16v = self.ctx.bf16_type().vec_type(32);
            let t = f32v.fn_type(&[f32v.into(), bf16v.into(), bf16v.into()], false);
            self.module.add_function(NAME, t, None)
        });
        self.call_value(decl, &[acc.into(), a.into(), b.into()])
    }

    /// The columns `j0..j1` of [`Emitter::gemm`] on packed bf16 pairs, with scalar f32 FMAs
    /// (`a`, `b`, `c` as `dot_bf16` packs them: `steps` pairs along k).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gemm_pairs_scalar(
        &mut self,
        g: Gemm,
        steps: usize,
        a: Mat<'ctx>,
        b: Mat<'ctx>,
        c: Mat<'ctx>,
        (j0, j1): (usize, usize),
        init: super::dot::Init<'ctx>,
    ) -> Result<()> {
        let f32t = self.ctx.f32_type();
        let i16t = self.ctx.i16_type();
        let acc = self.slot(f32t.into())?;
        self.nest(&[g.m, j1 - j0], &mut |e, idx| {
            let j = e.b.build_int_nsw_add(idx[1], e.i64(j0 as i64), "j")?;
            let at = e.mat_offset(c, idx[0], j)?;
            e.b.build_store(acc, f32t.const_zero())?;
            let (lo, hi) = (e.i64(0), e.i64(steps as i64));
            e.counted(lo, hi, &mut |e, p| {
                // Pair offsets, then their two halves (bf16 offsets 2·pair, 2·pair + 1).
                // bf16 offsets of the pairs: A's row stride is in bf16s, B's in pairs.
                let p2 = e.b.build_int_nsw_mul(p, e.i64(2), "p2")?;
                let pa = e.mat_offset(a, idx[0], p2)?;
                let pb = e.mat_offset(b, p, j)?;
                let pb = e.b.build_int_nsw_mul(pb, e.i64(2), "pb")?;
                for half in 0..2 {
                    let h = |e: &Self, at: IntValue<'ctx>| -> Result<IntValue<'ctx>> {
                        Ok(e.b.build_int_nsw_add(at, e.i64(half), "h")?)
                    };
                    let x = e.load_at(i16t.into(), a.ptr, h(e, pa)?)?;
                    let y = e.load_at(i16t.into(), b.ptr, h(e, pb)?)?;
                    let x = e.register_form(DType::BF16, x)?;
                    let y = e.register_form(DType::BF16, y)?;
                    let s = e.b.build_load(f32t, acc, "acc")?;
                    let r = e.intrinsic("llvm.fma", f32t.into(), &[x, y, s])?;
                    e.b.build_store(acc, r)?;
                }
                Ok(())
            })?;
            let s = e.b.build_load(f32t, acc, "acc")?;
            let s = e.add_c(init, s, &|e: &Self| e.load_at(f32t.into(), c.ptr, at))?;
            e.store_at(f32t.into(), c.ptr, at, s)
        })
    }
}

/// Whether A's pairs lie in its rows: k is A's last dimension, and even.
fn lhs_k_last_even(dims: DotDims, rank: usize, k: usize) -> bool {
    dims.lhs_contract == rank - 1 && k.is_multiple_of(2)
}
