//! A kernel: grid, operands with their windows, and a body.

use crate::{DType, Dim, Extent, Func, Literal, OperandId, Space};

#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub grid: Vec<GridAxis>,
    /// In Mosaic's order: scalar prefetch, inputs, outputs, scratch.
    pub operands: Vec<Operand>,
    /// The body, run once per grid point. Its region has no arguments.
    pub body: Func,
}

impl Kernel {
    pub fn operand(&self, id: OperandId) -> &Operand {
        &self.operands[id.0 as usize]
    }

    pub fn operands_with_role(&self, role: Role) -> impl Iterator<Item = (OperandId, &Operand)> {
        self.operands
            .iter()
            .enumerate()
            .filter(move |(_, o)| o.role == role)
            .map(|(i, o)| (OperandId(i as u32), o))
    }

    /// Every symbol that appears in the operands' shapes or the grid, sorted.
    pub fn symbols(&self) -> Vec<String> {
        let mut syms: Vec<String> = self
            .operands
            .iter()
            .flat_map(|o| o.shape.iter())
            .filter_map(|d| match d {
                Dim::Sym(s) => Some(s.clone()),
                Dim::Static(_) => None,
            })
            .chain(self.grid.iter().filter_map(|a| match &a.extent {
                Extent::CeilDiv { sym, .. } => Some(sym.clone()),
                Extent::Static(_) => None,
            }))
            .collect();
        syms.sort();
        syms.dedup();
        syms
    }
}

/// How the grid steps along one axis may be ordered (`pltpu.CompilerParams.dimension_semantics`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Semantics {
    /// Steps are independent: they may run in any order, concurrently.
    Parallel,
    /// Steps run in increasing order (a reduction over blocks, say).
    Arbitrary,
}

impl Semantics {
    pub fn name(self) -> &'static str {
        match self {
            Semantics::Parallel => "parallel",
            Semantics::Arbitrary => "arbitrary",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GridAxis {
    pub extent: Extent,
    pub semantics: Semantics,
}

impl GridAxis {
    pub fn parallel(extent: impl Into<Extent>) -> GridAxis {
        GridAxis {
            extent: extent.into(),
            semantics: Semantics::Parallel,
        }
    }

    pub fn arbitrary(extent: impl Into<Extent>) -> GridAxis {
        GridAxis {
            extent: extent.into(),
            semantics: Semantics::Arbitrary,
        }
    }
}

/// What an operand is to the kernel, which fixes where it sits in the signature.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// A whole (small, integer) array read by index maps and the body (SMEM on a TPU).
    Prefetch,
    Input,
    Output,
    /// Kernel-private memory that persists across the grid steps one worker runs (VMEM
    /// scratch). Its contents are undefined until the kernel writes them.
    Scratch,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Prefetch => "prefetch",
            Role::Input => "input",
            Role::Output => "output",
            Role::Scratch => "scratch",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    pub name: String,
    pub role: Role,
    pub dtype: DType,
    /// The global shape (for scratch: the buffer's shape, always static).
    pub shape: Vec<Dim>,
    pub window: Window,
    /// Where it lives: loads and stores reach [`Space::Local`] operands only, DMA reaches
    /// the others (see [`crate::dma`]).
    pub space: Space,
}

impl Operand {
    /// The shape the body sees through the operand's ref: the block shape without squeezed
    /// dims for a blocked operand, the whole array otherwise.
    pub fn ref_shape(&self) -> Vec<Dim> {
        match &self.window {
            Window::Whole => self.shape.clone(),
            Window::Blocked(b) => b.ref_shape().into_iter().map(Dim::Static).collect(),
        }
    }
}

/// Which part of an operand the body sees at one grid step.
#[derive(Clone, Debug, PartialEq)]
pub enum Window {
    /// The whole array, at every step.
    Whole,
    Blocked(BlockSpec),
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BlockDim {
    /// A block of this many elements; the index map gives the block number.
    Blocked(usize),
    /// One element, dropped from the ref's shape (`None` / `pl.Squeezed()` in Pallas); the
    /// index map gives the element index.
    Squeezed,
}

impl BlockDim {
    pub fn size(self) -> usize {
        match self {
            BlockDim::Blocked(n) => n,
            BlockDim::Squeezed => 1,
        }
    }
}

/// A window that moves with the grid (`pl.BlockSpec`).
///
/// At grid point `g`, dimension `d` of the window starts at element
/// `index_map(g)[d] * block[d].size()`. The start must lie inside the array (an index map that
/// points past the end is an error), but the window may overhang the end: such an edge block
/// reads `fill` where it lies outside the array and drops the writes there.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockSpec {
    pub block: Vec<BlockDim>,
    /// Arguments: one i32 per grid axis. Yields one i32 block index per array dimension. May
    /// load from prefetch operands.
    pub index_map: Func,
    /// What loads read outside the array (converted to the operand's dtype).
    pub fill: Literal,
}

impl BlockSpec {
    pub fn ref_shape(&self) -> Vec<usize> {
        self.block
            .iter()
            .filter_map(|b| match b {
                BlockDim::Blocked(n) => Some(*n),
                BlockDim::Squeezed => None,
            })
            .collect()
    }
}
