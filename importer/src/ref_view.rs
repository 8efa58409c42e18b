//! Refs seen through another shape or dtype (`tpu.memref_reshape`, `tpu.memref_bitcast`) and
//! strided reads (`tpu.strided_load`, `ref[pl.ds(start, size, stride=k)]`), as ragged paged
//! attention reads keys and values interleaved in its page buffer.
//!
//! The IR's refs are windows of an operand, so a read through such a view is imported as
//! reads of the underlying window (a view of [`Scope`]) in its own shape:
//!
//! - A reshape is row-major, as Mosaic defines it: element `i` (in row-major order) of the
//!   reshaped ref is element `i` of the window.
//! - A strided read of the reshaped ref is a set of elements whose row-major offsets in the
//!   window are `base + Σ_d i_d · c_d` (`i_d < n_d`). It is imported when every step `c_d`
//!   walks whole trailing dimensions of the window (a slice of one dimension, or of several
//!   consecutive ones read in full; neighbouring read dimensions that together step evenly
//!   count as one), each dimension walked once and in the result's order;
//!   the window's other dimensions are points. The read is then one `load` of the window and
//!   a `reshape` (lowered back as Pallas's own reads of such buffers are).
//! - A read of a view that is not reshaped (a ref, a slice of one) with any other stride or a
//!   dynamic start is the IR's strided load (`Indexer::Slice` with a `stride`), which Mosaic
//!   gets back as `tpu.strided_load`. A read of a reshaped ref that does not decompose (a
//!   stride inside one dimension of the window, a dynamic start) is refused by name.
//! - A bitcast of equal widths (f32 ↔ i32) reads the elements and bitcasts them. A bitcast
//!   between 8, 16 and 32 bits scales the second-minor dimension by the width ratio `k` as
//!   Mosaic (and Pallas's interpret mode) define it ([`Rows`]): element `(.., r, c)` of the
//!   wider view holds the narrower rows `k·r .. k·r + k - 1` at column `c`, the lowest row in
//!   the lowest bits. A read of a packing view is one read of the groups of rows (a dimension
//!   of `k` after the rows, `read_packed`), one of a splitting view a read of whole groups of
//!   rows, each bitcast by the IR's `bitcast` (which groups rows the same way).
//! - Views of views: a bitcast sees the window at the new width; a reshape of a packed or
//!   split view keeping its minor dimension (and whole groups of rows) is the bitcast of the
//!   window's reshape; a slice narrows the window (of a reshaped view, its leading rows
//!   only). A view stays one window, one reshape and one bitcast ([`Shaped`]).
//! - A store through a view (`store`) is the inverse of a read: the value bitcast to the
//!   window's dtype (the IR's bitcast packs and splits rows as Mosaic does) and stored into
//!   the window elements the access decomposes into (static starts), or at the window's own
//!   indexers for a view that is not reshaped (any start; rows of a split view in whole groups).

use super::rules::Table;
use super::scope::{Scope, attr_opt, op_name, result_type};
use super::text::{self, Ty};
use melior::ir::{
    ValueLike,
    operation::{OperationLike, OperationRef},
};
use tpukit_dsl::{Arg, BinaryOp, DType, Error, Ix, KernelBuilder, Literal, Ref, Result};

/// A ref seen through a reshape and a bitcast: the window it is made of and what it looks
/// like.
#[derive(Clone, Debug, PartialEq)]
pub struct Shaped {
    /// The underlying ref and its indexers (a whole ref: slices of every dimension).
    pub base: (Ref, Vec<Ix>),
    /// The window's own shape (the sizes of its slices), in its dtype.
    pub window: Vec<usize>,
    /// The reshaped shape, in the window's dtype (before any bitcast).
    pub shape: Vec<usize>,
    /// The dtype read: the window's, or what a bitcast made of it.
    pub dtype: DType,
    /// How a bitcast between widths regroups the window's rows (second-minor dimension).
    pub rows: Rows,
}

/// How a ref bitcast between widths (8, 16 and 32 bits) regroups the window's rows, as
/// Mosaic defines it: element `(.., r, c)` of a `k` times wider view holds the window's rows
/// `k·r .. k·r + k - 1` at column `c`, the lowest row in the lowest bits.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Rows {
    /// The window's own rows (no bitcast, or one between dtypes of one width).
    Same,
    /// Each row of the view packs this many (2 or 4) consecutive window rows.
    Packed(usize),
    /// Each window row splits into this many (2 or 4) consecutive rows of the view.
    Split(usize),
}

impl Rows {
    /// The rows regrouped by a view of `to` bits over a window of `from` bits.
    fn between(from: usize, to: usize) -> Rows {
        match from.cmp(&to) {
            std::cmp::Ordering::Equal => Rows::Same,
            std::cmp::Ordering::Less => Rows::Packed(to / from),
            std::cmp::Ordering::Greater => Rows::Split(from / to),
        }
    }

    /// The window rows per view row (`Packed`), or view rows per window row (`Split`); 1
    /// for `Same`.
    pub fn factor(self) -> usize {
        match self {
            Rows::Same => 1,
            Rows::Packed(k) | Rows::Split(k) => k,
        }
    }
}

