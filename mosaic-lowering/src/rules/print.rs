//! `print`: Mosaic's `tpu.log` (what Pallas lowers `pl.debug_print` to), its tag the message
//! with `$i` placeholders, `formatted` when there are values to put in.

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
};
use tpukit_dsl::{Op, OpKind, Result};

pub fn print<'c>(lw: &mut FuncLowering<'c, '_>, em: &Emitter<'c>, op: &Op) -> Result<Vec<Val<'c>>> {
    let OpKind::Print { message, args } = &op.kind else {
        unreachable!()
    };
    let operands: Vec<Val<'c>> = args.iter().map(|&a| lw.value(a)).collect();
    em.op(
        "tpu.log",
        &operands,
        &[],
        &[
            ("tag", em.attr(&crate::custom_call::quote(message))?),
            ("formatted", em.attr(&(!args.is_empty()).to_string())?),
        ],
    )?;
    Ok(Vec::new())
}
