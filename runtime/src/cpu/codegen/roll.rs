//! `roll` ops element by element: element `i` reads `x` at `(i - shift) mod n` along the
//! rolled axis (see `OpKind::Roll`), the modulo Euclidean for any i32 shift.

use super::value::Env;
use super::{Emitter, Result};
use inkwell::values::{BasicValueEnum, IntValue};
use tpukit_dsl::{Func, ValueId};

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// Element `idx` of `x` rolled by `shift` along `axis`.
    pub(super) fn roll_elem(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        x: ValueId,
        shift: ValueId,
        axis: usize,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let n = self.i64(f.ty(x).shape[axis].max(1) as i64);
        let s = self.elem(f, env, shift, &[])?.into_int_value();
        let s = self
            .b
            .build_int_s_extend(s, self.ctx.i64_type(), "roll.shift")?;
        // `shift % n` keeps the shift's sign, so `i + n - shift % n` lies in `0..3n`.
        let r = self.b.build_int_signed_rem(s, n, "roll.rem")?;
        let back = self.b.build_int_sub(n, r, "roll.back")?;
        let j = self.b.build_int_add(idx[axis], back, "roll.sum")?;
        let j = self.b.build_int_unsigned_rem(j, n, "roll.at")?;
        let mut at = idx.to_vec();
        at[axis] = j;
        self.elem(f, env, x, &at)
    }
}
