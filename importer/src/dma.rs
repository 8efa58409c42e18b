//! Manual DMA, semaphores and scoped allocations (`pltpu.make_async_copy`, `pltpu.sync_copy`,
//! `pl.semaphore_*`, `pl.run_scoped`) into the IR's copy and semaphore ops
//! ([`tpukit_dsl::dma`]).
//!
//! Refs are narrowed by `tpu.memref_slice` (dynamic starts, static sizes; a traced size in
//! one dimension for copies, imported as a loop of copies of one element there) and
//! `tpu.memref_squeeze` (dropping unit dimensions) into views, which the copy and semaphore
//! ops take. `tpu.region` (a scope) is imported inline; its `memref.alloca` and
//! `tpu.sem_alloc` allocations become scratch operands of their own, after the kernel's
//! (their contents are undefined when the scope starts, as on a TPU; semaphores come back to
//! zero when a scope obeys the rules). Remote copies and signals (`device_id`, `core_id`)
//! are refused by name. A copy through a bitcast ref is the IR's copy between the windows
//! beneath, of two dtypes (`bitcast_copy`); through a reshaped ref, copies of its rows.

use super::kernel_func::scratch;
use super::rules::Table;
use super::scope::{Scope, Val, attr_opt, op_name};
use super::text::{self, Ty};
use melior::ir::{
    RegionLike, ValueLike,
    operation::{OperationLike, OperationRef},
};
use tpukit_dsl::{Arg, ArraySpec, BinaryOp, Error, Ix, KernelBuilder, Literal, Ref, Result, Role};

/// The scratch operand a scoped allocation needs, if `op` is one.
pub(crate) fn allocation(op: &OperationRef<'_, '_>) -> Option<Result<ArraySpec>> {
    match op_name(op).as_str() {
        "memref.alloca" | "tpu.sem_alloc" => Some((|| {
            let r = op
                .result(0)
                .map_err(|_| Error::new("an allocation without a result"))?;
            match text::ty(&r.r#type().to_string())? {
                Ty::MemRef { ty, space } => scratch(&ty, space),
                other => Err(Error::new(format!("allocates {other:?}"))),
            }
        })()),
        _ => None,
    }
}

/// `memref.alloca`, `tpu.sem_alloc`: the scratch operand set aside for it.
pub(crate) fn alloc(
    s: &mut Scope,
    _: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let r = s.scratch_of(op, "the allocation")?;
    let result = op
        .result(0)
        .map_err(|_| Error::new("an allocation without a result"))?;
    s.bind(result.into(), Val::Ref(r));
    Ok(())
}

/// `tpu.region`: its block, inline; its yields are its results.
pub(crate) fn region(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    t: &Table,
) -> Result<()> {
    let block = op
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| Error::new("a region without a block"))?;
    let values = s.block(b, block, &[], t)?;
    for (i, v) in values.into_iter().enumerate() {
        s.define(op, i, v)?;
    }
    Ok(())
}

/// The sizes of `operandSegmentSizes`.
fn segments(op: &OperationRef<'_, '_>) -> Result<Vec<usize>> {
    let a =
        attr_opt(op, "operandSegmentSizes").ok_or_else(|| Error::new("no operandSegmentSizes"))?;
    Ok(text::int_array(&a)?
        .into_iter()
        .map(|n| n as usize)
        .collect())
}

/// Refuses an op with any of the segments `remote` (device or core ids) present.
fn local_only(op: &OperationRef<'_, '_>, seg: &[usize], remote: &[usize]) -> Result<()> {
    if remote
        .iter()
        .any(|&i| seg.get(i).copied().unwrap_or(0) != 0)
    {
        return Err(Error::unsupported(format!(
            "`{}` on another device or core (remote DMA and signals are not imported)",
            op_name(op)
        )));
    }
    Ok(())
}

/// `a + c`, folded when both are constants.
pub(crate) fn add(s: &Scope, b: &mut KernelBuilder, a: Arg, c: Arg) -> Result<Arg> {
    let lit = |x: Arg| match x {
        Arg::Lit(Literal::Int(n)) => Some(n),
        Arg::Value(v) => match s.constant(v) {
            Some(Literal::Int(n)) => Some(n),
            _ => None,
        },
        _ => None,
    };
    match (lit(a), lit(c)) {
        (Some(0), _) => Ok(c),
        (_, Some(0)) => Ok(a),
        (Some(x), Some(y)) => Ok(Arg::Lit(Literal::Int(x + y))),
        _ => Ok(Arg::Value(b.binary(BinaryOp::Add, a, c)?)),
    }
}

