//! `dot`: operands as row-major panels, then a register-tiled micro-kernel.
//!
//! `A` (m×k) and `B` (k×n) are read where they lie when they already are row-major f32 (a
//! window of an f32 operand whose columns are contiguous, or an f32 buffer): see
//! [`Emitter::in_place`]. Otherwise they are packed into row-major f32 panels, which makes
//! every other layout (contracting dim first or last, bf16, lazy values) one case. The
//! micro-kernel keeps an `MR × NR` tile of `C` in vector registers for the whole `k` loop:
//! per step it loads `NR/W` vectors of `B`, broadcasts `MR` scalars of `A` and issues
//! `MR·NR/W` FMAs. Tiles are chosen so the accumulators, the `B` vectors and one broadcast
//! fit the register file (16 registers with AVX2: 6×16; 32 with AVX-512: 6×64, see
//! `panels`). Edge tiles are the same code with smaller static sizes; columns left over after
//! whole vectors use a scalar loop. When several row tiles share a panel of `B`, `B`'s
//! panels are first copied one after another (`pack_panels`), so each stays in L1.
//!
//! bf16 × bf16 products on a CPU with AVX-512 BF16 multiply bf16 pairs in hardware instead
//! (see `dot_bf16`). `acc[w] += dot(x, y)` on an f32 ref is one `dot` that starts from and
//! ends in `acc[w]` (see `fuse`).

use super::access::TRANSPOSE_TILE;
use super::value::{Env, Val};
use super::{Emitter, Result};
use inkwell::types::{BasicTypeEnum, VectorType};
use inkwell::values::{BasicValue, BasicValueEnum, IntValue, PointerValue, VectorValue};
use tpukit_dsl::{DType, Func, Op, OpKind, ValueId};

/// The most bytes of B a product copies into panels (see `Emitter::pack_panels`): a 128 × 128
/// block's 64 KiB, up to a 512 × 512 block's 1 MiB (the workspace holds it; a larger B is
/// read where it lies).
const PACKED_B_BYTES: usize = 1 << 20;

/// One product's static geometry.
#[derive(Copy, Clone)]
pub(super) struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// A row-major matrix in memory: its first element and its row stride (in elements);
/// columns are contiguous.
#[derive(Copy, Clone)]
pub(super) struct Mat<'ctx> {
    pub ptr: PointerValue<'ctx>,
    pub ld: IntValue<'ctx>,
}

