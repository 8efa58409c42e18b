//! Extents to run or lower a kernel at when no problem shape is given (tools and tests:
//! `tpukit lower ID`, bundles' TPU modules, tests that sweep every kernel).

use crate::{Bindings, BlockDim, Dim, Extent, Kernel, Window};
use std::collections::BTreeMap;

/// How sample extents meet the blocks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fit {
    /// Every symbol two whole blocks of everything it is cut into.
    Divisible,
    /// Two and a half blocks plus one element: the last window of every blocked dimension
    /// overhangs the array (edge blocks).
    Edge,
}

impl Kernel {
    /// A binding of every symbol: with `L` the least common multiple of the blocks the
    /// symbol is cut into (windows and grid extents; 1 if none), `2L` for
    /// [`Fit::Divisible`] and `2L + L/2 + 1` for [`Fit::Edge`]. Symbols no block cuts all
    /// get the same extent, so an array of row numbers prefetched for one of them is in
    /// range of another.
    pub fn sample_bindings(&self, fit: Fit) -> Bindings {
        let mut blocks: BTreeMap<String, usize> =
            self.symbols().into_iter().map(|s| (s, 1)).collect();
        let mut cut = |sym: &str, block: usize| {
            let l = blocks.get_mut(sym).expect("a symbol of the kernel");
            *l = lcm(*l, block.max(1));
        };
        for o in &self.operands {
            if let Window::Blocked(spec) = &o.window {
                for (d, b) in o.shape.iter().zip(&spec.block) {
                    if let (Dim::Sym(s), BlockDim::Blocked(n)) = (d, b) {
                        cut(s, *n);
                    }
                }
            }
        }
        for axis in &self.grid {
            if let Extent::CeilDiv { sym, block } = &axis.extent {
                cut(sym, *block);
            }
        }
        blocks
            .into_iter()
            .map(|(s, l)| {
                let n = match fit {
                    Fit::Divisible => 2 * l,
                    Fit::Edge => 2 * l + l / 2 + 1,
                };
                (s, n)
            })
            .collect()
    }
}

fn lcm(a: usize, b: usize) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    a / gcd(a, b) * b
}
