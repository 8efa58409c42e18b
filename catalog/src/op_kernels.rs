//! One kernel per entry of the op table and dtype it accepts: what the rule-coverage tests run
//! on every device (against a reference of their own) and compile with libtpu for every TPU
//! topology. Driven by `UnaryOp::ALL` and its siblings, so a new line in the op table is a new
//! kernel here with no edit, and a backend that cannot run it turns a test red.
//!
//! Each kernel is elementwise over `[m, n]` arrays in `[BM, BN]` windows (both symbolic, so
//! the tests and the conformance suite choose extents the blocks do not divide):
//! - unary: `o = op(x)`;
//! - binary: `o = op(x, y)`;
//! - comparison: `o = where(op(x, y), x, y)` (the bool stays inside the kernel: a TPU array
//!   of bools is not a memref Mosaic accepts);
//! - reduction: `o = op(x, axis 1, keepdims)` over `[m, RN]` rows, whole rows per window.
//!
//! [`OpKernels`] presents them to tools as a [`KernelSource`] called `ops`, each under the id
//! `op.NAME` (`op.exp`, `op.reduce_max`). It is not shipped in bundles.

use crate::dsl::{
    ArraySpec, BinaryOp, CallSpec, CmpOp, DType, Dim, Extent, GridAxis, Kernel, KernelBuilder,
    ReduceOp, Result, Role, Typing, UnaryOp, grid,
};
use crate::{Instance, KernelSource, Listing, Shipped, bind};
use tpukit_dsl::{Fit, Ix};

/// Window rows: the sublane tile of the narrowest dtype (i8's 32).
pub const BM: usize = 32;
/// Window columns: one 128-lane vreg.
pub const BN: usize = 128;
/// Row length of the reductions' input (whole rows per window).
pub const RN: usize = 256;

/// One entry of the op table.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Case {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CmpOp),
    Reduce(ReduceOp),
}

impl Case {
    /// Every entry of the op table, family by family, in table order.
    pub fn all() -> Vec<Case> {
        let unary = UnaryOp::ALL.iter().map(|&o| Case::Unary(o));
        let binary = BinaryOp::ALL.iter().map(|&o| Case::Binary(o));
        let compare = CmpOp::ALL.iter().map(|&o| Case::Compare(o));
        let reduce = ReduceOp::ALL.iter().map(|&o| Case::Reduce(o));
        unary.chain(binary).chain(compare).chain(reduce).collect()
    }

    /// The op's IR name.
    pub fn name(self) -> &'static str {
        match self {
            Case::Unary(o) => o.name(),
            Case::Binary(o) => o.name(),
            Case::Compare(o) => o.name(),
            Case::Reduce(o) => o.name(),
        }
    }

    /// The id tools find the kernel by: `op.NAME`.
    pub fn id(self) -> String {
        format!("op.{}", self.name())
    }

    pub fn typing(self) -> Typing {
        match self {
            Case::Unary(o) => o.info().typing,
            Case::Binary(o) => o.info().typing,
            Case::Compare(o) => o.info().typing,
            Case::Reduce(o) => o.info().typing,
        }
    }

    /// The number of input arrays.
    pub fn arity(self) -> usize {
        match self {
            Case::Unary(_) | Case::Reduce(_) => 1,
            Case::Binary(_) | Case::Compare(_) => 2,
        }
    }

    /// The kernel of this op on `dtype` (which the op must accept).
    pub fn kernel(self, dtype: DType) -> Result<Kernel> {
        let spec = self.spec(dtype);
        let mut b = KernelBuilder::new(&format!("op_{}", self.name()), &spec)?;
        let inputs: Vec<_> = (0..self.arity())
            .map(|i| b.declare(Role::Input, &format!("x{i}")))
            .collect::<Result<_>>()?;
        let o = b.declare(Role::Output, "o")?;
        let all = [Ix::Full, Ix::Full];
        let x = b.load(inputs[0], &all)?;
        let y = match self.arity() {
            2 => Some(b.load(inputs[1], &all)?),
            _ => None,
        };
        let r = match (self, y) {
            (Case::Unary(u), _) => b.unary(u, x)?,
            (Case::Binary(op), Some(y)) => b.binary(op, x, y)?,
            (Case::Compare(c), Some(y)) => {
                let holds = b.compare(c, x, y)?;
                b.select(holds, x, y)?
            }
            (Case::Reduce(r), _) => b.reduce_keepdims(r, x, &[1])?,
            (Case::Binary(_) | Case::Compare(_), None) => unreachable!("arity 2"),
        };
        b.store(o, &all, r)?;
        b.finish()
    }

    fn spec(self, dtype: DType) -> CallSpec {
        match self {
            Case::Reduce(_) => {
                let rows = |n: usize| {
                    ArraySpec::new(dtype, [Dim::sym("m"), Dim::Static(n)])
                        .blocked([BM, n], [grid(0), 0.into()])
                };
                CallSpec {
                    grid: vec![GridAxis::parallel(Extent::cdiv("m", BM))],
                    inputs: vec![rows(RN)],
                    outputs: vec![rows(1)],
                    ..Default::default()
                }
            }
            _ => {
                let tiles = ArraySpec::new(dtype, ["m", "n"]).blocked([BM, BN], [grid(0), grid(1)]);
                CallSpec {
                    grid: vec![
                        GridAxis::parallel(Extent::cdiv("m", BM)),
                        GridAxis::parallel(Extent::cdiv("n", BN)),
                    ],
                    inputs: vec![tiles.clone(); self.arity()],
                    outputs: vec![tiles],
                    ..Default::default()
                }
            }
        }
    }
}