/// What a micro-kernel step multiplies: one f32 of `A` by a vector of f32 `B` columns
/// (`F32`), or one pair of bf16 of `A` (along k, read as an i32) by a vector of pairs of
/// `B` (`Bf16Pairs`, see `dot_bf16`). B and C are addressed in elements of 4 bytes (f32 or
/// pairs) for both; A in f32s, or in bf16s for pairs (row stride and offsets in bf16s).
#[derive(Copy, Clone, PartialEq, Eq)]
pub(super) enum Step {
    F32,
    Bf16Pairs,
}

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    pub(super) fn dot(
        &mut self,
        f: &'k Func,
        op: &'k Op,
        env: &Env<'ctx, 'k>,
    ) -> Result<Val<'ctx, 'k>> {
        let OpKind::Dot { lhs, rhs, dims } = &op.kind else {
            unreachable!("dot on a dot");
        };
        let (lhs, rhs, dims) = (*lhs, *rhs, *dims);
        let ty = f.ty(op.results[0]);
        let rank = ty.rank();
        let batch = if rank == 3 { ty.shape[0] } else { 1 };
        let g = Gemm {
            m: ty.shape[rank - 2],
            n: ty.shape[rank - 1],
            k: f.ty(lhs).shape[dims.lhs_contract],
        };
        let dtype = ty.dtype;
        let acc_dtype = if dtype.is_float() {
            DType::F32
        } else {
            DType::I32
        };
        let lhs_k_last = dims.lhs_contract == rank - 1;
        let rhs_k_first = dims.rhs_contract == rank - 2;
        // The destination: the fused accumulator (see `fuse`), or a new buffer.
        let fused = self.accumulations.get(&(op as *const Op)).copied();
        let (c, accumulate) = match fused {
            Some(acc) => {
                let target = super::fuse::Target {
                    operand: acc.operand,
                    index: acc.index,
                };
                (self.accumulator(env, target, [g.m, g.n])?, true)
            }
            None => {
                let c = self.alloc_buffer(acc_dtype, batch * g.m * g.n)?;
                (self.buffer_mat(c, g.n), false)
            }
        };
        let (copy, copy_if) = match fused.and_then(|acc| acc.copy) {
            Some(to) => (
                Some(self.accumulator(env, to, [g.m, g.n])?),
                self.store_runs(to.operand)?,
            ),
            None => (None, None),
        };
        let init = match fused {
            None => Init::Zeros,
            Some(acc) => match acc.zero_if {
                None => Init::C,
                Some(cond) => match super::value::get(env, cond) {
                    Val::Scalar(c) => Init::ZerosIf(c.into_int_value()),
                    _ => return Err(super::CodegenError::internal("condition is not a scalar")),
                },
            },
        };
        let dest = Dest {
            init,
            copy,
            copy_if,
        };
        let bf16 = |v: ValueId| f.ty(v).dtype == DType::BF16;
        if self.options.bf16_dot
            && self.options.vector_lanes == 16
            && dtype.is_float()
            && bf16(lhs)
            && bf16(rhs)
        {
            self.dot_bf16(f, env, (lhs, rhs, dims), g, batch, c, dest)?;
        } else {
            let in_place = |e: &mut Self, v, ok| -> Result<Option<Mat<'ctx>>> {
                if ok && batch == 1 && acc_dtype == DType::F32 {
                    e.in_place(f, env, v)
                } else {
                    Ok(None)
                }
            };
            let a = match in_place(self, lhs, lhs_k_last)? {
                Some(a) => a,
                None => self.pack(f, env, lhs, acc_dtype, batch, [g.m, g.k], !lhs_k_last)?,
            };
            let b = match in_place(self, rhs, rhs_k_first)? {
                Some(b) => b,
                None => self.pack(f, env, rhs, acc_dtype, batch, [g.k, g.n], !rhs_k_first)?,
            };
            let (lo, hi) = (self.i64(0), self.i64(batch as i64));
            self.counted(lo, hi, &mut |e, bi| {
                let (a, b, c) = (
                    e.batch_at(a, bi, g.m * g.k, acc_dtype)?,
                    e.batch_at(b, bi, g.k * g.n, acc_dtype)?,
                    e.batch_at(c, bi, g.m * g.n, acc_dtype)?,
                );
                if acc_dtype == DType::F32 {
                    e.gemm(g, g.k, a, b, c, dest, Step::F32)
                } else {
                    e.gemm_scalar(g, acc_dtype, a, b, c, (0, g.n), init)
                }
            })?;
        }
        if accumulate {
            // The `dot`'s only use, the fused `+`, is not emitted (see `fuse`).
            return Ok(Val::Buffer(c.ptr));
        }
        if dtype != acc_dtype {
            let total = batch * g.m * g.n;
            self.nest(&[total], &mut |e, idx| {
                let v = e.buffer_load(acc_dtype, c.ptr, idx[0])?;
                let v = e.cast(acc_dtype, dtype, v)?;
                e.buffer_store(dtype, c.ptr, idx[0], v)
            })?;
        }
        Ok(Val::Buffer(c.ptr))
    }

    /// Copies `v` (`[batch,] rows × cols` once `swap`ped from its own `cols × rows`) into a
    /// new row-major buffer of `dtype` (the accumulator type).
    #[allow(clippy::too_many_arguments)]
    fn pack(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        v: ValueId,
        dtype: DType,
        batch: usize,
        [rows, cols]: [usize; 2],
        swap: bool,
    ) -> Result<Mat<'ctx>> {
        let in_dtype = f.ty(v).dtype;
        let rank = f.ty(v).rank();
        let dst = self.alloc_buffer(dtype, batch * rows * cols)?;
        if batch == 1 && rank == 2 && dtype == DType::F32 && in_dtype == DType::F32 {
            // A packing that would walk down its source's columns (a swapped operand, or a
            // transposed value read as it is) reads the source row-major instead, where it
            // lies or else computed into a buffer, and transposes whole tiles in registers.
            let (src, down_columns) = match transposed_source(f, env, v) {
                Some(x) => (x, !swap),
                None => (v, swap),
            };
            if down_columns && !self.options.debug {
                let src = match self.in_place(f, env, src)? {
                    Some(src) => src,
                    None => self.materialise_f32(f, env, src)?,
                };
                let dst = self.buffer_mat(dst, cols);
                self.transpose_f32(src, dst, rows, cols)?;
                return Ok(dst);
            }
        }
        let shape = [batch, rows, cols];
        let mut each = |e: &mut Self, idx: &[IntValue<'ctx>]| {
            let (r, c) = if swap {
                (idx[2], idx[1])
            } else {
                (idx[1], idx[2])
            };
            let at: Vec<IntValue> = if rank == 3 {
                vec![idx[0], r, c]
            } else {
                vec![r, c]
            };
            let x = e.elem(f, env, v, &at)?;
            let x = e.cast(in_dtype, dtype, x)?;
            let to = e.linear(&shape, idx)?;
            e.buffer_store(dtype, dst, to, x)
        };
        // A swapped operand is read down its columns: in tiles, which stay in L1.
        if swap {
            self.tiled_nest(&shape, TRANSPOSE_TILE, &mut each)?;
        } else {
            self.nest(&shape, &mut each)?;
        }
        Ok(self.buffer_mat(dst, cols))
    }

    /// `v`, a rank-2 f32 value, computed into a new row-major buffer (in row order, which
    /// LLVM vectorises along the rows).
    fn materialise_f32(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        v: ValueId,
    ) -> Result<Mat<'ctx>> {
        let shape = f.ty(v).shape.clone();
        let buf = self.alloc_buffer(DType::F32, shape.iter().product())?;
        self.nest(&shape, &mut |e, idx| {
            let x = e.elem(f, env, v, idx)?;
            let at = e.linear(&shape, idx)?;
            e.buffer_store(DType::F32, buf, at, x)
        })?;
        Ok(self.buffer_mat(buf, shape[1]))
    }

    /// A row-major buffer with `cols` columns as a [`Mat`].
    pub(super) fn buffer_mat(&self, ptr: PointerValue<'ctx>, cols: usize) -> Mat<'ctx> {
        Mat {
            ptr,
            ld: self.i64(cols as i64),
        }
    }

    /// Matrix `bi` of a batch of matrices `stride` elements of `dtype` apart (batches are
    /// only ever packed buffers, whose row stride is static).
    fn batch_at(
        &self,
        m: Mat<'ctx>,
        bi: IntValue<'ctx>,
        stride: usize,
        dtype: DType,
    ) -> Result<Mat<'ctx>> {
        let t = self.reg_type(dtype);
        let off = self
            .b
            .build_int_nsw_mul(bi, self.i64(stride as i64), "boff")?;
        let ptr = unsafe { self.b.build_in_bounds_gep(t, m.ptr, &[off], "bp")? };
        Ok(Mat { ptr, ld: m.ld })
    }

    /// `v`, a rank-2 f32 value, where it already lies row-major with contiguous columns: an
    /// f32 buffer, or an unmasked load of an f32 operand's ref whose last dimension is
    /// contiguous, or either reshaped by adding or dropping unit dimensions. `None` otherwise,
    /// and in debug mode (whose per-element checks only the packing loop makes).
    fn in_place(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        v: ValueId,
    ) -> Result<Option<Mat<'ctx>>> {
        let ty = f.ty(v);
        if self.options.debug || ty.dtype != DType::F32 || ty.rank() != 2 {
            return Ok(None);
        }
        match super::value::get(env, unit_reshapes(f, env, v)) {
            Val::Buffer(p) => Ok(Some(self.buffer_mat(p, ty.shape[1]))),
            _ => self.loaded_window(f, env, v, DType::F32),
        }
    }

    /// The window that `v`, a rank-2 unmasked load of a `dtype` operand's ref (or one
    /// reshaped by adding or dropping unit dimensions), reads, where it lies in memory with
    /// contiguous columns (see [`Emitter::window_mat`]); `None` for any other value, and for
    /// a load that reads zeros past its array's end.
    pub(super) fn loaded_window(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        v: ValueId,
        dtype: DType,
    ) -> Result<Option<Mat<'ctx>>> {
        let shape = match f.ty(v).shape[..] {
            [m, n] => [m, n],
            _ => return Ok(None),
        };
        let Val::Lazy(op) = super::value::get(env, unit_reshapes(f, env, v)) else {
            return Ok(None);
        };
        match &op.kind {
            OpKind::Load {
                operand,
                index,
                mask: None,
                ..
            } if self.kernel.operand(*operand).dtype == dtype
                && !self.reads_zero_past_the_end(*operand, index) =>
            {
                self.window_mat(env, *operand, index, shape)
            }
            _ => Ok(None),
        }
    }

    /// `C = A·B` (or from C's values, see [`Init`]; C copied to `dest.copy`) for one
    /// matrix triple, `steps` micro-kernel steps along k (k itself, or its pairs).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gemm(
        &mut self,
        g: Gemm,
        steps: usize,
        a: Mat<'ctx>,
        b: Mat<'ctx>,
        c: Mat<'ctx>,
        dest: Dest<'ctx>,
        step: Step,
    ) -> Result<()> {
        let w = self.options.vector_lanes.max(4) as usize;
        let vec_cols = g.n / w * w;
        let tile = Tile {
            steps,
            w,
            init: dest.init,
            copy: dest.copy,
            copy_if: dest.copy_if,
            step,
        };
        let layout = panels(g.m, g.n / w, w);
        // B's whole vectors, when several row tiles read each of its panels, are first copied
        // panel after panel (see `pack_panels`).
        let packed = match step == Step::F32
            && !self.options.debug
            && layout.first().is_some_and(|p| g.m >= 2 * p.mr)
            && steps * vec_cols * 4 <= PACKED_B_BYTES
        {
            true => Some(self.pack_panels(b, steps, &layout)?),
            false => None,
        };
        for Panels {
            j0,
            count,
            width,
            mr,
        } in layout
        {
            let (lo, hi) = (self.i64(0), self.i64(count as i64));
            self.counted(lo, hi, &mut |e, jt| {
                let j = e.b.build_int_nsw_mul(jt, e.i64(width as i64), "j")?;
                let j = e.b.build_int_nsw_add(j, e.i64(j0 as i64), "j0")?;
                let (b, bj) = match packed {
                    Some(buf) => (e.packed_panel(buf, j, steps, width)?, e.i64(0)),
                    None => (b, j),
                };
                let full = g.m / mr;
                let (lo, hi) = (e.i64(0), e.i64(full as i64));
                e.counted(lo, hi, &mut |e, it| {
                    let i = e.b.build_int_nsw_mul(it, e.i64(mr as i64), "i")?;
                    e.tile(tile, [a, b, c], i, (bj, j), mr, width / w)
                })?;
                if !g.m.is_multiple_of(mr) {
                    let i = e.i64((full * mr) as i64);
                    e.tile(tile, [a, b, c], i, (bj, j), g.m % mr, width / w)?;
                }
                Ok(())
            })?;
        }
        if vec_cols < g.n {
            match step {
                Step::F32 => {
                    self.gemm_scalar(g, DType::F32, a, b, c, (vec_cols, g.n), dest.init)?
                }
                Step::Bf16Pairs => {
                    self.gemm_pairs_scalar(g, steps, a, b, c, (vec_cols, g.n), dest.init)?
                }
            }
            if let Some(d) = dest.copy {
                let f32t = self.ctx.f32_type().into();
                let mut copy = |e: &mut Self| {
                    e.nest(&[g.m, g.n - vec_cols], &mut |e, idx| {
                        let j = e.b.build_int_nsw_add(idx[1], e.i64(vec_cols as i64), "j")?;
                        let x = e.load_at(f32t, c.ptr, e.mat_offset(c, idx[0], j)?)?;
                        e.store_at(f32t, d.ptr, e.mat_offset(d, idx[0], j)?, x)
                    })
                };
                match dest.copy_if {
                    Some(runs) => self.when(runs, &mut copy)?,
                    None => copy(self)?,
                }
            }
        }
        Ok(())
    }

    /// Copies B's columns covered by `layout`'s panels (all its whole vectors) to a buffer,
    /// panel after panel, each panel's `steps` rows one after another: the panel of width
    /// `width` from column `j` at `steps · j`, row `p` of it at `+ p · width`. The
    /// micro-kernel walks a panel down its rows once for every tile of C's rows: where B
    /// lies, rows `ld` elements apart (4 KiB in a 1024-wide matrix), each row of a panel is
    /// on its own page and the rows of all panels share a few L1 sets; packed, a panel (8
    /// KiB for a 128-deep block with AVX2) stays in L1 for all of them. The copy reads B row
    /// after row, as it lies.
    fn pack_panels(
        &mut self,
        b: Mat<'ctx>,
        steps: usize,
        layout: &[Panels],
    ) -> Result<PointerValue<'ctx>> {
        let w = self.options.vector_lanes.max(4) as usize;
        let cols: usize = layout.iter().map(|p| p.count * p.width).sum();
        let buf = self.alloc_buffer(DType::F32, steps * cols)?;
        let f32t = self.ctx.f32_type();
        let vt = f32t.vec_type(w as u32);
        let (lo, hi) = (self.i64(0), self.i64(steps as i64));
        self.counted(lo, hi, &mut |e, p| {
            for &Panels {
                j0, count, width, ..
            } in layout
            {
                let (lo, hi) = (e.i64(0), e.i64(count as i64));
                e.counted(lo, hi, &mut |e, jt| {
                    let j = e.b.build_int_nsw_mul(jt, e.i64(width as i64), "pj")?;
                    let j = e.b.build_int_nsw_add(j, e.i64(j0 as i64), "pj0")?;
                    let panel = e.packed_panel(buf, j, steps, width)?;
                    for v in 0..width / w {
                        let col = e.i64((v * w) as i64);
                        let from = e.b.build_int_nsw_add(j, col, "pc")?;
                        let from = e.mat_offset(b, p, from)?;
                        let q = unsafe { e.b.build_in_bounds_gep(f32t, b.ptr, &[from], "pq")? };
                        let x = e.b.build_load(vt, q, "pv")?;
                        align4(x)?;
                        let to = e.mat_offset(panel, p, col)?;
                        let q = unsafe { e.b.build_in_bounds_gep(f32t, panel.ptr, &[to], "pd")? };
                        e.b.build_store(q, x)?
                            .set_alignment(4)
                            .map_err(|er| er.to_string())?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })?;
        Ok(buf)
    }

    /// The panel of width `width` from B's column `j` in the buffer `pack_panels` filled
    /// (panels lie `steps · width` elements apart: panel `j / width` of a batch).
    fn packed_panel(
        &self,
        buf: PointerValue<'ctx>,
        j: IntValue<'ctx>,
        steps: usize,
        width: usize,
    ) -> Result<Mat<'ctx>> {
        self.batch_at(self.buffer_mat(buf, width), j, steps, DType::F32)
    }

    /// One `rows × (nv·w)` tile of C at (`i`, `jc`), accumulated in registers over all of k,
    /// B's columns from `jb` (its panel's: `jc`, or 0 in a packed panel).
    fn tile(
        &mut self,
        t: Tile<'ctx>,
        [a, b, c]: [Mat<'ctx>; 3],
        i: IntValue<'ctx>,
        (jb, j): (IntValue<'ctx>, IntValue<'ctx>),
        rows: usize,
        nv: usize,
    ) -> Result<()> {
        let w = t.w;
        let f32t = self.ctx.f32_type();
        let vt: VectorType<'ctx> = f32t.vec_type(w as u32);
        // A's and B's elements: f32, or pairs of bf16 (4 bytes too).
        let (elem, bvt): (BasicTypeEnum<'ctx>, VectorType<'ctx>) = match t.step {
            Step::F32 => (f32t.into(), vt),
            Step::Bf16Pairs => (
                self.ctx.i32_type().into(),
                self.ctx.bf16_type().vec_type(2 * w as u32),
            ),
        };
        let accs: Vec<PointerValue<'ctx>> = (0..rows * nv)
            .map(|_| self.slot(vt.into()))
            .collect::<Result<_>>()?;
        let at = |e: &Self, c: Mat<'ctx>, r: usize, v: usize| -> Result<PointerValue<'ctx>> {
            let row = e.b.build_int_nsw_add(i, e.i64(r as i64), "r")?;
            let coff = e.b.build_int_nsw_mul(row, c.ld, "cr")?;
            let coff = e.b.build_int_nsw_add(coff, j, "cj")?;
            let off = e.b.build_int_nsw_add(coff, e.i64((v * w) as i64), "co")?;
            Ok(unsafe { e.b.build_in_bounds_gep(f32t, c.ptr, &[off], "cq")? })
        };
        let c_at = |e: &Self, r: usize, v: usize| at(e, c, r, v);
        for slot in &accs {
            self.b.build_store(*slot, vt.const_zero())?;
        }
        let (lo, hi) = (self.i64(0), self.i64(t.steps as i64));
        self.counted(lo, hi, &mut |e, p| {
            // B[p, jb + v·w ..]
            let brow = e.b.build_int_nsw_mul(p, b.ld, "brow")?;
            let brow = e.b.build_int_nsw_add(brow, jb, "bj")?;
            let mut bv: Vec<VectorValue<'ctx>> = Vec::with_capacity(nv);
            for v in 0..nv {
                let off = e.b.build_int_nsw_add(brow, e.i64((v * w) as i64), "bo")?;
                let q = unsafe { e.b.build_in_bounds_gep(elem, b.ptr, &[off], "bq")? };
                let x = e.b.build_load(bvt, q, "bv")?;
                align4(x)?;
                bv.push(x.into_vector_value());
            }
            for r in 0..rows {
                let row = e.b.build_int_nsw_add(i, e.i64(r as i64), "r")?;
                let aoff = e.b.build_int_nsw_mul(row, a.ld, "ar")?;
                // A's pairs are addressed in bf16s (its row stride may be odd).
                let (k_at, at_t): (_, BasicTypeEnum) = match t.step {
                    Step::F32 => (p, elem),
                    Step::Bf16Pairs => (
                        e.b.build_int_nsw_mul(p, e.i64(2), "p2")?,
                        e.ctx.i16_type().into(),
                    ),
                };
                let aoff = e.b.build_int_nsw_add(aoff, k_at, "ap")?;
                let q = unsafe { e.b.build_in_bounds_gep(at_t, a.ptr, &[aoff], "aq")? };
                let s = e.b.build_load(elem, q, "a")?;
                if t.step == Step::Bf16Pairs {
                    s.as_instruction_value()
                        .map(|i| i.set_alignment(2))
                        .transpose()
                        .map_err(|er| er.to_string())?;
                }
                let splat = e.splat(elem.vec_type_of(w), s)?;
                let splat: BasicValueEnum = match t.step {
                    Step::F32 => splat.into(),
                    Step::Bf16Pairs => e.b.build_bit_cast(splat, bvt, "pairs")?,
                };
                for (v, bvec) in bv.iter().enumerate() {
                    let slot = accs[r * nv + v];
                    let acc = e.b.build_load(vt, slot, "acc")?;
                    let next = match t.step {
                        Step::F32 => {
                            e.intrinsic("llvm.fma", vt.into(), &[splat, (*bvec).into(), acc])?
                        }
                        Step::Bf16Pairs => e.dpbf16ps(acc, splat, (*bvec).into())?,
                    };
                    e.b.build_store(slot, next)?;
                }
            }
            Ok(())
        })?;
        let mut finals = Vec::with_capacity(rows * nv);
        for r in 0..rows {
            for v in 0..nv {
                let sum = self.b.build_load(vt, accs[r * nv + v], "acc")?;
                let acc = self.add_c(t.init, sum, &|e: &Self| {
                    let x = e.b.build_load(vt, c_at(e, r, v)?, "c0")?;
                    align4(x)?;
                    Ok(x)
                })?;
                let st = self.b.build_store(c_at(self, r, v)?, acc)?;
                st.set_alignment(4).map_err(|er| er.to_string())?;
                finals.push(acc);
            }
        }
        if let Some(d) = t.copy {
            let mut copy = |e: &mut Self| {
                for r in 0..rows {
                    for v in 0..nv {
                        let st = e.b.build_store(at(e, d, r, v)?, finals[r * nv + v])?;
                        st.set_alignment(4).map_err(|er| er.to_string())?;
                    }
                }
                Ok(())
            };
            match t.copy_if {
                Some(runs) => self.when(runs, &mut copy)?,
                None => copy(self)?,
            }
        }
        Ok(())
    }

    /// A C element's (or vector's) final value from the product's `sum`, as `init` says (`C +
    /// sum` from C's values); `load` reads C's. C is added once, after the product's own sum
    /// (`acc + dot(…)` in the order written), and read after the loop over k: the loads do
    /// not hold up the first step.
    pub(super) fn add_c(
        &self,
        init: Init<'ctx>,
        sum: BasicValueEnum<'ctx>,
        load: &dyn Fn(&Self) -> Result<BasicValueEnum<'ctx>>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let plus = |e: &Self| -> Result<BasicValueEnum<'ctx>> {
            let c = load(e)?;
            Ok(match sum {
                BasicValueEnum::IntValue(x) => {
                    e.b.build_int_add(c.into_int_value(), x, "c")?.into()
                }
                BasicValueEnum::FloatValue(x) => {
                    e.b.build_float_add(c.into_float_value(), x, "c")?.into()
                }
                BasicValueEnum::VectorValue(x) => {
                    e.b.build_float_add(c.into_vector_value(), x, "c")?.into()
                }
                other => unreachable!("no sums of {other:?} here"),
            })
        };
        Ok(match init {
            Init::Zeros => sum,
            Init::C => plus(self)?,
            // C is read either way (it is the accumulator's memory, always readable): a
            // select, not a branch per element.
            Init::ZerosIf(cond) => {
                let with_c = plus(self)?;
                self.b.build_select(cond, sum, with_c, "c")?
            }
        })
    }

    fn splat(&self, vt: VectorType<'ctx>, s: BasicValueEnum<'ctx>) -> Result<VectorValue<'ctx>> {
        let undef = vt.get_poison();
        let v = self.b.build_insert_element(undef, s, self.i64(0), "ins")?;
        let zeros = self.ctx.i32_type().vec_type(vt.get_size()).const_zero();
        Ok(self.b.build_shuffle_vector(v, undef, zeros, "splat")?)
    }

    /// `C[:, j0..j1] = A·B[:, j0..j1]` (from C's values as `init` says) with plain loops
    /// (integer dots, leftover columns).
    #[allow(clippy::too_many_arguments)]
    fn gemm_scalar(
        &mut self,
        g: Gemm,
        acc_dtype: DType,
        a: Mat<'ctx>,
        b: Mat<'ctx>,
        c: Mat<'ctx>,
        (j0, j1): (usize, usize),
        init: Init<'ctx>,
    ) -> Result<()> {
        let float = acc_dtype == DType::F32;
        let rt = self.reg_type(acc_dtype);
        let acc = self.slot(rt)?;
        self.nest(&[g.m, j1 - j0], &mut |e, idx| {
            let j = e.b.build_int_nsw_add(idx[1], e.i64(j0 as i64), "j")?;
            let at = e.mat_offset(c, idx[0], j)?;
            e.b.build_store(acc, e.constant(acc_dtype, 0.0))?;
            let (lo, hi) = (e.i64(0), e.i64(g.k as i64));
            e.counted(lo, hi, &mut |e, p| {
                let x = e.load_at(rt, a.ptr, e.mat_offset(a, idx[0], p)?)?;
                let y = e.load_at(rt, b.ptr, e.mat_offset(b, p, j)?)?;
                let s = e.b.build_load(rt, acc, "acc")?;
                let r: BasicValueEnum = if float {
                    e.intrinsic("llvm.fma", rt, &[x, y, s])?
                } else {
                    let m =
                        e.b.build_int_mul(x.into_int_value(), y.into_int_value(), "m")?;
                    e.b.build_int_add(s.into_int_value(), m, "s")?.into()
                };
                e.b.build_store(acc, r)?;
                Ok(())
            })?;
            let s = e.b.build_load(rt, acc, "acc")?;
            let s = e.add_c(init, s, &|e: &Self| e.load_at(rt, c.ptr, at))?;
            e.store_at(rt, c.ptr, at, s)
        })
    }

    /// The offset of element (`r`, `c`) of `m`.
    pub(super) fn mat_offset(
        &self,
        m: Mat<'ctx>,
        r: IntValue<'ctx>,
        c: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let row = self.b.build_int_nsw_mul(r, m.ld, "row")?;
        Ok(self.b.build_int_nsw_add(row, c, "el")?)
    }
}

/// `count` column panels of `width` columns from column `j0`, in tiles of `mr` rows.
struct Panels {
    j0: usize,
    count: usize,
    width: usize,
    mr: usize,
}

/// How the micro-kernel covers `vectors` whole vectors of `w` lanes of the columns of C (`m`
/// rows). With 16 registers (AVX2) tiles are 6 rows × 2 vectors. With 32 (AVX-512), 6 rows ×
/// 4 vectors (24 accumulators, 4 loads of B and 6 broadcasts of A per step), with the vectors
/// left over in a panel of 3 (8 rows), 2 (12 rows: 24 accumulators again) or, when there is a
/// single vector, 1 (12 rows); one vector left over after fours is covered by 3 + 2 instead.
/// When 6-row tiles would leave 1–3 rows over (m = 128, 512: flash attention's blocks), the
/// panels are of 3 vectors (8 rows) and 2 instead, as before 6 × 4 tiles: a thin last tile of
/// 4 vectors costs more than 6 × 4 saves (measured on flash attention's 128 × 128 products).
///
/// 6 × 4 measured 2–3% faster than 8 × 3 on JAX's blocked matmul (256 × 256 × 256 products
/// of operands with rows 4 KB apart, Zen 5): fewer rows of A read at once, and each step's
/// `B` is 4 whole cache lines.
fn panels(m: usize, vectors: usize, w: usize) -> Vec<Panels> {
    let mut out = Vec::new();
    let mut push = |j0: usize, count: usize, nv: usize, mr: usize| {
        if count > 0 {
            out.push(Panels {
                j0: j0 * w,
                count,
                width: nv * w,
                mr,
            });
        }
    };
    if w < 16 {
        push(0, vectors / 2, 2, 6);
        push(vectors / 2 * 2, vectors % 2, 1, 6);
        return out;
    }
    // vectors = 4·fours + 3·threes + 2·twos (+ 1 when vectors is 1).
    let (fours, threes, twos) = if matches!(m % 6, 1..=3) {
        match vectors % 3 {
            0 => (0, vectors / 3, 0),
            2 => (0, vectors / 3, 1),
            _ if vectors >= 4 => (0, vectors / 3 - 1, 2),
            _ => (0, 0, 0),
        }
    } else {
        match vectors % 4 {
            0 => (vectors / 4, 0, 0),
            3 => (vectors / 4, 1, 0),
            2 => (vectors / 4, 0, 1),
            _ if vectors >= 5 => (vectors / 4 - 1, 1, 1),
            _ => (0, 0, 0),
        }
    };
    push(0, fours, 4, 6);
    push(4 * fours, threes, 3, 8);
    push(4 * fours + 3 * threes, twos, 2, 12);
    let done = 4 * fours + 3 * threes + 2 * twos;
    push(done, vectors - done, 1, 12);
    out
}

/// What a product's C starts from.
#[derive(Copy, Clone)]
pub(super) enum Init<'ctx> {
    /// Zeros: `C = A·B`.
    Zeros,
    /// C's values: `C += A·B`.
    C,
    /// Zeros where the bool holds, else C's values: an accumulator whose zeroing just before
    /// the product is left to it (see `fuse`).
    ZerosIf(IntValue<'ctx>),
}

/// Where a product goes besides C: what C starts from, and a matrix of C's shape that gets
/// C's final values too (see `fuse`), only where `copy_if` holds if it is given (see
/// `deferred`).
#[derive(Copy, Clone)]
pub(super) struct Dest<'ctx> {
    pub init: Init<'ctx>,
    pub copy: Option<Mat<'ctx>>,
    pub copy_if: Option<IntValue<'ctx>>,
}

