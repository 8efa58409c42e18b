//! `for` loops with carried values and `if`/`else` with results.
//!
//! Carried scalars live in entry-block slots (LLVM promotes them to phis); carried tensors in
//! workspace buffers. At a `yield`, every yielded value is first computed into a temporary and
//! only then copied into the carried buffers, since a yielded value may read a carried one.

use super::value::{Env, Val};
use super::{CodegenError, Emitter, Report, Result};
use crate::cpu::abi::code;
use inkwell::IntPredicate;
use inkwell::values::PointerValue;
use tpukit_dsl::{Func, Op, OpKind, Region, ValueId};

/// Where one carried value or branch result lives.
#[derive(Copy, Clone)]
enum Home<'ctx> {
    Slot(PointerValue<'ctx>),
    Buffer(PointerValue<'ctx>),
}

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    fn homes(&mut self, f: &'k Func, values: &[ValueId]) -> Result<Vec<Home<'ctx>>> {
        values
            .iter()
            .map(|v| {
                let ty = f.ty(*v);
                Ok(if ty.is_scalar() {
                    Home::Slot(self.slot(self.reg_type(ty.dtype))?)
                } else {
                    Home::Buffer(self.alloc_buffer(ty.dtype, ty.num_elements())?)
                })
            })
            .collect()
    }

    /// The value a home holds, as seen by the code that follows.
    fn read_home(&self, f: &'k Func, v: ValueId, h: Home<'ctx>) -> Result<Val<'ctx, 'k>> {
        Ok(match h {
            Home::Slot(p) => {
                Val::Scalar(self.b.build_load(self.reg_type(f.ty(v).dtype), p, "c")?)
            }
            Home::Buffer(p) => Val::Buffer(p),
        })
    }

    /// Stores the values `sources` (values of `f`) into `homes`, via temporaries.
    fn fill_homes(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        types_of: &[ValueId],
        sources: &[Val<'ctx, 'k>],
        homes: &[Home<'ctx>],
    ) -> Result<()> {
        let mut staged = Vec::new();
        for ((v, src), h) in types_of.iter().zip(sources).zip(homes) {
            let ty = f.ty(*v).clone();
            match (h, src) {
                (Home::Slot(_), Val::Scalar(x)) => staged.push(Some(Val::Scalar(*x))),
                (Home::Buffer(dst), Val::Buffer(p)) if dst == p => staged.push(None),
                (Home::Buffer(_), src) => {
                    let tmp = self.alloc_buffer(ty.dtype, ty.num_elements())?;
                    let shape = ty.shape.clone();
                    self.nest(&shape, &mut |e, idx| {
                        let x = e.val_elem(f, env, &ty, *src, idx)?;
                        let at = e.linear(&shape, idx)?;
                        e.buffer_store(ty.dtype, tmp, at, x)
                    })?;
                    staged.push(Some(Val::Buffer(tmp)));
                }
                (Home::Slot(_), _) => {
                    return Err(CodegenError::internal("scalar carried as a tensor"));
                }
            }
        }
        for ((v, s), h) in types_of.iter().zip(staged).zip(homes) {
            match (s, h) {
                (None, _) => {}
                (Some(Val::Scalar(x)), Home::Slot(p)) => {
                    self.b.build_store(*p, x)?;
                }
                (Some(Val::Buffer(src)), Home::Buffer(dst)) => {
                    let ty = f.ty(*v).clone();
                    let dst = *dst;
                    self.nest(&[ty.num_elements()], &mut |e, idx| {
                        let x = e.buffer_load(ty.dtype, src, idx[0])?;
                        e.buffer_store(ty.dtype, dst, idx[0], x)
                    })?;
                }
                _ => return Err(CodegenError::internal("mismatched carried value")),
            }
        }
        Ok(())
    }

    pub(super) fn for_loop(
        &mut self,
        f: &'k Func,
        op: &'k Op,
        env: &mut Env<'ctx, 'k>,
    ) -> Result<Vec<Val<'ctx, 'k>>> {
        let OpKind::For {
            lower,
            upper,
            step,
            init,
            body,
        } = &op.kind
        else {
            unreachable!("for_loop on a for");
        };
        let scalar = |e: &Self, v: ValueId| -> Result<inkwell::values::IntValue<'ctx>> {
            match super::value::get(env, v) {
                Val::Scalar(s) => {
                    Ok(e.b.build_int_s_extend(s.into_int_value(), e.ctx.i64_type(), "bound")?)
                }
                _ => Err(CodegenError::internal("loop bound is not a scalar")),
            }
        };
        let (lo, hi, st) = (
            scalar(self, *lower)?,
            scalar(self, *upper)?,
            scalar(self, *step)?,
        );
        let positive = self
            .b
            .build_int_compare(IntPredicate::SGT, st, self.i64(0), "pos")?;
        let site = self.site;
        self.check(positive, Report::new(code::STEP, site, 0, st, self.i64(0)))?;
        let homes = self.homes(f, &op.results)?;
        let inits: Vec<Val> = init.iter().map(|v| super::value::get(env, *v)).collect();
        self.fill_homes(f, env, init, &inits, &homes)?;
        // Trip count = ceil((hi - lo) / step), so the loop is a counted one.
        let span = self.b.build_int_nsw_sub(hi, lo, "span")?;
        let span = self.b.build_int_nsw_add(span, st, "span1")?;
        let span = self.b.build_int_nsw_sub(span, self.i64(1), "span2")?;
        let trips = self.b.build_int_signed_div(span, st, "trips")?;
        let (zero, body_r): (_, &'k Region) = (self.i64(0), body);
        let results = op.results.clone();
        self.counted(zero, trips, &mut |e, t| {
            let iv = e.b.build_int_nsw_mul(t, st, "k")?;
            let iv = e.b.build_int_nsw_add(iv, lo, "iv")?;
            let iv = e.b.build_int_truncate(iv, e.ctx.i32_type(), "iv32")?;
            let mut args = vec![Val::Scalar(iv.into())];
            for (v, h) in results.iter().zip(&homes) {
                args.push(e.read_home(f, *v, *h)?);
            }
            let yielded = e.region(f, body_r, env, &args)?;
            e.fill_homes(f, env, &results, &yielded, &homes)
        })?;
        results
            .iter()
            .zip(&homes)
            .map(|(v, h)| self.read_home(f, *v, *h))
            .collect()
    }

    /// A `while`: the carried values in homes; a header block runs the condition and
    /// branches to the body (which refills the homes and jumps back) or past the loop.
    pub(super) fn while_loop(
        &mut self,
        f: &'k Func,
        op: &'k Op,
        env: &mut Env<'ctx, 'k>,
    ) -> Result<Vec<Val<'ctx, 'k>>> {
        let OpKind::While { init, cond, body } = &op.kind else {
            unreachable!("while_loop on a while");
        };
        let homes = self.homes(f, &op.results)?;
        let inits: Vec<Val> = init.iter().map(|v| super::value::get(env, *v)).collect();
        self.fill_homes(f, env, init, &inits, &homes)?;
        let header = self.ctx.append_basic_block(self.func, "while");
        let looped = self.ctx.append_basic_block(self.func, "do");
        let done = self.ctx.append_basic_block(self.func, "done");
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        let results = op.results.clone();
        let read = |e: &Self| -> Result<Vec<Val<'ctx, 'k>>> {
            results
                .iter()
                .zip(&homes)
                .map(|(v, h)| e.read_home(f, *v, *h))
                .collect()
        };
        let args = read(self)?;
        let c = match self.region(f, cond, env, &args)?.first() {
            Some(Val::Scalar(c)) => c.into_int_value(),
            _ => return Err(CodegenError::internal("a loop condition is not a scalar")),
        };
        self.b.build_conditional_branch(c, looped, done)?;
        self.b.position_at_end(looped);
        let args = read(self)?;
        let yielded = self.region(f, body, env, &args)?;
        self.fill_homes(f, env, &results, &yielded, &homes)?;
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(done);
        read(self)
    }

    pub(super) fn if_else(
        &mut self,
        f: &'k Func,
        op: &'k Op,
        env: &mut Env<'ctx, 'k>,
    ) -> Result<Vec<Val<'ctx, 'k>>> {
        let OpKind::If {
            cond,
            then_region,
            else_region,
        } = &op.kind
        else {
            unreachable!("if_else on an if");
        };
        let Val::Scalar(c) = super::value::get(env, *cond) else {
            return Err(CodegenError::internal("condition is not a scalar"));
        };
        let homes = self.homes(f, &op.results)?;
        let yes = self.ctx.append_basic_block(self.func, "if.then");
        let no = self.ctx.append_basic_block(self.func, "if.else");
        let done = self.ctx.append_basic_block(self.func, "if.done");
        self.b
            .build_conditional_branch(c.into_int_value(), yes, no)?;
        for (bb, region) in [(yes, then_region), (no, else_region)] {
            self.b.position_at_end(bb);
            let yielded = self.region(f, region, env, &[])?;
            self.fill_homes(f, env, &op.results, &yielded, &homes)?;
            self.b.build_unconditional_branch(done)?;
        }
        self.b.position_at_end(done);
        op.results
            .iter()
            .zip(&homes)
            .map(|(v, h)| self.read_home(f, *v, *h))
            .collect()
    }
}
