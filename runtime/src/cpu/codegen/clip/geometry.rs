//! Where a clipped kernel's operands lie relative to its *geometry* operand, the window whose
//! extents cut the step's loops (see the module docs of `clip`).

use crate::coverage::term::{Term, eval};
use tpukit_dsl::{
    BlockDim, BlockSpec, Dim, Kernel, Operand, OperandId, Role, Semantics, Space, ValueId, Window,
};

/// Program ids known where an op runs: `(axis, index)` pairs, from the `if program_id(a) ==
/// c` branches around it.
pub(super) type Path = Vec<(usize, i64)>;

/// The geometry operand of a kernel and its window.
pub(super) struct Geometry<'k> {
    kernel: &'k Kernel,
    /// The operand: the local input or output window with the most elements (the first of
    /// those).
    pub operand: usize,
    /// Its window's shape (kept dimensions).
    pub window: Vec<usize>,
    /// The array dimension each window dimension is.
    axes: Vec<usize>,
    /// Its block index along each window dimension: a grid index or a constant.
    index: Vec<Term>,
}

impl<'k> Geometry<'k> {
    /// The geometry of `kernel`, if it has one: a local input or output window whose index
    /// map yields a grid index or a constant along every kept dimension.
    pub fn of(kernel: &'k Kernel) -> Option<Geometry<'k>> {
        let (operand, spec) = kernel
            .operands
            .iter()
            .enumerate()
            .filter_map(|(i, o)| match (&o.window, o.role, o.space) {
                (Window::Blocked(s), Role::Input | Role::Output, Space::Local) => Some((i, s)),
                _ => None,
            })
            .rev()
            .max_by_key(|(_, s)| s.ref_shape().iter().product::<usize>())?;
        let axes: Vec<usize> = (0..spec.block.len())
            .filter(|&d| spec.block[d].kept())
            .collect();
        let all = block_indices(kernel, spec, &[])?;
        let index: Vec<Term> = axes.iter().map(|&d| all[d]).collect();
        if index.contains(&Term::Other) {
            return None;
        }
        Some(Geometry {
            kernel,
            operand,
            window: spec.ref_shape(),
            axes,
            index,
        })
    }

    fn operand(&self) -> (&'k Operand, &'k BlockSpec) {
        let o = &self.kernel.operands[self.operand];
        let Window::Blocked(spec) = &o.window else {
            unreachable!("the geometry operand is a window");
        };
        (o, spec)
    }

    /// The window dimension that dimension `axis` of `operand`'s array runs along, if it is
    /// one of the geometry's dimensions (the same extent, kept in its window).
    pub fn window_dim(&self, operand: OperandId, axis: usize) -> Option<usize> {
        let (g, _) = self.operand();
        let o = self.kernel.operand(operand);
        let d = self.axes.iter().position(|&a| a == axis)?;
        (o.shape.len() == g.shape.len() && o.shape[axis] == g.shape[axis]).then_some(d)
    }

    /// The window dimension whose first element is `program_id(axis) · block`, if any (a
    /// blocked dimension whose block index is that grid index; an element-offset dimension
    /// starts at the index itself).
    pub fn started_by(&self, axis: usize, block: i64) -> Option<usize> {
        let (_, spec) = self.operand();
        (0..self.window.len()).find(|&d| {
            self.index[d] == Term::Axis(axis)
                && matches!(spec.block[self.axes[d]], BlockDim::Blocked(b) if b as i64 == block)
        })
    }

    /// Whether a window dimension's extent is the same at every step whose state a scratch
    /// buffer can carry: its block index is a constant or a `parallel` grid index (steps of
    /// other indices along a parallel axis share no state).
    fn steady(&self, d: usize) -> bool {
        match self.index[d] {
            Term::Int(_) => true,
            Term::Axis(a) => self.kernel.grid[a].semantics == Semantics::Parallel,
            Term::Other => false,
        }
    }

    /// Whether every operand fits the clipping, given the `accesses` (every load and store,
    /// with the program ids known where it runs): a window lies where the geometry's does
    /// along each dimension it does not broadcast, wherever it is accessed; a whole input
    /// holds one element; a scratch buffer spans only steady window dimensions.
    pub fn admits(&self, accesses: &[(OperandId, Path)]) -> bool {
        self.kernel
            .operands
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != self.operand)
            .all(|(i, o)| {
                let mut paths = accesses
                    .iter()
                    .filter(|(id, _)| id.0 as usize == i)
                    .map(|(_, p)| p);
                match (o.role, o.space, &o.window) {
                    (Role::Input | Role::Output, Space::Local, Window::Blocked(s)) => {
                        paths.all(|p| self.follows(o, s, p))
                    }
                    (Role::Input, Space::Local, Window::Whole) => {
                        o.shape.iter().all(|d| *d == Dim::Static(1))
                    }
                    (Role::Scratch, Space::Local, Window::Whole) => self.spans_steadily(o),
                    _ => false,
                }
            })
    }