/// The static parameters of one micro-kernel tile.
#[derive(Copy, Clone)]
struct Tile<'ctx> {
    /// Steps along k (k, or its pairs).
    steps: usize,
    /// Vector lanes (f32).
    w: usize,
    /// What C starts from.
    init: Init<'ctx>,
    /// Also store the finished tile here (where `copy_if` holds, if given).
    copy: Option<Mat<'ctx>>,
    copy_if: Option<IntValue<'ctx>>,
    step: Step,
}

/// Marks a vector load or store as aligned to its element only.
fn align4<'a>(x: impl BasicValue<'a>) -> Result<()> {
    if let Some(ins) = x.as_instruction_value() {
        ins.set_alignment(4).map_err(|er| er.to_string())?;
    }
    Ok(())
}

/// The vector of `w` elements of a scalar type.
pub(super) trait VecOf<'ctx> {
    fn vec_type_of(self, w: usize) -> VectorType<'ctx>;
}

impl<'ctx> VecOf<'ctx> for BasicTypeEnum<'ctx> {
    fn vec_type_of(self, w: usize) -> VectorType<'ctx> {
        match self {
            BasicTypeEnum::FloatType(t) => t.vec_type(w as u32),
            BasicTypeEnum::IntType(t) => t.vec_type(w as u32),
            other => unreachable!("no vectors of {other:?} here"),
        }
    }
}

/// The value `v` transposes, if `v` is a lazy transpose of a rank-2 value.
pub(super) fn transposed_source(f: &Func, env: &Env<'_, '_>, v: ValueId) -> Option<ValueId> {
    match super::value::get(env, v) {
        Val::Lazy(Op {
            kind: OpKind::Transpose { x, perm },
            ..
        }) if perm[..] == [1, 0] && f.ty(*x).rank() == 2 => Some(*x),
        _ => None,
    }
}

/// `v` with lazy reshapes that only add or drop unit dimensions looked through: the value
/// whose row-major elements, in order, are `v`'s.
fn unit_reshapes<'k>(f: &'k Func, env: &Env<'_, 'k>, mut v: ValueId) -> ValueId {
    let squeezed =
        |x: ValueId| -> Vec<usize> { f.ty(x).shape.iter().copied().filter(|&n| n != 1).collect() };
    while let Val::Lazy(op) = super::value::get(env, v) {
        match &op.kind {
            OpKind::Reshape { x } if squeezed(*x) == squeezed(v) => v = *x,
            _ => break,
        }
    }
    v
}
