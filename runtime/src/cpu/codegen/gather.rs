//! `gather` ops element by element: the index read from `indices`, checked against the
//! gathered axis; an index outside it reads 0 (see `OpKind::Gather`), the load itself at a
//! clamped position so that it stays in bounds.

use super::value::Env;
use super::{Emitter, Result};
use inkwell::IntPredicate;
use inkwell::values::{BasicValueEnum, IntValue};
use tpukit_dsl::{Func, ValueId};

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// Element `idx` of `x` gathered along `axis` at `indices`.
    pub(super) fn gather_elem(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        x: ValueId,
        indices: ValueId,
        axis: usize,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let dtype = f.ty(x).dtype;
        let n = f.ty(x).shape[axis] as i64;
        let j = self.elem(f, env, indices, idx)?.into_int_value();
        let j = self
            .b
            .build_int_s_extend(j, self.ctx.i64_type(), "gather.j")?;
        // Unsigned `j < n` also refuses negative indices.
        let inside = self
            .b
            .build_int_compare(IntPredicate::ULT, j, self.i64(n), "gather.in")?;
        let safe = self
            .b
            .build_select(inside, j, self.i64(0), "gather.at")?
            .into_int_value();
        let mut at = idx.to_vec();
        at[axis] = safe;
        let v = self.elem(f, env, x, &at)?;
        let zero = self.constant(dtype, 0.0);
        Ok(self.b.build_select(inside, v, zero, "gather")?)
    }
}
