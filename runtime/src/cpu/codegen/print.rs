//! `print` ops: a call of the runtime's [`print`](crate::print::print) helper with the
//! message (a constant of the module) and the arguments sign-extended into an i64 array.

use super::value::{Env, Val, get};
use super::{CodegenError, Emitter, Result};
use crate::cpu::abi::helper;
use inkwell::AddressSpace;
use tpukit_dsl::ValueId;

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// Emits the call printing `message` with `args` (i32 scalars) in place of `$i`.
    pub(super) fn print(
        &mut self,
        message: &str,
        args: &[ValueId],
        env: &Env<'ctx, 'k>,
    ) -> Result<()> {
        let i64t = self.ctx.i64_type();
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        let text = self.ctx.const_string(message.as_bytes(), false);
        let global = self
            .module
            .add_global(text.get_type(), None, "print_message");
        global.set_initializer(&text);
        global.set_constant(true);
        global.set_linkage(inkwell::module::Linkage::Private);
        let values = self.slot(i64t.array_type(args.len().max(1) as u32).into())?;
        for (i, &a) in args.iter().enumerate() {
            let Val::Scalar(v) = get(env, a) else {
                return Err(CodegenError::internal("a printed value is not a scalar"));
            };
            let wide = self.b.build_int_s_extend(v.into_int_value(), i64t, "arg")?;
            let p = unsafe {
                self.b
                    .build_in_bounds_gep(i64t, values, &[self.i64(i as i64)], "a")?
            };
            self.b.build_store(p, wide)?;
        }
        let f = unsafe {
            self.b
                .build_in_bounds_gep(ptr, self.helpers, &[self.i64(helper::PRINT as i64)], "h")?
        };
        let f = self.b.build_load(ptr, f, "print")?.into_pointer_value();
        let fn_type = self
            .ctx
            .void_type()
            .fn_type(&[ptr.into(), i64t.into(), ptr.into(), i64t.into()], false);
        self.b.build_indirect_call(
            fn_type,
            f,
            &[
                global.as_pointer_value().into(),
                self.i64(message.len() as i64).into(),
                values.into(),
                self.i64(args.len() as i64).into(),
            ],
            "",
        )?;
        Ok(())
    }
}
