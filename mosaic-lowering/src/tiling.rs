//! Adapting windows to the TPU's memory tiling.
//!
//! Mosaic places a window with DMAs of whole (8, 128) tiles of the array's last two
//! dimensions, so a block whose second-to-last dimension is squeezed (one row, as in a row
//! gather) cannot be cut from a rank-2 array: libtpu rejects it with
//! `CompileTimeMosaicMisalignedBlockAndTiling`. The lowering therefore presents such an array
//! to the kernel with a unit dimension inserted before the last one, `(r, c)` → `(r, 1, c)`,
//! which the block covers whole; the custom call reshapes around it. The body does not change:
//! the new dimension is squeezed, so refs keep their shape.

use crate::Shapes;
use tpukit_dsl::{
    BlockDim, DType, Dim, Kernel, Literal, Op, OpKind, Result, Type, ValueId, Window,
};

/// `kernel` and `shapes` with every squeezed second-to-last block dimension lifted as above.
/// Operands that need nothing keep their shapes.
pub fn lift_squeezed_rows(kernel: &Kernel, shapes: &Shapes) -> Result<(Kernel, Shapes)> {
    let mut kernel = kernel.clone();
    let mut shapes = shapes.clone();
    for (i, operand) in kernel.operands.iter_mut().enumerate() {
        let Window::Blocked(spec) = &mut operand.window else {
            continue;
        };
        let rank = spec.block.len();
        if rank < 2 || spec.block[rank - 2] != BlockDim::Squeezed {
            continue;
        }
        let at = rank - 1;
        operand.shape.insert(at, Dim::Static(1));
        shapes.operands[i].insert(at, 1);
        spec.block.insert(at, BlockDim::Squeezed);
        // The index map yields block index 0 for the new dimension.
        let map = &mut spec.index_map;
        let zero = ValueId(map.types.len() as u32);
        map.types.push(Type::scalar(DType::I32));
        let ops = &mut map.body.ops;
        let Some(Op {
            kind: OpKind::Yield { values },
            ..
        }) = ops.last_mut()
        else {
            unreachable!("the verifier checks that index maps end in yield")
        };
        values.insert(at, zero);
        let last = ops.len() - 1;
        ops.insert(
            last,
            Op {
                results: vec![zero],
                kind: OpKind::Const {
                    value: Literal::Int(0),
                },
                loc: None,
            },
        );
    }
    Ok((kernel, shapes))
}
