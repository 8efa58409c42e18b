//! A kernel: grid, operands with their windows, and a body.

use crate::{DType, Dim, Extent, Func, Literal, OperandId, Space};

#[derive(Clone, Debug, PartialEq)]
/// A kernel: a named body run once per point of its grid over its operands (see the crate's
/// "Semantics"). Built by [`crate::KernelBuilder`] or parsed; [`crate::verify`] checks it.
pub struct Kernel {
    /// The kernel's name, shown in errors and printed IR.
    pub name: String,
    /// The grid, outermost axis first; empty means one step.
    pub grid: Vec<GridAxis>,
    /// In Mosaic's order: scalar prefetch, inputs, outputs, scratch.
    pub operands: Vec<Operand>,
    /// The body, run once per grid point. Its region has no arguments.
    pub body: Func,
}

impl Kernel {
    /// The operand `id` names. Panics if `id` is not one of this kernel's (ids come from the
    /// builder that made the kernel).
    pub fn operand(&self, id: OperandId) -> &Operand {
        &self.operands[id.0 as usize]
    }

    /// The operands of `role`, with their ids, in signature order.
    pub fn operands_with_role(&self, role: Role) -> impl Iterator<Item = (OperandId, &Operand)> {
        self.operands
            .iter()
            .enumerate()
            .filter(move |(_, o)| o.role == role)
            .map(|(i, o)| (OperandId(i as u32), o))
    }

    /// The operands that size the grid ([`Extent::Value`]), by index: the first ones.
    pub fn grid_values(&self) -> Vec<usize> {
        let mut ids: Vec<usize> = self
            .grid
            .iter()
            .filter_map(|a| match a.extent {
                Extent::Value { operand } => Some(operand),
                _ => None,
            })
            .collect();
        ids.sort();
        ids.dedup();
        ids
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
                Extent::Static(_) | Extent::Value { .. } => None,
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
    /// The Pallas name of the semantics (`"parallel"`, `"arbitrary"`).
    pub fn name(self) -> &'static str {
        match self {
            Semantics::Parallel => "parallel",
            Semantics::Arbitrary => "arbitrary",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
/// One axis of the grid: how many steps, and whether they may run in any order.
pub struct GridAxis {
    /// The number of steps: static, or a symbol's extent divided by a block, rounded up.
    pub extent: Extent,
    /// How the steps along this axis may be ordered.
    pub semantics: Semantics,
}

impl GridAxis {
    /// An axis whose steps are independent ([`Semantics::Parallel`]).
    pub fn parallel(extent: impl Into<Extent>) -> GridAxis {
        GridAxis {
            extent: extent.into(),
            semantics: Semantics::Parallel,
        }
    }

    /// An axis whose steps run in increasing order ([`Semantics::Arbitrary`]): a reduction.
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
    /// A whole (small, integer) array read by index maps and the body (SMEM on a TPU); the
    /// body may write the kernel's copy of it ([`crate::smem`]).
    Prefetch,
    /// An array the kernel reads through its window; never written.
    Input,
    /// An array the kernel writes through its window (it may read it back).
    Output,
    /// Kernel-private memory that persists across the grid steps one worker runs (VMEM
    /// scratch). Its contents are undefined until the kernel writes them.
    Scratch,
}

impl Role {
    /// The role's lower-case name, as printed (`"prefetch"`, `"input"`, ...).
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
/// One array in a kernel's signature: its role, dtype, global shape and window.
pub struct Operand {
    /// The operand's name, unique in its kernel (errors and printed IR use it).
    pub name: String,
    /// What the operand is to the kernel (its place in the signature).
    pub role: Role,
    /// The element type.
    pub dtype: DType,
    /// The global shape (for scratch: the buffer's shape, always static).
    pub shape: Vec<Dim>,
    /// Which part of the array the body sees at each grid step.
    pub window: Window,
    /// Where it lives: loads and stores reach [`Space::Local`] and [`Space::Smem`] operands
    /// only, DMA reaches the others (see [`crate::dma`]).
    pub space: Space,
    /// What an output holds before the body writes it (always [`Initial::Caller`] for other
    /// roles).
    pub initial: Initial,
}

/// What an output holds before the body first writes it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Initial {
    /// The caller's buffer: zeros for a new array, the initial contents when a caller passes
    /// them (aliased outputs). A load sees them, a masked store keeps them: on a TPU the
    /// lowering copies them in (`tpukit_mosaic`'s `initial`).
    #[default]
    Caller,
    /// Anything (printed `undefined`): a Pallas output that no input aliases, which a kernel
    /// reads only after writing it (an accumulator). The CPU devices start it as
    /// [`Initial::Caller`] would; a TPU starts it with whatever its VMEM held, as Pallas does,
    /// so the lowering copies nothing in.
    Undefined,
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
    /// A block placed by an index map at each step.
    Blocked(BlockSpec),
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
/// One dimension of a [`BlockSpec`]'s block.
pub enum BlockDim {
    /// A block of this many elements; the index map gives the block number.
    Blocked(usize),
    /// One element, dropped from the ref's shape (`None` / `pl.Squeezed()` in Pallas); the
    /// index map gives the element index.
    Squeezed,
    /// A window of this many elements at any element offset (`pl.Element` in Pallas): the
    /// index map gives the element where it starts. (Pallas's virtual padding is folded
    /// into the index map by whoever builds the spec: the start is in the array's own
    /// coordinates.)
    Element(usize),
}

impl BlockDim {
    /// Elements of the array this dimension covers per step (1 for a squeezed one).
    pub fn size(self) -> usize {
        match self {
            BlockDim::Blocked(n) | BlockDim::Element(n) => n,
            BlockDim::Squeezed => 1,
        }
    }

    /// Elements per unit of the index map's result: the window along this dim starts at
    /// element `index * unit()`.
    pub fn unit(self) -> usize {
        match self {
            BlockDim::Blocked(n) => n,
            BlockDim::Squeezed | BlockDim::Element(_) => 1,
        }
    }

    /// Whether the dim stays in the ref's shape (all but squeezed ones).
    pub fn kept(self) -> bool {
        self != BlockDim::Squeezed
    }
}

/// A window that moves with the grid (`pl.BlockSpec`).
///
/// At grid point `g`, dimension `d` of the window starts at element
/// `index_map(g)[d] * block[d].unit()`. The start must lie inside the array (an index map that
/// points past the end is an error), but the window may overhang the end: such an edge block
/// reads `fill` where it lies outside the array; an output's writes there are never written
/// to the array, but kept while the window stays at its block over consecutive steps (see
/// the crate's "Semantics").
#[derive(Clone, Debug, PartialEq)]
pub struct BlockSpec {
    /// One entry per array dimension (the block's rank is the array's).
    pub block: Vec<BlockDim>,
    /// Arguments: one i32 per grid axis. Yields one i32 block index per array dimension. May
    /// load from prefetch operands the body does not write, and read the grid's extents
    /// (`num_programs`).
    pub index_map: Func,
    /// What loads read outside the array (converted to the operand's dtype).
    pub fill: Literal,
}

impl BlockSpec {
    /// The shape the body's ref has: the block's sizes without the squeezed dimensions.
    pub fn ref_shape(&self) -> Vec<usize> {
        self.block
            .iter()
            .filter(|b| b.kept())
            .map(|b| b.size())
            .collect()
    }
}