/// The ref and indexers of an access `index` of operand `i` of `op`: a ref as it is, or a
/// view (`tpu.memref_slice`, `memref_squeeze`) with the access moved by the view's starts.
pub(crate) fn through_view(
    s: &Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    i: usize,
    index: Vec<Ix>,
) -> Result<(Ref, Vec<Ix>)> {
    let place = s.place(op, i)?;
    Ok((place.0, compose(s, b, place, index)?))
}

/// The indexers of `r` reading `index` of its view `view` (the view's starts added to the
/// access's; `index` itself for a whole ref).
pub(crate) fn compose(
    s: &Scope,
    b: &mut KernelBuilder,
    (_, view): (Ref, Vec<Ix>),
    index: Vec<Ix>,
) -> Result<Vec<Ix>> {
    if view.is_empty() {
        return Ok(index);
    }
    let mut access = index.into_iter();
    let mut out = Vec::with_capacity(view.len());
    for v in view {
        out.push(match v {
            Ix::Ds(start, _) => match access.next() {
                Some(Ix::At(a)) => Ix::At(add(s, b, start, a)?),
                Some(Ix::Ds(a, n)) => Ix::Ds(add(s, b, start, a)?, n),
                _ => return Err(Error::new("an access of another rank than its view")),
            },
            other => other,
        });
    }
    if access.next().is_some() {
        return Err(Error::new("an access of another rank than its view"));
    }
    Ok(out)
}

/// The indexers of a view of `r` (all of `r` when `index` is empty).
pub(crate) fn full(b: &KernelBuilder, r: Ref, index: Vec<Ix>) -> Result<Vec<Ix>> {
    if !index.is_empty() {
        return Ok(index);
    }
    let shape = b.ref_shape(r)?;
    Ok(shape
        .into_iter()
        .map(|n| Ix::Ds(Arg::Lit(Literal::Int(0)), n))
        .collect())
}

/// The static shape of result `i` of `op`, a memref.
fn memref_shape(op: &OperationRef<'_, '_>, i: usize) -> Result<Vec<usize>> {
    let r = op
        .result(i)
        .map_err(|_| Error::new(format!("`{}` has no result {i}", op_name(op))))?;
    match text::ty(&r.r#type().to_string())? {
        Ty::MemRef { ty, .. } => Ok(ty.shape),
        other => Err(Error::new(format!("a view of type {other:?}"))),
    }
}

/// `tpu.memref_slice %ref[%starts…]`: a view of the result's (static) shape at the starts.
pub(crate) fn memref_slice(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let seg = segments(op)?;
    let dynamic = seg.get(2).copied().unwrap_or(0);
    let plain =
        s.dynamic_of(op, 0).is_none() && s.chosen_of(op, 0).is_none() && s.shaped(op, 0).is_none();
    if dynamic >= 1
        && plain
        && super::chosen_size::slice(s, b, op, seg.get(1).copied().unwrap_or(0), dynamic)?
    {
        return Ok(());
    }
    if s.chosen_of(op, 0).is_some() {
        return Err(Error::unsupported(
            "a slice of a slice of traced size (copies of one are imported)",
        ));
    }
    if dynamic > 1 || (dynamic == 1 && s.dynamic_of(op, 0).is_some()) {
        return Err(Error::unsupported(
            "a slice of traced size in more than one dimension (copies of one are imported)",
        ));
    }
    if s.dynamic_of(op, 0).is_some() {
        return Err(Error::unsupported("a slice of a slice of traced size"));
    }
    if let Some(view) = s.shaped(op, 0) {
        if dynamic != 0 {
            return Err(Error::unsupported(
                "a slice of traced size of a reshaped ref",
            ));
        }
        let narrowed = slice_of_shaped(s, b, op, view)?;
        return s.define_shaped(op, narrowed);
    }
    let (r, index) = s.place(op, 0)?;
    let index = full(b, r, index)?;
    // A traced size is `?` in the result type: the view keeps a slice of one element there,
    // and the size beside it (see `dynamic_copy`).
    let (sizes, traced) = if dynamic == 1 {
        slice_sizes(op)?
    } else {
        (memref_shape(op, 0)?, None)
    };
    let (out, positions) = offset_slices(s, b, op, index, &sizes)?;
    if let Some(dim) = traced {
        // The view's indexer of that dimension.
        let at = *positions
            .get(dim)
            .ok_or_else(|| Error::new("a slice of another rank"))?;
        let size = s.arg(op, 1 + seg[1])?;
        s.define_dynamic(op, 0, at, size)?;
    }
    s.define_view(op, 0, r, out)
}