    /// Whether window `s` of `o` lies where the geometry's does at the steps of `path`.
    ///
    /// Window dimensions pair in order (the body indexes every ref by them), so the `k`-th
    /// kept dimension of `o` must have the extent, block and block index of the geometry's
    /// `k`-th, whichever array dimensions they are (the output of `[a, b, c, d] → [a, c, b,
    /// d]` keeps its second dimension where the input keeps its third); or broadcast
    /// (extent 1, block 1). A squeezed dimension must be one of the geometry's squeezed
    /// dimensions (the same extent and block index, so the element is inside the array
    /// exactly when the geometry's is), or of extent 1.
    fn follows(&self, o: &Operand, s: &BlockSpec, path: &Path) -> bool {
        let (g, gs) = self.operand();
        let (Some(at), Some(gat)) = (
            block_indices(self.kernel, s, path),
            block_indices(self.kernel, gs, path),
        ) else {
            return false;
        };
        let same = |d: usize, e: usize| {
            o.shape[d] == g.shape[e]
                && s.block[d] == gs.block[e]
                && at[d] != Term::Other
                && at[d] == gat[e]
        };
        let kept: Vec<usize> = (0..s.block.len()).filter(|&d| s.block[d].kept()).collect();
        let broadcast = |d: usize| o.shape[d] == Dim::Static(1) && s.block[d].size() == 1;
        kept.len() == self.axes.len()
            && kept
                .iter()
                .zip(&self.axes)
                .all(|(&d, &e)| broadcast(d) || same(d, e))
            && (0..s.block.len()).filter(|&d| !s.block[d].kept()).all(|d| {
                o.shape[d] == Dim::Static(1)
                    || (0..gs.block.len()).any(|e| !gs.block[e].kept() && same(d, e))
            })
    }

    /// Whether scratch `o` has the window's rank and spans only steady dimensions (extent 1
    /// along the others).
    fn spans_steadily(&self, o: &Operand) -> bool {
        o.shape.len() == self.window.len()
            && o.shape.iter().enumerate().all(|(d, n)| match n {
                Dim::Static(1) => true,
                Dim::Static(n) => *n == self.window[d] && self.steady(d),
                Dim::Sym(_) => false,
            })
    }
}

/// Per array dimension, the block index `spec`'s map yields with the program ids of `path`.
fn block_indices(kernel: &Kernel, spec: &BlockSpec, path: &[(usize, i64)]) -> Option<Vec<Term>> {
    let map = &spec.index_map.body;
    let yielded: &[ValueId] = match &map.ops.last()?.kind {
        tpukit_dsl::OpKind::Yield { values } => values,
        _ => return None,
    };
    Some(
        yielded
            .iter()
            .map(|&v| eval(map, &kernel.grid, v, path))
            .collect(),
    )
}
