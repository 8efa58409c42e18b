//! Loads and stores through refs: element addresses and access checks.

use super::value::{Env, Val, get};
use super::{CodegenError, Emitter, Report, Result};
use crate::cpu::abi::code;
use inkwell::IntPredicate;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use tpukit_dsl::{DType, Func, Indexer, Op, OpKind, OperandId, Start, ValueId, Window};

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
                            return Err(CodegenError::internal("dynamic start is not a scalar"));
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

    /// Whether a read outside the ref reads 0 instead of failing: a scalar read of a
    /// prefetch operand outside debug mode (see `OpKind::Load`).
    pub(super) fn reads_zero_past_the_end(&self, id: OperandId, index: &[Indexer]) -> bool {
        !self.options.debug
            && self.kernel.operand(id).role == tpukit_dsl::Role::Prefetch
            && index.iter().all(|ix| matches!(ix, Indexer::Point(_)))
    }

    /// Whether every point of `index` lies inside the ref (an i1): each start at least 0 and
    /// below its extent.
    fn inside(
        &mut self,
        env: &Env<'ctx, 'k>,
        id: OperandId,
        index: &[Indexer],
    ) -> Result<IntValue<'ctx>> {
        let starts = self.starts(env, index)?;
        let mut ok = self.within_extents(id, &starts, IntPredicate::SLT)?;
        for s in starts {
            let lo = self
                .b
                .build_int_compare(IntPredicate::SGE, s, self.i64(0), "lo")?;
            ok = self.b.build_and(ok, lo, "inside")?;
        }
        Ok(ok)
    }

    /// Whether a whole access lies inside the ref (an i1): each dimension's start plus span
    /// at most its extent (the access is checked not to start below 0).
    pub(super) fn window_inside(
        &mut self,
        env: &Env<'ctx, 'k>,
        id: OperandId,
        index: &[Indexer],
    ) -> Result<IntValue<'ctx>> {
        let starts = self.starts(env, index)?;
        let mut ends = Vec::with_capacity(starts.len());
        for (ix, s) in index.iter().zip(starts) {
            let span = self.i64(ix.span() as i64);
            ends.push(self.b.build_int_nsw_add(s, span, "end")?);
        }
        self.within_extents(id, &ends, IntPredicate::SLE)
    }

    /// Whether element `idx` of an access lies inside the array (an i1): each dimension's
    /// position below its extent (the access is checked not to start below 0).
    pub(super) fn elem_inside(
        &mut self,
        env: &Env<'ctx, 'k>,
        id: OperandId,
        index: &[Indexer],
        idx: &[IntValue<'ctx>],
    ) -> Result<IntValue<'ctx>> {
        let at = self.positions(env, index, idx)?;
        self.within_extents(id, &at, IntPredicate::SLT)
    }

    /// Whether `at[d] pred extent(d)` holds along every dimension `d` of the ref (an i1).
    fn within_extents(
        &mut self,
        id: OperandId,
        at: &[IntValue<'ctx>],
        pred: IntPredicate,
    ) -> Result<IntValue<'ctx>> {
        let mut ok = self.ctx.bool_type().const_int(1, false);
        for (d, &a) in at.iter().enumerate() {
            let (extent, _) = self.ref_extent(id, d);
            let hi = self.b.build_int_compare(pred, a, extent, "hi")?;
            ok = self.b.build_and(ok, hi, "inside")?;
        }
        Ok(ok)
    }

    /// The position in the ref, along each of its dimensions, of element `idx` of an access
    /// (`idx` has one index per slice of `index`): a point's start, or a slice's start plus
    /// `idx` times its stride.
    fn positions(
        &mut self,
        env: &Env<'ctx, 'k>,
        index: &[Indexer],
        idx: &[IntValue<'ctx>],
    ) -> Result<Vec<IntValue<'ctx>>> {
        let starts = self.starts(env, index)?;
        let mut slices = idx.iter();
        let mut at = Vec::with_capacity(starts.len());
        for (ix, s) in index.iter().zip(starts) {
            at.push(match *ix {
                Indexer::Point(_) => s,
                Indexer::Slice { stride, .. } => {
                    let i = *slices.next().expect("an index per slice");
                    let i = if stride == 1 {
                        i
                    } else {
                        self.b.build_int_nsw_mul(i, self.i64(stride as i64), "s")?
                    };
                    self.b.build_int_nsw_add(s, i, "l")?
                }
            });
        }
        Ok(at)
    }

    /// Checks, when the kernel runs, every part of an access that the verifier could not:
    /// dynamic starts, and static ones against extents only known at launch.
    pub(super) fn check_access(
        &mut self,
        env: &Env<'ctx, 'k>,
        id: OperandId,
        index: &[Indexer],
    ) -> Result<()> {
        self.check_against_tiles(env, id, index, &|_| None)
    }

    /// [`Self::check_access`] for a `copy`'s window: against the extents rounded up to the
    /// tiles a copy may reach past an HBM array's end (`tpukit_dsl::dma::copy_tile`).
    pub(super) fn check_copy_access(
        &mut self,
        env: &Env<'ctx, 'k>,
        id: OperandId,
        index: &[Indexer],
    ) -> Result<()> {
        let o = self.kernel.operand(id);
        self.check_against_tiles(env, id, index, &|d| tpukit_dsl::dma::copy_tile(o, d))
    }

    /// [`Self::check_access`] against each dimension `d`'s extent rounded up to a multiple of
    /// `tile(d)`, where that is some.
    fn check_against_tiles(
        &mut self,
        env: &Env<'ctx, 'k>,
        id: OperandId,
        index: &[Indexer],
        tile: &dyn Fn(usize) -> Option<usize>,
    ) -> Result<()> {
        let starts = self.starts(env, index)?;
        for (d, (ix, s)) in index.iter().zip(starts).enumerate() {
            let (mut extent, static_extent) = self.ref_extent(id, d);
            if let Some(t) = tile(d) {
                let t = self.i64(t as i64);
                let up = self.b.build_int_add(extent, t, "e.up")?;
                let up = self.b.build_int_sub(up, self.i64(1), "e.up")?;
                let tiles = self.b.build_int_signed_div(up, t, "tiles")?;
                extent = self.b.build_int_mul(tiles, t, "e.tiled")?;
            }
            let (start, size, reported) = match ix {
                Indexer::Slice { start, .. } => (start, ix.span(), ix.span() as i64),
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

    /// The offset from the ref's base of element `idx` of an access.
    pub(super) fn address(
        &mut self,
        env: &Env<'ctx, 'k>,
        id: OperandId,
        index: &[Indexer],
        idx: &[IntValue<'ctx>],
    ) -> Result<IntValue<'ctx>> {
        let at = self.positions(env, index, idx)?;
        let strides = self.operands[id.0 as usize].ref_strides.clone();
        let mut offset = self.i64(0);
        for (local, stride) in at.into_iter().zip(strides) {
            let t = self.b.build_int_nsw_mul(local, stride, "t")?;
            offset = self.b.build_int_nsw_add(offset, t, "off")?;
        }
        if self.options.debug {
            let span = self.operands[id.0 as usize].span;
            let ok = self
                .b
                .build_int_compare(IntPredicate::ULT, offset, span, "dbg")?;
            let site = self.site;
            self.check(ok, Report::new(code::ELEMENT, site, 0, offset, span))?;
        }
        Ok(offset)
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
        let offset = self.address(env, *operand, index, idx)?;
        let value = if self.reads_zero_past_the_end(*operand, index) {
            let ok = self.inside(env, *operand, index)?;
            self.read_or_zero(*operand, offset, ok)?
        } else {
            self.read(*operand, offset)?
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
        if mask.is_none() && self.store_transposed(f, env, *operand, index, *value)? {
            return Ok(());
        }
        let shape = f.ty(*value).shape.clone();
        let dtype = self.kernel.operand(*operand).dtype;
        let mut each = |e: &mut Self, idx: &[IntValue<'ctx>]| {
            let v = e.elem(f, env, *value, idx)?;
            let offset = e.address(env, *operand, index, idx)?;
            match mask {
                None => e.write(*operand, offset, dtype, v),
                Some(m) => {
                    let keep = e.elem(f, env, *m, idx)?.into_int_value();
                    e.when(keep, &mut |e| e.write(*operand, offset, dtype, v))
                }
            }
        };
        if reads_transposed(f, env, *value) {
            self.tiled_nest(&shape, TRANSPOSE_TILE, &mut each)
        } else {
            self.nest(&shape, &mut each)
        }
    }

    /// Reads the element at `offset` from the ref's base into a register.
    pub(super) fn read(
        &self,
        id: OperandId,
        offset: IntValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let dtype = self.kernel.operand(id).dtype;
        let base = self.operands[id.0 as usize].base;
        let v = self.read_raw(dtype, base, offset)?;
        self.register_form(dtype, v)
    }

    /// [`Self::read`] where `ok` holds, else 0: the read then goes to the ref's base, so it
    /// never leaves the ref.
    pub(super) fn read_or_zero(
        &self,
        id: OperandId,
        offset: IntValue<'ctx>,
        ok: IntValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let safe = self.b.build_select(ok, offset, self.i64(0), "safe")?;
        let v = self.read(id, safe.into_int_value())?;
        let zero = v.get_type().const_zero();
        Ok(self.b.build_select(ok, v, zero, "past_end")?)
    }

    /// A value of `dtype` in its in-memory representation, as a register (the inverse of
    /// [`memory_form`](Self::memory_form)).
    pub(super) fn register_form(
        &self,
        dtype: DType,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
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

    /// The element of `dtype` at `offset` from `base`, as stored in memory.
    pub(super) fn read_raw(
        &self,
        dtype: DType,
        base: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        self.load_at(self.mem_type(dtype), base, offset)
    }

    /// Stores a value in memory representation at `offset` from `base`.
    pub(super) fn write_raw(
        &self,
        dtype: DType,
        base: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
        m: BasicValueEnum<'ctx>,
    ) -> Result<()> {
        self.store_at(self.mem_type(dtype), base, offset, m)
    }

    /// Loads the element of type `t` at `offset` (in elements) from `base`.
    pub(super) fn load_at(
        &self,
        t: BasicTypeEnum<'ctx>,
        base: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        // SAFETY (of the generated code): every offset is checked against its array or
        // buffer before the access (see `check_access`, `Report`) or is in range by
        // construction (loop nests over static buffer shapes).
        let q = unsafe { self.b.build_in_bounds_gep(t, base, &[offset], "a")? };
        Ok(self.b.build_load(t, q, "m")?)
    }

    /// Stores `v`, of type `t`, at `offset` (in elements) from `base`.
    pub(super) fn store_at(
        &self,
        t: BasicTypeEnum<'ctx>,
        base: PointerValue<'ctx>,
        offset: IntValue<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> Result<()> {
        // SAFETY: as for `load_at`.
        let q = unsafe { self.b.build_in_bounds_gep(t, base, &[offset], "a")? };
        self.b.build_store(q, v)?;
        Ok(())
    }

    /// Writes a register to the element at `offset` from the ref's base.
    pub(super) fn write(
        &self,
        id: OperandId,
        offset: IntValue<'ctx>,
        dtype: DType,
        v: BasicValueEnum<'ctx>,
    ) -> Result<()> {
        let m = self.memory_form(dtype, v)?;
        self.write_raw(dtype, self.operands[id.0 as usize].base, offset, m)
    }

    /// A register value of `dtype` in its in-memory representation.
    pub(super) fn memory_form(
        &self,
        dtype: DType,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let b = &self.b;
        Ok(match dtype {
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
        })
    }
}

/// Rows and columns of the tiles a store runs in when its value reads a transpose: 16 f32
/// rows of 64 bytes, one cache line each, fit L1 with room to spare.
pub(super) const TRANSPOSE_TILE: usize = 16;

/// Whether computing `v` element by element reads a value (or array) with its last two
/// dimensions swapped: through lazily computed ops, down to the first materialised ones.
fn reads_transposed(f: &Func, env: &Env<'_, '_>, v: ValueId) -> bool {
    let Some(Val::Lazy(op)) = env[v.0 as usize] else {
        return false;
    };
    if let OpKind::Transpose { perm, .. } = &op.kind {
        let r = perm.len();
        if r >= 2 && (perm[r - 1] != r - 1 || perm[r - 2] != r - 2) {
            return true;
        }
    }
    f.ty(v).shape.len() >= 2
        && op
            .kind
            .operands()
            .into_iter()
            .any(|x| reads_transposed(f, env, x))
}
