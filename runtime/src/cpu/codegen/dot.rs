//! `dot`: operands packed into row-major f32 panels, then a register-tiled micro-kernel.
//!
//! The packed `A` (m×k) and `B` (k×n) make every operand layout (contracting dim first or
//! last, bf16 or f32, lazy or materialised) one case. The micro-kernel keeps an `MR × NR`
//! tile of `C` in vector registers for the whole `k` loop: per step it loads `NR/W` vectors
//! of `B`, broadcasts `MR` scalars of `A` and issues `MR·NR/W` FMAs. Tiles are chosen so the
//! accumulators, the `B` vectors and one broadcast fit the register file (16 registers with
//! AVX2: 6×16; 32 with AVX-512: 12×32). Edge tiles are the same code with smaller static
//! sizes; columns left over after whole vectors use a scalar loop.

use super::value::{Env, Val};
use super::{Emitter, Result};
use inkwell::types::VectorType;
use inkwell::values::{BasicValue, BasicValueEnum, IntValue, PointerValue, VectorValue};
use tpukit_dsl::{DType, Func, Op, OpKind};

/// One product's static geometry.
#[derive(Copy, Clone)]
struct Gemm {
    m: usize,
    n: usize,
    k: usize,
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
        let a = self.alloc_buffer(acc_dtype, batch * g.m * g.k)?;
        let b = self.alloc_buffer(acc_dtype, batch * g.k * g.n)?;
        let c = self.alloc_buffer(acc_dtype, batch * g.m * g.n)?;
        let lhs_k_last = dims.lhs_contract == rank - 1;
        let rhs_k_first = dims.rhs_contract == rank - 2;
        let in_dtype = f.ty(lhs).dtype;
        // Pack A as [batch, m, k] and B as [batch, k, n], converted to the accumulator type.
        let pack = |e: &mut Self, v, dst, rows: usize, cols: usize, swap: bool| {
            e.nest(&[batch, rows, cols], &mut |e, idx| {
                let (r, c2) = if swap {
                    (idx[2], idx[1])
                } else {
                    (idx[1], idx[2])
                };
                let at: Vec<IntValue> = if rank == 3 {
                    vec![idx[0], r, c2]
                } else {
                    vec![r, c2]
                };
                let x = e.elem(f, env, v, &at)?;
                let x = e.cast(in_dtype, acc_dtype, x)?;
                let to = e.linear(&[batch, rows, cols], idx)?;
                e.buffer_store(acc_dtype, dst, to, x)
            })
        };
        pack(self, lhs, a, g.m, g.k, !lhs_k_last)?;
        pack(self, rhs, b, g.k, g.n, !rhs_k_first)?;
        let (lo, hi) = (self.i64(0), self.i64(batch as i64));
        self.counted(lo, hi, &mut |e, bi| {
            let at =
                |e: &Self, p: PointerValue<'ctx>, stride: usize| -> Result<PointerValue<'ctx>> {
                    let t = e.reg_type(acc_dtype);
                    let off = e.b.build_int_nsw_mul(bi, e.i64(stride as i64), "boff")?;
                    Ok(unsafe { e.b.build_in_bounds_gep(t, p, &[off], "bp")? })
                };
            let (pa, pb, pc) = (
                at(e, a, g.m * g.k)?,
                at(e, b, g.k * g.n)?,
                at(e, c, g.m * g.n)?,
            );
            if acc_dtype == DType::F32 {
                e.gemm_f32(g, pa, pb, pc)
            } else {
                e.gemm_scalar(g, acc_dtype, pa, pb, pc, 0, g.n)
            }
        })?;
        if dtype != acc_dtype {
            let total = batch * g.m * g.n;
            self.nest(&[total], &mut |e, idx| {
                let v = e.buffer_load(acc_dtype, c, idx[0])?;
                let v = e.cast(acc_dtype, dtype, v)?;
                e.buffer_store(dtype, c, idx[0], v)
            })?;
        }
        Ok(Val::Buffer(c))
    }

    /// `C = A·B` for one f32 matrix triple.
    fn gemm_f32(
        &mut self,
        g: Gemm,
        a: PointerValue<'ctx>,
        b: PointerValue<'ctx>,
        c: PointerValue<'ctx>,
    ) -> Result<()> {
        let w = self.options.vector_lanes.max(4) as usize;
        let (mr, nr) = if w >= 16 { (12, 2 * w) } else { (6, 2 * w) };
        let vec_cols = g.n / w * w;
        // Column panels of NR, then one of the remaining whole vectors.
        let mut panels = vec![];
        if g.n / nr > 0 {
            panels.push((0, g.n / nr, nr));
        }
        if !vec_cols.is_multiple_of(nr) {
            panels.push((g.n / nr * nr, 1, vec_cols % nr));
        }
        for (j0, count, width) in panels {
            let (lo, hi) = (self.i64(0), self.i64(count as i64));
            self.counted(lo, hi, &mut |e, jt| {
                let j = e.b.build_int_nsw_mul(jt, e.i64(width as i64), "j")?;
                let j = e.b.build_int_nsw_add(j, e.i64(j0 as i64), "j0")?;
                let full = g.m / mr;
                let (lo, hi) = (e.i64(0), e.i64(full as i64));
                e.counted(lo, hi, &mut |e, it| {
                    let i = e.b.build_int_nsw_mul(it, e.i64(mr as i64), "i")?;
                    e.tile(g, a, b, c, i, j, mr, width / w, w)
                })?;
                if !g.m.is_multiple_of(mr) {
                    let i = e.i64((full * mr) as i64);
                    e.tile(g, a, b, c, i, j, g.m % mr, width / w, w)?;
                }
                Ok(())
            })?;
        }
        if vec_cols < g.n {
            self.gemm_scalar(g, DType::F32, a, b, c, vec_cols, g.n)?;
        }
        Ok(())
    }

    /// One `rows × (nv·w)` tile of C at (`i`, `j`), accumulated in registers over all of k.
    #[allow(clippy::too_many_arguments)]
    fn tile(
        &mut self,
        g: Gemm,
        a: PointerValue<'ctx>,
        b: PointerValue<'ctx>,
        c: PointerValue<'ctx>,
        i: IntValue<'ctx>,
        j: IntValue<'ctx>,
        rows: usize,
        nv: usize,
        w: usize,
    ) -> Result<()> {
        let f32t = self.ctx.f32_type();
        let vt: VectorType<'ctx> = f32t.vec_type(w as u32);
        let accs: Vec<PointerValue<'ctx>> = (0..rows * nv)
            .map(|_| self.slot(vt.into()))
            .collect::<Result<_>>()?;
        for p in &accs {
            self.b.build_store(*p, vt.const_zero())?;
        }
        let (lo, hi) = (self.i64(0), self.i64(g.k as i64));
        self.counted(lo, hi, &mut |e, p| {
            // B[p, j + v·w ..]
            let brow = e.b.build_int_nsw_mul(p, e.i64(g.n as i64), "brow")?;
            let brow = e.b.build_int_nsw_add(brow, j, "bj")?;
            let mut bv: Vec<VectorValue<'ctx>> = Vec::with_capacity(nv);
            for v in 0..nv {
                let off = e.b.build_int_nsw_add(brow, e.i64((v * w) as i64), "bo")?;
                let q = unsafe { e.b.build_in_bounds_gep(f32t, b, &[off], "bq")? };
                let x = e.b.build_load(vt, q, "bv")?;
                if let Some(ins) = x.as_instruction_value() {
                    ins.set_alignment(4).map_err(|er| er.to_string())?;
                }
                bv.push(x.into_vector_value());
            }
            for r in 0..rows {
                let row = e.b.build_int_nsw_add(i, e.i64(r as i64), "r")?;
                let aoff = e.b.build_int_nsw_mul(row, e.i64(g.k as i64), "ar")?;
                let aoff = e.b.build_int_nsw_add(aoff, p, "ap")?;
                let q = unsafe { e.b.build_in_bounds_gep(f32t, a, &[aoff], "aq")? };
                let s = e.b.build_load(f32t, q, "a")?;
                let splat = e.splat(vt, s)?;
                for (v, bvec) in bv.iter().enumerate() {
                    let slot = accs[r * nv + v];
                    let acc = e.b.build_load(vt, slot, "acc")?;
                    let fma =
                        e.intrinsic("llvm.fma", vt.into(), &[splat.into(), (*bvec).into(), acc])?;
                    e.b.build_store(slot, fma)?;
                }
            }
            Ok(())
        })?;
        for r in 0..rows {
            let row = self.b.build_int_nsw_add(i, self.i64(r as i64), "r")?;
            let coff = self.b.build_int_nsw_mul(row, self.i64(g.n as i64), "cr")?;
            let coff = self.b.build_int_nsw_add(coff, j, "cj")?;
            for v in 0..nv {
                let off = self
                    .b
                    .build_int_nsw_add(coff, self.i64((v * w) as i64), "co")?;
                let q = unsafe { self.b.build_in_bounds_gep(f32t, c, &[off], "cq")? };
                let acc = self.b.build_load(vt, accs[r * nv + v], "acc")?;
                let st = self.b.build_store(q, acc)?;
                st.set_alignment(4).map_err(|er| er.to_string())?;
            }
        }
        Ok(())
    }

    fn splat(&self, vt: VectorType<'ctx>, s: BasicValueEnum<'ctx>) -> Result<VectorValue<'ctx>> {
        let undef = vt.get_poison();
        let v = self.b.build_insert_element(undef, s, self.i64(0), "ins")?;
        let zeros = self.ctx.i32_type().vec_type(vt.get_size()).const_zero();
        Ok(self.b.build_shuffle_vector(v, undef, zeros, "splat")?)
    }

    /// `C[:, j0..j1] = A·B[:, j0..j1]` with plain loops (integer dots, leftover columns).
    #[allow(clippy::too_many_arguments)]
    fn gemm_scalar(
        &mut self,
        g: Gemm,
        acc_dtype: DType,
        a: PointerValue<'ctx>,
        b: PointerValue<'ctx>,
        c: PointerValue<'ctx>,
        j0: usize,
        j1: usize,
    ) -> Result<()> {
        let float = acc_dtype == DType::F32;
        let rt = self.reg_type(acc_dtype);
        let acc = self.slot(rt)?;
        self.nest(&[g.m, j1 - j0], &mut |e, idx| {
            let j = e.b.build_int_nsw_add(idx[1], e.i64(j0 as i64), "j")?;
            e.b.build_store(acc, e.constant(acc_dtype, 0.0))?;
            let (lo, hi) = (e.i64(0), e.i64(g.k as i64));
            e.counted(lo, hi, &mut |e, p| {
                let x = e.buffer_load(acc_dtype, a, e.linear(&[g.m, g.k], &[idx[0], p])?)?;
                let y = e.buffer_load(acc_dtype, b, e.linear(&[g.k, g.n], &[p, j])?)?;
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
            let at = e.linear(&[g.m, g.n], &[idx[0], j])?;
            e.buffer_store(acc_dtype, c, at, s)
        })
    }
}
