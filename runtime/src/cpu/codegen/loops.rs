//! Counted loops and loop nests, in the shape LLVM's loop passes like best: a guarded
//! do-while with an i64 induction variable in a phi.

use super::{Emitter, Result};
use inkwell::IntPredicate;
use inkwell::basic_block::BasicBlock;
use inkwell::values::{InstructionValue, IntValue};

/// The innermost loop of a [`Emitter::nest`] being emitted: what code computing a value that
/// is the same at every iteration (a lane-uniform value, see `uniform`) needs to be emitted
/// once before the loop instead.
#[derive(Clone)]
pub(crate) struct LaneLoop<'ctx> {
    /// The block the loop is entered from; it dominates the loop and ends in the loop's
    /// guard.
    pub pre: BasicBlock<'ctx>,
    /// The indices of the dimensions around the loop (defined before `pre` ends).
    pub outer: Vec<IntValue<'ctx>>,
    /// The loop's induction variable (the index along the last dimension).
    pub iv: IntValue<'ctx>,
}

impl<'ctx> Emitter<'ctx, '_> {
    /// Emits `for iv in lo..hi { body(iv) }`.
    pub fn counted(
        &mut self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        body: &mut dyn FnMut(&mut Self, IntValue<'ctx>) -> Result<()>,
    ) -> Result<()> {
        self.counted_latch(lo, hi, body).map(|_| ())
    }

    /// [`Emitter::counted`], returning the loop's back edge (the branch loop metadata goes
    /// on).
    pub fn counted_latch(
        &mut self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        body: &mut dyn FnMut(&mut Self, IntValue<'ctx>) -> Result<()>,
    ) -> Result<InstructionValue<'ctx>> {
        let i64t = self.ctx.i64_type();
        let pre = self.block();
        let header = self.ctx.append_basic_block(self.func, "loop");
        let exit = self.ctx.append_basic_block(self.func, "loop.exit");
        let enter = self
            .b
            .build_int_compare(IntPredicate::SLT, lo, hi, "loop.enter")?;
        self.b.build_conditional_branch(enter, header, exit)?;
        self.b.position_at_end(header);
        let iv = self.b.build_phi(i64t, "iv")?;
        iv.add_incoming(&[(&lo, pre)]);
        let ivv = iv.as_basic_value().into_int_value();
        body(self, ivv)?;
        let next = self
            .b
            .build_int_nsw_add(ivv, i64t.const_int(1, false), "iv.next")?;
        let latch = self.block();
        iv.add_incoming(&[(&next, latch)]);
        let more = self
            .b
            .build_int_compare(IntPredicate::SLT, next, hi, "loop.more")?;
        let back = self.b.build_conditional_branch(more, header, exit)?;
        self.b.position_at_end(exit);
        Ok(back)
    }

    /// Emits a row-major loop nest over a static `shape`, calling `body` with the multi-index
    /// (in a clipped kernel, a nest over its window's shape runs to the step's extents, see
    /// `clip`).
    pub fn nest(
        &mut self,
        shape: &[usize],
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<()> {
        let bounds: Vec<IntValue<'ctx>> = (0..shape.len()).map(|d| self.bound(shape, d)).collect();
        self.nest_within(&bounds, body)
    }

    /// [`Emitter::nest`] over `0..bounds[d]` along each dimension `d`.
    pub fn nest_within(
        &mut self,
        bounds: &[IntValue<'ctx>],
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<()> {
        let mut idx = Vec::with_capacity(bounds.len());
        self.nest_from(bounds, &mut idx, body)
    }

    /// Where a loop over dimension `d` of a value of `shape` ends: in a clipped kernel, at
    /// the step's extent along a dimension of the window's size of a value of its rank (see
    /// `clip`), else at `shape[d]`.
    pub fn bound(&self, shape: &[usize], d: usize) -> IntValue<'ctx> {
        match &self.clip {
            Some(clip) if clip.window.len() == shape.len() && clip.window[d] == shape[d] => {
                self.clip_extents[d]
            }
            _ => self.i64(shape[d] as i64),
        }
    }

    /// Emits a loop nest over a static `shape` of rank ≥ 2 whose last two dimensions run in
    /// `tile`×`tile` tiles (row-major within and across tiles; each ends at its
    /// [`Emitter::bound`]), calling `body` with the multi-index: a transposed read then
    /// touches `tile` rows of its source per tile, which stay in L1, where a row-major nest
    /// would stride through a whole source column.
    pub fn tiled_nest(
        &mut self,
        shape: &[usize],
        tile: usize,
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<()> {
        let r = shape.len();
        let (rows, cols) = (shape[r - 2], shape[r - 1]);
        let outer: Vec<IntValue<'ctx>> = (0..r - 2).map(|d| self.bound(shape, d)).collect();
        let tiles = [rows.div_ceil(tile), cols.div_ceil(tile)].map(|n| self.i64(n as i64));
        self.nest_within(&outer, &mut |e, outer| {
            e.nest_within(&tiles, &mut |e, t| {
                let extent = |e: &Self, t: IntValue<'ctx>, d: usize| -> Result<_> {
                    let lo = e.b.build_int_mul(t, e.i64(tile as i64), "tile.lo")?;
                    let end = e.b.build_int_add(lo, e.i64(tile as i64), "tile.end")?;
                    let hi = e.min_i64(end, e.bound(shape, d))?;
                    Ok((lo, hi))
                };
                let (r0, r1) = extent(e, t[0], r - 2)?;
                let (c0, c1) = extent(e, t[1], r - 1)?;
                e.counted(r0, r1, &mut |e, i| {
                    e.counted(c0, c1, &mut |e, j| {
                        let mut idx = outer.to_vec();
                        idx.extend([i, j]);
                        body(e, &idx)
                    })
                })
            })
        })
    }

    /// `min(a, b)` of two i64 values.
    pub fn min_i64(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> Result<IntValue<'ctx>> {
        let lt = self.b.build_int_compare(IntPredicate::SLT, a, b, "lt")?;
        Ok(self.b.build_select(lt, a, b, "min")?.into_int_value())
    }

    fn nest_from(
        &mut self,
        bounds: &[IntValue<'ctx>],
        idx: &mut Vec<IntValue<'ctx>>,
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<()> {
        if idx.len() == bounds.len() {
            return body(self, idx);
        }
        let hi = bounds[idx.len()];
        let lo = self.i64(0);
        let innermost = idx.len() + 1 == bounds.len();
        let pre = self.block();
        self.counted(lo, hi, &mut |e, iv| {
            let outer = innermost.then(|| {
                let lanes = LaneLoop {
                    pre,
                    outer: idx.clone(),
                    iv,
                };
                e.lane_loop.replace(lanes)
            });
            idx.push(iv);
            let r = e.nest_from(bounds, idx, body);
            idx.pop();
            if let Some(outer) = outer {
                e.lane_loop = outer;
            }
            r
        })
    }

    /// Emits `if cond { then() }`.
    pub fn when(
        &mut self,
        cond: IntValue<'ctx>,
        then: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let yes = self.ctx.append_basic_block(self.func, "then");
        let done = self.ctx.append_basic_block(self.func, "endif");
        self.b.build_conditional_branch(cond, yes, done)?;
        self.b.position_at_end(yes);
        then(self)?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        Ok(())
    }
}
