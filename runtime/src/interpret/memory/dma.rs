//! Copies and semaphores on the interpreter, with the checks of [`tpukit_dsl::dma`].
//!
//! A copy happens when it starts (a load of its source stored into its destination). Until
//! its wait, the copy is *in flight*: its elements are marked in a shadow of each operand
//! it touches, so a load of a destination element, a store to either end, or a second copy
//! writing the same element is an error naming both ops. A wait on a semaphore that holds
//! less than it takes is an error (on a TPU it never returns), and so is a copy still in
//! flight when the kernel ends (unless it signals a semaphore output, which hands it over).

use super::Memory;
use crate::interpret::tensor::Tensor;
use std::collections::HashMap;
use tpukit_dsl::{Indexer, OperandId, Place, SemaphoreKind, Type};

/// A copy between its start and its wait.
struct InFlight {
    /// The semaphore element it signalled: (operand, flat offset).
    sem: (OperandId, usize),
    bytes: i64,
    /// Where it was started, for error messages.
    started: String,
    src: (OperandId, Vec<usize>),
    dst: (OperandId, Vec<usize>),
}

/// Per operand and element: how many in-flight copies read it and write it.
#[derive(Default)]
struct Shadow {
    reads: HashMap<usize, u32>,
    writes: HashMap<usize, u32>,
}

/// The copies in flight, and their marks.
#[derive(Default)]
pub(in crate::interpret) struct Copies {
    flying: Vec<InFlight>,
    shadows: HashMap<OperandId, Shadow>,
}

/// A place with its dynamic starts evaluated.
pub(in crate::interpret) struct At<'a> {
    pub place: &'a Place,
    pub starts: Vec<i64>,
}

impl Copies {
    /// An error if an access of `offsets` in `id` touches an in-flight copy: any access of a
    /// destination, or a store (`write`) to a source.
    pub fn check_access(
        &self,
        id: OperandId,
        offsets: &[usize],
        write: bool,
    ) -> Result<(), String> {
        let Some(sh) = self.shadows.get(&id) else {
            return Ok(());
        };
        for off in offsets {
            let conflict = if sh.writes.contains_key(off) {
                Some("destination")
            } else if write && sh.reads.contains_key(off) {
                Some("source")
            } else {
                None
            };
            if let Some(end) = conflict {
                let copy = self.flying.iter().find(|c| {
                    let (oid, offs) = if end == "destination" { &c.dst } else { &c.src };
                    *oid == id && offs.contains(off)
                });
                let started = copy.map_or("?", |c| c.started.as_str());
                return Err(format!(
                    "{} an element of the {end} of a copy in flight (started at {started}) \
                     before its `dma_wait`",
                    if write { "writes" } else { "reads" }
                ));
            }
        }
        Ok(())
    }

    fn mark(&mut self, c: &InFlight, delta: i32) {
        for (ends, is_dst) in [(&c.src, false), (&c.dst, true)] {
            let sh = self.shadows.entry(ends.0).or_default();
            let map = if is_dst {
                &mut sh.writes
            } else {
                &mut sh.reads
            };
            for off in &ends.1 {
                let n = map.entry(*off).or_default();
                *n = n.saturating_add_signed(delta);
                if *n == 0 {
                    map.remove(off);
                }
            }
        }
    }

    /// An error naming the first copy still in flight, but for those signalling a
    /// semaphore for which `handed_over` holds (an output's: the caller waits for them).
    pub fn check_done(&self, handed_over: impl Fn(OperandId) -> bool) -> Result<(), String> {
        match self.flying.iter().find(|c| !handed_over(c.sem.0)) {
            Some(c) => Err(format!(
                "the copy started at {} was never waited on (`dma_wait`) before the kernel ended",
                c.started
            )),
            None => Ok(()),
        }
    }
}

impl Memory {
    /// The flat offsets (inside the array) an access touches, in access order.
    fn offsets(&self, at: &At) -> Result<(Vec<usize>, Vec<usize>), String> {
        let shape = self.check_access(at.place.operand, &at.place.index, &at.starts)?;
        let mut offs = Vec::new();
        self.each_element(
            at.place.operand,
            &at.place.index,
            &at.starts,
            &shape,
            |_, off, _| offs.extend(off),
        );
        Ok((shape, offs))
    }

    /// The semaphore element `at` names: its flat offset.
    fn semaphore(&self, at: &At) -> Result<usize, String> {
        let (_, offs) = self.offsets(at)?;
        Ok(offs[0])
    }

    fn sem_value(&mut self, at: (OperandId, usize)) -> &mut f64 {
        &mut self.buffers[at.0.0 as usize].data[at.1]
    }

    /// Copies `src` into `dst` and signals `sem`, a semaphore of `kind`: a DMA semaphore with
    /// the bytes moved, a regular one (which counts copies) with 1.
    pub fn dma_start(
        &mut self,
        src: At,
        dst: At,
        sem: At,
        started: String,
        kind: SemaphoreKind,
    ) -> Result<(), String> {
        self.copying = true;
        let done = self.copy(src, dst, sem, started, kind);
        self.copying = false;
        done
    }

