//! `acc[w] += dot(x, y)` as one `dot` that starts from `acc[w]` and ends in it.
//!
//! Written as IR, the update is a `load` of `acc[w]`, a `dot`, their `add` and a `store` to
//! `acc[w]`: unfused, the `dot` fills a buffer, the `load` copies `acc[w]` (an operand the
//! kernel stores to is read as a snapshot), and the `store` adds them: three passes over the
//! block per update, in every grid step of a blocked matmul and every iteration of a loop
//! of small products (flash attention). Fused, the micro-kernel adds each tile's sum to
//! `acc[w]`'s values and stores it back; the `load`, `add` and `store` emit nothing. The sum
//! is `acc + (p₀ + p₁ + …)`, as written: `acc[w]` is read after the loop over k, so its
//! loads do not hold up the tile's first step.
//!
//! Fused only when nothing can tell: the four ops are in one region, each result has that
//! one use, `acc` is an f32 operand whose window has contiguous columns, and no op between
//! the first of them and the `store` reads or writes `acc`, writes any memory, or runs a
//! region; the window's dynamic starts are defined before the `dot`. Not in debug mode.
//!
//! An update followed by `out[v] = acc[w]` (a blocked matmul writes its output block from
//! the accumulator at every k step) also *copies*: the micro-kernel stores each finished
//! tile to `out[v]` too, while it is in registers, and that `load` and `store` emit nothing
//! (one pass less over the block per step). Only when `out` is another f32 operand whose
//! window has contiguous columns, the load's result has that one use, the ops between
//! them are as above for `acc` and `out`, no op of the region loads `out` (so the product
//! reads nothing the copy writes), and `out[v]`'s dynamic starts are defined before the
//! `dot`.
//!
//! An update whose ref was just zeroed by `if c: acc[w] = 0` (the `pl.when(k == 0)` that
//! starts a blocked matmul's accumulator) also *starts from zeros where `c` holds*: the
//! micro-kernel stores its sums there without adding `acc[w]`'s values, and the `if` emits
//! nothing (one pass less over the block per accumulation). Only when the `if`
//! is in the update's region, has no results and an empty `else`, its `then` holds nothing
//! but the unmasked store (no store to another ref: an `if` that starts two accumulators
//! runs as written), to `acc` through the update's own indexers, of a splat of +0.0
//! (a constant, maybe broadcast or reshaped there), and no op between the `if` and the
//! update reads or writes `acc`, writes any memory, or runs a region: so nothing can tell
//! the zeros were never stored, and the `dot` writes every element the store would have.

use super::dot::Mat;
use super::value::Env;
use super::{Emitter, Result};
use std::collections::HashMap;
use tpukit_dsl::{
    BinaryOp, DType, Func, Indexer, Literal, Op, OpKind, OperandId, Region, Start, ValueId, Window,
};

/// The ref an accumulating `dot` adds itself to, and the ref its result is then copied to.
#[derive(Copy, Clone)]
pub(super) struct Accumulate<'k> {
    pub operand: OperandId,
    pub index: &'k [Indexer],
    pub copy: Option<Target<'k>>,
    /// The condition of an `if` that zeroes the ref just before, which the `dot` does instead.
    pub zero_if: Option<ValueId>,
}

