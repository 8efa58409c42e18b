//! Building copies and semaphore ops (see [`crate::dma`] for their semantics).

use super::{Arg, Ix, KernelBuilder, Ref};
use crate::{DType, OpKind, Place, Result, Type, ValueId};

impl KernelBuilder {
    fn place(&mut self, op: &str, r: Ref, index: &[Ix]) -> Result<Place> {
        let (index, _) = self.indexers(op, r, index)?;
        Ok(Place {
            operand: r.0,
            index,
        })
    }

    /// Prints `message` with `$i` replaced by i32 scalar `args[i]` (`pl.debug_print`).
    pub fn print(&mut self, message: &str, args: &[ValueId]) -> Result<()> {
        self.push0(OpKind::Print {
            message: message.to_string(),
            args: args.to_vec(),
        })
    }

    fn push0(&mut self, kind: OpKind) -> Result<()> {
        self.check(&kind, &[])?;
        self.f.push(kind, vec![], self.loc.clone());
        Ok(())
    }

    /// Starts copying `src[src_index]` into `dst[dst_index]`, signalling the DMA semaphore
    /// `sem[sem_index]` (`pltpu.make_async_copy(src, dst, sem).start()`).
    pub fn dma_start(
        &mut self,
        (src, src_index): (Ref, &[Ix]),
        (dst, dst_index): (Ref, &[Ix]),
        (sem, sem_index): (Ref, &[Ix]),
    ) -> Result<()> {
        let src = self.place("dma_start", src, src_index)?;
        let dst = self.place("dma_start", dst, dst_index)?;
        let sem = self.place("dma_start", sem, sem_index)?;
        self.push0(OpKind::DmaStart { src, dst, sem })
    }

    /// Waits for a copy from `src[src_index]` into `dst[dst_index]` signalled on
    /// `sem[sem_index]` (`.wait()`).
    pub fn dma_wait(
        &mut self,
        (sem, sem_index): (Ref, &[Ix]),
        (src, src_index): (Ref, &[Ix]),
        (dst, dst_index): (Ref, &[Ix]),
    ) -> Result<()> {
        let sem = self.place("dma_wait", sem, sem_index)?;
        let src = self.place("dma_wait", src, src_index)?;
        let dst = self.place("dma_wait", dst, dst_index)?;
        self.push0(OpKind::DmaWait { sem, src, dst })
    }

    /// Adds `amount` to a regular semaphore (`pl.semaphore_signal`).
    pub fn semaphore_signal(
        &mut self,
        sem: Ref,
        index: &[Ix],
        amount: impl Into<Arg>,
    ) -> Result<()> {
        let sem = self.place("semaphore_signal", sem, index)?;
        let amount = self.index_value(amount, "a semaphore amount")?;
        self.push0(OpKind::SemaphoreSignal { sem, amount })
    }

    /// Takes `amount` from a regular semaphore (`pl.semaphore_wait`).
    pub fn semaphore_wait(&mut self, sem: Ref, index: &[Ix], amount: impl Into<Arg>) -> Result<()> {
        let sem = self.place("semaphore_wait", sem, index)?;
        let amount = self.index_value(amount, "a semaphore amount")?;
        self.push0(OpKind::SemaphoreWait { sem, amount })
    }

    /// A semaphore's count (`pl.semaphore_read`).
    pub fn semaphore_read(&mut self, sem: Ref, index: &[Ix]) -> Result<ValueId> {
        let sem = self.place("semaphore_read", sem, index)?;
        self.checked(OpKind::SemaphoreRead { sem }, Type::scalar(DType::I32))
    }
}