/// `index` (a ref's window) narrowed by `tpu.memref_slice` `op`: its `d`-th slice starts at
/// the `d`-th start operand more and takes `sizes[d]` elements. Also where each slice
/// landed among the window's indexers (`positions[d]`). An error unless `index` has one
/// slice per size.
pub(crate) fn offset_slices(
    s: &Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    index: Vec<Ix>,
    sizes: &[usize],
) -> Result<(Vec<Ix>, Vec<usize>)> {
    let (mut out, mut positions) = (Vec::with_capacity(index.len()), Vec::new());
    for ix in index {
        match ix {
            Ix::Ds(start, _) => {
                let d = positions.len();
                let offset = s.arg(op, 1 + d)?;
                let size = *sizes
                    .get(d)
                    .ok_or_else(|| Error::new("a slice of another rank"))?;
                positions.push(out.len());
                out.push(Ix::Ds(add(s, b, start, offset)?, size));
            }
            other => out.push(other),
        }
    }
    if positions.len() != sizes.len() {
        return Err(Error::new("a slice of another rank"));
    }
    Ok((out, positions))
}

/// `tpu.memref_slice` of a reshaped or bitcast ref: [`narrow`] at the slice's starts.
fn slice_of_shaped(
    s: &Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    view: super::ref_view::Shaped,
) -> Result<super::ref_view::Shaped> {
    let sizes = memref_shape(op, 0)?;
    let starts = (0..sizes.len())
        .map(|d| s.arg(op, 1 + d))
        .collect::<Result<Vec<_>>>()?;
    let whole = sizes.len() >= 2
        && op
            .operand(sizes.len() - 1)
            .is_ok_and(|x| super::ref_view::whole_rows(&view, x));
    let leading = |k: i64| {
        op.operand(1)
            .is_ok_and(|v| super::parity::multiple_of(v, k))
    };
    narrow(s, b, view, starts, sizes, whole, &leading)
}

/// A slice (`starts`, `sizes`, in the view's shape) of a reshaped or bitcast ref (its starts
/// and sizes first taken to the window's dtype, [`super::ref_view::in_window_dtype`], with
/// `whole_rows` saying a traced second-minor start is a multiple of a split's factor): of a view that is not reshaped,
/// the view of the narrowed window; of a reshaped one, when it narrows the leading dimension
/// only, to whole leading rows of the window beneath (`x.reshape(16, 128).at[:8]` of a
/// `(16, 1, 128)` window, or `x.reshape(24, 256).at[8:]` of a `(3, 8, 256)` one: a traced
/// start when `leading` says it is a multiple of the reshaped rows per window row), the
/// reshaped view of the narrowed window. Other slices of reshaped refs are refused by name.
pub(crate) fn narrow(
    s: &Scope,
    b: &mut KernelBuilder,
    view: super::ref_view::Shaped,
    starts: Vec<Arg>,
    sizes: Vec<usize>,
    whole_rows: bool,
    leading: &dyn Fn(i64) -> bool,
) -> Result<super::ref_view::Shaped> {
    let refuse = || {
        Error::unsupported(
            "a slice of a reshaped ref other than of whole leading rows (of a reshaped ref \
             whose rows cover whole rows of the window beneath)",
        )
    };
    if sizes.len() != view.shape.len() || sizes.is_empty() || view.window.is_empty() {
        return Err(refuse());
    }
    let (starts, sizes) = super::ref_view::in_window_dtype(b, &view, starts, sizes, whole_rows)?;
    if view.shape == view.window {
        let index = starts
            .into_iter()
            .zip(&sizes)
            .map(|(a, &n)| Ix::Ds(a, n))
            .collect();
        let index = compose(s, b, view.base.clone(), index)?;
        return Ok(super::ref_view::Shaped {
            base: (view.base.0, index),
            window: sizes.clone(),
            shape: sizes,
            ..view
        });
    }
    if sizes[1..] != view.shape[1..] {
        return Err(refuse());
    }
    for start in &starts[1..] {
        if !matches!(start, Arg::Lit(Literal::Int(0))) {
            return Err(refuse());
        }
    }
    let row: usize = view.shape[1..].iter().product();
    let window_row: usize = view.window[1..].iter().product();
    let start = starts[0];
    // Window rows per reshaped row (`row` a multiple of `window_row`), or reshaped rows per
    // window row, when the slice starts and ends on window rows (static start).
    let (start, rows) = if window_row > 0 && row.is_multiple_of(window_row) {
        let factor = row / window_row;
        let start = match start {
            Arg::Lit(Literal::Int(n)) => Arg::Lit(Literal::Int(n * factor as i64)),
            other => {
                Arg::Value(b.binary(BinaryOp::Mul, other, Arg::Lit(Literal::Int(factor as i64)))?)
            }
        };
        (start, sizes[0] * factor)
    } else if row > 0 && window_row.is_multiple_of(row) {
        let per = (window_row / row) as i64;
        if sizes[0] as i64 % per != 0 {
            return Err(refuse());
        }
        let start = match start {
            Arg::Lit(Literal::Int(n)) if n % per == 0 => Arg::Lit(Literal::Int(n / per)),
            // (a traced start halved for a bitcast's rows is not followed)
            Arg::Value(v)
                if leading(per)
                    && !(sizes.len() == 2 && view.rows != super::ref_view::Rows::Same) =>
            {
                Arg::Value(b.binary(BinaryOp::Div, v, Arg::Lit(Literal::Int(per)))?)
            }
            _ => return Err(refuse()),
        };
        (start, sizes[0] / per as usize)
    } else {
        return Err(refuse());
    };
    let (r, mut index) = view.base.clone();
    let first = index
        .iter()
        .position(|ix| matches!(ix, Ix::Ds(..)))
        .ok_or_else(refuse)?;
    let Ix::Ds(at, _) = index[first] else {
        return Err(refuse());
    };
    index[first] = Ix::Ds(add(s, b, at, start)?, rows);
    let mut window = view.window.clone();
    window[0] = rows;
    Ok(super::ref_view::Shaped {
        base: (r, index),
        window,
        shape: sizes,
        ..view
    })
}