/// The op-table kernels as a [`KernelSource`]: entries `op.NAME` over an `m x n` problem.
pub struct OpKernels;

impl OpKernels {
    fn find(id: &str) -> Option<Case> {
        Case::all().into_iter().find(|c| c.id() == id)
    }

    fn ship(case: Case, dtype: DType, fit: Fit) -> Result<Shipped> {
        let kernel = case.kernel(dtype)?;
        Ok(Shipped {
            id: case.id(),
            instance: Instance {
                bindings: kernel.sample_bindings(fit),
                kernel,
            },
        })
    }
}

impl KernelSource for OpKernels {
    fn name(&self) -> &'static str {
        "ops"
    }

    fn entries(&self) -> Vec<Listing> {
        Case::all()
            .into_iter()
            .map(|c| Listing {
                name: c.id(),
                about: "one op of the op table, elementwise (reductions: along rows)",
                shape: &["m", "n"],
                dtypes: c.typing().dtypes(),
            })
            .collect()
    }

    fn instantiate(&self, name: &str, shape: &[usize], dtype: DType) -> Option<Result<Instance>> {
        let case = OpKernels::find(name)?;
        Some(case.kernel(dtype).map(|kernel| {
            let m = shape.first().copied().unwrap_or(1);
            let n = shape.get(1).copied().unwrap_or(1);
            let bindings = match case {
                Case::Reduce(_) => bind(&[("m", m)]),
                _ => bind(&[("m", m), ("n", n)]),
            };
            Instance { kernel, bindings }
        }))
    }

    fn kernels(&self, dtype: DType) -> Result<Vec<Shipped>> {
        Case::all()
            .into_iter()
            .filter(|c| c.typing().accepts(dtype))
            .map(|c| OpKernels::ship(c, dtype, Fit::Edge))
            .collect()
    }

    fn kernel(&self, id: &str, dtype: DType) -> Option<Result<Shipped>> {
        OpKernels::find(id).map(|c| OpKernels::ship(c, dtype, Fit::Edge))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every op of the table, on every dtype it accepts, builds a verified kernel; a dtype it
    /// does not accept is refused by the verifier, never built.
    #[test]
    fn every_op_builds_on_exactly_the_dtypes_it_accepts() {
        let cases = Case::all();
        let count = UnaryOp::ALL.len() + BinaryOp::ALL.len() + CmpOp::ALL.len();
        assert_eq!(cases.len(), count + ReduceOp::ALL.len());
        for case in cases {
            for dtype in DType::ALL {
                let built = case.kernel(dtype);
                let accepted = case.typing().accepts(dtype);
                assert_eq!(
                    built.is_ok(),
                    accepted,
                    "{} on {dtype}: {built:?}",
                    case.id()
                );
            }
            let again = OpKernels.kernel(&case.id(), DType::F32).unwrap();
            assert_eq!(again.is_ok(), case.typing().accepts(DType::F32));
        }
    }
}
