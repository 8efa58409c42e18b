//! `dense` constants: the values in a private constant global of the dtype's register type,
//! read element by element at the row-major index.

use super::{Emitter, Result};
use inkwell::module::Linkage;
use inkwell::values::{BasicValueEnum, IntValue};
use tpukit_dsl::{Literal, Type};

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// Element `idx` of the constant of type `ty` holding `values`.
    pub(super) fn dense_elem(
        &mut self,
        ty: &Type,
        values: &[Literal],
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let d = ty.dtype;
        let elems: Vec<BasicValueEnum<'ctx>> = values
            .iter()
            .map(|v| self.constant(d, d.round_f64(v.as_f64())))
            .collect();
        let t = self.reg_type(d);
        let array = match t {
            inkwell::types::BasicTypeEnum::FloatType(f) => f.const_array(
                &elems
                    .iter()
                    .map(|e| e.into_float_value())
                    .collect::<Vec<_>>(),
            ),
            _ => t
                .into_int_type()
                .const_array(&elems.iter().map(|e| e.into_int_value()).collect::<Vec<_>>()),
        };
        let global = self.module.add_global(array.get_type(), None, "dense");
        global.set_initializer(&array);
        global.set_constant(true);
        global.set_linkage(Linkage::Private);
        let at = self.linear(&ty.shape, idx)?;
        self.load_at(t, global.as_pointer_value(), at)
    }
}