/// The static shape and dtype of a printed memref type.
fn memref(ty: &str) -> Result<(Vec<usize>, DType)> {
    match text::ty(ty)? {
        Ty::MemRef { ty, .. } => Ok((ty.shape, ty.dtype)),
        other => Err(Error::new(format!("a ref of type {other:?}"))),
    }
}

/// The static shape and dtype of `op`'s result, a memref.
fn result_memref(op: &OperationRef<'_, '_>) -> Result<(Vec<usize>, DType)> {
    let r = op
        .result(0)
        .map_err(|_| Error::new(format!("`{}` has no result", op_name(op))))?;
    memref(&r.r#type().to_string())
}

/// The shaped view of operand 0 of `op`: one already made, or its plain window.
fn source(s: &Scope, b: &KernelBuilder, op: &OperationRef<'_, '_>) -> Result<Shaped> {
    if let Some(v) = s.shaped(op, 0) {
        return Ok(v);
    }
    let (r, index) = s.place(op, 0)?;
    let index = if index.is_empty() {
        b.ref_shape(r)?
            .into_iter()
            .map(|n| Ix::Ds(Arg::Lit(Literal::Int(0)), n))
            .collect()
    } else {
        index
    };
    let window: Vec<usize> = index
        .iter()
        .filter_map(|ix| match ix {
            Ix::Ds(_, n) => Some(*n),
            _ => None,
        })
        .collect();
    Ok(Shaped {
        base: (r, index),
        shape: window.clone(),
        window,
        dtype: b.ref_dtype(r),
        rows: Rows::Same,
    })
}

/// The shape a shaped view has to the kernel: its reshaped shape, with the second-minor
/// dimension divided by a packing bitcast's factor or multiplied by a splitting one's.
pub(crate) fn view_shape(v: &Shaped) -> Vec<usize> {
    let mut shape = v.shape.clone();
    let rank = shape.len();
    match v.rows {
        Rows::Same => {}
        Rows::Packed(k) => shape[rank - 2] /= k,
        Rows::Split(k) => shape[rank - 2] *= k,
    }
    shape
}

/// `tpu.memref_reshape`: the same elements in row-major order, in the result's shape. A
/// reshape of a view whose bitcast packs or splits rows (by `k`) keeps rows grouped when it
/// keeps the minor dimension (and, for rows split from wider ones, a second-minor one that
/// is a multiple of `k`): it is then the bitcast of the window's reshape to that shape in the
/// window's dtype.
pub(crate) fn memref_reshape(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let mut v = source(s, b, op)?;
    let (shape, _) = result_memref(op)?;
    let old = view_shape(&v);
    if shape.iter().product::<usize>() != old.iter().product::<usize>() {
        return Err(Error::new("a reshape to another element count"));
    }
    if v.rows == Rows::Same {
        v.shape = shape;
        return s.define_shaped(op, v);
    }
    let rank = shape.len();
    let k = v.rows.factor();
    if rank < 2
        || shape[rank - 1] != old[old.len() - 1]
        || (matches!(v.rows, Rows::Split(_)) && !shape[rank - 2].is_multiple_of(k))
    {
        return Err(Error::unsupported(format!(
            "a reshape of {old:?} to {shape:?} of a ref bitcast between widths (reshapes \
             keeping the minor dimension, and whole groups of {k} rows, are imported)"
        )));
    }
    let mut inner = shape;
    match v.rows {
        Rows::Packed(_) => inner[rank - 2] *= k,
        _ => inner[rank - 2] /= k,
    }
    v.shape = inner;
    s.define_shaped(op, v)
}

/// `tpu.memref_bitcast`: between any of 8, 16 and 32 bits (not bool), of the window's bits:
/// elementwise between equal widths, else packing or splitting the window's rows along the
/// second-minor dimension ([`Rows`]). A view of a view is the window seen at the new width.
pub(crate) fn memref_bitcast(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let mut v = source(s, b, op)?;
    let (shape, to) = result_memref(op)?;
    let from = v.dtype;
    let window = b.ref_dtype(v.base.0);
    if from.is_bool() || to.is_bool() || window.is_bool() {
        return Err(Error::unsupported(format!(
            "a ref bitcast from {from} to {to} (bitcasts between 8, 16 and 32-bit dtypes other \
             than bool are imported)"
        )));
    }
    let rows = Rows::between(window.bit_width(), to.bit_width());
    let rank = v.shape.len();
    if rows != Rows::Same && rank < 2 {
        return Err(Error::unsupported(format!(
            "a bitcast of {from}{:?} to {to} (rows pack or split along the second-minor \
             dimension: a ref of rank 2 or more)",
            view_shape(&v)
        )));
    }
    if let Rows::Packed(k) = rows
        && !v.shape[rank - 2].is_multiple_of(k)
    {
        return Err(Error::new(format!(
            "a bitcast of {from}{:?} to {to}: {} rows of {window} do not pack by {k}",
            view_shape(&v),
            v.shape[rank - 2]
        )));
    }
    let old = view_shape(&v);
    v.rows = rows;
    v.dtype = to;
    if shape != view_shape(&v) {
        return Err(Error::new(format!(
            "a bitcast of {from}{old:?} to {to}{shape:?}, expected {:?}",
            view_shape(&v)
        )));
    }
    s.define_shaped(op, v)
}

/// One dimension of a read: its static start, stride and size.
#[derive(Copy, Clone, Debug)]
pub struct Access {
    pub start: usize,
    pub stride: usize,
    pub size: usize,
}

/// Row-major strides of `shape`.
/// The starts as numbers when every one is a non-negative constant, else `None`.
fn static_starts(starts: &[Arg]) -> Option<Vec<usize>> {
    starts
        .iter()
        .map(|a| match a {
            Arg::Lit(Literal::Int(x)) if *x >= 0 => Some(*x as usize),
            _ => None,
        })
        .collect()
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut w = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        w[d] = w[d + 1] * shape[d + 1];
    }
    w
}

