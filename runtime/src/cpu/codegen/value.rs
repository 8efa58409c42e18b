//! SSA values during code generation, and the emission of each op.

use super::{CodegenError, Emitter, Result};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, InstructionValue, IntValue, PointerValue};
use tpukit_dsl::{DType, Func, Op, OpKind, Region, Type, ValueId};

/// A value of the function being emitted.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Val<'ctx, 'k> {
    /// A rank-0 value, in a register.
    Scalar(BasicValueEnum<'ctx>),
    /// Every element, row-major in the workspace, in register representation (bool as i8).
    Buffer(PointerValue<'ctx>),
    /// A lane-uniform value (see `uniform`): element `[..., i, 0]` of every row, row-major in
    /// the workspace, in register representation; element `[..., i, j]` is element
    /// `[..., i, 0]`.
    Rows(PointerValue<'ctx>),
    /// Computed where it is used, one element at a time, by the op that defines it.
    Lazy(&'k Op),
}

pub(crate) type Env<'ctx, 'k> = Vec<Option<Val<'ctx, 'k>>>;

pub(super) fn get<'ctx, 'k>(env: &Env<'ctx, 'k>, v: ValueId) -> Val<'ctx, 'k> {
    env[v.0 as usize].expect("verified: defined before use")
}

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// Emits the kernel body for one grid step.
    pub(super) fn body(&mut self) -> Result<()> {
        let f = &self.kernel.body;
        let mut env = vec![None; f.types.len()];
        self.region(f, &f.body, &mut env, &[])?;
        Ok(())
    }

    /// Evaluates an index map at the current grid point: one i32 per array dimension.
    pub(super) fn index_map(&mut self, f: &'k Func) -> Result<Vec<IntValue<'ctx>>> {
        let mut args = Vec::new();
        for &p in &self.point {
            let p = self.b.build_int_truncate(p, self.ctx.i32_type(), "g")?;
            args.push(Val::Scalar(p.into()));
        }
        let mut env = vec![None; f.types.len()];
        let out = self.region(f, &f.body, &mut env, &args)?;
        out.into_iter()
            .map(|v| match v {
                Val::Scalar(s) => Ok(s.into_int_value()),
                _ => Err(CodegenError::internal("index map yields a non-scalar")),
            })
            .collect()
    }

    /// Emits a region's ops with its arguments bound; returns what it yields.
    pub(super) fn region(
        &mut self,
        f: &'k Func,
        r: &'k Region,
        env: &mut Env<'ctx, 'k>,
        args: &[Val<'ctx, 'k>],
    ) -> Result<Vec<Val<'ctx, 'k>>> {
        for (a, v) in r.args.iter().zip(args) {
            env[a.0 as usize] = Some(*v);
        }
        self.find_accumulations(f, r);
        self.find_unsnapshotted(f, r);
        for op in &r.ops {
            if self.fused.contains(&(op as *const Op)) {
                continue;
            }
            if let OpKind::Yield { values } = &op.kind {
                return Ok(values.iter().map(|v| get(env, *v)).collect());
            }
            let outer = self.site;
            self.site = self.site_of(op);
            let results = self.op(f, op, env).map_err(|e| self.locate(op, e))?;
            self.site = outer;
            for (r, v) in op.results.iter().zip(results) {
                env[r.0 as usize] = Some(v);
            }
        }
        Ok(Vec::new())
    }

    fn locate(&self, op: &Op, e: CodegenError) -> CodegenError {
        if e.located {
            return e;
        }
        let at = op
            .loc
            .as_ref()
            .map(|l| format!(" at {l}"))
            .unwrap_or_default();
        CodegenError {
            kind: e.kind,
            message: format!(
                "kernel `{}`: op `{}`{at}: {}",
                self.kernel.name,
                op.kind.name(),
                e.message
            ),
            located: true,
        }
    }

    fn op(
        &mut self,
        f: &'k Func,
        op: &'k Op,
        env: &mut Env<'ctx, 'k>,
    ) -> Result<Vec<Val<'ctx, 'k>>> {
        let i32t = self.ctx.i32_type();
        let scalar = |v: IntValue<'ctx>| Val::Scalar(v.into());
        Ok(vec![match &op.kind {
            OpKind::ProgramId { axis } => {
                scalar(self.b.build_int_truncate(self.point[*axis], i32t, "pid")?)
            }
            OpKind::NumPrograms { axis } => {
                scalar(self.b.build_int_truncate(self.grid[*axis], i32t, "nprog")?)
            }
            OpKind::ArrayDim { operand, axis } => {
                let d = self.operands[operand.0 as usize].dims[*axis];
                scalar(self.b.build_int_truncate(d, i32t, "dim")?)
            }
            OpKind::Load { operand, index, .. } => {
                if !self.reads_zero_past_the_end(*operand, index) {
                    self.check_access(env, *operand, index)?;
                }
                let snapshot = self.stored.contains(operand)
                    && !self.unsnapshotted.contains(&(op as *const Op));
                self.define(f, op, env, snapshot)?
            }
            OpKind::Store { operand, .. } => {
                match self.store_runs(*operand)? {
                    Some(runs) => self.when(runs, &mut |e| e.store(f, op, env))?,
                    None => self.store(f, op, env)?,
                }
                return Ok(Vec::new());
            }
            OpKind::Reduce { .. } => self.reduce(f, op, env)?,
            OpKind::Dot { .. } => self.dot(f, op, env)?,
            OpKind::For { .. } => return self.for_loop(f, op, env),
            OpKind::While { .. } => return self.while_loop(f, op, env),
            OpKind::If { .. } => return self.if_else(f, op, env),
            OpKind::Yield { .. } => unreachable!("handled by region"),
            OpKind::Print { message, args } => {
                self.print(message, args, env)?;
                return Ok(Vec::new());
            }
            OpKind::DmaStart { .. }
            | OpKind::DmaWait { .. }
            | OpKind::SemaphoreSignal { .. }
            | OpKind::SemaphoreWait { .. }
            | OpKind::SemaphoreRead { .. } => return self.dma(f, op, env),
            _ => {
                let body = std::ptr::eq(f, &self.kernel.body);
                let materialise = body && self.uses.materialised(op.results[0]);
                self.define(f, op, env, materialise)?
            }
        }])
    }

    /// A new value defined by an elementwise-style `op`: in a register if it is a scalar,
    /// else in the workspace if `materialise`, else lazy.
    fn define(
        &mut self,
        f: &'k Func,
        op: &'k Op,
        env: &Env<'ctx, 'k>,
        materialise: bool,
    ) -> Result<Val<'ctx, 'k>> {
        let ty = f.ty(op.results[0]);
        if ty.is_scalar() {
            return Ok(Val::Scalar(self.elem_of(f, env, op, &[])?));
        }
        if !materialise {
            return Ok(Val::Lazy(op));
        }
        if let Some(rows) = self.rows_shape(f, op.results[0]) {
            let ptr = self.alloc_buffer(ty.dtype, rows.iter().product())?;
            self.nest(&rows, &mut |e, idx| {
                let x = e.elem_of(f, env, op, idx)?;
                let at = e.linear(&rows, idx)?;
                e.buffer_store(ty.dtype, ptr, at, x)
            })?;
            return Ok(Val::Rows(ptr));
        }
        let ptr = self.alloc_buffer(ty.dtype, ty.num_elements())?;
        let shape = ty.shape.clone();
        self.nest(&shape, &mut |e, idx| {
            let x = e.elem_of(f, env, op, idx)?;
            let at = e.linear(&shape, idx)?;
            e.buffer_store(ty.dtype, ptr, at, x)
        })?;
        Ok(Val::Buffer(ptr))
    }

    /// Element `idx` of value `v`.
    pub(super) fn elem(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        v: ValueId,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        if self.rows_shape(f, v).is_some() {
            // The same at every lane: computed at lane 0, once before the lane loop when
            // `idx` is a nest's index.
            let mut at = idx.to_vec();
            *at.last_mut().expect("rank >= 1") = self.i64(0);
            let Some(pre) = self.lane_preheader(idx) else {
                return self.val_elem(f, env, f.ty(v), get(env, v), &at);
            };
            let here = self.block();
            self.b.position_before(&pre);
            let x = self.val_elem(f, env, f.ty(v), get(env, v), &at);
            self.b.position_at_end(here);
            return x;
        }
        self.val_elem(f, env, f.ty(v), get(env, v), idx)
    }

    /// Where code for element `idx` at lane 0 can go before the lane loop (the terminator of
    /// the loop's entering block): when `idx` is the current nest's index (its last index the
    /// innermost loop's induction variable, the others the enclosing loops' or constants).
    /// Not in debug mode, whose checks branch (the code must not add blocks).
    fn lane_preheader(&self, idx: &[IntValue<'ctx>]) -> Option<InstructionValue<'ctx>> {
        let l = self.lane_loop.as_ref()?;
        let (last, rest) = idx.split_last()?;
        let outside = |i: &IntValue<'ctx>| i.is_const() || l.outer.contains(i);
        if self.options.debug || *last != l.iv || !rest.iter().all(outside) {
            return None;
        }
        l.pre.get_terminator()
    }

    /// `v`'s shape with its last dimension 1, if `v` is a lane-uniform value of the kernel
    /// body (see `uniform`) with more than one lane.
    pub(super) fn rows_shape(&self, f: &'k Func, v: ValueId) -> Option<Vec<usize>> {
        let shape = &f.ty(v).shape;
        let body = std::ptr::eq(f, &self.kernel.body);
        if !body || shape.last().is_none_or(|&n| n <= 1) || !self.uniform.holds(v) {
            return None;
        }
        let mut rows = shape.clone();
        *rows.last_mut().expect("rank >= 1") = 1;
        Some(rows)
    }

    /// Element `idx` of `val`, a value of type `ty`.
    pub(super) fn val_elem(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        ty: &Type,
        val: Val<'ctx, 'k>,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        match val {
            Val::Scalar(x) => Ok(x),
            Val::Buffer(p) => {
                let at = self.linear(&ty.shape, idx)?;
                self.buffer_load(ty.dtype, p, at)
            }
            Val::Rows(p) => {
                let mut rows = ty.shape.clone();
                let mut at = idx.to_vec();
                if let (Some(n), Some(i)) = (rows.last_mut(), at.last_mut()) {
                    (*n, *i) = (1, self.i64(0));
                }
                let at = self.linear(&rows, &at)?;
                self.buffer_load(ty.dtype, p, at)
            }
            Val::Lazy(op) => self.elem_of(f, env, op, idx),
        }
    }

    /// Element `idx` of the (first) result of `op`, computed in registers.
    fn elem_of(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        op: &'k Op,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let ty = f.ty(op.results[0]);
        let dt = |v: &ValueId| f.ty(*v).dtype;
        Ok(match &op.kind {
            OpKind::Const { value } => self.constant(ty.dtype, ty.dtype.round_f64(value.as_f64())),
            OpKind::Dense { values } => self.dense_elem(ty, values, idx)?,
            OpKind::Load { .. } => self.load_elem(f, env, op, idx)?,
            OpKind::Unary { op: u, x } => {
                let x = self.elem(f, env, *x, idx)?;
                self.unary(*u, ty.dtype, x)?
            }
            OpKind::Binary { op: b, lhs, rhs } => {
                let (x, y) = (self.elem(f, env, *lhs, idx)?, self.elem(f, env, *rhs, idx)?);
                self.binary(*b, dt(lhs), x, y)?
            }
            OpKind::Compare { op: c, lhs, rhs } => {
                let (x, y) = (self.elem(f, env, *lhs, idx)?, self.elem(f, env, *rhs, idx)?);
                self.compare(*c, dt(lhs), x, y)?.into()
            }
            OpKind::Select {
                cond,
                on_true,
                on_false,
            } => {
                let c = self.elem(f, env, *cond, idx)?.into_int_value();
                let t = self.elem(f, env, *on_true, idx)?;
                let e = self.elem(f, env, *on_false, idx)?;
                self.b.build_select(c, t, e, "select")?
            }
            OpKind::Cast { x } => {
                let v = self.elem(f, env, *x, idx)?;
                self.cast(dt(x), ty.dtype, v)?
            }
            OpKind::Bitcast { x } => self.bitcast_elem(f, env, *x, ty.dtype, idx)?,
            OpKind::Roll {
                x,
                shift,
                axis,
                stride,
            } => self.roll_elem(f, env, *x, *shift, (*axis, *stride), idx)?,
            OpKind::Gather { x, indices, axis } => {
                self.gather_elem(f, env, *x, *indices, *axis, idx)?
            }
            OpKind::Broadcast { x } => {
                let xs = &f.ty(*x).shape;
                let lead = idx.len() - xs.len();
                let zero = self.i64(0);
                let at: Vec<_> = (0..xs.len())
                    .map(|d| if xs[d] == 1 { zero } else { idx[lead + d] })
                    .collect();
                self.elem(f, env, *x, &at)?
            }
            OpKind::Reshape { x } => {
                let at = self.reshape_index(&ty.shape, &f.ty(*x).shape, idx)?;
                self.elem(f, env, *x, &at)?
            }
            OpKind::Transpose { x, perm } => {
                let mut at = vec![self.i64(0); idx.len()];
                for (i, &p) in perm.iter().enumerate() {
                    at[p] = idx[i];
                }
                self.elem(f, env, *x, &at)?
            }
            OpKind::Iota { dim } => {
                let i = idx[*dim];
                if ty.dtype.is_float() {
                    let v = self
                        .b
                        .build_signed_int_to_float(i, self.ctx.f32_type(), "iota")?;
                    self.round(ty.dtype, v)?.into()
                } else {
                    let t = self.reg_type(ty.dtype).into_int_type();
                    self.b.build_int_truncate(i, t, "iota")?.into()
                }
            }
            other => {
                return Err(
                    format!("internal error: `{}` has no per-element form", other.name()).into(),
                );
            }
        })
    }

    /// The index into `from` of element `idx` of its reshape to `to`.
    fn reshape_index(
        &self,
        to: &[usize],
        from: &[usize],
        idx: &[IntValue<'ctx>],
    ) -> Result<Vec<IntValue<'ctx>>> {
        let squeeze = |s: &[usize]| s.iter().copied().filter(|&n| n != 1).collect::<Vec<_>>();
        let zero = self.i64(0);
        if squeeze(to) == squeeze(from) {
            // Only unit dims differ: the non-unit indices carry over in order.
            let mut kept = to
                .iter()
                .zip(idx)
                .filter(|(n, _)| **n != 1)
                .map(|(_, i)| *i);
            return Ok(from
                .iter()
                .map(|&n| {
                    if n == 1 {
                        zero
                    } else {
                        kept.next().expect("same sizes")
                    }
                })
                .collect());
        }
        let flat = self.linear(to, idx)?;
        let mut at = vec![zero; from.len()];
        let mut rest = flat;
        for d in (0..from.len()).rev() {
            let n = self.i64(from[d] as i64);
            at[d] = self.b.build_int_unsigned_rem(rest, n, "r")?;
            rest = self.b.build_int_unsigned_div(rest, n, "q")?;
        }
        Ok(at)
    }

    /// The row-major flat index of `idx` in a static `shape`.
    pub(super) fn linear(&self, shape: &[usize], idx: &[IntValue<'ctx>]) -> Result<IntValue<'ctx>> {
        let mut at = self.i64(0);
        let mut stride = 1i64;
        for d in (0..shape.len()).rev() {
            let term = self.b.build_int_nsw_mul(idx[d], self.i64(stride), "t")?;
            at = self.b.build_int_nsw_add(at, term, "at")?;
            stride *= shape[d] as i64;
        }
        Ok(at)
    }

    /// The workspace type of `dtype`: its register type, with bool as a byte.
    fn buffer_type(&self, dtype: DType) -> BasicTypeEnum<'ctx> {
        match dtype {
            DType::Bool => self.ctx.i8_type().into(),
            d => self.reg_type(d),
        }
    }

    pub(super) fn alloc_buffer(&mut self, dtype: DType, n: usize) -> Result<PointerValue<'ctx>> {
        let bytes = match dtype {
            DType::F32 | DType::BF16 | DType::F16 | DType::I32 => 4,
            DType::I16 => 2,
            DType::I8 | DType::Bool => 1,
        };
        self.alloc(n.checked_mul(bytes))
    }

    pub(super) fn buffer_load(
        &self,
        dtype: DType,
        p: PointerValue<'ctx>,
        at: IntValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let v = self.load_at(self.buffer_type(dtype), p, at)?;
        // Buffers hold registers as they are, except bools (bytes, as in memory).
        match dtype {
            DType::Bool => self.register_form(dtype, v),
            _ => Ok(v),
        }
    }

    pub(super) fn buffer_store(
        &self,
        dtype: DType,
        p: PointerValue<'ctx>,
        at: IntValue<'ctx>,
        x: BasicValueEnum<'ctx>,
    ) -> Result<()> {
        let x = match dtype {
            DType::Bool => self.memory_form(dtype, x)?,
            _ => x,
        };
        self.store_at(self.buffer_type(dtype), p, at, x)
    }

    /// A scalar slot in the entry block (promoted to a register by LLVM's mem2reg).
    pub(super) fn slot(&self, t: BasicTypeEnum<'ctx>) -> Result<PointerValue<'ctx>> {
        let entry = self.func.get_first_basic_block().expect("has entry");
        let b = self.ctx.create_builder();
        match entry.get_first_instruction() {
            Some(i) => b.position_before(&i),
            None => b.position_at_end(entry),
        }
        Ok(b.build_alloca(t, "slot")?)
    }
}
