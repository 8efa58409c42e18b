//! `roll` ops element by element: element `i` reads `x` at `(i - s) mod n` along the rolled
//! axis, `s` the shift (plus `i[e] · k` for a stride `(k, e)`; see `OpKind::Roll`), the
//! modulo Euclidean for any i32 shift.

use super::value::Env;
use super::{Emitter, Result};
use inkwell::values::{BasicValueEnum, IntValue};
use tpukit_dsl::{Func, ValueId};

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// Element `idx` of `x` rolled by `shift` along `axis` (with its `stride`).
    pub(super) fn roll_elem(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        x: ValueId,
        shift: ValueId,
        (axis, stride): (usize, Option<(i64, usize)>),
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let n = self.i64(f.ty(x).shape[axis].max(1) as i64);
        let s = self.elem(f, env, shift, &[])?.into_int_value();
        let s = self
            .b
            .build_int_s_extend(s, self.ctx.i64_type(), "roll.shift")?;
        // `shift % n` keeps the shift's sign, so `i + n - shift % n` lies in `0..3n`; a
        // stride adds `(i[e] · k) % n` (both non-negative, below 2^62) to what is taken off.
        let mut r = self.b.build_int_signed_rem(s, n, "roll.rem")?;
        let mut j = idx[axis];
        if let Some((k, e)) = stride {
            let step = self.b.build_int_mul(idx[e], self.i64(k), "roll.step")?;
            let step = self.b.build_int_unsigned_rem(step, n, "roll.steprem")?;
            r = self.b.build_int_add(r, step, "roll.total")?;
            j = self.b.build_int_add(j, n, "roll.up")?;
        }
        let back = self.b.build_int_sub(n, r, "roll.back")?;
        let j = self.b.build_int_add(j, back, "roll.sum")?;
        let j = self.b.build_int_unsigned_rem(j, n, "roll.at")?;
        let mut at = idx.to_vec();
        at[axis] = j;
        self.elem(f, env, x, &at)
    }
}