/// A ref a fused `dot` writes: an operand, through an index.
#[derive(Copy, Clone)]
pub(super) struct Target<'k> {
    pub operand: OperandId,
    pub index: &'k [Indexer],
}

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// Finds the fusable accumulations among `r`'s ops (not those of nested regions):
    /// records each in `accumulations` (by its `dot`) and its other ops in `fused`.
    pub(super) fn find_accumulations(&mut self, f: &'k Func, r: &'k Region) {
        for op in &r.ops {
            let key = op as *const Op;
            self.accumulations.remove(&key);
            self.fused.remove(&key);
        }
        if self.options.debug || !std::ptr::eq(f, &self.kernel.body) {
            return;
        }
        let def: HashMap<ValueId, usize> = r
            .ops
            .iter()
            .enumerate()
            .flat_map(|(i, op)| op.results.iter().map(move |v| (*v, i)))
            .collect();
        for (s, store) in r.ops.iter().enumerate() {
            if let Some((load, add, dot, mut acc)) = self.accumulation(f, r, &def, s, store) {
                if let Some((copy_load, copy_store, copy)) =
                    self.copy_after(f, r, &def, s, dot, acc)
                {
                    acc.copy = Some(copy);
                    for i in [copy_load, copy_store] {
                        self.fused.insert(&r.ops[i] as *const Op);
                    }
                }
                if let Some((at, cond)) = zeroed_before(r, load.min(dot), acc) {
                    acc.zero_if = Some(cond);
                    self.fused.insert(&r.ops[at] as *const Op);
                }
                self.accumulations.insert(&r.ops[dot] as *const Op, acc);
                for i in [load, add, s] {
                    self.fused.insert(&r.ops[i] as *const Op);
                }
            }
        }
    }

    /// The positions of the `load`, `add` and `dot` that `store` (at `s`) completes into a
    /// fusable accumulation, and its ref.
    fn accumulation(
        &self,
        f: &'k Func,
        r: &'k Region,
        def: &HashMap<ValueId, usize>,
        s: usize,
        store: &'k Op,
    ) -> Option<(usize, usize, usize, Accumulate<'k>)> {
        let OpKind::Store {
            operand,
            index,
            value,
            mask: None,
        } = &store.kind
        else {
            return None;
        };
        let ty = f.ty(*value);
        if self.kernel.operand(*operand).dtype != DType::F32
            || ty.dtype != DType::F32
            || ty.rank() != 2
            || !self.columns_contiguous(*operand, index)
        {
            return None;
        }
        let add = *def.get(value)?;
        let OpKind::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
        } = &r.ops[add].kind
        else {
            return None;
        };
        let once = |v: &ValueId| self.uses.count(*v) == 1;
        for (x, y) in [(lhs, rhs), (rhs, lhs)] {
            let (Some(&load), Some(&dot)) = (def.get(x), def.get(y)) else {
                continue;
            };
            let same_ref = matches!(&r.ops[load].kind,
                OpKind::Load { operand: o, index: i, mask: None, .. } if o == operand && i == index);
            let dot_ok = matches!(r.ops[dot].kind, OpKind::Dot { .. }) && f.ty(*y) == ty;
            if !(same_ref && dot_ok && once(x) && once(y) && once(value)) {
                continue;
            }
            let quiet = (load.min(dot)..s)
                .filter(|&i| i != load && i != dot && i != add)
                .all(|i| pure_of(&r.ops[i], *operand));
            if quiet && defined_before(index, def, dot) {
                let acc = Accumulate {
                    operand: *operand,
                    index,
                    copy: None,
                    zero_if: None,
                };
                return Some((load, add, dot, acc));
            }
        }
        None
    }

    /// The positions of a `load` of `acc` and a `store` of it to another ref that follow the
    /// accumulation's `store` (at `s`; its `dot` at `dot`) as a copy the `dot` can make (see
    /// the module doc), and that ref.
    fn copy_after(
        &self,
        f: &'k Func,
        r: &'k Region,
        def: &HashMap<ValueId, usize>,
        s: usize,
        dot: usize,
        acc: Accumulate<'k>,
    ) -> Option<(usize, usize, Target<'k>)> {
        let mut load = None;
        for (t, op) in r.ops.iter().enumerate().skip(s + 1) {
            match &op.kind {
                OpKind::Load {
                    operand,
                    index,
                    mask: None,
                    ..
                } if load.is_none() && *operand == acc.operand && *index == acc.index => {
                    load = Some(t);
                }
                OpKind::Store {
                    operand,
                    index,
                    value,
                    mask: None,
                } if load.is_some() && def.get(value) == load.as_ref() => {
                    let load = load?;
                    let out = *operand;
                    let ty = f.ty(*value);
                    let ok = out != acc.operand
                        && self.uses.count(*value) == 1
                        && self.kernel.operand(out).dtype == DType::F32
                        && ty.dtype == DType::F32
                        && ty.rank() == 2
                        && self.columns_contiguous(out, index)
                        && (s + 1..t).all(|i| i == load || pure_of(&r.ops[i], out))
                        && r.ops[..t].iter().all(
                            |op| !matches!(op.kind, OpKind::Load { operand, .. } if operand == out),
                        )
                        && defined_before(index, def, dot);
                    return ok.then_some((
                        load,
                        t,
                        Target {
                            operand: out,
                            index,
                        },
                    ));
                }
                _ if pure_of(op, acc.operand) => {}
                _ => return None,
            }
        }
        None
    }

    /// Whether an access of `id`'s ref through `index` is a matrix with contiguous columns:
    /// exactly two slices of consecutive elements, the last on the ref's last dimension,
    /// which is the array's last (not squeezed from a block).
    pub(super) fn columns_contiguous(&self, id: OperandId, index: &[Indexer]) -> bool {
        if index.iter().any(|ix| ix.stride() != 1) {
            return false;
        }
        let slices = index
            .iter()
            .filter(|ix| matches!(ix, Indexer::Slice { .. }))
            .count();
        let last_kept = match &self.kernel.operand(id).window {
            Window::Whole => true,
            Window::Blocked(spec) => spec.block.last().is_some_and(|b| b.kept()),
        };
        slices == 2 && last_kept && matches!(index.last(), Some(Indexer::Slice { .. }))
    }

    /// Where an access of `id`'s ref through `index` lies as an `m × n` matrix with
    /// contiguous columns: its last indexer is a slice of `n` along the ref's last dimension,
    /// which is the array's last (not squeezed from a block), and its other slices are the
    /// `m` rows and any number of length 1 (what a reshape that drops unit dimensions reads).
    /// The position in `index` of the rows' slice (`None` for a single row without one).
    pub(super) fn matrix_rows(
        &self,
        id: OperandId,
        index: &[Indexer],
        [m, n]: [usize; 2],
    ) -> Option<Option<usize>> {
        let last_kept = match &self.kernel.operand(id).window {
            Window::Whole => true,
            Window::Blocked(spec) => spec.block.last().is_some_and(|b| b.kept()),
        };
        let (Some(Indexer::Slice { size, .. }), true) = (index.last(), last_kept) else {
            return None;
        };
        if *size != n {
            return None;
        }
        let others: Vec<(usize, usize)> = index[..index.len() - 1]
            .iter()
            .enumerate()
            .filter_map(|(i, ix)| match ix {
                Indexer::Slice { size, .. } => Some((i, *size)),
                Indexer::Point(_) => None,
            })
            .collect();
        let long: Vec<&(usize, usize)> = others.iter().filter(|(_, s)| *s != 1).collect();
        match long[..] {
            [] if m == 1 => Some(others.last().map(|(i, _)| *i)),
            [&(i, s)] if s == m => Some(Some(i)),
            _ => None,
        }
    }

    /// The `m × n` matrix `index` accesses in `id`'s ref, if it lies there with contiguous
    /// columns (see [`Self::matrix_rows`]). The access must have been checked.
    pub(super) fn window_mat(
        &mut self,
        env: &Env<'ctx, 'k>,
        id: OperandId,
        index: &[Indexer],
        shape: [usize; 2],
    ) -> Result<Option<Mat<'ctx>>> {
        if self.options.debug {
            return Ok(None);
        }
        let Some(row) = self.matrix_rows(id, index, shape) else {
            return Ok(None);
        };
        let slices = index
            .iter()
            .filter(|ix| matches!(ix, Indexer::Slice { .. }))
            .count();
        let zeros = vec![self.i64(0); slices];
        let offset = self.address(env, id, index, &zeros)?;
        let st = &self.operands[id.0 as usize];
        // A single row's stride is never used.
        let (base, ld) = (st.base, row.map_or(self.i64(0), |r| st.ref_strides[r]));
        let t = self.mem_type(self.kernel.operand(id).dtype);
        let ptr = unsafe { self.b.build_in_bounds_gep(t, base, &[offset], "mat")? };
        Ok(Some(Mat { ptr, ld }))
    }

    /// A ref a fused `dot` writes (its accumulator or copy) as a matrix, its access checked as
    /// the `store` would.
    pub(super) fn accumulator(
        &mut self,
        env: &Env<'ctx, 'k>,
        acc: Target<'k>,
        shape: [usize; 2],
    ) -> Result<Mat<'ctx>> {
        self.check_access(env, acc.operand, acc.index)?;
        self.window_mat(env, acc.operand, acc.index, shape)?
            .ok_or_else(|| super::CodegenError::internal("fused accumulator is not a matrix"))
    }
}