    /// [`Memory::dma_start`] with `copying` set (windows may reach into an HBM array's tiles).
    fn copy(
        &mut self,
        src: At,
        dst: At,
        sem: At,
        started: String,
        kind: SemaphoreKind,
    ) -> Result<(), String> {
        let (shape, src_offs) = self.offsets(&src)?;
        let (_, dst_offs) = self.offsets(&dst)?;
        let (s, d) = (src.place.operand, dst.place.operand);
        if let Some(sh) = self.copies.shadows.get(&d)
            && let Some(c) = self.copies.flying.iter().find(|c| {
                c.dst.0 == d
                    && dst_offs
                        .iter()
                        .any(|o| sh.writes.contains_key(o) && c.dst.1.contains(o))
            })
        {
            return Err(format!(
                "writes elements that the copy started at {} also writes, before that copy's \
                 `dma_wait`",
                c.started
            ));
        }
        let dtype = self.buffers[s.0 as usize].dtype;
        let value = self.load(
            s,
            &src.place.index,
            &src.starts,
            None,
            None,
            Type::new(dtype, shape),
        )?;
        // A copy through a bitcast ref moves the same bits (`tpukit_dsl::dma::copies_between`).
        let to = self.buffers[d.0 as usize].dtype;
        let value = if to == dtype {
            value
        } else {
            let shape = tpukit_dsl::bitcast_shape(&value.ty, to)
                .ok_or("a copy between types no bitcast relates")?;
            crate::interpret::ops::bitcast(&value, Type::new(to, shape))
        };
        self.store(d, &dst.place.index, &dst.starts, &value, None)?;
        let sem_at = (sem.place.operand, self.semaphore(&sem)?);
        let bytes = match kind {
            SemaphoreKind::Regular => 1,
            SemaphoreKind::Dma => (value.data.len() * to.size_bytes()) as i64,
        };
        *self.sem_value(sem_at) += bytes as f64;
        let c = InFlight {
            sem: sem_at,
            bytes,
            started,
            src: (s, src_offs),
            dst: (d, dst_offs),
        };
        self.copies.mark(&c, 1);
        self.copies.flying.push(c);
        Ok(())
    }

    pub fn dma_wait(&mut self, sem: At, dst: At) -> Result<(), String> {
        self.copying = true;
        let shape = self.offsets(&dst).map(|(shape, _)| shape);
        self.copying = false;
        let shape = shape?;
        let dtype = self.buffers[dst.place.operand.0 as usize].dtype;
        let bytes = (shape.iter().product::<usize>() * dtype.size_bytes()) as i64;
        let sem_at = (sem.place.operand, self.semaphore(&sem)?);
        self.take(sem_at, bytes, "no copy signalled it with")?;
        // The earliest copy on this semaphore completes (a TPU's DMAs on one semaphore are
        // indistinguishable to the waiter; a program obeying the rules cannot tell either).
        if let Some(i) = self
            .copies
            .flying
            .iter()
            .position(|c| c.sem == sem_at && c.bytes == bytes)
            .or_else(|| self.copies.flying.iter().position(|c| c.sem == sem_at))
        {
            let c = self.copies.flying.remove(i);
            self.copies.mark(&c, -1);
        }
        Ok(())
    }

    /// Subtracts `amount` from a semaphore, or fails: a TPU would wait forever.
    fn take(&mut self, at: (OperandId, usize), amount: i64, why: &str) -> Result<(), String> {
        let name = self.buffers[at.0.0 as usize].name.clone();
        let v = self.sem_value(at);
        if (*v as i64) < amount {
            return Err(format!(
                "waits for {amount} on semaphore `{name}` (element {}), which holds {}: {why} \
                 enough (on a TPU this wait never returns)",
                at.1, *v as i64
            ));
        }
        *v -= amount as f64;
        Ok(())
    }

    pub fn semaphore_signal(&mut self, sem: At, amount: i64) -> Result<(), String> {
        let at = (sem.place.operand, self.semaphore(&sem)?);
        let v = self.sem_value(at);
        *v = tpukit_dsl::DType::I32.wrap_int(*v as i64 + amount) as f64;
        Ok(())
    }

    /// Takes `amount` from a regular semaphore; copies that signalled it complete, the
    /// earliest first, one per unit taken.
    pub fn semaphore_wait(&mut self, sem: At, amount: i64) -> Result<(), String> {
        let at = (sem.place.operand, self.semaphore(&sem)?);
        self.take(at, amount, "nothing signalled it")?;
        for _ in 0..amount.max(0) {
            let Some(i) = self.copies.flying.iter().position(|c| c.sem == at) else {
                break;
            };
            let c = self.copies.flying.remove(i);
            self.copies.mark(&c, -1);
        }
        Ok(())
    }

    pub fn semaphore_read(&mut self, sem: At) -> Result<Tensor, String> {
        let at = (sem.place.operand, self.semaphore(&sem)?);
        Ok(Tensor::scalar_i32(*self.sem_value(at) as i64))
    }

    /// Fails if a copy is still in flight when the kernel ends, unless it signals a
    /// semaphore output (handed to the caller, see `tpukit_dsl::dma`).
    pub fn check_copies_done(&self) -> Result<(), String> {
        self.copies
            .check_done(|id| self.buffers[id.0 as usize].role == tpukit_dsl::Role::Output)
    }

    /// Checks a load (`write` false) or store against the copies in flight.
    pub(super) fn check_in_flight(
        &self,
        id: OperandId,
        index: &[Indexer],
        starts: &[i64],
        shape: &[usize],
        write: bool,
    ) -> Result<(), String> {
        if self
            .copies
            .shadows
            .get(&id)
            .is_none_or(|s| s.reads.is_empty() && s.writes.is_empty())
        {
            return Ok(());
        }
        let mut offs = Vec::new();
        self.each_element(id, index, starts, shape, |_, off, _| offs.extend(off));
        self.copies.check_access(id, &offs, write)
    }
}