/// The sizes of a view's result (`tpu.memref_slice`, `memref_squeeze`) with one dimension of
/// traced size (`?` in its type, given as 1 here), and which dimension that is.
fn slice_sizes(op: &OperationRef<'_, '_>) -> Result<(Vec<usize>, Option<usize>)> {
    match super::chosen_size::traced_sizes(op)? {
        (sizes, traced) if traced.len() == 1 => Ok((sizes, Some(traced[0]))),
        _ => Err(Error::new("a slice of one traced size of another type")),
    }
}

/// One end of a copy: a ref and its indexers.
pub(crate) type Window = (Ref, Vec<Ix>);

/// A copy whose ends have one dimension of traced size each (`pl.ds(start, n)` with `n`
/// traced): one copy (or wait) per element of that dimension, in a loop of `n` steps. The
/// bytes signalled and waited for add up to the whole copy's, so a program waiting with a
/// descriptor of the same size sees what it would on a TPU.
fn dynamic_copy(
    s: &Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    ends: [usize; 2],
    each: &mut dyn FnMut(&mut KernelBuilder, [Window; 2]) -> Result<()>,
) -> Result<()> {
    let [(sa, sz), (da, _)] = match ends.map(|i| s.dynamic_of(op, i)) {
        [Some(a), Some(b)] => [a, b],
        _ => {
            return Err(Error::unsupported(
                "a copy between a window of traced size and one of static size",
            ));
        }
    };
    let places = [
        s.place_of_any_size(op, ends[0])?,
        s.place_of_any_size(op, ends[1])?,
    ];
    b.for_loop(0, sz, 1, &[], |b, row, _| {
        let mut moved = places.clone();
        for ((_, index), at) in moved.iter_mut().zip([sa, da]) {
            if let Ix::Ds(start, 1) = index[at] {
                index[at] = Ix::Ds(add(s, b, start, row.into())?, 1);
            }
        }
        each(b, moved)?;
        Ok(vec![])
    })?;
    Ok(())
}

