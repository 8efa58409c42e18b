//! Specialisation of symbolic extents: Mosaic kernels have static shapes.
//!
//! A kernel's array extents may be symbols (`Dim::Sym`) and its grid may be `cdiv(sym, b)`.
//! JAX traces one kernel per concrete shape; the lowering does the same: the caller binds every
//! symbol ([`tpukit_dsl::Bindings`]), and the Mosaic module, the custom call and its tensor types
//! are specialised to those extents. One IR kernel serves every binding; each binding gets its
//! own Mosaic module.

use tpukit_dsl::{Bindings, BlockDim, Error, ErrorKind, Extent, Kernel, Operand, Result, Window};

/// The concrete extents of one kernel under one binding of its symbols.
#[derive(Clone, Debug, PartialEq)]
pub struct Shapes {
    /// Each operand's global shape, in operand order.
    pub operands: Vec<Vec<usize>>,
    /// The iteration count of each grid axis; `None` for a count read at run time
    /// ([`tpukit_dsl::Extent::Value`]: Mosaic's dynamic `iteration_bounds`).
    pub grid: Vec<Option<usize>>,
}

impl Shapes {
    /// Resolves every symbol of `kernel`; an unbound symbol is an error naming it.
    pub fn of(kernel: &Kernel, bindings: &Bindings) -> Result<Shapes> {
        let unbound = |what: String| {
            Error::new(format!(
                "{what} is symbolic and has no binding (bound: {:?})",
                bindings.keys().collect::<Vec<_>>()
            ))
            .with_kind(ErrorKind::Shape)
            .in_kernel(&kernel.name)
        };
        let operands = kernel
            .operands
            .iter()
            .map(|o| {
                o.shape
                    .iter()
                    .map(|d| {
                        d.resolve(bindings)
                            .ok_or_else(|| unbound(format!("`{}` ({d})", o.name)))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let grid = kernel
            .grid
            .iter()
            .enumerate()
            .map(|(i, a)| match a.extent {
                Extent::Value { .. } => Ok(None),
                _ => a
                    .extent
                    .resolve(bindings)
                    .map(Some)
                    .ok_or_else(|| unbound(format!("grid axis {i} ({})", a.extent))),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Shapes { operands, grid })
    }
}

/// The shape of an operand's buffer inside the kernel: the block (squeezed dims as 1, as
/// Pallas passes them) for a blocked operand, the whole array otherwise.
pub fn window_shape(operand: &Operand, global: &[usize]) -> Vec<usize> {
    match &operand.window {
        Window::Whole => global.to_vec(),
        Window::Blocked(b) => b.block.iter().map(|d| d.size()).collect(),
    }
}

/// Whether dimension `d` of a blocked operand has a partial last block (`extent % block != 0`):
/// the dimensions along which edge blocks overhang the array.
pub fn overhangs(block: BlockDim, extent: usize) -> bool {
    match block {
        BlockDim::Blocked(n) => !extent.is_multiple_of(n),
        // Not lowered (`lower` refuses element windows).
        BlockDim::Element(_) => true,
        BlockDim::Squeezed => false,
    }
}
