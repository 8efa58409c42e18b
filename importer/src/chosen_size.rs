//! Views whose traced sizes are each one of two constants (`arith.select %last, A, B`, through
//! `tpu.assume_multiple`): `pltpu.emit_pipeline` sizes a block that may be the last, partial
//! one of an array its blocks do not divide that way (the remainder rounded up to whole
//! tiles, or the block), in any number of dimensions. A copy (or wait) between two such
//! views is imported as one static copy per choice, under `if`s on the conditions (the
//! source's, its k-th chosen dimension paired with the destination's k-th): what Mosaic
//! copies, with sizes the IR and a TPU both take statically.

use super::dma::{Window, full, offset_slices};
use super::scope::{Chosen, Scope, op_name};
use melior::ir::{
    Value, ValueLike,
    operation::{OperationLike, OperationRef, OperationResult},
};
use std::cell::RefCell;
use tpukit_dsl::{Error, Ix, KernelBuilder, Result};

/// The condition and the two sizes of a traced size `v` that selects between constants.
fn select_of_constants(s: &Scope, v: Value<'_, '_>) -> Option<(tpukit_dsl::Arg, [usize; 2])> {
    let mut op = OperationResult::try_from(v).ok()?.owner();
    while op_name(&op) == "tpu.assume_multiple" {
        op = OperationResult::try_from(op.operand(0).ok()?).ok()?.owner();
    }
    if op_name(&op) != "arith.select" {
        return None;
    }
    let size = |i: usize| {
        let c = super::parity::constant_value(op.operand(i).ok()?)?;
        usize::try_from(c).ok()
    };
    let sizes = [size(1)?, size(2)?];
    // A constant condition chooses once (the other size may not even fit).
    if let Some(c) = op.operand(0).ok().and_then(super::parity::constant_value) {
        let size = sizes[usize::from(c == 0)];
        return Some((s.arg(&op, 0).ok()?, [size, size]));
    }
    Some((s.arg(&op, 0).ok()?, sizes))
}

/// The sizes of a view's result type (`?` given as 1) and which dimensions are `?`.
pub(crate) fn traced_sizes(op: &OperationRef<'_, '_>) -> Result<(Vec<usize>, Vec<usize>)> {
    let r = op
        .result(0)
        .map_err(|_| Error::new(format!("`{}` has no result", op_name(op))))?;
    let ty = r.r#type().to_string();
    let dims = ty
        .strip_prefix("memref<")
        .ok_or_else(|| Error::new(format!("a view of type {ty}")))?;
    let parts: Vec<&str> = dims.split(['x', ',', '>']).collect();
    let (mut sizes, mut traced) = (Vec::new(), Vec::new());
    for p in &parts[..parts.len().saturating_sub(1)] {
        match p.trim() {
            "?" => {
                traced.push(sizes.len());
                sizes.push(1);
            }
            n => match n.parse::<usize>() {
                Ok(n) => sizes.push(n),
                Err(_) => break,
            },
        }
    }
    Ok((sizes, traced))
}

/// `tpu.memref_slice` whose `dynamic` traced sizes (operands after the `starts` starts) all
/// select between constants: the view, its chosen dimensions recorded. `false` (nothing
/// defined) when one does not.
pub(crate) fn slice(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    starts: usize,
    dynamic: usize,
) -> Result<bool> {
    let mut picks = Vec::with_capacity(dynamic);
    for j in 0..dynamic {
        let v = op
            .operand(1 + starts + j)
            .map_err(|_| Error::new("a slice without its sizes"))?;
        match select_of_constants(s, v) {
            Some(p) => picks.push(p),
            None => return Ok(false),
        }
    }
    let (sizes, traced) = traced_sizes(op)?;
    if traced.len() != dynamic {
        return Err(Error::new("a slice whose type and sizes disagree"));
    }
    let (r, index) = s.place(op, 0)?;
    let index = full(b, r, index)?;
    let (out, positions) = offset_slices(s, b, op, index, &sizes)?;
    let chosen = traced
        .iter()
        .zip(picks)
        .map(|(&d, (cond, sizes))| {
            let at = *positions
                .get(d)
                .ok_or_else(|| Error::new("a slice of another rank"))?;
            Ok(Chosen { at, cond, sizes })
        })
        .collect::<Result<_>>()?;
    s.define_chosen(op, 0, chosen)?;
    s.define_view(op, 0, r, out)?;
    Ok(true)
}

/// A copy (or wait, `each`) between `ends` of `op`, one of them with chosen sizes: one
/// static copy per choice of the source's conditions (see the module doc).
pub(crate) fn copy(
    s: &Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    ends: [usize; 2],
    each: &mut dyn FnMut(&mut KernelBuilder, [Window; 2]) -> Result<()>,
) -> Result<()> {
    let choices = ends.map(|i| s.chosen_of(op, i).unwrap_or_default());
    if choices[0].len() != choices[1].len() {
        return Err(Error::unsupported(format!(
            "a copy between windows with {} and {} dimensions of traced size (`{}`)",
            choices[0].len(),
            choices[1].len(),
            op_name(op)
        )));
    }
    let mut places = Vec::with_capacity(2);
    for i in ends {
        let (r, index) = s.place_of_any_size(op, i)?;
        places.push((r, full(b, r, index)?));
    }
    let places: [Window; 2] = places.try_into().expect("two ends");
    let each = RefCell::new(each);
    emit(b, &choices, 0, places, &each)
}

type Each<'a> = RefCell<&'a mut dyn FnMut(&mut KernelBuilder, [Window; 2]) -> Result<()>>;

/// Copies `places` with chosen dimensions `j..` given a size each, under `if`s.
fn emit(
    b: &mut KernelBuilder,
    choices: &[Vec<Chosen>; 2],
    j: usize,
    places: [Window; 2],
    each: &Each<'_>,
) -> Result<()> {
    let Some(c) = choices[0].get(j).copied() else {
        return (each.borrow_mut())(b, places);
    };
    let sized = |size: usize| {
        let mut p = places.clone();
        for (e, (_, index)) in p.iter_mut().enumerate() {
            let at = choices[e][j].at;
            if let Some(Ix::Ds(start, _)) = index.get(at).cloned() {
                index[at] = Ix::Ds(start, size);
            }
        }
        p
    };
    if c.sizes[0] == c.sizes[1] {
        return emit(b, choices, j + 1, sized(c.sizes[0]), each);
    }
    let (yes, no) = (sized(c.sizes[0]), sized(c.sizes[1]));
    b.if_else(
        c.cond,
        |b| emit(b, choices, j + 1, yes, each).map(|()| vec![]),
        |b| emit(b, choices, j + 1, no, each).map(|()| vec![]),
    )?;
    Ok(())
}

/// The chosen dimensions of a squeeze's source (the positions are the underlying ref's, so
/// they carry over), checked against the `?` count of its result.
pub(crate) fn squeezed(s: &Scope, op: &OperationRef<'_, '_>) -> Result<Option<Vec<Chosen>>> {
    let Some(chosen) = s.chosen_of(op, 0) else {
        return Ok(None);
    };
    let (_, traced) = traced_sizes(op)?;
    if traced.len() != chosen.len() {
        return Err(Error::new(
            "a squeeze that drops a dimension of traced size",
        ));
    }
    Ok(Some(chosen))
}