/// The window indexers (over `window`'s dimensions) reading `access` of `shape` (a
/// row-major reshape of `window`), and the shape that read has; see the module doc.
pub fn decompose(
    window: &[usize],
    shape: &[usize],
    access: &[Access],
) -> std::result::Result<(Vec<Ix>, Vec<usize>), String> {
    let (w, ws) = (strides(window), strides(shape));
    for (d, a) in access.iter().enumerate() {
        if a.size == 0 || a.stride == 0 || a.start + a.stride * (a.size - 1) >= shape[d] {
            return Err(format!(
                "an access of {} elements from {} by {} outside dimension {d} of {shape:?}",
                a.size, a.start, a.stride
            ));
        }
    }
    let base: usize = access.iter().zip(&ws).map(|(a, w)| a.start * w).sum();
    let digits: Vec<usize> = w
        .iter()
        .zip(window)
        .map(|(&wk, &n)| base / wk % n)
        .collect();
    // (dimension, elements, step) of each read dimension walking more than one element,
    // neighbours merged where the outer one steps over the whole inner one.
    let mut walks: Vec<(usize, usize, usize)> = Vec::new();
    for (d, a) in access.iter().enumerate() {
        if a.size == 1 {
            continue;
        }
        let step = a.stride * ws[d];
        match walks.last_mut() {
            Some((_, n, outer)) if *outer == a.size * step => {
                *n *= a.size;
                *outer = step;
            }
            _ => walks.push((d, a.size, step)),
        }
    }
    let mut slices: Vec<Option<usize>> = vec![None; window.len()];
    let mut last: Option<usize> = None;
    for (d, size, step) in walks {
        let a = Access {
            start: 0,
            stride: access[d].stride,
            size,
        };
        let Some(mut k) = (0..window.len()).rev().find(|&k| w[k] == step) else {
            return Err(format!(
                "a stride of {} along dimension {d} of {shape:?} falls inside one dimension of \
                 the ref's window {window:?}",
                a.stride
            ));
        };
        let mut n = a.size;
        let mut walked = vec![];
        loop {
            if slices[k].is_some() {
                return Err("two dimensions of the access walk one dimension of the window".into());
            }
            if digits[k] + n <= window[k] {
                slices[k] = Some(n);
                walked.push(k);
                break;
            }
            if digits[k] != 0 || !n.is_multiple_of(window[k]) || k == 0 {
                return Err(format!(
                    "dimension {d} of the access crosses dimensions of the window {window:?} \
                     partly"
                ));
            }
            slices[k] = Some(window[k]);
            walked.push(k);
            n /= window[k];
            k -= 1;
        }
        let first = *walked.last().expect("walked one dimension");
        if last.is_some_and(|l| first <= l) {
            return Err("the access's dimensions walk the window out of order".into());
        }
        last = walked.first().copied();
    }
    let lit = |x: usize| Arg::Lit(Literal::Int(x as i64));
    let index = (0..window.len())
        .map(|k| match slices[k] {
            Some(n) => Ix::Ds(lit(digits[k]), n),
            None => Ix::At(lit(digits[k])),
        })
        .collect();
    Ok((index, access.iter().map(|a| a.size).collect()))
}

/// Reads `access` (one per dimension of the view's shape, static) of shaped view `v`, as a
/// value of shape `out`, through the decomposition (see the module doc).
fn read(
    s: &Scope,
    b: &mut KernelBuilder,
    v: &Shaped,
    access: &[Access],
    out: &[usize],
) -> Result<tpukit_dsl::ValueId> {
    match v.rows {
        Rows::Packed(k) => return read_packed(s, b, v, access, out, k),
        Rows::Split(k) => return read_split(s, b, v, access, out, k),
        Rows::Same => {}
    }
    let (index, shape) = decompose(&v.window, &v.shape, access).map_err(Error::unsupported)?;
    let index = super::dma::compose(s, b, v.base.clone(), index)?;
    let x = b.load(v.base.0, &index)?;
    let x = b.reshape(x, &shape)?;
    let x = b.reshape(x, out)?;
    b.bitcast(x, v.dtype)
}

