//! The Mosaic module: the kernel function and its transforms, verified by MLIR.

use crate::{Options, Shapes, kernel_func, transform};
use melior::{
    Context,
    ir::{
        Location, Module,
        operation::{OperationLike, OperationMutLike},
    },
};
use std::{cell::RefCell, rc::Rc};
use tpukit_dsl::{Error, ErrorKind, Kernel, Result};

/// Builds the Mosaic module of `kernel` (readable form: `vector.load`, `tpu.matmul`, …) and
/// runs MLIR's verifier on it, so malformed IR stops here with the verifier's message rather
/// than inside libtpu. `initial` lists the outputs that start as the caller's buffer
/// ([`crate::initial::outputs`]).
pub fn build<'c>(
    context: &'c Context,
    kernel: &Kernel,
    shapes: &Shapes,
    options: &Options,
    initial: &[usize],
) -> Result<Module<'c>> {
    let mut module = Module::new(Location::unknown(context));
    module.as_operation_mut().set_attribute(
        "stable_mosaic.version",
        melior::ir::Attribute::parse(context, &format!("{} : i64", options.serde_version))
            .expect("an i64 attribute"),
    );
    kernel_func::build(context, &module.body(), kernel, shapes, options, initial)?;
    transform::build_all(context, &module.body(), kernel, shapes, options, initial)?;
    verify(context, &module).map_err(|e| e.in_kernel(&kernel.name))?;
    Ok(module)
}

/// MLIR's verifier on `module`, its diagnostics collected into the error.
pub fn verify(context: &Context, module: &Module) -> Result<()> {
    let messages = Rc::new(RefCell::new(Vec::<String>::new()));
    let sink = Rc::clone(&messages);
    let handler = context.attach_diagnostic_handler(move |d| {
        sink.borrow_mut()
            .push(format!("{} (at {})", d, d.location()));
        true
    });
    let ok = module.as_operation().verify();
    context.detach_diagnostic_handler(handler);
    if ok {
        Ok(())
    } else {
        Err(Error::new(format!(
            "the Mosaic module does not verify: {}",
            messages.borrow().join("; ")
        ))
        .with_kind(ErrorKind::Internal))
    }
}