/// `tpu.memref_squeeze`: the view without the unit dimensions the result drops.
pub(crate) fn memref_squeeze(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    // A view of traced size keeps that dimension (`?` in both types; its indexer a slice of
    // one element, see `memref_slice`): the squeeze drops unit dimensions around it, and the
    // result is of traced size along the same indexer (`emit_pipeline`'s buffer slot of a
    // `pl.BoundedSlice` block: `memref<1x?x8x128>` to `memref<?x8x128>`).
    let dynamic = s.dynamic_of(op, 0);
    let chosen = super::chosen_size::squeezed(s, op)?;
    let keep: Vec<usize> = match (&dynamic, &chosen) {
        (Some((at, _)), _) => vec![*at],
        (None, Some(c)) => c.iter().map(|c| c.at).collect(),
        (None, None) => vec![],
    };
    let (r, index) = s.place_of_any_size(op, 0)?;
    let index = full(b, r, index)?;
    let want: Vec<Option<usize>> = if keep.is_empty() {
        memref_shape(op, 0)?.into_iter().map(Some).collect()
    } else {
        let (sizes, traced) = super::chosen_size::traced_sizes(op)?;
        (0..sizes.len())
            .map(|d| (!traced.contains(&d)).then_some(sizes[d]))
            .collect()
    };
    let mut kept = 0;
    let squeezed = index
        .into_iter()
        .enumerate()
        .map(|(i, ix)| match ix {
            Ix::Ds(start, size) if keep.contains(&i) => {
                if want.get(kept) != Some(&None) {
                    return Err(Error::new(
                        "a squeeze that moves the dimension of traced size",
                    ));
                }
                kept += 1;
                Ok(Ix::Ds(start, size))
            }
            Ix::Ds(start, size) if want.get(kept) == Some(&Some(size)) => {
                kept += 1;
                Ok(Ix::Ds(start, size))
            }
            Ix::Ds(start, 1) => Ok(Ix::At(start)),
            Ix::Ds(..) => Err(Error::new("squeezes a dimension that is not 1")),
            other => Ok(other),
        })
        .collect::<Result<Vec<_>>>()?;
    if kept != want.len() {
        return Err(Error::new("a squeeze to another shape"));
    }
    if let Some((at, size)) = dynamic {
        s.define_dynamic(op, 0, at, size)?;
    }
    if let Some(c) = chosen {
        s.define_chosen(op, 0, c)?;
    }
    s.define_view(op, 0, r, squeezed)
}

/// The window of one end of a copy that may be a reshaped ref ([`super::ref_view`]): the
/// reshaped ref's window (its elements in row-major order are the view's), or the place.
fn copy_end(s: &Scope, b: &KernelBuilder, op: &OperationRef<'_, '_>, i: usize) -> Result<Window> {
    match s.shaped(op, i) {
        Some(v) if v.rows == super::ref_view::Rows::Same && v.dtype == b.ref_dtype(v.base.0) => {
            Ok(v.base)
        }
        Some(_) => Err(Error::unsupported(format!(
            "operand {i} of `{}` is a ref both reshaped and bitcast (copies through bitcast \
             refs, and through reshaped refs, are imported)",
            op_name(op)
        ))),
        None => {
            let (r, index) = s.place(op, i)?;
            Ok((r, full(b, r, index)?))
        }
    }
}

/// The windows of a copy (or wait) between `ends` of `op` when one is a ref bitcast to
/// another dtype and neither is reshaped: the windows beneath, in their own dtypes (the IR's
/// copy bitcasts between them, splitting and packing rows as Mosaic's ref bitcast does). A
/// bitcast ref that is also reshaped is refused by name. `None` when no end is a bitcast.
fn bitcast_copy(
    s: &Scope,
    b: &KernelBuilder,
    op: &OperationRef<'_, '_>,
    ends: [usize; 2],
) -> Result<Option<[Window; 2]>> {
    let views = ends.map(|i| s.shaped(op, i));
    let bitcast = |v: &super::ref_view::Shaped| {
        v.dtype != b.ref_dtype(v.base.0) || v.rows != super::ref_view::Rows::Same
    };
    if !views.iter().flatten().any(bitcast) {
        return Ok(None);
    }
    let mut windows = Vec::with_capacity(2);
    for (v, i) in views.into_iter().zip(ends) {
        match v {
            Some(v) if v.shape == v.window => windows.push(v.base),
            Some(_) => {
                return Err(Error::unsupported(format!(
                    "operand {i} of `{}` is a ref both reshaped and bitcast (copies through                      bitcast refs, and through reshaped refs, are imported)",
                    op_name(op)
                )));
            }
            None => {
                let (r, index) = s.place(op, i)?;
                windows.push((r, full(b, r, index)?));
            }
        }
    }
    let [src, dst]: [Window; 2] = windows.try_into().expect("two ends");
    Ok(Some([src, dst]))
}

