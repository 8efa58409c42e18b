//! Copies and semaphores, as Pallas lowers `make_async_copy`, `pl.semaphore_*`: each end of a
//! copy and each semaphore is its ref narrowed by `tpu.memref_slice` (i32 starts, static
//! sizes) and `tpu.memref_squeeze` (dropping point indexers), then `tpu.enqueue_dma`,
//! `tpu.wait_dma2`, `tpu.sem_signal`, `tpu.sem_wait` and `tpu.sem_read` on those views. A
//! copy between two dtypes (through a bitcast ref) bitcasts its source view to the
//! destination's type (`tpu.memref_bitcast`), as Pallas lowers `ref.bitcast(...)`.

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
    types::{self, MemorySpace},
};
use tpukit_dsl::{Error, Indexer, Op, OpKind, Place, Result, Start};

/// The view of `p`: its ref, sliced unless it is the whole ref, squeezed where it has points.
fn view<'c>(lw: &FuncLowering<'c, '_>, em: &Emitter<'c>, p: &Place) -> Result<Val<'c>> {
    let o = lw.kernel.operand(p.operand);
    let buffer = lw.refs[p.operand.0 as usize]
        .ok_or_else(|| Error::new(format!("`{}` is not visible here", o.name)))?;
    let space = MemorySpace::of(o.role, o.space);
    let whole = crate::shapes::window_shape(o, &lw.shapes.operands[p.operand.0 as usize]);
    let mut starts = Vec::new();
    let mut sizes = Vec::new();
    let mut squeezed = Vec::new();
    for ix in &p.index {
        let (start, size) = match *ix {
            Indexer::Slice { start, size, .. } => (start, size),
            Indexer::Point(start) => (start, 1),
        };
        starts.push(match start {
            Start::Static(s) => em.i32(s)?,
            Start::Dynamic(v) => lw.value(v),
        });
        sizes.push(size);
        if matches!(ix, Indexer::Slice { .. }) {
            squeezed.push(size);
        }
    }
    let mut v = buffer;
    let is_whole = p.index.iter().zip(&whole).all(
        |(ix, &n)| matches!(ix, Indexer::Slice { start: Start::Static(0), size, .. } if *size == n),
    );
    if !is_whole {
        let mut operands = vec![buffer];
        operands.extend(&starts);
        let ty = types::memref(em.context, &sizes, o.dtype, space)?;
        let segments = format!("array<i32: 1, {}, 0>", starts.len());
        v = em.op1(
            "tpu.memref_slice",
            &operands,
            ty,
            &[("operandSegmentSizes", em.attr(&segments)?)],
        )?;
    }
    if squeezed.len() != sizes.len() {
        let ty = types::memref(em.context, &squeezed, o.dtype, space)?;
        v = em.op1("tpu.memref_squeeze", &[v], ty, &[])?;
    }
    Ok(v)
}

/// The view of a copy's source `src`, bitcast to the dtype of its destination `dst` when the
/// two differ (the verifier checked that a bitcast relates them).
fn source<'c>(
    lw: &FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    src: &Place,
    dst: &Place,
) -> Result<Val<'c>> {
    let v = view(lw, em, src)?;
    let (from, to) = (
        lw.kernel.operand(src.operand),
        lw.kernel.operand(dst.operand),
    );
    if from.dtype == to.dtype {
        return Ok(v);
    }
    let sizes: Vec<usize> = src
        .index
        .iter()
        .filter_map(|ix| match ix {
            Indexer::Slice { size, .. } => Some(*size),
            Indexer::Point(_) => None,
        })
        .collect();
    let shape = tpukit_dsl::bitcast_shape(&tpukit_dsl::Type::new(from.dtype, sizes), to.dtype)
        .ok_or_else(|| Error::new("a copy between types no bitcast relates"))?;
    let ty = types::memref(
        em.context,
        &shape,
        to.dtype,
        MemorySpace::of(from.role, from.space),
    )?;
    em.op1("tpu.memref_bitcast", &[v], ty, &[])
}

pub fn dma<'c>(lw: &mut FuncLowering<'c, '_>, em: &Emitter<'c>, op: &Op) -> Result<Vec<Val<'c>>> {
    let segments = |s: &str| em.attr(&format!("array<i32: {s}>"));
    match &op.kind {
        OpKind::DmaStart { src, dst, sem } => {
            let operands = [
                source(lw, em, src, dst)?,
                view(lw, em, dst)?,
                view(lw, em, sem)?,
            ];
            em.op(
                "tpu.enqueue_dma",
                &operands,
                &[],
                &[
                    ("operandSegmentSizes", segments("1, 0, 1, 1, 0, 0, 0")?),
                    ("priority", em.attr("0 : i32")?),
                    ("strict_ordering", em.attr("false")?),
                ],
            )?;
        }
        OpKind::DmaWait { sem, src, dst } => {
            let operands = [
                view(lw, em, sem)?,
                source(lw, em, src, dst)?,
                view(lw, em, dst)?,
            ];
            em.op(
                "tpu.wait_dma2",
                &operands,
                &[],
                &[
                    ("operandSegmentSizes", segments("1, 1, 1, 0, 0")?),
                    ("strict_ordering", em.attr("false")?),
                ],
            )?;
        }
        OpKind::SemaphoreSignal { sem, amount } => {
            let operands = [view(lw, em, sem)?, lw.value(*amount)];
            em.op(
                "tpu.sem_signal",
                &operands,
                &[],
                &[("operandSegmentSizes", segments("1, 1, 0, 0, 0")?)],
            )?;
        }
        OpKind::SemaphoreWait { sem, amount } => {
            let operands = [view(lw, em, sem)?, lw.value(*amount)];
            em.op("tpu.sem_wait", &operands, &[], &[])?;
        }
        OpKind::SemaphoreRead { sem } => {
            let v = view(lw, em, sem)?;
            return Ok(vec![em.op1("tpu.sem_read", &[v], em.ty("i32")?, &[])?]);
        }
        _ => unreachable!("dma on a copy or semaphore op"),
    }
    Ok(Vec::new())
}