/// Whether `index`'s dynamic starts are all defined (in the region whose definitions `def`
/// gives) before the op at `at`.
fn defined_before(index: &[Indexer], def: &HashMap<ValueId, usize>, at: usize) -> bool {
    index.iter().all(|ix| match ix {
        Indexer::Slice {
            start: Start::Dynamic(v),
            ..
        }
        | Indexer::Point(Start::Dynamic(v)) => def.get(v).is_none_or(|&i| i < at),
        _ => true,
    })
}

/// The position of an `if` before `first` in `r` that only zeroes `acc`'s ref through its
/// indexers, with nothing between it and `first` that could tell the zeros apart from
/// values stored later (see the module doc), and its condition.
fn zeroed_before(r: &Region, first: usize, acc: Accumulate<'_>) -> Option<(usize, ValueId)> {
    let at = (0..first)
        .rev()
        .find(|&i| !pure_of(&r.ops[i], acc.operand))?;
    let op = &r.ops[at];
    let OpKind::If {
        cond,
        then_region,
        else_region,
    } = &op.kind
    else {
        return None;
    };
    let empty = |r: &Region| {
        r.ops
            .iter()
            .all(|op| matches!(&op.kind, OpKind::Yield { values } if values.is_empty()))
    };
    let mut stores = then_region.ops.iter().filter_map(|op| match &op.kind {
        OpKind::Store {
            operand,
            index,
            value,
            mask: None,
        } if *operand == acc.operand && *index == acc.index => Some(*value),
        _ => None,
    });
    let (Some(value), None) = (stores.next(), stores.next()) else {
        return None;
    };
    // Every store in `then` must be this one: an `if` that zeroes other refs too (two
    // accumulators started together) must still run for them.
    let only_zeroes = then_region.ops.iter().all(|op| match &op.kind {
        OpKind::Store { operand, index, .. } => *operand == acc.operand && *index == acc.index,
        OpKind::Const { .. } | OpKind::Broadcast { .. } => true,
        OpKind::Reshape { .. } => true,
        OpKind::Yield { values } => values.is_empty(),
        _ => false,
    });
    let ok = op.results.is_empty()
        && empty(else_region)
        && only_zeroes
        && positive_zeros(then_region, value);
    ok.then_some((at, *cond))
}

/// Whether `v` is a splat of +0.0 made in `r`: a constant, maybe broadcast or reshaped.
fn positive_zeros(r: &Region, mut v: ValueId) -> bool {
    loop {
        let Some(op) = r.ops.iter().find(|op| op.results.contains(&v)) else {
            return false;
        };
        match &op.kind {
            OpKind::Broadcast { x } | OpKind::Reshape { x } => v = *x,
            OpKind::Const {
                value: Literal::Float(z),
            } => return z.to_bits() == 0,
            _ => return false,
        }
    }
}

/// Whether `op` neither touches operand `acc` nor writes memory nor runs a region.
fn pure_of(op: &Op, acc: OperandId) -> bool {
    match &op.kind {
        OpKind::Load { operand, .. } => *operand != acc,
        OpKind::Store { .. }
        | OpKind::DmaStart { .. }
        | OpKind::DmaWait { .. }
        | OpKind::SemaphoreSignal { .. }
        | OpKind::SemaphoreWait { .. }
        | OpKind::SemaphoreRead { .. } => false,
        k => k.regions().is_empty(),
    }
}