/// A copy (or wait) between `ends` of `op` when one is a reshaped ref: the same elements in
/// row-major order, as one copy per index of the leading dimensions the two shapes do not
/// share (their longest common trailing dimensions are copied whole each time, with a whole
/// innermost leading dimension of one end when it divides the other's: tiles of rows). `None`
/// when neither end is reshaped.
fn reshaped_copies(
    s: &Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    ends: [usize; 2],
) -> Result<Option<Vec<[Window; 2]>>> {
    if s.shaped(op, ends[0]).is_none() && s.shaped(op, ends[1]).is_none() {
        return Ok(None);
    }
    let windows = [copy_end(s, b, op, ends[0])?, copy_end(s, b, op, ends[1])?];
    let sizes = windows.clone().map(|(_, index)| {
        index
            .iter()
            .filter_map(|ix| match ix {
                Ix::Ds(_, n) => Some(*n),
                _ => None,
            })
            .collect::<Vec<usize>>()
    });
    if sizes[0].iter().product::<usize>() != sizes[1].iter().product::<usize>() {
        return Err(Error::new("a copy between windows of other element counts"));
    }
    let common = sizes[0]
        .iter()
        .rev()
        .zip(sizes[1].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let outer = sizes.clone().map(|v| v[..v.len() - common].to_vec());
    // Where the innermost leading dimension of one end divides the other's, each copy takes
    // a whole one of those (a tile of rows rather than a row): `split[e]` pieces per index of
    // end `e`'s innermost leading dimension, `chunk` elements each.
    let (split, chunk) = match (outer[0].last(), outer[1].last()) {
        (Some(&a), Some(&b)) if b % a == 0 => ([1, b / a], a),
        (Some(&a), Some(&b)) if a % b == 0 => ([a / b, 1], b),
        _ => ([0, 0], 1),
    };
    // Per end: the leading dimensions walked (the innermost one split into pieces of `chunk`
    // when `split` says so), and whether that innermost one is sliced rather than pointed.
    let walk = |e: usize| -> (Vec<usize>, bool) {
        let mut dims = outer[e].clone();
        if split[e] > 0 {
            dims.pop();
            dims.push(split[e]);
        }
        (dims, split[e] > 0)
    };
    let walks = [walk(0), walk(1)];
    let count: usize = walks[0].0.iter().product();
    if count > 1024 || count != walks[1].0.iter().product::<usize>() {
        return Err(Error::unsupported(format!(
            "a copy through a reshaped ref that takes {count} copies (at most 1024)"
        )));
    }
    let mut out = Vec::with_capacity(count);
    for f in 0..count {
        let mut pair = windows.clone();
        for ((_, index), (dims, sliced)) in pair.iter_mut().zip(&walks) {
            // Row-major coordinates of `f` over the walked dimensions.
            let mut rest = f;
            let mut coords = vec![0; dims.len()];
            for (c, &n) in coords.iter_mut().zip(dims).rev() {
                *c = rest % n;
                rest /= n;
            }
            let mut k = 0;
            for ix in index.iter_mut() {
                if k == dims.len() {
                    break;
                }
                if let Ix::Ds(start, _) = *ix {
                    let last = k + 1 == dims.len();
                    let at = if *sliced && last {
                        coords[k] * chunk
                    } else {
                        coords[k]
                    };
                    let at = add(s, b, start, Arg::Lit(Literal::Int(at as i64)))?;
                    *ix = if *sliced && last {
                        Ix::Ds(at, chunk)
                    } else {
                        Ix::At(at)
                    };
                    k += 1;
                }
            }
        }
        out.push(pair);
    }
    Ok(Some(out))
}

/// `tpu.enqueue_dma source(…) target(…) target_semaphore(…)`.
pub(crate) fn enqueue_dma(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let seg = segments(op)?;
    local_only(op, &seg, &[1, 4, 5])?;
    if s.chosen_of(op, 0).is_some() || s.chosen_of(op, 1).is_some() {
        let (sem, mi) = s.place(op, 2)?;
        return super::chosen_size::copy(s, b, op, [0, 1], &mut |b, [(src, si), (dst, di)]| {
            b.dma_start((src, &si), (dst, &di), (sem, &mi))
        });
    }
    if s.dynamic_of(op, 0).is_some() || s.dynamic_of(op, 1).is_some() {
        let (sem, mi) = s.place(op, 2)?;
        return dynamic_copy(s, b, op, [0, 1], &mut |b, [(src, si), (dst, di)]| {
            b.dma_start((src, &si), (dst, &di), (sem, &mi))
        });
    }
    if let Some([(src, si), (dst, di)]) = bitcast_copy(s, b, op, [0, 1])? {
        let (sem, mi) = s.place(op, 2)?;
        return b.dma_start((src, &si), (dst, &di), (sem, &mi));
    }
    if let Some(copies) = reshaped_copies(s, b, op, [0, 1])? {
        let (sem, mi) = s.place(op, 2)?;
        for [(src, si), (dst, di)] in copies {
            b.dma_start((src, &si), (dst, &di), (sem, &mi))?;
        }
        return Ok(());
    }
    let (src, si) = s.place(op, 0)?;
    let (dst, di) = s.place(op, 1)?;
    let (sem, mi) = s.place(op, 2)?;
    b.dma_start((src, &si), (dst, &di), (sem, &mi))
}

/// `tpu.wait_dma2 semaphore(…) src(…) dst(…)` (and the older `tpu.wait_dma`).
pub(crate) fn wait_dma(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    // `wait_dma2` names the copy's source and destination; the older `wait_dma` only the
    // destination, which stands for the source too (the IR's wait needs only its size).
    let (src, dst) = if op_name(op) == "tpu.wait_dma2" {
        local_only(op, &segments(op)?, &[3, 4])?;
        (1, 2)
    } else {
        (1, 1)
    };
    let (sem, mi) = s.place(op, 0)?;
    if s.chosen_of(op, src).is_some() || s.chosen_of(op, dst).is_some() {
        return super::chosen_size::copy(s, b, op, [src, dst], &mut |b, [(sr, si), (d, di)]| {
            b.dma_wait((sem, &mi), (sr, &si), (d, &di))
        });
    }
    if s.dynamic_of(op, src).is_some() || s.dynamic_of(op, dst).is_some() {
        return dynamic_copy(s, b, op, [src, dst], &mut |b, [(sr, si), (d, di)]| {
            b.dma_wait((sem, &mi), (sr, &si), (d, &di))
        });
    }
    if let Some([(sr, si), (d, di)]) = bitcast_copy(s, b, op, [src, dst])? {
        return b.dma_wait((sem, &mi), (sr, &si), (d, &di));
    }
    if let Some(copies) = reshaped_copies(s, b, op, [src, dst])? {
        for [(sr, si), (d, di)] in copies {
            b.dma_wait((sem, &mi), (sr, &si), (d, &di))?;
        }
        return Ok(());
    }
    let (sr, si) = s.place(op, src)?;
    let (d, di) = s.place(op, dst)?;
    b.dma_wait((sem, &mi), (sr, &si), (d, &di))
}

/// `tpu.sem_signal %sem, %amount` (on this core).
pub(crate) fn sem_signal(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    if let Some(seg) = attr_opt(op, "operandSegmentSizes") {
        let seg: Vec<usize> = text::int_array(&seg)?
            .into_iter()
            .map(|n| n as usize)
            .collect();
        local_only(op, &seg, &[2, 3])?;
    }
    let (sem, mi) = s.place(op, 0)?;
    let amount = s.arg(op, 1)?;
    b.semaphore_signal(sem, &mi, amount)
}

/// `tpu.sem_wait %sem, %amount`.
pub(crate) fn sem_wait(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let (sem, mi) = s.place(op, 0)?;
    let amount = s.arg(op, 1)?;
    b.semaphore_wait(sem, &mi, amount)
}

/// `tpu.sem_read %sem`.
pub(crate) fn sem_read(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let (sem, mi) = s.place(op, 0)?;
    let v = b.semaphore_read(sem, &mi)?;
    s.define(op, 0, v)
}

/// Declares the scratch operands of the allocations found before import.
pub(crate) fn declare(
    b: &mut KernelBuilder,
    s: &mut Scope,
    keys: &[usize],
    counts: &mut std::collections::HashMap<Role, usize>,
) -> Result<()> {
    for key in keys {
        let n = counts.entry(Role::Scratch).or_default();
        let r = b.declare(Role::Scratch, &format!("scratch{n}"))?;
        *n += 1;
        s.scratch.insert(*key, r);
    }
    Ok(())
}
