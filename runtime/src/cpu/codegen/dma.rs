//! Copies and semaphores on the compiled backend (semantics: `tpukit_dsl::dma`).
//!
//! A copy runs when it starts: one loop nest reading its source and writing its destination
//! element by element (both through their refs, so windows and edge blocks behave as loads
//! and stores do). Semaphores are the i32 elements of their scratch operand, zero when a
//! worker starts: a copy adds its bytes, a wait checks the count and subtracts, failing with
//! [`code::SEMAPHORE`] where a TPU would wait forever. The checks of copies in flight are
//! the interpreter's (`Device::Interpret`), not compiled in.

use super::value::{Env, Val, get};
use super::{CodegenError, Emitter, Report, Result};
use crate::cpu::abi::code;
use inkwell::IntPredicate;
use inkwell::values::IntValue;
use tpukit_dsl::{DType, Func, Indexer, Op, OpKind, Place, SemaphoreKind, Space};

/// Elements of an access of `index`.
fn count(index: &[Indexer]) -> usize {
    index
        .iter()
        .map(|ix| match ix {
            Indexer::Slice { size, .. } => *size,
            Indexer::Point(_) => 1,
        })
        .product()
}

/// The shape of an access of `index`.
fn shape(index: &[Indexer]) -> Vec<usize> {
    index
        .iter()
        .filter_map(|ix| match ix {
            Indexer::Slice { size, .. } => Some(*size),
            Indexer::Point(_) => None,
        })
        .collect()
}

impl<'ctx, 'k> Emitter<'ctx, 'k> {
    /// Emits a copy or semaphore op; a `semaphore_read` gives its count.
    pub(super) fn dma(
        &mut self,
        _f: &'k Func,
        op: &'k Op,
        env: &Env<'ctx, 'k>,
    ) -> Result<Vec<Val<'ctx, 'k>>> {
        let bytes = |p: &Place, e: &Self| {
            let dtype = e.kernel.operand(p.operand).dtype;
            e.ctx
                .i32_type()
                .const_int((count(&p.index) * dtype.size_bytes()) as u64, false)
        };
        let amount = |v| match get(env, v) {
            Val::Scalar(s) => Ok(s.into_int_value()),
            _ => Err(CodegenError::internal("a semaphore amount is not a scalar")),
        };
        match &op.kind {
            OpKind::DmaStart { src, dst, sem } => {
                self.copy(env, src, dst)?;
                // A regular semaphore counts copies, a DMA semaphore bytes.
                let n = if self.kernel.operand(sem.operand).space
                    == Space::Semaphore(SemaphoreKind::Regular)
                {
                    self.ctx.i32_type().const_int(1, false)
                } else {
                    bytes(dst, self)
                };
                self.semaphore_add(env, sem, n)?;
            }
            OpKind::DmaWait { sem, dst, .. } => {
                let n = bytes(dst, self);
                self.semaphore_take(env, sem, n)?;
            }
            OpKind::SemaphoreSignal { sem, amount: a } => {
                self.semaphore_add(env, sem, amount(*a)?)?
            }
            OpKind::SemaphoreWait { sem, amount: a } => {
                self.semaphore_take(env, sem, amount(*a)?)?
            }
            OpKind::SemaphoreRead { sem } => {
                let (_, v) = self.semaphore(env, sem)?;
                return Ok(vec![Val::Scalar(v.into())]);
            }
            _ => unreachable!("dma on a copy or semaphore op"),
        }
        Ok(Vec::new())
    }