/// `start · mul + add`, folded for a constant start.
fn affine(b: &mut KernelBuilder, start: Arg, mul: i64, add: i64) -> Result<Arg> {
    if let Arg::Lit(Literal::Int(x)) = start {
        return Ok(Arg::Lit(Literal::Int(x * mul + add)));
    }
    let scaled = b.binary(BinaryOp::Mul, start, Arg::Lit(Literal::Int(mul)))?;
    Ok(Arg::Value(b.binary(
        BinaryOp::Add,
        scaled,
        Arg::Lit(Literal::Int(add)),
    )?))
}

/// Reads `sizes` elements every `strides` from `starts` (one of each per dimension) of a view
/// that is not reshaped, as the IR's strided load of its ref (any start, any stride). Of a
/// bitcast between widths, the rows are read in the window's dtype and bitcast: of a packing
/// one, the window rows of each view row (one read for consecutive rows, else one read per
/// part packed by [`pack_parts`]); of a splitting one, whole groups of rows from a start
/// `whole_rows` says is a multiple of the factor ([`super::parity::multiple_of`]).
#[allow(clippy::too_many_arguments)]
fn read_direct(
    s: &Scope,
    b: &mut KernelBuilder,
    v: &Shaped,
    starts: &[Arg],
    strides: &[usize],
    sizes: &[usize],
    out: &[usize],
    whole_rows: bool,
) -> Result<tpukit_dsl::ValueId> {
    let r = starts.len().wrapping_sub(2);
    let plain = Shaped {
        rows: Rows::Same,
        dtype: b.ref_dtype(v.base.0),
        shape: v.window.clone(),
        ..v.clone()
    };
    match v.rows {
        Rows::Same => {}
        Rows::Split(k) => {
            if whole_rows
                && strides.iter().all(|&k| k == 1)
                && sizes.get(r).is_some_and(|n| n.is_multiple_of(k))
            {
                // Whole groups of rows: the window rows they split from.
                let (at, n) = in_window_dtype(b, v, starts.to_vec(), sizes.to_vec(), true)?;
                let x = read_direct(s, b, &plain, &at, strides, &n, &n, false)?;
                let x = b.bitcast(x, v.dtype)?;
                return b.reshape(x, out);
            }
            return Err(Error::unsupported(format!(
                "a strided or dynamic read of a {}-bit ref bitcast to {} (reads of whole groups \
                 of {k} rows, from a static start or a traced one computed as a multiple of \
                 {k}, are imported)",
                v.dtype.bit_width() * k,
                v.dtype
            )));
        }
        Rows::Packed(_) if strides[r] == 1 => {
            let (at, n) = in_window_dtype(b, v, starts.to_vec(), sizes.to_vec(), false)?;
            let x = read_direct(s, b, &plain, &at, strides, &n, &n, false)?;
            let x = b.bitcast(x, v.dtype)?;
            return b.reshape(x, out);
        }
        Rows::Packed(k) => {
            let mut parts = Vec::with_capacity(k);
            for j in 0..k {
                let mut at = starts.to_vec();
                at[r] = affine(b, starts[r], k as i64, j as i64)?;
                let mut by = strides.to_vec();
                by[r] *= k;
                parts.push(read_direct(s, b, &plain, &at, &by, sizes, out, false)?);
            }
            return pack_parts(b, &parts, plain.dtype, v.dtype);
        }
    }
    let index: Vec<Ix> = starts
        .iter()
        .zip(sizes)
        .map(|(&a, &n)| Ix::Ds(a, n))
        .collect();
    let index = super::dma::compose(s, b, v.base.clone(), index)?;
    let mut by = strides.iter();
    let per_dim: Vec<usize> = v
        .base
        .1
        .iter()
        .map(|ix| match ix {
            Ix::Ds(..) => by.next().copied().unwrap_or(1),
            _ => 1,
        })
        .collect();
    let x = b.load_strided(v.base.0, &index, &per_dim)?;
    let x = b.reshape(x, out)?;
    b.bitcast(x, v.dtype)
}

/// Packs `parts` (values of one shape, of dtype `from`: the window rows of each element of a
/// packing view, the lowest first) into elements of `to` (as wide as all parts together):
/// each part's bits, zero-extended to 32 bits (a bf16 widened to f32 holds them in its high
/// half), shifted into place and or-ed; a 16-bit result is taken back to its signed range
/// before the cast to 16 bits (exact).
fn pack_parts(
    b: &mut KernelBuilder,
    parts: &[tpukit_dsl::ValueId],
    from: DType,
    to: DType,
) -> Result<tpukit_dsl::ValueId> {
    let w = from.bit_width();
    let int = |x: i64| Arg::Lit(Literal::Int(x));
    let mut packed: Option<tpukit_dsl::ValueId> = None;
    for (j, &x) in parts.iter().enumerate() {
        let bits = if from == DType::BF16 {
            let x = b.cast(x, DType::F32)?;
            let x = b.bitcast(x, DType::I32)?;
            b.binary(BinaryOp::ShrL, x, int(16))?
        } else {
            let x = match from {
                DType::F16 => b.bitcast(x, DType::I16)?,
                _ => x,
            };
            let x = b.cast(x, DType::I32)?;
            b.binary(BinaryOp::And, x, int((1 << w) - 1))?
        };
        let placed = b.binary(BinaryOp::Shl, bits, int((w * j) as i64))?;
        packed = Some(match packed {
            Some(p) => b.binary(BinaryOp::Or, p, placed)?,
            None => placed,
        });
    }
    let mut x = packed.ok_or_else(|| Error::new("a packing read of no rows"))?;
    if to.bit_width() == 16 {
        let high = b.compare(tpukit_dsl::CmpOp::Ge, x, int(1 << 15))?;
        let wrapped = b.binary(BinaryOp::Sub, x, int(1 << 16))?;
        x = b.select(high, wrapped, x)?;
        x = b.cast(x, DType::I16)?;
    }
    b.bitcast(x, to)
}

