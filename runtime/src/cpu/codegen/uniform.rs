//! Lane-uniform values: values of the kernel body whose elements do not depend on their index
//! along the last dimension (the lanes). Kernels written for a TPU keep per-row statistics
//! replicated across a row's 128 lanes (flash attention's running max and sum live in
//! `[block_q, 128]` scratch refs); such a value is computed once per row and, when it is
//! materialised, stored as one element per row (see `Val::Rows`).
//!
//! A value is uniform when its last dimension is 1 (or it is a scalar), or it is: a splat
//! constant; an `iota` along another dimension; a broadcast of a value whose last dimension is
//! 1 or that is uniform along the same last dimension; an elementwise op, cast or select of
//! uniform operands; a reshape keeping the last dimension (row-major, lane `j` of every row
//! stays lane `j`) of a uniform value; a reduction over other axes of a uniform value; or an
//! unmasked load keeping the last dimension of a uniform scratch ref.
//!
//! A scratch ref is uniform when every one of its rows holds one value at every step: its
//! initial contents are a fill (NaN or zeros, see `cpu::poison`), and every `store` to it
//! writes a uniform value, unmasked, to whole rows (a slice of the entire last dimension).
//! Refs some DMA or semaphore op names are not. Stores may write loads of the same refs, so
//! the refs are found as a greatest fixed point: assume every scratch ref uniform, and drop
//! those a store breaks until none does.

use tpukit_dsl::{Func, Indexer, Kernel, OpKind, OperandId, Region, Role, Start, ValueId};

/// Which values of the kernel body are lane-uniform.
pub(super) struct Uniform {
    value: Vec<bool>,
}

impl Uniform {
    pub fn of(kernel: &Kernel) -> Uniform {
        let f = &kernel.body;
        let mut refs: Vec<bool> = kernel
            .operands
            .iter()
            .map(|o| o.role == Role::Scratch && !o.shape.is_empty())
            .collect();
        named_by_dma(&f.body, &mut refs);
        loop {
            let mut value = vec![false; f.types.len()];
            values(f, &f.body, &refs, &mut value);
            let mut changed = false;
            breaking_stores(kernel, &f.body, &value, &mut refs, &mut changed);
            if !changed {
                return Uniform { value };
            }
        }
    }

    /// Whether `v` (a value of the kernel body, of rank ≥ 1) has one value per row.
    pub fn holds(&self, v: ValueId) -> bool {
        self.value[v.0 as usize]
    }
}

/// Marks the refs any DMA or semaphore op in `r` names as not uniform.
fn named_by_dma(r: &Region, refs: &mut [bool]) {
    for op in &r.ops {
        let places = match &op.kind {
            OpKind::DmaStart { src, dst, sem } | OpKind::DmaWait { sem, src, dst } => {
                vec![src, dst, sem]
            }
            OpKind::SemaphoreSignal { sem, .. }
            | OpKind::SemaphoreWait { sem, .. }
            | OpKind::SemaphoreRead { sem } => vec![sem],
            _ => Vec::new(),
        };
        for p in places {
            refs[p.operand.0 as usize] = false;
        }
        for sub in op.kind.regions() {
            named_by_dma(sub, refs);
        }
    }
}

/// Marks which values defined in `r` (at any depth) are uniform, given the uniform `refs`.
fn values(f: &Func, r: &Region, refs: &[bool], value: &mut [bool]) {
    for op in &r.ops {
        for sub in op.kind.regions() {
            values(f, sub, refs, value);
        }
        let [v] = op.results[..] else {
            continue;
        };
        value[v.0 as usize] = uniform(f, &op.kind, v, refs, value);
    }
}

/// Whether the result `v` of an op of kind `kind` is uniform.
fn uniform(f: &Func, kind: &OpKind, v: ValueId, refs: &[bool], value: &[bool]) -> bool {
    let shape = &f.ty(v).shape;
    let Some(&lanes) = shape.last() else {
        return true;
    };
    if lanes == 1 {
        return true;
    }
    let is = |x: &ValueId| value[x.0 as usize];
    let last_of = |x: &ValueId| f.ty(*x).shape.last().copied();
    match kind {
        OpKind::Const { .. } => true,
        OpKind::Iota { dim } => *dim + 1 != shape.len(),
        OpKind::Unary { .. }
        | OpKind::Binary { .. }
        | OpKind::Compare { .. }
        | OpKind::Select { .. }
        | OpKind::Cast { .. } => kind.operands().iter().all(is),
        OpKind::Broadcast { x } => match last_of(x) {
            None | Some(1) => true,
            Some(n) => n == lanes && is(x),
        },
        OpKind::Reshape { x } => last_of(x) == Some(lanes) && is(x),
        OpKind::Reduce { x, axes, .. } => {
            let rank = f.ty(*x).rank();
            !axes.contains(&(rank - 1)) && is(x)
        }
        OpKind::Load {
            operand,
            index,
            mask: None,
            ..
        } => refs[operand.0 as usize] && matches!(index.last(), Some(Indexer::Slice { .. })),
        _ => false,
    }
}

/// Marks as not uniform every uniform ref in `refs` that a store in `r` (at any depth) could
/// make non-uniform, setting `changed` if it marks any.
fn breaking_stores(
    kernel: &Kernel,
    r: &Region,
    value: &[bool],
    refs: &mut [bool],
    changed: &mut bool,
) {
    for op in &r.ops {
        if let OpKind::Store {
            operand,
            index,
            value: v,
            mask,
        } = &op.kind
            && refs[operand.0 as usize]
            && !(mask.is_none() && value[v.0 as usize] && whole_rows(kernel, *operand, index))
        {
            refs[operand.0 as usize] = false;
            *changed = true;
        }
        for sub in op.kind.regions() {
            breaking_stores(kernel, sub, value, refs, changed);
        }
    }
}

/// Whether `index` takes every element of `operand`'s last dimension, in order.
fn whole_rows(kernel: &Kernel, operand: OperandId, index: &[Indexer]) -> bool {
    let lanes = kernel
        .operand(operand)
        .shape
        .last()
        .and_then(|d| d.as_static());
    match index.last() {
        Some(Indexer::Slice {
            start: Start::Static(0),
            size,
            stride: 1,
        }) => lanes == Some(*size),
        _ => false,
    }
}
