//! Whether a kernel body computes the same inside its arrays when every loop over a window
//! stops at the step's extents (see the module docs of `clip`), and where it touches which
//! operand.
//!
//! An abstract interpretation over the body: per value, which window dimension each of its
//! dimensions runs along, and per window dimension the value of its elements *past the
//! extent* there, where that is one known constant on a staged step (computed from the fill
//! values). Elementwise ops map the elements past the extent to elements past it, so their
//! constants fold (by the interpreter's semantics, `interpret::fold`); a load of an input
//! window starts them at its fill value; `iota + program_id · block < array_dim`, the usual
//! mask, is false past the extent. A reduction along a window dimension is exact clipped
//! when its input's elements past the extent are the reduction's identity (a masked
//! deviation `where(valid, x − mean, 0)` squared, an input filled with 0 summed, with −∞
//! maximised): the staged step adds identities the clipped one leaves out.

use super::geometry::{Geometry, Path};
use crate::coverage;
use crate::interpret::fold;
use std::collections::HashMap;
use tpukit_dsl::{
    BinaryOp, CmpOp, DType, Dim, Func, Indexer, Kernel, OpKind, OperandId, ReduceOp, Region, Role,
    Type, ValueId, Window,
};

/// What the analysis knows of a value.
#[derive(Clone, Debug, PartialEq)]
struct Fact {
    /// The window dimension each of the value's dimensions runs along (None: extent 1);
    /// empty for a scalar.
    dims: Vec<Option<usize>>,
    /// Per window dimension, the value of every element past the step's extent along it,
    /// where that is a known constant (the bits of an f64, so that NaN equals itself).
    beyond: Vec<Option<u64>>,
    /// What the value is as an index expression.
    sym: Sym,
}

/// Values the mask pattern is made of, and constants.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Sym {
    None,
    /// The same constant at every element.
    Const(f64),
    /// `program_id(axis)`.
    ProgramId(usize),
    /// `program_id(axis) == index`.
    Is(usize, i64),
    /// The array index of the window's first element along a window dimension.
    Start(usize),
    /// Each element's index in the window along a window dimension (`iota`).
    Iota(usize),
    /// Each element's array index along a window dimension (`iota + start`).
    Global(usize),
    /// The array's extent along a window dimension (`array_dim`).
    Extent(usize),
}

/// Every load and store of `kernel`'s body with the program ids known where it runs, if the
/// body clips exactly on `geometry`'s window (see the module docs).
pub(super) fn accesses(kernel: &Kernel, geometry: &Geometry) -> Option<Vec<(OperandId, Path)>> {
    let mut a = Analysis {
        kernel,
        geometry,
        facts: HashMap::new(),
        stored: HashMap::new(),
        accesses: Vec::new(),
    };
    let body = &kernel.body;
    let yielded = a.region(body, &body.body, &Path::new())?;
    yielded.is_empty().then_some(a.accesses)
}

struct Analysis<'k> {
    kernel: &'k Kernel,
    geometry: &'k Geometry<'k>,
    facts: HashMap<ValueId, Fact>,
    /// Per operand stored whole earlier in the region being analysed (and not since an `if`
    /// there), the stored value's elements past the extent: what a load then reads.
    stored: HashMap<OperandId, Vec<Option<u64>>>,
    accesses: Vec<(OperandId, Path)>,
}