/// Reads `sizes` elements every `strides` from `starts` of shaped view `v` as a value of
/// shape `out`: through the decomposition when the starts are static and it applies, else,
/// for a view that is not reshaped, by the IR's strided load (see [`read_direct`] for
/// `whole_rows`).
#[allow(clippy::too_many_arguments)]
fn read_any(
    s: &Scope,
    b: &mut KernelBuilder,
    v: &Shaped,
    starts: &[Arg],
    strides: &[usize],
    sizes: &[usize],
    out: &[usize],
    whole_rows: bool,
) -> Result<tpukit_dsl::ValueId> {
    let fixed = static_starts(starts);
    let reshaped = v.shape != v.window;
    match fixed {
        Some(fixed) => {
            let access: Vec<Access> = (0..starts.len())
                .map(|d| Access {
                    start: fixed[d],
                    stride: strides[d],
                    size: sizes[d],
                })
                .collect();
            match read(s, b, v, &access, out) {
                Err(e) if !reshaped && e.kind == tpukit_dsl::ErrorKind::Unsupported => {}
                other => return other,
            }
        }
        None if reshaped => {
            return Err(Error::unsupported(
                "a dynamic start in a read of a reshaped ref",
            ));
        }
        None => {}
    }
    read_direct(s, b, v, starts, strides, sizes, out, whole_rows)
}

/// A read of a packing bitcast (`k` window rows to one view row): the window rows of each
/// view row are a group dimension of the window's reshape (`[.., kR, C]` as `[.., R, k, C]`),
/// read whole, and the IR's bitcast packs them (it groups rows as Mosaic's ref bitcast does).
fn read_packed(
    s: &Scope,
    b: &mut KernelBuilder,
    v: &Shaped,
    access: &[Access],
    out: &[usize],
    k: usize,
) -> Result<tpukit_dsl::ValueId> {
    let r = access.len() - 2;
    let mut shape = v.shape.clone();
    shape[r] /= k;
    shape.insert(r + 1, k);
    let mut groups = access.to_vec();
    groups.insert(
        r + 1,
        Access {
            start: 0,
            stride: 1,
            size: k,
        },
    );
    let (index, _) = decompose(&v.window, &shape, &groups).map_err(Error::unsupported)?;
    let index = super::dma::compose(s, b, v.base.clone(), index)?;
    let x = b.load(v.base.0, &index)?;
    let mut rows: Vec<usize> = access.iter().map(|a| a.size).collect();
    rows[r] *= k;
    let x = b.reshape(x, &rows)?;
    let x = b.bitcast(x, v.dtype)?;
    b.reshape(x, out)
}

/// A read of a splitting bitcast (one window row to `k` view rows): view rows `k·r ..
/// k·r + k - 1` are the parts of the window's row `r` (the inverse of [`read_packed`]), so a
/// read of whole groups of `k` rows is a read of the window rows they come from, bitcast (the
/// IR's `bitcast` splits rows along the second-minor dimension as Mosaic does).
fn read_split(
    s: &Scope,
    b: &mut KernelBuilder,
    v: &Shaped,
    access: &[Access],
    out: &[usize],
    k: usize,
) -> Result<tpukit_dsl::ValueId> {
    let r = access.len() - 2;
    let rows = access[r];
    if rows.stride != 1 || !rows.start.is_multiple_of(k) || !rows.size.is_multiple_of(k) {
        return Err(Error::unsupported(format!(
            "a read of {} rows from {} by {} of a {}-bit ref bitcast to {} (whole groups of \
             {k} rows are imported)",
            rows.size,
            rows.start,
            rows.stride,
            v.dtype.bit_width() * k,
            v.dtype
        )));
    }
    let mut wide = access.to_vec();
    wide[r] = Access {
        start: rows.start / k,
        stride: 1,
        size: rows.size / k,
    };
    let (index, shape) = decompose(&v.window, &v.shape, &wide).map_err(Error::unsupported)?;
    let index = super::dma::compose(s, b, v.base.clone(), index)?;
    let x = b.load(v.base.0, &index)?;
    let x = b.reshape(x, &shape)?;
    let x = b.bitcast(x, v.dtype)?;
    b.reshape(x, out)
}

