//! `sum`/`max`/`min` over axes, accumulating in the compute type (f32 for floats).

use super::value::{Env, Val};
use super::{Emitter, Result};
use inkwell::values::FastMathFlags;
use inkwell::values::{BasicValueEnum, InstructionValue, IntValue};
use tpukit_dsl::{DType, Func, Op, OpKind, ReduceOp};

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    pub(super) fn reduce(
        &mut self,
        f: &'k Func,
        op: &'k Op,
        env: &Env<'ctx, 'k>,
    ) -> Result<Val<'ctx, 'k>> {
        let OpKind::Reduce { op: r, x, axes } = &op.kind else {
            unreachable!("reduce on a reduce");
        };
        let (r, x) = (*r, *x);
        let ty = f.ty(op.results[0]);
        let xs = f.ty(x).shape.clone();
        let dtype = ty.dtype;
        if dtype == DType::Bool {
            return Err("reductions over bool are not supported (cast to i32 first)".into());
        }
        let init = self.identity(r, dtype);
        let out = self.alloc_buffer(dtype, ty.num_elements())?;
        let kept: Vec<usize> = (0..xs.len()).filter(|d| !axes.contains(d)).collect();
        let out_shape: Vec<usize> = kept.iter().map(|&d| xs[d]).collect();
        let trailing = kept.iter().enumerate().all(|(i, &d)| i == d);
        if trailing {
            // Reduced axes are the innermost: one register accumulator per output element.
            // Every loop runs to `x`'s bounds: a clipped step's (see `clip`).
            let bounds: Vec<IntValue<'ctx>> = (0..xs.len()).map(|d| self.bound(&xs, d)).collect();
            let (kept_bounds, reduced) = bounds.split_at(kept.len());
            let acc = self.slot(self.reg_type(dtype))?;
            self.nest_within(kept_bounds, &mut |e, oidx| {
                e.b.build_store(acc, init)?;
                let step = |e: &mut Self, idx: &[IntValue<'ctx>]| -> Result<()> {
                    let idx: Vec<_> = oidx.iter().chain(idx).copied().collect();
                    let v = e.elem(f, env, x, &idx)?;
                    let a = e.b.build_load(e.reg_type(dtype), acc, "acc")?;
                    let c = e.combine(r, dtype, a, v)?;
                    e.b.build_store(acc, c)?;
                    Ok(())
                };
                if let Some((&hi, outer)) = reduced.split_last() {
                    // The innermost reduced axis carries the accumulator: interleaved.
                    let inner = xs[xs.len() - 1];
                    let count = e.accumulators_for(inner);
                    e.nest_within(outer, &mut |e, ridx| {
                        let run = |e: &mut Self, lo, hi| {
                            e.counted_latch(lo, hi, &mut |e, last| {
                                let idx: Vec<_> = ridx.iter().chain([&last]).copied().collect();
                                step(e, &idx)
                            })
                        };
                        let lo = e.i64(0);
                        if hi.is_const() {
                            let latch = run(e, lo, hi)?;
                            e.interleave(latch, count);
                            return Ok(());
                        }
                        // A clipped step's extent (see `clip`): whole vectors for every
                        // accumulator, then the tail summed apart and added once. Left to
                        // the vectoriser, the tail's elements would each be added to the
                        // finished total, rounding at its magnitude.
                        let chunk = e.i64(i64::from(count * e.options.vector_lanes.max(1)));
                        let tail = e.b.build_int_signed_rem(hi, chunk, "tail")?;
                        let whole = e.b.build_int_nsw_sub(hi, tail, "whole")?;
                        let latch = run(e, lo, whole)?;
                        e.interleave(latch, count);
                        let reg = e.reg_type(dtype);
                        let body = e.b.build_load(reg, acc, "acc")?;
                        e.b.build_store(acc, init)?;
                        run(e, whole, hi)?;
                        let rest = e.b.build_load(reg, acc, "acc")?;
                        let sum = e.combine(r, dtype, body, rest)?;
                        e.b.build_store(acc, sum)?;
                        Ok(())
                    })?;
                } else {
                    step(e, &[])?;
                }
                let a = e.b.build_load(e.reg_type(dtype), acc, "acc")?;
                let a = e.finish(dtype, a)?;
                let at = e.linear(&out_shape, oidx)?;
                e.buffer_store(dtype, out, at, a)
            })?;
        } else {
            // Accumulate in the output buffer, sweeping the input in row-major order (the
            // innermost loop then runs along kept, contiguous elements).
            self.nest(&out_shape, &mut |e, oidx| {
                let at = e.linear(&out_shape, oidx)?;
                e.buffer_store(dtype, out, at, init)
            })?;
            self.nest(&xs, &mut |e, idx| {
                let oidx: Vec<_> = kept.iter().map(|&d| idx[d]).collect();
                let at = e.linear(&out_shape, &oidx)?;
                let a = e.buffer_load(dtype, out, at)?;
                let v = e.elem(f, env, x, idx)?;
                let c = e.combine(r, dtype, a, v)?;
                e.buffer_store(dtype, out, at, c)
            })?;
            if dtype != DType::F32 && dtype.is_float() {
                self.nest(&out_shape, &mut |e, oidx| {
                    let at = e.linear(&out_shape, oidx)?;
                    let a = e.buffer_load(dtype, out, at)?;
                    let a = e.finish(dtype, a)?;
                    e.buffer_store(dtype, out, at, a)
                })?;
            }
        }
        if ty.is_scalar() {
            return Ok(Val::Scalar(self.buffer_load(dtype, out, self.i64(0))?));
        }
        Ok(Val::Buffer(out))
    }

    fn identity(&self, r: ReduceOp, dtype: DType) -> BasicValueEnum<'ctx> {
        self.constant(dtype, crate::interpret::fold::identity(r, dtype))
    }

    /// One accumulation step. Float sums may be reassociated (so LLVM can vectorise them):
    /// the IR promises f32 accumulation, not an order.
    fn combine(
        &self,
        r: ReduceOp,
        dtype: DType,
        a: BasicValueEnum<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        if dtype.is_float() {
            let f32t = self.ctx.f32_type().into();
            return match r {
                ReduceOp::Sum => {
                    let s = self.b.build_float_add(
                        a.into_float_value(),
                        v.into_float_value(),
                        "sum",
                    )?;
                    if let Some(i) = s.as_instruction() {
                        reassociate(i);
                    }
                    Ok(s.into())
                }
                ReduceOp::Max => self.intrinsic("llvm.maximum", f32t, &[a, v]),
                ReduceOp::Min => self.intrinsic("llvm.minimum", f32t, &[a, v]),
            };
        }
        let t = a.into_int_value().get_type().into();
        match r {
            ReduceOp::Sum => Ok(self
                .b
                .build_int_add(a.into_int_value(), v.into_int_value(), "sum")?
                .into()),
            ReduceOp::Max => self.intrinsic("llvm.smax", t, &[a, v]),
            ReduceOp::Min => self.intrinsic("llvm.smin", t, &[a, v]),
        }
    }

    /// Rounds a finished accumulator to the result dtype.
    fn finish(&self, dtype: DType, a: BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>> {
        if dtype.is_float() {
            return Ok(self.round(dtype, a.into_float_value())?.into());
        }
        Ok(a)
    }
}

fn reassociate(i: InstructionValue<'_>) {
    // Cannot fail on an fadd.
    let _ = i.set_fast_math_flags(FastMathFlags::AllowReassoc);
}