impl Analysis<'_> {
    fn fact(&self, v: ValueId) -> Option<&Fact> {
        self.facts.get(&v)
    }

    /// The window dimensions of a value of `ty` that has the window's rank (each dimension
    /// 1 or the window's), or is a scalar.
    fn window_dims(&self, ty: &Type) -> Option<Vec<Option<usize>>> {
        let window = &self.geometry.window;
        if ty.is_scalar() {
            return Some(Vec::new());
        }
        (ty.shape.len() == window.len()).then_some(())?;
        ty.shape
            .iter()
            .zip(window)
            .enumerate()
            .map(|(d, (&n, &w))| match n {
                _ if n == w => Some(Some(d)),
                1 => Some(None),
                _ => None,
            })
            .collect()
    }

    /// A fact for a value of `ty` laid out as the window, with `beyond` and `sym`.
    fn shaped(&self, ty: &Type, beyond: Vec<Option<u64>>, sym: Sym) -> Option<Fact> {
        Some(Fact {
            dims: self.window_dims(ty)?,
            beyond,
            sym,
        })
    }

    fn unknown(&self) -> Vec<Option<u64>> {
        vec![None; self.geometry.window.len()]
    }

    /// Analyses `r`'s ops; the facts of the values it yields.
    fn region(&mut self, f: &Func, r: &Region, path: &Path) -> Option<Vec<Fact>> {
        let outer = std::mem::take(&mut self.stored);
        let yielded = self.ops(f, r, path);
        self.stored = outer;
        yielded
    }

    fn ops(&mut self, f: &Func, r: &Region, path: &Path) -> Option<Vec<Fact>> {
        for op in &r.ops {
            if let OpKind::Yield { values } = &op.kind {
                return values.iter().map(|v| self.fact(*v).cloned()).collect();
            }
            let facts = self.op(f, op, path)?;
            if !op.kind.regions().is_empty() {
                // The branches may have stored anything.
                self.stored.clear();
            }
            (facts.len() == op.results.len()).then_some(())?;
            for (v, fact) in op.results.iter().zip(facts) {
                self.facts.insert(*v, fact);
            }
        }
        None
    }

    fn op(&mut self, f: &Func, op: &tpukit_dsl::Op, path: &Path) -> Option<Vec<Fact>> {
        let ty = |i: usize| f.ty(op.results[i]);
        let known = |c: f64| vec![Some(c.to_bits()); self.geometry.window.len()];
        let fact = match &op.kind {
            OpKind::Const { value } => {
                let c = value.as_f64();
                self.shaped(ty(0), known(c), Sym::Const(c))?
            }
            OpKind::ProgramId { axis } => {
                self.shaped(ty(0), self.unknown(), Sym::ProgramId(*axis))?
            }
            OpKind::NumPrograms { .. } => self.shaped(ty(0), self.unknown(), Sym::None)?,
            OpKind::ArrayDim { operand, axis } => {
                let sym = match self.geometry.window_dim(*operand, *axis) {
                    Some(d) => Sym::Extent(d),
                    None => Sym::None,
                };
                self.shaped(ty(0), self.unknown(), sym)?
            }
            OpKind::Iota { dim } => {
                let dims = self.window_dims(ty(0))?;
                let sym = match dims.get(*dim) {
                    Some(Some(d)) => Sym::Iota(*d),
                    _ => Sym::None,
                };
                self.shaped(ty(0), self.unknown(), sym)?
            }
            OpKind::Unary { op: u, x } => {
                let dtype = f.ty(*x).dtype;
                self.elementwise(ty(0), &[*x], |a| fold::unary(*u, dtype, a[0]), Sym::None)?
            }
            OpKind::Cast { x } => {
                let (from, to) = (f.ty(*x).dtype, ty(0).dtype);
                self.elementwise(ty(0), &[*x], |a| fold::cast(from, to, a[0]), Sym::None)?
            }
            OpKind::Binary { op: b, lhs, rhs } => {
                let dtype = f.ty(*lhs).dtype;
                let sym = self.binary_sym(*b, dtype, *lhs, *rhs);
                self.elementwise(
                    ty(0),
                    &[*lhs, *rhs],
                    |a| fold::binary(*b, dtype, a[0], a[1]),
                    sym,
                )?
            }
            OpKind::Compare { op: c, lhs, rhs } => {
                let dtype = f.ty(*lhs).dtype;
                let (l, r) = (self.fact(*lhs)?.sym, self.fact(*rhs)?.sym);
                let sym = match (c, l, r) {
                    (CmpOp::Eq, Sym::ProgramId(a), Sym::Const(i))
                    | (CmpOp::Eq, Sym::Const(i), Sym::ProgramId(a)) => Sym::Is(a, i as i64),
                    _ => Sym::None,
                };
                let mut fact = self.elementwise(
                    ty(0),
                    &[*lhs, *rhs],
                    |a| fold::compare(*c, dtype, a[0], a[1]),
                    sym,
                )?;
                if let Some((d, holds)) = mask(*c, l, r) {
                    fact.beyond[d] = Some((holds as u8 as f64).to_bits());
                }
                fact
            }
            OpKind::Select {
                cond,
                on_true,
                on_false,
            } => {
                let (c, t, e) = (
                    self.fact(*cond)?,
                    self.fact(*on_true)?,
                    self.fact(*on_false)?,
                );
                let beyond = (0..self.geometry.window.len())
                    .map(|d| match c.beyond[d] {
                        Some(c) if f64::from_bits(c) != 0.0 => t.beyond[d],
                        Some(_) => e.beyond[d],
                        None => t.beyond[d].filter(|_| t.beyond[d] == e.beyond[d]),
                    })
                    .collect();
                let dims = self.dims_of(ty(0), &[t, e])?;
                Fact {
                    dims,
                    beyond,
                    sym: Sym::None,
                }
            }
            OpKind::Broadcast { x } => self.broadcast(f, *x, ty(0))?,
            OpKind::Reshape { x } => self.reshape(f, *x, ty(0))?,
            OpKind::Reduce { op: r, x, axes } => self.reduce(*r, *x, axes, ty(0).dtype)?,
            OpKind::Load {
                operand,
                index,
                mask: None,
                other: None,
            } => {
                self.access(*operand, index, path)?;
                let o = self.kernel.operand(*operand);
                let beyond = match (self.stored.get(operand), &o.role, &o.window) {
                    (Some(stored), _, _) => stored.clone(),
                    (None, Role::Input, Window::Blocked(s)) => {
                        let dims = self.window_dims(ty(0))?;
                        let fill = Some(s.fill.as_f64().to_bits());
                        let mut beyond = self.unknown();
                        for d in dims.into_iter().flatten() {
                            beyond[d] = fill;
                        }
                        beyond
                    }
                    _ => self.unknown(),
                };
                self.shaped(ty(0), beyond, Sym::None)?
            }
            OpKind::Store {
                operand,
                index,
                value,
                mask: None,
            } => {
                self.access(*operand, index, path)?;
                let beyond = self.fact(*value)?.beyond.clone();
                self.stored.insert(*operand, beyond);
                return Some(Vec::new());
            }
            OpKind::If {
                cond,
                then_region,
                else_region,
            } => return self.branch(f, *cond, then_region, else_region, path),
            _ => return None,
        };
        Some(vec![fact])
    }

    /// The fact of an elementwise op of `args` with result type `ty`: past the extent, the
    /// fold of its arguments' constants where all are known.
    fn elementwise(
        &self,
        ty: &Type,
        args: &[ValueId],
        fold: impl Fn(&[f64]) -> f64,
        sym: Sym,
    ) -> Option<Fact> {
        let facts: Vec<&Fact> = args.iter().map(|v| self.fact(*v)).collect::<Option<_>>()?;
        let beyond = (0..self.geometry.window.len())
            .map(|d| {
                let values: Option<Vec<f64>> = facts
                    .iter()
                    .map(|f| f.beyond[d].map(f64::from_bits))
                    .collect();
                values.map(|v| fold(&v).to_bits())
            })
            .collect();
        let sym = match facts.iter().map(|f| f.sym).collect::<Vec<_>>().as_slice() {
            _ if sym != Sym::None => sym,
            [Sym::Const(a)] => Sym::Const(fold(&[*a])),
            [Sym::Const(a), Sym::Const(b)] => Sym::Const(fold(&[*a, *b])),
            _ => Sym::None,
        };
        Some(Fact {
            dims: self.dims_of(ty, &facts)?,
            beyond,
            sym,
        })
    }

    /// The layout of an elementwise op's result of type `ty` from `args` of its shape: the
    /// window's for a value of its rank, else (a reduction's result) the arguments' own,
    /// which must agree.
    fn dims_of(&self, ty: &Type, args: &[&Fact]) -> Option<Vec<Option<usize>>> {
        if let Some(dims) = self.window_dims(ty) {
            return Some(dims);
        }
        let dims = &args.first()?.dims;
        (dims.len() == ty.shape.len() && args.iter().all(|f| f.dims == *dims)).then(|| dims.clone())
    }

    /// The index expressions `program_id · block` and `iota + start` make.
    fn binary_sym(&self, op: BinaryOp, dtype: DType, lhs: ValueId, rhs: ValueId) -> Sym {
        let (Some(l), Some(r)) = (self.fact(lhs), self.fact(rhs)) else {
            return Sym::None;
        };
        if dtype.is_float() {
            return Sym::None;
        }
        match (op, l.sym, r.sym) {
            (BinaryOp::Mul, Sym::ProgramId(a), Sym::Const(b))
            | (BinaryOp::Mul, Sym::Const(b), Sym::ProgramId(a)) => self
                .geometry
                .started_by(a, b as i64)
                .map_or(Sym::None, Sym::Start),
            (BinaryOp::Add, Sym::Iota(d), Sym::Start(e))
            | (BinaryOp::Add, Sym::Start(e), Sym::Iota(d))
                if d == e =>
            {
                Sym::Global(d)
            }
            _ => Sym::None,
        }
    }

    fn broadcast(&self, f: &Func, x: ValueId, ty: &Type) -> Option<Fact> {
        let src = self.fact(x)?;
        let xs = &f.ty(x).shape;
        let dims = self.window_dims(ty)?;
        let lead = dims.len().checked_sub(xs.len())?;
        // A dimension of the source that is not 1 keeps its window dimension.
        for (i, &n) in xs.iter().enumerate() {
            (n == 1 || src.dims[i] == dims[lead + i]).then_some(())?;
        }
        let mut beyond = self.unknown();
        for (d, b) in beyond.iter_mut().enumerate() {
            let kept = (0..xs.len()).any(|i| xs[i] != 1 && src.dims[i] == Some(d));
            *b = match src.sym {
                Sym::Const(c) => Some(c.to_bits()),
                _ if kept => src.beyond[d],
                _ => None,
            };
        }
        let sym = match src.sym {
            Sym::Iota(d) | Sym::Global(d) if !src.dims.contains(&Some(d)) => Sym::None,
            s => s,
        };
        Some(Fact { dims, beyond, sym })
    }

    /// A reshape that keeps the order and window dimensions of the dimensions that are not
    /// 1 (`[16] ↔ [16, 1]`).
    fn reshape(&self, f: &Func, x: ValueId, ty: &Type) -> Option<Fact> {
        let src = self.fact(x)?;
        let xs = &f.ty(x).shape;
        let big = |shape: &[usize], dims: &[Option<usize>]| -> Vec<(usize, Option<usize>)> {
            shape
                .iter()
                .zip(dims)
                .filter(|(n, _)| **n != 1)
                .map(|(n, d)| (*n, *d))
                .collect()
        };
        let from = big(xs, &src.dims);
        let dims = match self.window_dims(ty) {
            Some(dims) => dims,
            None => {
                // A lower rank: the source's dimensions that are not 1, in order.
                let mut at = from.iter();
                ty.shape
                    .iter()
                    .map(|&n| match n {
                        1 => Some(None),
                        _ => at.next().filter(|(m, _)| *m == n).map(|(_, d)| *d),
                    })
                    .collect::<Option<_>>()?
            }
        };
        (big(&ty.shape, &dims) == from).then_some(())?;
        let beyond = (0..self.geometry.window.len())
            .map(|d| match src.sym {
                Sym::Const(c) => Some(c.to_bits()),
                _ if dims.contains(&Some(d)) => src.beyond[d],
                _ => None,
            })
            .collect();
        let sym = match src.sym {
            Sym::Const(c) => Sym::Const(c),
            _ => Sym::None,
        };
        Some(Fact { dims, beyond, sym })
    }

    /// A reduction: along each window dimension it reduces, the input's elements past the
    /// extent must be the reduction's identity.
    fn reduce(&self, op: ReduceOp, x: ValueId, axes: &[usize], dtype: DType) -> Option<Fact> {
        let src = self.fact(x)?;
        for &a in axes {
            if let Some(d) = *src.dims.get(a)? {
                let beyond = f64::from_bits(src.beyond[d]?);
                (beyond == fold::identity(op, dtype)).then_some(())?;
            }
        }
        let dims = (0..src.dims.len())
            .filter(|a| !axes.contains(a))
            .map(|a| src.dims[a])
            .collect();
        Some(Fact {
            dims,
            beyond: self.unknown(),
            sym: Sym::None,
        })
    }

    /// Records an unmasked access of the whole ref of `operand`.
    fn access(&mut self, operand: OperandId, index: &[Indexer], path: &Path) -> Option<()> {
        let shape: Option<Vec<usize>> = self
            .kernel
            .operand(operand)
            .ref_shape()
            .iter()
            .map(Dim::as_static)
            .collect();
        coverage::whole(index, &shape?).then_some(())?;
        self.accesses.push((operand, path.clone()));
        Some(())
    }

    /// An `if` on a scalar: its branches analysed (the `then` branch of
    /// `program_id(a) == c` knowing that), its results what both yield alike.
    fn branch(
        &mut self,
        f: &Func,
        cond: ValueId,
        then_region: &Region,
        else_region: &Region,
        path: &Path,
    ) -> Option<Vec<Fact>> {
        let c = self.fact(cond)?.clone();
        c.dims.is_empty().then_some(())?;
        let mut then_path = path.clone();
        if let Sym::Is(a, i) = c.sym {
            then_path.push((a, i));
        }
        let yes = self.region(f, then_region, &then_path)?;
        let no = self.region(f, else_region, path)?;
        yes.into_iter()
            .zip(no)
            .map(|(a, b)| {
                (a.dims == b.dims).then_some(())?;
                let beyond = a
                    .beyond
                    .iter()
                    .zip(&b.beyond)
                    .map(|(x, y)| x.filter(|_| x == y))
                    .collect();
                let sym = if a.sym == b.sym { a.sym } else { Sym::None };
                Some(Fact {
                    dims: a.dims,
                    beyond,
                    sym,
                })
            })
            .collect()
    }
}

/// The mask `global < extent` (or `extent > global`, true inside the array) or its negation
/// `global >= extent`: the window dimension it tests and what it is past the extent there.
fn mask(op: CmpOp, l: Sym, r: Sym) -> Option<(usize, bool)> {
    match (op, l, r) {
        (CmpOp::Lt, Sym::Global(d), Sym::Extent(e))
        | (CmpOp::Gt, Sym::Extent(e), Sym::Global(d))
            if d == e =>
        {
            Some((d, false))
        }
        (CmpOp::Ge, Sym::Global(d), Sym::Extent(e))
        | (CmpOp::Le, Sym::Extent(e), Sym::Global(d))
            if d == e =>
        {
            Some((d, true))
        }
        _ => None,
    }
}