/// `vector.load` of a shaped view (the load rule hands it over).
pub(crate) fn load(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    v: &Shaped,
) -> Result<()> {
    let ty = result_type(op, 0)?;
    let rank = v.shape.len();
    let starts = (0..rank)
        .map(|d| s.arg(op, 1 + d))
        .collect::<Result<Vec<_>>>()?;
    let points = rank
        .checked_sub(ty.shape.len())
        .ok_or_else(|| Error::new("a load of higher rank than its ref"))?;
    let sizes: Vec<usize> = (0..rank)
        .map(|d| if d < points { 1 } else { ty.shape[d - points] })
        .collect();
    let whole = rank >= 2 && op.operand(rank - 1).is_ok_and(|x| whole_rows(v, x));
    let x = read_any(s, b, v, &starts, &vec![1; rank], &sizes, &ty.shape, whole)?;
    s.define(op, 0, x)
}

/// `tpu.strided_load %ref[%starts…] {strides}`: elements `start + stride · i` of each
/// dimension, `i` below the result's extent.
pub(crate) fn strided_load(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let v = source(s, b, op)?;
    let ty = result_type(op, 0)?;
    let rank = v.shape.len();
    let stride = attr_opt(op, "strides")
        .map(|a| text::int_array(&a))
        .transpose()?
        .ok_or_else(|| Error::new("a strided load without strides"))?;
    if stride.len() != rank || ty.shape.len() != rank || stride.iter().any(|&k| k <= 0) {
        return Err(Error::new(
            "a strided load of another rank, or a non-positive stride",
        ));
    }
    let starts = (0..rank)
        .map(|d| s.arg(op, 1 + d))
        .collect::<Result<Vec<_>>>()?;
    let strides: Vec<usize> = stride.iter().map(|&k| k as usize).collect();
    let x = read_any(s, b, &v, &starts, &strides, &ty.shape, &ty.shape, false)?;
    s.define(op, 0, x)
}

/// Whether traced start `x` of a view's second-minor dimension is, by how it is computed, a
/// multiple of the rows a splitting bitcast makes of one window row (always, for others).
pub(crate) fn whole_rows(v: &Shaped, x: melior::ir::Value<'_, '_>) -> bool {
    super::parity::multiple_of(x, v.rows.factor() as i64)
}

/// The starts and sizes of one access per dimension of shaped view `v` (in its view shape,
/// [`view_shape`]) as an access of its reshaped shape in the window's dtype: the rows of a
/// packing bitcast are groups of `k` of the window's (start and size times `k`), those of a
/// splitting one parts of the window's, taken in whole groups of `k` (a size that is a
/// multiple of `k`, from a static start that is one or a traced one `whole_rows` says is
/// one, [`whole_rows`]).
pub(crate) fn in_window_dtype(
    b: &mut KernelBuilder,
    v: &Shaped,
    mut starts: Vec<Arg>,
    mut sizes: Vec<usize>,
    whole_rows: bool,
) -> Result<(Vec<Arg>, Vec<usize>)> {
    let Some(r) = sizes.len().checked_sub(2).filter(|_| v.rows != Rows::Same) else {
        return Ok((starts, sizes));
    };
    let k = v.rows.factor();
    if let Rows::Packed(_) = v.rows {
        starts[r] = affine(b, starts[r], k as i64, 0)?;
        sizes[r] *= k;
        return Ok((starts, sizes));
    }
    let kk = k as i64;
    match starts[r] {
        Arg::Lit(Literal::Int(x)) if x >= 0 && x % kk == 0 && sizes[r].is_multiple_of(k) => {
            starts[r] = Arg::Lit(Literal::Int(x / kk));
            sizes[r] /= k;
            Ok((starts, sizes))
        }
        Arg::Value(x) if whole_rows && sizes[r].is_multiple_of(k) => {
            starts[r] = Arg::Value(b.binary(BinaryOp::Div, x, Arg::Lit(Literal::Int(kk)))?);
            sizes[r] /= k;
            Ok((starts, sizes))
        }
        start => Err(Error::unsupported(format!(
            "an access of {} rows from {} of a {}-bit ref bitcast to {} (whole groups of {k} \
             rows from a static start, or a traced one computed as a multiple of {k}, are \
             imported)",
            sizes[r],
            match start {
                Arg::Lit(Literal::Int(x)) => x.to_string(),
                _ => "a traced start".into(),
            },
            v.dtype.bit_width() * k,
            v.dtype
        ))),
    }
}

