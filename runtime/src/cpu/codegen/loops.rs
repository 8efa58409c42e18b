//! Counted loops and loop nests, in the shape LLVM's loop passes like best: a guarded
//! do-while with an i64 induction variable in a phi.

use super::{Emitter, Result};
use inkwell::IntPredicate;
use inkwell::values::IntValue;

impl<'ctx> Emitter<'ctx, '_> {
    /// Emits `for iv in lo..hi { body(iv) }`.
    pub fn counted(
        &mut self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        body: &mut dyn FnMut(&mut Self, IntValue<'ctx>) -> Result<()>,
    ) -> Result<()> {
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
        self.b.build_conditional_branch(more, header, exit)?;
        self.b.position_at_end(exit);
        Ok(())
    }

    /// Emits a row-major loop nest over a static `shape`, calling `body` with the multi-index.
    pub fn nest(
        &mut self,
        shape: &[usize],
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<()> {
        let mut idx = Vec::with_capacity(shape.len());
        self.nest_from(shape, &mut idx, body)
    }

    fn nest_from(
        &mut self,
        shape: &[usize],
        idx: &mut Vec<IntValue<'ctx>>,
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<()> {
        if idx.len() == shape.len() {
            return body(self, idx);
        }
        let (lo, hi) = (self.i64(0), self.i64(shape[idx.len()] as i64));
        self.counted(lo, hi, &mut |e, iv| {
            idx.push(iv);
            let r = e.nest_from(shape, idx, body);
            idx.pop();
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
