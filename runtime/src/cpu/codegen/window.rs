//! Placing a blocked operand's window at each grid step, and staging edge blocks.
//!
//! A window that lies inside its array is a view: the ref's base points into the array and its
//! strides are the array's. A window that overhangs the array's end (an edge block) is
//! *staged*: it is copied into a block-sized buffer in the workspace, reading the operand's
//! fill value outside the array; the body runs on the buffer exactly as on a view (its
//! innermost stride is 1 either way, so the same vectorised code serves both); after the body,
//! an output's buffer is copied back where it lies inside the array — stores past the end
//! stay in the buffer, which keeps them while the window stays at its block over
//! consecutive steps (the operand's last origin is kept in the workspace) and is refilled
//! when it moves. Only edge steps pay for the copies, and the body is emitted once. Copies
//! that change nothing are left out (`crate::overhang`): an output the body overwrites whole
//! is not copied in, and an input read only elementwise into such outputs of its geometry
//! gets no fill (what lies past its end only reaches what lies past theirs).

use super::{Emitter, Report, Result};
use crate::cpu::abi::{code, helper};
use crate::cpu::stage;
use crate::overhang;
use inkwell::{AddressSpace, IntPredicate};
use tpukit_dsl::{DType, OperandId, Role, Window};

impl<'ctx> Emitter<'ctx, '_> {
    /// Evaluates operand `i`'s index map at the current grid point, checks the window's start,
    /// and points its ref at the array or at a staged copy.
    pub(super) fn place_window(&mut self, i: usize) -> Result<()> {
        let o = &self.kernel.operands[i];
        let Window::Blocked(spec) = &o.window else {
            return Ok(());
        };
        let blocks = self.index_map(&spec.index_map)?;
        let mut fits = self.ctx.bool_type().const_int(1, false);
        let mut offset = self.i64(0);
        for (d, (&bi, bd)) in blocks.iter().zip(&spec.block).enumerate() {
            let size = bd.size() as i64;
            let bi = self
                .b
                .build_int_s_extend(bi, self.ctx.i64_type(), "block")?;
            let start = self
                .b
                .build_int_nsw_mul(bi, self.i64(bd.unit() as i64), "start")?;
            let n = self.operands[i].dims[d];
            // 0 <= start < n, or start == 0 for an empty dimension.
            let inside = self
                .b
                .build_int_compare(IntPredicate::ULT, start, n, "inside")?;
            let zero = self
                .b
                .build_int_compare(IntPredicate::EQ, start, self.i64(0), "z")?;
            let ok = self.b.build_or(inside, zero, "ok")?;
            let mut report = Report::new(code::WINDOW, i as i64, d, start, n);
            report.blocks = blocks.clone();
            self.check(ok, report)?;
            let end = self.b.build_int_nsw_add(start, self.i64(size), "end")?;
            let le = self
                .b
                .build_int_compare(IntPredicate::SLE, end, n, "fits")?;
            fits = self.b.build_and(fits, le, "fits")?;
            let t = self
                .b
                .build_int_nsw_mul(start, self.operands[i].strides[d], "t")?;
            offset = self.b.build_int_nsw_add(offset, t, "origin")?;
            self.operands[i].origin[d] = start;
        }
        let st = &self.operands[i];
        let view = unsafe {
            self.b
                .build_in_bounds_gep(self.mem_type(o.dtype), st.ptr, &[offset], "view")?
        };
        let left = self.b.build_int_nsw_sub(st.numel, offset, "left")?;
        if self.clip.is_some() {
            // A clipped step reads and writes only the part inside the array (see `clip`):
            // the ref is the view, overhanging or not.
            let ref_strides = spec
                .block
                .iter()
                .zip(&st.strides)
                .filter(|(bd, _)| bd.kept())
                .map(|(_, &s)| s)
                .collect();
            let st = &mut self.operands[i];
            st.base = view;
            st.span = left;
            st.ref_strides = ref_strides;
            return Ok(());
        }
        let block: Vec<usize> = spec.block.iter().map(|b| b.size()).collect();
        let numel: usize = block.iter().product();
        let stage = match self.operands[i].stage {
            Some(p) => p,
            None => {
                let p = self.alloc(tpukit_dsl::buffer_bytes(o.dtype, block.iter().copied()))?;
                self.operands[i].stage = Some(p);
                p
            }
        };
        let st = &self.operands[i];
        let base = self.b.build_select(fits, view, stage, "base")?;
        let span = self
            .b
            .build_select(fits, left, self.i64(numel as i64), "span")?;
        // The ref's strides: the array's along blocked dims, or the staging buffer's.
        let mut ref_strides = Vec::new();
        let mut inner = 1i64;
        let mut stage_strides = vec![0i64; block.len()];
        for d in (0..block.len()).rev() {
            stage_strides[d] = inner;
            inner *= block[d] as i64;
        }
        for (d, bd) in spec.block.iter().enumerate() {
            if bd.kept() {
                let s = self.b.build_select(
                    fits,
                    st.strides[d],
                    self.i64(stage_strides[d]),
                    "stride",
                )?;
                ref_strides.push(s.into_int_value());
            }
        }
        let st = &mut self.operands[i];
        st.base = base.into_pointer_value();
        st.span = span.into_int_value();
        st.ref_strides = ref_strides;
        st.fits = Some(fits);
        let id = OperandId(i as u32);
        let dir = if o.role == Role::Output {
            if !overhang::output_needs_copy_in(self.kernel, id) {
                return Ok(()); // the body overwrites the whole buffer
            }
            let stayed = self.stayed(i)?;
            let keep = self.i64(stage::IN_KEEP);
            self.b
                .build_select(stayed, keep, self.i64(stage::IN), "dir")?
                .into_int_value()
        } else if overhang::input_fill_observable(self.kernel, id) {
            self.i64(stage::IN)
        } else {
            self.i64(stage::IN_KEEP) // whatever lies past the end is never seen
        };
        let overhangs = self.b.build_not(fits, "overhangs")?;
        self.when(overhangs, &mut |e| e.stage_copy(i, &block, dir))
    }

    /// Whether output `i`'s window has the origin it had at this worker's previous grid
    /// step (an i1); records the current origin for the next step. The record (the origin,
    /// then a flag set once recorded) lives in the workspace, its flag zeroed when the body
    /// starts (see `zero_records`).
    fn stayed(&mut self, i: usize) -> Result<inkwell::values::IntValue<'ctx>> {
        let i64t = self.ctx.i64_type();
        let origin = self.operands[i].origin.clone();
        let n = origin.len();
        let last = match self.operands[i].last_origin {
            Some(p) => p,
            None => {
                let (p, off) = self.alloc_at(Some((n + 1) * 8))?;
                self.zero_on_entry.push(off + n * 8);
                self.operands[i].last_origin = Some(p);
                p
            }
        };
        let at = |e: &Self, d: usize| unsafe {
            e.b.build_in_bounds_gep(i64t, last, &[e.i64(d as i64)], "last")
        };
        let flag = self.b.build_load(i64t, at(self, n)?, "recorded")?;
        let mut stayed = self.b.build_int_compare(
            IntPredicate::NE,
            flag.into_int_value(),
            self.i64(0),
            "stayed",
        )?;
        for (d, &o) in origin.iter().enumerate() {
            let p = at(self, d)?;
            let was = self.b.build_load(i64t, p, "was")?.into_int_value();
            let same = self.b.build_int_compare(IntPredicate::EQ, was, o, "same")?;
            stayed = self.b.build_and(stayed, same, "stayed")?;
            self.b.build_store(p, o)?;
        }
        self.b.build_store(at(self, n)?, self.i64(1))?;
        Ok(stayed)
    }

    /// After the body: writes a staged output window back where it lies inside the array.
    pub(super) fn unstage_window(&mut self, i: usize) -> Result<()> {
        let o = &self.kernel.operands[i];
        let (Role::Output, Window::Blocked(spec)) = (o.role, &o.window) else {
            return Ok(());
        };
        let block: Vec<usize> = spec.block.iter().map(|b| b.size()).collect();
        let fits = self.operands[i].fits.expect("placed before the body");
        let overhangs = self.b.build_not(fits, "overhangs")?;
        let dir = self.i64(stage::OUT);
        self.when(overhangs, &mut |e| e.stage_copy(i, &block, dir))
    }

    /// Copies between operand `i`'s window in its array and its staging buffer, through the
    /// runtime's [`stage`](crate::cpu::stage::stage) helper, in direction `dir` (an i64: one
    /// of its `IN`, `IN_KEEP`, `OUT`).
    fn stage_copy(
        &mut self,
        i: usize,
        block: &[usize],
        dir: inkwell::values::IntValue<'ctx>,
    ) -> Result<()> {
        let o = &self.kernel.operands[i];
        let fill = match &o.window {
            Window::Blocked(b) => b.fill.as_f64(),
            Window::Whole => 0.0,
        };
        let fill = fill_bits(o.dtype, fill);
        let elem = o.dtype.size_bytes() as u64;
        let rank = block.len();
        let first_dim: usize = self.kernel.operands[..i]
            .iter()
            .map(|o| o.shape.len())
            .sum();
        let i64t = self.ctx.i64_type();
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        let st = &self.operands[i];
        let (array, stage) = (st.ptr, st.stage.expect("allocated by place_window"));
        let origin = st.origin.clone();
        let dims = unsafe {
            self.b.build_in_bounds_gep(
                i64t,
                self.dims_param,
                &[self.i64(first_dim as i64)],
                "dims",
            )?
        };
        let array_of = |e: &Self, values: &[inkwell::values::IntValue<'ctx>]| -> Result<_> {
            let slot = e.slot(i64t.array_type(values.len() as u32).into())?;
            for (d, v) in values.iter().enumerate() {
                let p = unsafe {
                    e.b.build_in_bounds_gep(i64t, slot, &[e.i64(d as i64)], "e")?
                };
                e.b.build_store(p, *v)?;
            }
            Ok(slot)
        };
        let origin = array_of(self, &origin)?;
        let block_values: Vec<_> = block.iter().map(|&b| self.i64(b as i64)).collect();
        let block = array_of(self, &block_values)?;
        let f = unsafe {
            self.b
                .build_in_bounds_gep(ptr, self.helpers, &[self.i64(helper::STAGE as i64)], "h")?
        };
        let f = self.b.build_load(ptr, f, "stage")?.into_pointer_value();
        let fn_type = self.ctx.void_type().fn_type(
            &[
                ptr.into(),
                ptr.into(),
                ptr.into(),
                ptr.into(),
                ptr.into(),
                i64t.into(),
                i64t.into(),
                i64t.into(),
                i64t.into(),
            ],
            false,
        );
        self.b.build_indirect_call(
            fn_type,
            f,
            &[
                array.into(),
                stage.into(),
                dims.into(),
                origin.into(),
                block.into(),
                self.i64(rank as i64).into(),
                i64t.const_int(elem, false).into(),
                i64t.const_int(fill, false).into(),
                dir.into(),
            ],
            "",
        )?;
        Ok(())
    }
}

/// The bits of `x` as an element of `dtype` in memory (little-endian, low bytes used).
fn fill_bits(dtype: DType, x: f64) -> u64 {
    let x = dtype.round_f64(x);
    match dtype {
        DType::F32 => (x as f32).to_bits() as u64,
        DType::BF16 => tpukit_dsl::bf16_from_f64(x).to_bits() as u64,
        DType::F16 => tpukit_dsl::f16_from_f64(x).to_bits() as u64,
        DType::I32 => x as i32 as u32 as u64,
        DType::I16 => x as i16 as u16 as u64,
        DType::I8 => x as i8 as u8 as u64,
        DType::Bool => (x != 0.0) as u64,
    }
}