/// A store of `value` at `index` (one indexer per dimension of its view shape) of shaped view
/// `view`: the value bitcast to the window's dtype (the IR's bitcast packs and splits rows
/// along the second-minor dimension as Mosaic's ref bitcast does), then stored into the
/// window elements the access names: through the decomposition for static starts (see the
/// module doc), or at the window's own indexers for a view that is not reshaped; a traced
/// leading start of whole trailing rows of a reshaped view through [`super::dma::narrow`],
/// other traced starts into one refused by name. A `mask` (of the value's shape) is
/// reshaped with it; into a bitcast between widths, the store merges the value with the
/// view's elements the mask leaves (a read, then a whole store). `(op, first)`: the store
/// op and its first index operand, whose Mosaic proves traced starts multiples.
pub(crate) fn store(
    s: &Scope,
    b: &mut KernelBuilder,
    view: &Shaped,
    index: &[Ix],
    value: tpukit_dsl::ValueId,
    mask: Option<tpukit_dsl::ValueId>,
    (op, first): (&OperationRef<'_, '_>, usize),
) -> Result<()> {
    let shape = view_shape(view);
    if index.len() != shape.len() {
        return Err(Error::new("a store of another rank than its ref"));
    }
    let (starts, sizes): (Vec<Arg>, Vec<usize>) = index
        .iter()
        .zip(&shape)
        .map(|(ix, &n)| match ix {
            Ix::At(a) => (*a, 1),
            Ix::Ds(a, k) => (*a, *k),
            Ix::Full => (Arg::Lit(Literal::Int(0)), n),
        })
        .unzip();
    let rank = shape.len();
    let whole = rank >= 2
        && op
            .operand(first + rank - 2)
            .is_ok_and(|x| whole_rows(view, x));
    let zero = |a: &Arg| matches!(a, Arg::Lit(Literal::Int(0)));
    if view.shape != view.window && static_starts(&starts).is_none() {
        // Whole trailing rows at a traced leading start: the store into that slice of the
        // view ([`super::dma::narrow`]), at its origin.
        if !(starts[1..].iter().all(zero) && sizes[1..] == shape[1..]) {
            return Err(Error::unsupported(
                "a dynamic start in a store into a reshaped ref (stores of whole trailing \
                 rows at a traced leading start are imported)",
            ));
        }
        let leading = |k: i64| {
            op.operand(first)
                .is_ok_and(|v| super::parity::multiple_of(v, k))
        };
        let narrowed =
            super::dma::narrow(s, b, view.clone(), starts, sizes.clone(), whole, &leading)?;
        let origin: Vec<Ix> = sizes
            .iter()
            .map(|&n| Ix::Ds(Arg::Lit(Literal::Int(0)), n))
            .collect();
        return store(s, b, &narrowed, &origin, value, mask, (op, first));
    }
    if let Some(m) = mask.filter(|_| view.rows != Rows::Same) {
        // A narrow element is part of a wider one: the masked store is the whole store of
        // the elements it keeps merged with those it does not (read from the view first).
        let old = read_any(s, b, view, &starts, &vec![1; rank], &sizes, &sizes, whole)?;
        let (value, m) = (b.reshape(value, &sizes)?, b.reshape(m, &sizes)?);
        let merged = b.select(m, value, old)?;
        return store(s, b, view, index, merged, None, (op, first));
    }
    let (r, base) = view.base.clone();
    let value = b.reshape(value, &sizes)?;
    let mask = mask.map(|m| b.reshape(m, &sizes)).transpose()?;
    let (starts, sizes) = in_window_dtype(b, view, starts, sizes, whole)?;
    let value = b.bitcast(value, b.ref_dtype(r))?;
    let fixed = static_starts(&starts);
    let index = match fixed {
        Some(fixed) => {
            let access: Vec<Access> = fixed
                .iter()
                .zip(&sizes)
                .map(|(&start, &size)| Access {
                    start,
                    stride: 1,
                    size,
                })
                .collect();
            decompose(&view.window, &view.shape, &access)
                .map_err(Error::unsupported)?
                .0
        }
        None if view.shape != view.window => {
            return Err(Error::unsupported(
                "a dynamic start in a store into a reshaped ref",
            ));
        }
        None => starts
            .iter()
            .zip(&sizes)
            .map(|(&a, &n)| Ix::Ds(a, n))
            .collect(),
    };
    let stored: Vec<usize> = index
        .iter()
        .filter_map(|ix| match ix {
            Ix::Ds(_, n) => Some(*n),
            _ => None,
        })
        .collect();
    let value = b.reshape(value, &stored)?;
    let index = super::dma::compose(s, b, (r, base), index)?;
    match mask {
        Some(m) => {
            let m = b.reshape(m, &stored)?;
            b.store_masked(r, &index, value, m)
        }
        None => b.store(r, &index, value),
    }
}

#[cfg(test)]
mod tests {
    use super::{Access, Rows, decompose, strides};
    use proptest::prelude::*;
    use tpukit_dsl::{Arg, Ix, Literal};

    fn at(x: i64) -> Ix {
        Ix::At(Arg::Lit(Literal::Int(x)))
    }

    fn ds(x: i64, n: usize) -> Ix {
        Ix::Ds(Arg::Lit(Literal::Int(x)), n)
    }

    fn acc(start: usize, stride: usize, size: usize) -> Access {
        Access {
            start,
            stride,
            size,
        }
    }

