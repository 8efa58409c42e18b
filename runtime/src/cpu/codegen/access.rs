//! Loads and stores through refs: element addresses, edge handling, access checks.

use super::value::{Env, get};
use super::{Bounds, Emitter, Report, Result};
use crate::cpu::abi::code;
use inkwell::IntPredicate;
use inkwell::values::{BasicValueEnum, IntValue};
use tpukit_dsl::{BlockDim, DType, Func, Indexer, Op, OpKind, OperandId, Start, Window};

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// The start of each indexer, as i64.
    fn starts(&self, env: &Env<'ctx, 'k>, index: &[Indexer]) -> Result<Vec<IntValue<'ctx>>> {
        index
            .iter()
            .map(|ix| match ix {
                Indexer::Slice { start, .. } | Indexer::Point(start) => match start {
                    Start::Static(s) => Ok(self.i64(*s)),
                    Start::Dynamic(v) => {
                        let super::Val::Scalar(s) = get(env, *v) else {
                            return Err("internal error: dynamic start is not a scalar".into());
                        };
                        Ok(self.b.build_int_s_extend(
                            s.into_int_value(),
                            self.ctx.i64_type(),
                            "start",
                        )?)
                    }
                },
            })
            .collect()
    }

    /// The ref's extent along its dimension `d`.
    fn ref_extent(&self, id: OperandId, d: usize) -> (IntValue<'ctx>, bool) {
        let o = self.kernel.operand(id);
        match &o.window {
            Window::Blocked(b) => (self.i64(b.ref_shape()[d] as i64), true),
            Window::Whole => (
                self.operands[id.0 as usize].dims[d],
                o.shape[d].as_static().is_some(),
            ),
        }
    }

    /// Checks, when the kernel runs, every part of an access that the verifier could not:
    /// dynamic starts, and static ones against extents only known at launch.
    pub(super) fn check_access(
        &mut self,
        env: &Env<'ctx, 'k>,
        id: OperandId,
        index: &[Indexer],
    ) -> Result<()> {
        let starts = self.starts(env, index)?;
        for (d, (ix, s)) in index.iter().zip(starts).enumerate() {
            let (extent, static_extent) = self.ref_extent(id, d);
            let (start, size, reported) = match ix {
                Indexer::Slice { start, size } => (start, *size, *size as i64),
                Indexer::Point(start) => (start, 1, -1),
            };
            if matches!(start, Start::Static(_)) && static_extent {
                continue;
            }
            let end = self.b.build_int_nsw_add(s, self.i64(size as i64), "end")?;
            let lo = self
                .b
                .build_int_compare(IntPredicate::SGE, s, self.i64(0), "lo")?;
            let hi = self
                .b
                .build_int_compare(IntPredicate::SLE, end, extent, "hi")?;
            let ok = self.b.build_and(lo, hi, "ok")?;
            let site = self.site;
            let mut report = Report::new(code::ACCESS, site, d, s, extent);
            report.size = reported;
            self.check(ok, report)?;
        }
        Ok(())
    }

    /// The flat array offset of element `idx` of an access, and (in edge mode, for a
    /// blocked operand) whether it lies inside the array.
    fn address(
        &mut self,
        env: &Env<'ctx, 'k>,
        id: OperandId,
        index: &[Indexer],
        idx: &[IntValue<'ctx>],
    ) -> Result<(IntValue<'ctx>, Option<IntValue<'ctx>>)> {
        let starts = self.starts(env, index)?;
        let mut local = Vec::with_capacity(index.len());
        let mut k = 0;
        for (ix, s) in index.iter().zip(starts) {
            local.push(match ix {
                Indexer::Slice { .. } => {
                    k += 1;
                    self.b.build_int_nsw_add(s, idx[k - 1], "l")?
                }
                Indexer::Point(_) => s,
            });
        }
        let st = &self.operands[id.0 as usize];
        let (origin, dims, strides) = (st.origin.clone(), st.dims.clone(), st.strides.clone());
        let coords: Vec<IntValue<'ctx>> = match &self.kernel.operand(id).window {
            Window::Whole => local,
            Window::Blocked(spec) => {
                let mut it = local.into_iter();
                let mut c = Vec::with_capacity(spec.block.len());
                for (d, bd) in spec.block.iter().enumerate() {
                    c.push(match bd {
                        BlockDim::Squeezed => origin[d],
                        BlockDim::Blocked(_) => {
                            let l = it.next().expect("one index per ref dim");
                            self.b.build_int_nsw_add(origin[d], l, "c")?
                        }
                    });
                }
                c
            }
        };
        let mut offset = self.i64(0);
        for (c, s) in coords.iter().zip(&strides) {
            let t = self.b.build_int_nsw_mul(*c, *s, "t")?;
            offset = self.b.build_int_nsw_add(offset, t, "off")?;
        }
        let blocked = matches!(self.kernel.operand(id).window, Window::Blocked(_));
        let inside = if self.bounds == Bounds::Edge && blocked {
            let mut ok = self.ctx.bool_type().const_int(1, false);
            for (c, n) in coords.iter().zip(&dims) {
                let lt = self.b.build_int_compare(IntPredicate::ULT, *c, *n, "in")?;
                ok = self.b.build_and(ok, lt, "inside")?;
            }
            Some(ok)
        } else {
            None
        };
        if self.options.debug {
            let numel = self.operands[id.0 as usize].numel;
            let ok = self
                .b
                .build_int_compare(IntPredicate::ULT, offset, numel, "dbg")?;
            let ok = match inside {
                Some(i) => self.b.build_or(ok, self.b.build_not(i, "out")?, "dbg.ok")?,
                None => ok,
            };
            let site = self.site;
            self.check(ok, Report::new(code::ELEMENT, site, 0, offset, numel))?;
        }
        Ok((offset, inside))
    }

    /// Element `idx` of a `load` op's result.
    pub(super) fn load_elem(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        op: &'k Op,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let OpKind::Load {
            operand,
            index,
            mask,
            other,
        } = &op.kind
        else {
            unreachable!("load_elem on a load");
        };
        let o = self.kernel.operand(*operand);
        let dtype = o.dtype;
        let (offset, inside) = self.address(env, *operand, index, idx)?;
        let value = match inside {
            None => self.read(*operand, offset)?,
            Some(inside) => {
                let fill = match &o.window {
                    Window::Blocked(b) => dtype.round_f64(b.fill.as_f64()),
                    Window::Whole => 0.0,
                };
                let fill = self.constant(dtype, fill);
                let before = self.block();
                let yes = self.ctx.append_basic_block(self.func, "in");
                let done = self.ctx.append_basic_block(self.func, "in.done");
                self.b.build_conditional_branch(inside, yes, done)?;
                self.b.position_at_end(yes);
                let v = self.read(*operand, offset)?;
                let after = self.block();
                self.b.build_unconditional_branch(done)?;
                self.b.position_at_end(done);
                let phi = self.b.build_phi(self.reg_type(dtype), "ld")?;
                phi.add_incoming(&[(&v, after), (&fill, before)]);
                phi.as_basic_value()
            }
        };
        match (mask, other) {
            (Some(m), Some(x)) => {
                let m = self.elem(f, env, *m, idx)?.into_int_value();
                let x = self.elem(f, env, *x, idx)?;
                Ok(self.b.build_select(m, value, x, "masked")?)
            }
            _ => Ok(value),
        }
    }

    /// Emits a `store` op: one loop nest over the stored value.
    pub(super) fn store(&mut self, f: &'k Func, op: &'k Op, env: &Env<'ctx, 'k>) -> Result<()> {
        let OpKind::Store {
            operand,
            index,
            value,
            mask,
        } = &op.kind
        else {
            unreachable!("store on a store");
        };
        self.check_access(env, *operand, index)?;
        let shape = f.ty(*value).shape.clone();
        let dtype = self.kernel.operand(*operand).dtype;
        self.nest(&shape, &mut |e, idx| {
            let v = e.elem(f, env, *value, idx)?;
            let (offset, inside) = e.address(env, *operand, index, idx)?;
            let keep = match mask {
                Some(m) => Some(e.elem(f, env, *m, idx)?.into_int_value()),
                None => None,
            };
            let cond = match (inside, keep) {
                (Some(a), Some(b)) => Some(e.b.build_and(a, b, "cond")?),
                (a, b) => a.or(b),
            };
            match cond {
                None => e.write(*operand, offset, dtype, v),
                Some(c) => e.when(c, &mut |e| e.write(*operand, offset, dtype, v)),
            }
        })
    }

    /// Reads element `offset` of an operand into a register.
    fn read(&self, id: OperandId, offset: IntValue<'ctx>) -> Result<BasicValueEnum<'ctx>> {
        let dtype = self.kernel.operand(id).dtype;
        let t = self.mem_type(dtype);
        let p = self.operands[id.0 as usize].ptr;
        let q = unsafe { self.b.build_in_bounds_gep(t, p, &[offset], "a")? };
        let v = self.b.build_load(t, q, "m")?;
        let b = &self.b;
        Ok(match dtype {
            DType::BF16 => {
                let w = b.build_int_z_extend(v.into_int_value(), self.ctx.i32_type(), "w")?;
                let w = b.build_left_shift(w, self.i32c(16), "hi")?;
                b.build_bit_cast(w, self.ctx.f32_type(), "bf16")?
            }
            DType::F16 => b
                .build_float_ext(v.into_float_value(), self.ctx.f32_type(), "f16")?
                .into(),
            DType::Bool => b
                .build_int_compare(
                    IntPredicate::NE,
                    v.into_int_value(),
                    self.ctx.i8_type().const_zero(),
                    "b",
                )?
                .into(),
            _ => v,
        })
    }

    /// Writes a register to element `offset` of an operand.
    fn write(
        &self,
        id: OperandId,
        offset: IntValue<'ctx>,
        dtype: DType,
        v: BasicValueEnum<'ctx>,
    ) -> Result<()> {
        let b = &self.b;
        let m: BasicValueEnum<'ctx> = match dtype {
            DType::BF16 => {
                let w = b
                    .build_bit_cast(v, self.ctx.i32_type(), "w")?
                    .into_int_value();
                let w = b.build_right_shift(w, self.i32c(16), false, "hi")?;
                b.build_int_truncate(w, self.ctx.i16_type(), "bf16")?.into()
            }
            DType::F16 => b
                .build_float_trunc(v.into_float_value(), self.ctx.f16_type(), "f16")?
                .into(),
            DType::Bool => b
                .build_int_z_extend(v.into_int_value(), self.ctx.i8_type(), "b")?
                .into(),
            _ => v,
        };
        let t = self.mem_type(dtype);
        let p = self.operands[id.0 as usize].ptr;
        let q = unsafe { b.build_in_bounds_gep(t, p, &[offset], "a")? };
        b.build_store(q, m)?;
        Ok(())
    }
}