    /// Copies `src` into `dst`, element by element: each destination element the bitcast
    /// of the source's (itself, for one dtype; see `tpukit_dsl::dma::copies_between`).
    /// An end in an HBM array's tiles past its end reads 0 there and drops its writes: a
    /// copy whose windows lie inside their arrays (checked once) takes the unguarded loop.
    fn copy(&mut self, env: &Env<'ctx, 'k>, src: &'k Place, dst: &'k Place) -> Result<()> {
        self.check_copy_access(env, src.operand, &src.index)?;
        self.check_copy_access(env, dst.operand, &dst.index)?;
        let [src_tiled, dst_tiled] = [src, dst].map(|p| self.tiled(p));
        if !src_tiled && !dst_tiled {
            return self.copy_nest(env, src, dst, [false, false]);
        }
        let mut inside = self.ctx.bool_type().const_int(1, false);
        for (p, tiled) in [(src, src_tiled), (dst, dst_tiled)] {
            if tiled {
                let ok = self.window_inside(env, p.operand, &p.index)?;
                inside = self.b.build_and(inside, ok, "inside")?;
            }
        }
        self.when(inside, &mut |e| e.copy_nest(env, src, dst, [false, false]))?;
        let outside = self.b.build_not(inside, "outside")?;
        self.when(outside, &mut |e| {
            e.copy_nest(env, src, dst, [src_tiled, dst_tiled])
        })
    }

    /// The loop nest of [`Self::copy`], each end's elements checked against its array where
    /// `guard` says (reading 0 and dropping writes outside).
    fn copy_nest(
        &mut self,
        env: &Env<'ctx, 'k>,
        src: &'k Place,
        dst: &'k Place,
        [src_guard, dst_guard]: [bool; 2],
    ) -> Result<()> {
        let dtype = self.kernel.operand(dst.operand).dtype;
        let from = self.kernel.operand(src.operand).dtype;
        self.nest(&shape(&dst.index), &mut |e, idx| {
            let mut read = |e: &mut Self, at: &[IntValue<'ctx>]| {
                let offset = e.address(env, src.operand, &src.index, at)?;
                if !src_guard {
                    return e.read(src.operand, offset);
                }
                let ok = e.elem_inside(env, src.operand, &src.index, at)?;
                e.read_or_zero(src.operand, offset, ok)
            };
            let v = if from == dtype {
                read(e, idx)?
            } else {
                e.bitcast_of(from, dtype, idx, &mut read)?
            };
            let to = e.address(env, dst.operand, &dst.index, idx)?;
            if dst_guard {
                let ok = e.elem_inside(env, dst.operand, &dst.index, idx)?;
                e.when(ok, &mut |e| e.write(dst.operand, to, dtype, v))
            } else {
                e.write(dst.operand, to, dtype, v)
            }
        })
    }

    /// Whether a copy's window of `p` may reach into tiles past its array's end.
    fn tiled(&self, p: &Place) -> bool {
        let o = self.kernel.operand(p.operand);
        (0..o.shape.len()).any(|d| tpukit_dsl::dma::copy_tile(o, d).is_some())
    }

    /// The offset and current count of the semaphore `p`.
    fn semaphore(
        &mut self,
        env: &Env<'ctx, 'k>,
        p: &'k Place,
    ) -> Result<(IntValue<'ctx>, IntValue<'ctx>)> {
        self.check_access(env, p.operand, &p.index)?;
        let at = self.address(env, p.operand, &p.index, &[])?;
        let v = self.read(p.operand, at)?.into_int_value();
        Ok((at, v))
    }

    fn semaphore_add(
        &mut self,
        env: &Env<'ctx, 'k>,
        p: &'k Place,
        n: IntValue<'ctx>,
    ) -> Result<()> {
        let (at, v) = self.semaphore(env, p)?;
        let sum = self.b.build_int_add(v, n, "sem")?;
        self.write(p.operand, at, DType::I32, sum.into())
    }

    /// Subtracts `n` from the semaphore `p`, failing if it holds less.
    fn semaphore_take(
        &mut self,
        env: &Env<'ctx, 'k>,
        p: &'k Place,
        n: IntValue<'ctx>,
    ) -> Result<()> {
        let (at, v) = self.semaphore(env, p)?;
        let ok = self
            .b
            .build_int_compare(IntPredicate::SGE, v, n, "enough")?;
        let i64t = self.ctx.i64_type();
        let (held, want) = (
            self.b.build_int_s_extend(v, i64t, "held")?,
            self.b.build_int_s_extend(n, i64t, "want")?,
        );
        let site = self.site;
        self.check(ok, Report::new(code::SEMAPHORE, site, 0, held, want))?;
        let rest = self.b.build_int_sub(v, n, "sem")?;
        self.write(p.operand, at, DType::I32, rest.into())
    }
}