    #[test]
    fn rows_group_by_the_width_ratio() {
        assert_eq!(Rows::between(8, 32), Rows::Packed(4));
        assert_eq!(Rows::between(16, 32), Rows::Packed(2));
        assert_eq!(Rows::between(8, 16), Rows::Packed(2));
        assert_eq!(Rows::between(32, 8), Rows::Split(4));
        assert_eq!(Rows::between(16, 8), Rows::Split(2));
        assert_eq!(Rows::between(32, 32), Rows::Same);
        assert_eq!(Rows::Split(4).factor(), 4);
        assert_eq!(Rows::Same.factor(), 1);
    }

    #[test]
    fn a_stride_over_a_merged_dimension_is_a_point_of_the_window() {
        // [2, 16, 4, 128] read as [128, 128], rows 3, 7, 11, ...: head 3 of every token.
        let (index, shape) = decompose(
            &[2, 16, 4, 128],
            &[128, 128],
            &[acc(3, 4, 32), acc(0, 1, 128)],
        )
        .unwrap();
        assert_eq!(index, vec![ds(0, 2), ds(0, 16), at(3), ds(0, 128)]);
        assert_eq!(shape, vec![32, 128]);
    }

    #[test]
    fn neighbouring_dimensions_that_step_evenly_merge() {
        // Row pairs of a [16, 128] window read as [8, 2, 128]: all 16 rows.
        let (index, _) = decompose(
            &[16, 128],
            &[8, 2, 128],
            &[acc(0, 1, 8), acc(0, 1, 2), acc(0, 1, 128)],
        )
        .unwrap();
        assert_eq!(index, vec![ds(0, 16), ds(0, 128)]);
    }

    #[test]
    fn a_stride_inside_one_dimension_is_refused() {
        let err = decompose(&[32, 128], &[32, 128], &[acc(1, 4, 8), acc(0, 1, 128)]).unwrap_err();
        assert!(err.contains("falls inside one dimension"), "{err}");
    }

    #[test]
    fn a_read_past_the_end_is_refused() {
        let err = decompose(&[32, 128], &[32, 128], &[acc(1, 4, 9), acc(0, 1, 128)]).unwrap_err();
        assert!(err.contains("outside dimension 0"), "{err}");
    }

    /// The row-major offsets in `window` of the elements the indexers read, in order.
    fn window_offsets(window: &[usize], index: &[Ix]) -> Vec<usize> {
        let w = strides(window);
        let mut out = vec![0];
        for (k, ix) in index.iter().enumerate() {
            let (start, n) = match ix {
                Ix::Ds(Arg::Lit(Literal::Int(s)), n) => (*s as usize, *n),
                Ix::At(Arg::Lit(Literal::Int(s))) => (*s as usize, 1),
                other => panic!("{other:?}"),
            };
            let step = w[k];
            out = out
                .iter()
                .flat_map(|&o| (0..n).map(move |i| o + (start + i) * step))
                .collect();
        }
        out
    }

    /// The row-major offsets of the elements `access` reads of `shape`, in order.
    fn access_offsets(shape: &[usize], access: &[Access]) -> Vec<usize> {
        let w = strides(shape);
        let mut out = vec![0];
        for (d, a) in access.iter().enumerate() {
            let (step, a) = (w[d], *a);
            out = out
                .iter()
                .flat_map(|&o| (0..a.size).map(move |i| o + (a.start + a.stride * i) * step))
                .collect();
        }
        out
    }

    /// Splits `factors` (prime-ish pieces of the element count) into `dims` groups.
    fn regroup(factors: &[usize], cuts: &[bool]) -> Vec<usize> {
        let mut shape = vec![1];
        for (f, &cut) in factors.iter().zip(cuts) {
            if cut {
                shape.push(*f);
            } else {
                *shape.last_mut().unwrap() *= f;
            }
        }
        shape
    }

    proptest! {
        // Cheap cases; few random reads decompose with a stride, so many of them.
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Whenever a read decomposes, the window elements it names are exactly the elements
        /// the strided read of the reshaped ref reads, in the same order.
        #[test]
        fn a_decomposed_read_reads_exactly_the_strided_elements(
            factors in prop::collection::vec(prop::sample::select(vec![1usize, 2, 3, 4, 8]), 1..6),
            window_cuts in prop::collection::vec(any::<bool>(), 6),
            shape_cuts in prop::collection::vec(any::<bool>(), 6),
            picks in prop::collection::vec((0usize..64, 1usize..9, 1usize..64), 6),
        ) {
            let window = regroup(&factors, &window_cuts);
            let shape = regroup(&factors, &shape_cuts);
            let access: Vec<Access> = shape
                .iter()
                .zip(&picks)
                .map(|(&n, &(start, stride, size))| {
                    let start = start % n;
                    let stride = stride.min(n);
                    let size = 1 + (size - 1) % ((n - 1 - start) / stride + 1);
                    Access { start, stride, size }
                })
                .collect();
            if let Ok((index, sizes)) = decompose(&window, &shape, &access) {
                prop_assert_eq!(sizes, access.iter().map(|a| a.size).collect::<Vec<_>>());
                prop_assert_eq!(window_offsets(&window, &index), access_offsets(&shape, &access));
            }
        }
    }
}
