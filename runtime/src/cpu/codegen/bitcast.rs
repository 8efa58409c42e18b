//! `bitcast` ops element by element: a register's bits as an integer of the dtype's width
//! (through its memory form), packed or unpacked along the second-minor dimension when the
//! widths differ (see `OpKind::Bitcast`).

use super::value::Env;
use super::{Emitter, Result};
use inkwell::types::IntType;
use inkwell::values::{BasicValueEnum, IntValue};
use tpukit_dsl::{DType, Func, ValueId};

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// Element `idx` of `x` (of `from`'s dtype) bitcast to `to`.
    pub(super) fn bitcast_elem(
        &mut self,
        f: &'k Func,
        env: &Env<'ctx, 'k>,
        x: ValueId,
        to: DType,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let from = f.ty(x).dtype;
        self.bitcast_of(from, to, idx, &mut |e, at| e.elem(f, env, x, at))
    }

    /// Element `idx` of the bitcast to `to` of the elements of `from` that `read` gives at
    /// an index (a value's, or a copy's source window's).
    pub(super) fn bitcast_of(
        &mut self,
        from: DType,
        to: DType,
        idx: &[IntValue<'ctx>],
        read: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<BasicValueEnum<'ctx>>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let (fw, tw) = (from.bit_width(), to.bit_width());
        let wide = self.int_of_width(fw.max(tw));
        let bits = if fw == tw {
            let v = read(self, idx)?;
            self.bits(from, v)?
        } else {
            let row = idx.len() - 2;
            let mut at = idx.to_vec();
            if fw < tw {
                let p = (tw / fw) as i64;
                let base = self.b.build_int_mul(idx[row], self.i64(p), "row")?;
                let mut acc = wide.const_zero();
                for k in 0..p {
                    at[row] = self.b.build_int_add(base, self.i64(k), "row.k")?;
                    let v = read(self, &at)?;
                    let part = self.bits(from, v)?;
                    let part = self.b.build_int_z_extend(part, wide, "part")?;
                    let shift = wide.const_int(k as u64 * fw as u64, false);
                    let part = self.b.build_left_shift(part, shift, "part.at")?;
                    acc = self.b.build_or(acc, part, "packed")?;
                }
                acc
            } else {
                let p = self.i64((fw / tw) as i64);
                at[row] = self.b.build_int_unsigned_div(idx[row], p, "row")?;
                let k = self.b.build_int_unsigned_rem(idx[row], p, "k")?;
                let v = read(self, &at)?;
                let whole = self.bits(from, v)?;
                let k = self.b.build_int_truncate_or_bit_cast(k, wide, "k")?;
                let shift = self
                    .b
                    .build_int_mul(k, wide.const_int(tw as u64, false), "shift")?;
                let part = self.b.build_right_shift(whole, shift, false, "part")?;
                let narrow = self.int_of_width(tw);
                self.b.build_int_truncate(part, narrow, "part")?
            }
        };
        self.bits_as(to, bits)
    }

    /// The integer type of `bits` bits (8, 16 or 32: the widths of the IR's dtypes).
    fn int_of_width(&self, bits: usize) -> IntType<'ctx> {
        match bits {
            8 => self.ctx.i8_type(),
            16 => self.ctx.i16_type(),
            _ => self.ctx.i32_type(),
        }
    }

    /// The bits of `v`, a register of `dtype` (not bool), as an integer of its width.
    fn bits(&self, dtype: DType, v: BasicValueEnum<'ctx>) -> Result<IntValue<'ctx>> {
        let m = self.memory_form(dtype, v)?;
        let t = self.int_of_width(dtype.bit_width());
        Ok(self.b.build_bit_cast(m, t, "bits")?.into_int_value())
    }

    /// The register of `dtype` (not bool) whose bits are `bits` (an integer of its width).
    fn bits_as(&self, dtype: DType, bits: IntValue<'ctx>) -> Result<BasicValueEnum<'ctx>> {
        let m = self
            .b
            .build_bit_cast(bits, self.mem_type(dtype), "from.bits")?;
        self.register_form(dtype, m)
    }
}
