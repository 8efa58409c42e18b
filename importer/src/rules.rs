//! The Mosaic import rules: one small function per op, found by name in [`MOSAIC`]; the
//! elementwise `arith`/`math` ops are found in the op table's Mosaic column instead
//! (`tpukit_dsl::UnaryOp::from_mosaic`), as are comparison predicates and reduction kinds.
//!
//! Each rule reads its op's operands through the [`Scope`], appends kernel-IR ops through the
//! [`KernelBuilder`] (which checks them as it builds) and binds the op's results. An op with
//! no rule is an error naming it and its source location; a rule that meets an attribute it
//! does not handle (a masked or accumulating store it cannot express, a reduction kind, a
//! comparison predicate) fails the same way. No rule approximates.

use super::scope::{Scope, attr, attr_opt, op_name, operand_type, result_type};
use super::text;
use melior::ir::{
    BlockRef, RegionLike, Value, ValueLike,
    operation::{OperationLike, OperationRef},
};
use std::cell::RefCell;
use tpukit_dsl::{
    Arg, BinaryOp, CmpOp, DType, DotDims, Error, ErrorKind, Ix, KernelBuilder, Literal, OpInfo,
    ReduceOp, Result, Type, UnaryOp, ValueId,
};

pub type Rule = fn(&mut Scope, &mut KernelBuilder, &OperationRef<'_, '_>, &Table) -> Result<()>;

/// What one dialect imports: rules by op name, and the op table's column that names the
/// dialect's elementwise ops (imported one to one, without a rule of their own).
pub struct Table {
    pub rules: &'static [(&'static str, Rule)],
    pub column: fn(&OpInfo) -> &'static [&'static str],
}

/// An op the op table maps one to one.
#[derive(Copy, Clone)]
enum Elementwise {
    Unary(UnaryOp),
    Binary(BinaryOp),
}

impl Table {
    fn elementwise(&self, name: &str) -> Option<Elementwise> {
        let named = |i: &OpInfo| (self.column)(i).contains(&name);
        let unary = UnaryOp::ALL.iter().find(|o| named(o.info()));
        let binary = BinaryOp::ALL.iter().find(|o| named(o.info()));
        unary
            .map(|&u| Elementwise::Unary(u))
            .or(binary.map(|&b| Elementwise::Binary(b)))
    }

    /// Every op name the table imports: its rules', then the op table's.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        let unary = UnaryOp::ALL.iter().map(|o| o.info());
        let binary = BinaryOp::ALL.iter().map(|o| o.info());
        let column = self.column;
        self.rules.iter().map(|(n, _)| *n).chain(
            unary
                .chain(binary)
                .flat_map(move |i| column(i).iter().copied()),
        )
    }
}

/// Imports an elementwise op of the op table: the op on the MLIR op's operands.
fn elementwise(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    e: Elementwise,
) -> Result<()> {
    let v = match e {
        Elementwise::Unary(u) => b.unary(u, s.value(op, 0)?)?,
        Elementwise::Binary(o) => b.binary(o, s.value(op, 0)?, s.value(op, 1)?)?,
    };
    s.define(op, 0, v)
}

/// Imports one op with its rule, attaching the op's name and location to any error.
pub fn import_op(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    table: &Table,
) -> Result<()> {
    let name = op_name(op);
    let loc = text::loc(&op.location().to_string());
    b.set_loc(loc.clone());
    let rule = table.rules.iter().find(|(n, _)| *n == name);
    let imported = match (rule, table.elementwise(&name)) {
        (Some((_, rule)), _) => rule(s, b, op, table),
        (None, Some(e)) => elementwise(s, b, op, e),
        (None, None) => {
            return Err(
                Error::op(&name, "unsupported: tpukit has no import rule for this op")
                    .with_kind(ErrorKind::Unsupported)
                    .at(loc.as_ref()),
            );
        }
    };
    imported.map_err(|mut e| {
        if e.op.is_none() {
            e.op = Some(name.clone());
        }
        e.at(loc.as_ref())
    })
}

/// Converts to the result's element type (every `arith` cast the IR's `cast` covers).
fn cast(s: &mut Scope, b: &mut KernelBuilder, op: &OperationRef<'_, '_>, _: &Table) -> Result<()> {
    let to = result_type(op, 0)?.dtype;
    let v = b.cast(s.value(op, 0)?, to)?;
    s.define(op, 0, v)
}

/// `index_cast`, `assume_multiple`, `sdy.sharding_constraint` (a layout hint for XLA's
/// partitioner, on one device nothing): the value itself (index is i32 in the IR).
pub(crate) fn identity(
    s: &mut Scope,
    _: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let v = s.value(op, 0)?;
    s.define(op, 0, v)
}

fn terminator(
    s: &mut Scope,
    _: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let values = (0..op.operand_count())
        .map(|i| s.value(op, i))
        .collect::<Result<Vec<_>>>()?;
    s.yielded = Some(values);
    Ok(())
}

fn constant(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let ty = result_type(op, 0)?;
    let value = attr(op, "value")?;
    if let Some(values) = text::dense_values(&value, &ty)? {
        let v = b.dense(values, ty)?;
        return s.define(op, 0, v);
    }
    let lit = text::literal(&value, ty.dtype)?;
    let v = b.constant(lit, ty);
    s.note_const(v, lit);
    s.define(op, 0, v)
}

/// The name of an `arith.cmpi`/`cmpf` predicate (printed as an integer or an enum case).
pub(crate) fn predicate_name(op: &OperationRef<'_, '_>, float: bool) -> Result<String> {
    let raw = attr(op, "predicate")?;
    Ok(match text::int(&raw) {
        Ok(n) => {
            let names: &[&str] = if float {
                &[
                    "false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge",
                    "ult", "ule", "une", "uno", "true",
                ]
            } else {
                &[
                    "eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge",
                ]
            };
            names.get(n as usize).copied().unwrap_or("?").to_string()
        }
        Err(_) => text::enum_case(&raw)?.to_string(),
    })
}

/// The IR comparison of a predicate whose meaning (NaN included) is the IR's (the op table's
/// Mosaic names: ordered float comparisons, and `une` for `!=`).
pub(crate) fn predicate(name: &str) -> Result<CmpOp> {
    CmpOp::from_mosaic(name)
        .ok_or_else(|| Error::unsupported(format!("comparison predicate `{name}`")))
}

/// `arith.cmpf`. Besides the IR's own comparisons, the NaN tests Pallas emits: `one`
/// (ordered and unequal: what Pallas lowers `!=` and `jnp.isnan` to on TPU), `ord` and `uno`,
/// built from `x == x` (false only for NaN).
fn cmpf(s: &mut Scope, b: &mut KernelBuilder, op: &OperationRef<'_, '_>, _: &Table) -> Result<()> {
    let (x, y) = (s.value(op, 0)?, s.value(op, 1)?);
    let name = predicate_name(op, true)?;
    let v = match name.as_str() {
        "one" | "ord" | "uno" => {
            let x_ok = b.compare(CmpOp::Eq, x, x)?;
            let y_ok = b.compare(CmpOp::Eq, y, y)?;
            let ordered = b.binary(BinaryOp::And, x_ok, y_ok)?;
            match name.as_str() {
                "one" => {
                    let unequal = b.compare(CmpOp::Ne, x, y)?;
                    b.binary(BinaryOp::And, ordered, unequal)?
                }
                "ord" => ordered,
                _ => b.unary(UnaryOp::Not, ordered)?,
            }
        }
        other => b.compare(predicate(other)?, x, y)?,
    };
    s.define(op, 0, v)
}

/// `arith.cmpi`. An unsigned predicate (`ult`, `ule`, `ugt`, `uge`: uint32 comparisons, as
/// the IR holds uint32 in i32) is the signed one on both operands with their sign bit flipped
/// (`x ^ MIN`), which orders two's complement bits as unsigned numbers: exact.
fn cmpi(s: &mut Scope, b: &mut KernelBuilder, op: &OperationRef<'_, '_>, _: &Table) -> Result<()> {
    let name = predicate_name(op, false)?;
    let (mut lhs, mut rhs) = (s.value(op, 0)?, s.value(op, 1)?);
    let signed = match name.as_str() {
        "ult" => Some("slt"),
        "ule" => Some("sle"),
        "ugt" => Some("sgt"),
        "uge" => Some("sge"),
        _ => None,
    };
    if signed.is_some() {
        let what = format!("unsigned comparison `{name}`");
        lhs = super::unsigned::sign_flipped(b, lhs, &what)?;
        rhs = super::unsigned::sign_flipped(b, rhs, &what)?;
    }
    let v = b.compare(predicate(signed.unwrap_or(&name))?, lhs, rhs)?;
    s.define(op, 0, v)
}

fn select(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let v = b.select(s.value(op, 0)?, s.value(op, 1)?, s.value(op, 2)?)?;
    s.define(op, 0, v)
}

/// The indexers of a vector or scalar access: one start per memref dimension; the leading
/// dimensions beyond the value's rank are single elements, the rest slices of the value's
/// extents.
fn indexers(
    s: &Scope,
    op: &OperationRef<'_, '_>,
    first: usize,
    count: usize,
    value_shape: &[usize],
) -> Result<Vec<Ix>> {
    if value_shape.len() > count {
        return Err(Error::new(format!(
            "a rank-{} value accessed with {count} indices",
            value_shape.len()
        )));
    }
    let points = count - value_shape.len();
    (0..count)
        .map(|d| {
            let start = s.arg(op, first + d)?;
            Ok(if d < points {
                Ix::At(start)
            } else {
                Ix::Ds(start, value_shape[d - points])
            })
        })
        .collect()
}

/// How many operands of `op` follow its first `leading` (the indices of a load or store).
fn indices(op: &OperationRef<'_, '_>, leading: usize) -> Result<usize> {
    op.operand_count()
        .checked_sub(leading)
        .ok_or_else(|| Error::new(format!("fewer than {leading} operands")))
}

/// `vector.load %ref[%i, …]` and `memref.load %ref[%i, …]`. A load nothing depends on (Pallas
/// emits one before every store, the old value of its "swap", sometimes reshaped) is dropped:
/// loads have no effects, and a dead load of an output would make it look read.
fn load(s: &mut Scope, b: &mut KernelBuilder, op: &OperationRef<'_, '_>, _: &Table) -> Result<()> {
    if results_dead(op) {
        return Ok(());
    }
    if let Some(v) = s.shaped(op, 0) {
        return super::ref_view::load(s, b, op, &v);
    }
    let ty = result_type(op, 0)?;
    let index = indexers(s, op, 1, indices(op, 1)?, &ty.shape)?;
    let (r, index) = super::dma::through_view(s, b, op, 0, index)?;
    let v = b.load(r, &index)?;
    s.define(op, 0, v)
}

/// Whether nothing depends on `v`: it has no uses, or is used only by views (`shape_cast`,
/// `broadcast`) whose results nothing depends on. Pallas's swap (`ref[…] = v`) loads the old
/// value and reshapes it without using it; neither is imported.
fn is_dead(v: Value<'_, '_>) -> bool {
    // SAFETY: `v` is a live value of the module being imported; the C API only reads it and
    // the values and operations it hands out, all owned by that module.
    unsafe {
        let mut use_ = mlir_sys::mlirValueGetFirstUse(v.to_raw());
        while !mlir_sys::mlirOpOperandIsNull(use_) {
            let owner = mlir_sys::mlirOpOperandGetOwner(use_);
            if !is_dead_view(owner) {
                return false;
            }
            use_ = mlir_sys::mlirOpOperandGetNextUse(use_);
        }
    }
    true
}

/// # Safety
/// `op` must be a live operation of the module being imported.
unsafe fn is_dead_view(op: mlir_sys::MlirOperation) -> bool {
    // SAFETY: per the contract, `op` is live; its name and results are read only.
    unsafe {
        let name = mlir_sys::mlirIdentifierStr(mlir_sys::mlirOperationGetName(op));
        let name = std::slice::from_raw_parts(name.data as *const u8, name.length);
        let name = name.strip_prefix(b"stable_mosaic.").unwrap_or(name);
        if name != b"vector.shape_cast" && name != b"vector.broadcast" {
            return false;
        }
        (0..mlir_sys::mlirOperationGetNumResults(op))
            .all(|i| is_dead(Value::from_raw(mlir_sys::mlirOperationGetResult(op, i))))
    }
}

/// Whether every result of `op` is dead (see [`is_dead`]).
fn results_dead(op: &OperationRef<'_, '_>) -> bool {
    op.result_count() > 0
        && (0..op.result_count()).all(|i| op.result(i).is_ok_and(|r| is_dead(r.into())))
}

/// `vector.store %v, %ref[%i, …]` and `memref.store`.
fn store(s: &mut Scope, b: &mut KernelBuilder, op: &OperationRef<'_, '_>, _: &Table) -> Result<()> {
    let value = s.value(op, 0)?;
    let shape = b.ty(value).shape.clone();
    let index = indexers(s, op, 2, indices(op, 2)?, &shape)?;
    if let Some(view) = s.shaped(op, 1) {
        return super::ref_view::store(s, b, &view, &index, value, None, (op, 2));
    }
    let (r, index) = super::dma::through_view(s, b, op, 1, index)?;
    b.store(r, &index, value)
}

/// `tpu.vector_store %v, %ref[%i, …] (masked %m)`: operand segments `[value, ref, indices,
/// mask]`. Accumulating (`add = true`) and strided stores are refused.
fn tpu_vector_store(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    if attr_opt(op, "add").is_some_and(|a| a.starts_with("true")) {
        return Err(Error::unsupported("accumulating store (`add = true`)"));
    }
    if let Some(st) = attr_opt(op, "strides")
        && !text::int_array(&st)?.is_empty()
    {
        return Err(Error::unsupported(format!("strided store ({st})")));
    }
    let segments = text::int_array(&attr(op, "operandSegmentSizes")?)?;
    let [1, 1, n @ 0..=i64::MAX, m @ 0..=1] = segments[..] else {
        return Err(Error::new(format!(
            "unexpected operand segments {segments:?}"
        )));
    };
    let value = s.value(op, 0)?;
    let shape = b.ty(value).shape.clone();
    let index = indexers(s, op, 2, n as usize, &shape)?;
    if let Some(view) = s.shaped(op, 1) {
        let mask = (m == 1).then(|| s.value(op, 2 + n as usize)).transpose()?;
        return super::ref_view::store(s, b, &view, &index, value, mask, (op, 2));
    }
    let (r, index) = super::dma::through_view(s, b, op, 1, index)?;
    if m == 1 {
        let mask = s.value(op, 2 + n as usize)?;
        b.store_masked(r, &index, value, mask)
    } else {
        b.store(r, &index, value)
    }
}

/// `vector.broadcast`: a scalar or a vector to a larger shape (numpy rules, right-aligned).
fn broadcast(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    if results_dead(op) {
        return Ok(());
    }
    let shape = result_type(op, 0)?.shape;
    let v = b.broadcast_to(s.value(op, 0)?, &shape)?;
    s.define(op, 0, v)
}

/// `vector.shape_cast`: same elements, new shape.
fn shape_cast(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    if results_dead(op) {
        return Ok(());
    }
    let shape = result_type(op, 0)?.shape;
    let v = b.reshape(s.value(op, 0)?, &shape)?;
    s.define(op, 0, v)
}

fn transpose(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let perm: Vec<usize> = text::int_array(&attr(op, "permutation")?)?
        .into_iter()
        .map(|p| p as usize)
        .collect();
    let v = b.transpose(s.value(op, 0)?, &perm)?;
    s.define(op, 0, v)
}

/// The scratch buffer a Mosaic op goes through, set aside before import (the IR slices refs,
/// not values): a `tpu.concatenate` stores its operands into its result and loads it whole
/// (the StableHLO rule); a `tpu.dynamic_rotate` stores its operand twice along the rotated
/// dimension and loads one window of it; a `vector.extract_strided_slice` wider than one
/// element in some narrowed dimension stores its operand and loads the slice.
pub(crate) fn mosaic_scratch_type(op: &OperationRef<'_, '_>) -> Option<Result<Type>> {
    match op_name(op).as_str() {
        "tpu.concatenate" => Some(result_type(op, 0)),
        // A malformed slice reserves nothing: its rule reports it, at the op.
        "vector.extract_strided_slice" => {
            wide_slice(op).ok().flatten().map(|()| operand_type(op, 0))
        }
        // A strided rotation also keeps its result there, after the two copies; one by a
        // traced shift is the IR's roll, which needs none.
        "tpu.dynamic_rotate" if traced_rotation(op) => None,
        "tpu.dynamic_rotate" => Some(result_type(op, 0).and_then(|mut t| {
            let d = rotated_dim(op, t.rank())?;
            t.shape[d] *= if stride(op, t.rank(), d)?.is_some() {
                3
            } else {
                2
            };
            Ok(t)
        })),
        _ => None,
    }
}

/// Whether `op`, a `tpu.dynamic_rotate`, rotates by a shift no `arith.constant` defines:
/// it is imported as the IR's roll (lowered back to `tpu.dynamic_rotate`), not through a
/// scratch buffer.
fn traced_rotation(op: &OperationRef<'_, '_>) -> bool {
    let Ok(shift) = op.operand(1) else {
        return false;
    };
    match melior::ir::operation::OperationResult::try_from(shift) {
        Ok(r) => op_name(&r.owner()) != "arith.constant",
        Err(_) => true,
    }
}

/// The dimension a `tpu.dynamic_rotate` rotates, checked against the value's rank.
fn rotated_dim(op: &OperationRef<'_, '_>, rank: usize) -> Result<usize> {
    let d = text::int(&attr(op, "dimension")?)?;
    if d < 0 || d as usize >= rank {
        return Err(Error::new(format!(
            "rotation of dimension {d} of a rank-{rank} value"
        )));
    }
    Ok(d as usize)
}

/// The `(stride, stride dimension)` of a strided `tpu.dynamic_rotate` of dimension `d`
/// (`pltpu.roll(..., stride=, stride_axis=)`), checked; `None` for a plain rotation.
fn stride(op: &OperationRef<'_, '_>, rank: usize, d: usize) -> Result<Option<(i64, usize)>> {
    let (Some(stride), Some(dim)) = (attr_opt(op, "stride"), attr_opt(op, "stride_dimension"))
    else {
        return Ok(None);
    };
    let (stride, dim) = (text::int(&stride)?, text::int(&dim)?);
    if stride < 0 || dim < 0 || dim as usize >= rank || dim as usize == d {
        return Err(Error::new(format!(
            "a rotation of dimension {d} with stride {stride} along dimension {dim} of a \
             rank-{rank} value"
        )));
    }
    Ok(Some((stride, dim as usize)))
}

/// `tpu.dynamic_rotate %x by %shift dim d` (`pltpu.roll`, as `jnp.roll`: element `i` moves
/// to `i + shift` modulo the extent): by a traced shift, the IR's roll; by a constant one,
/// `x` stored twice along `d` in a scratch buffer and the window starting at `-shift` modulo
/// the extent loaded (exact for any dtype). A strided rotation (`stride = k`,
/// `stride_dimension = e`) rotates the `j`-th slice along `e` by `shift + j * k`: by a
/// traced shift, the IR's strided roll; by a constant one, each slice's window is loaded and
/// stored into the buffer's third part, which is loaded whole.
fn dynamic_rotate(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let x = s.value(op, 0)?;
    let shift = s.value(op, 1)?;
    let shape = b.ty(x).shape.clone();
    let d = rotated_dim(op, shape.len())?;
    let strided = stride(op, shape.len(), d)?;
    if traced_rotation(op) {
        let v = match strided {
            Some(stride) => b.strided_roll(x, shift, d, stride)?,
            None => b.roll(x, shift, d)?,
        };
        return s.define(op, 0, v);
    }
    let c = s
        .constant(shift)
        .map(|c| c.as_i64())
        .ok_or_else(|| Error::new("a rotation by a constant of no recorded value"))?;
    let buf = s.scratch_of(op, "the rotation")?;
    let n = shape[d] as i64;
    let window = |start: Arg| {
        let mut index = vec![Ix::Full; shape.len()];
        index[d] = Ix::Ds(start, n as usize);
        index
    };
    let int = |i: i64| Arg::Lit(Literal::Int(i));
    b.store(buf, &window(int(0)), x)?;
    b.store(buf, &window(int(n)), x)?;
    let Some((k, e)) = strided else {
        // The window starts at `-shift` modulo `n`.
        let v = b.load(buf, &window(int((-c).rem_euclid(n.max(1)))))?;
        return s.define(op, 0, v);
    };
    // Slice `j` along `e` is rolled by `shift + j * k`: one window per slice at a static
    // start (which a TPU can load).
    if n > 0 {
        for j in 0..shape[e] {
            let at = (-(c.rem_euclid(n) + (j as i64 * k.rem_euclid(n)) % n)).rem_euclid(n);
            let mut from = window(int(at));
            from[e] = Ix::Ds(int(j as i64), 1);
            let slice = b.load(buf, &from)?;
            let mut to = window(int(2 * n));
            to[e] = Ix::Ds(int(j as i64), 1);
            b.store(buf, &to, slice)?;
        }
    }
    let v = b.load(buf, &window(int(2 * n)))?;
    s.define(op, 0, v)
}

/// Whether `v` is a splat constant equal to `x`.
fn is_const(s: &Scope, v: ValueId, x: f64) -> bool {
    s.constant(v).is_some_and(|l| l.as_f64() == x)
}

/// `vector.multi_reduction <kind>, %src, %acc [dims]`: the reduction, combined with the
/// accumulator unless it is the kind's identity.
fn multi_reduction(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let kind_attr = attr(op, "kind")?;
    let kind = text::enum_case(&kind_attr)?;
    let reduce = ReduceOp::from_mosaic(kind)
        .ok_or_else(|| Error::unsupported(format!("reduction kind `{kind}`")))?;
    let (combine, identity) = match reduce {
        ReduceOp::Sum => (BinaryOp::Add, 0.0),
        ReduceOp::Max => (BinaryOp::Max, f64::NEG_INFINITY),
        ReduceOp::Min => (BinaryOp::Min, f64::INFINITY),
    };
    let dims = text::int_array(&attr(op, "reduction_dims")?)?;
    let r = b.reduce(reduce, s.value(op, 0)?, &dims)?;
    let acc = s.value(op, 1)?;
    let int_identity = matches!(reduce, ReduceOp::Max | ReduceOp::Min)
        && b.ty(acc).dtype.is_int()
        && s.constant(acc).is_some_and(|l| {
            let i = l.as_i64();
            (reduce == ReduceOp::Max && i == i32::MIN as i64)
                || (reduce == ReduceOp::Min && i == i32::MAX as i64)
        });
    let v = if is_const(s, acc, identity) || int_identity {
        r
    } else {
        b.binary(combine, r, acc)?
    };
    s.define(op, 0, v)
}

/// `vector.extract %v[p0, p1, …]` at constant positions: the element (or sub-vector) of the
/// leading dimensions at those positions. A position in a dimension of extent 1 is a reshape
/// (what JAX emits after a reduction to a scalar); any other is picked out exactly by a
/// maximum over the dimension in which every other element is the dtype's lowest value.
/// Dynamic positions have no kernel-IR form and are refused.
fn extract(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    if op.operand_count() > 1 {
        return Err(Error::unsupported(
            "`vector.extract` at a dynamic position (index a ref instead)",
        ));
    }
    let positions = text::int_array(&attr(op, "static_position")?)?;
    let mut v = s.value(op, 0)?;
    let shape = b.ty(v).shape.clone();
    for (d, &p) in positions.iter().enumerate() {
        let extent = *shape.get(d).ok_or_else(|| {
            Error::new(format!(
                "{} positions for a rank-{} vector",
                positions.len(),
                shape.len()
            ))
        })?;
        if p < 0 || p as usize >= extent {
            return Err(Error::unsupported(format!(
                "`vector.extract` position {p} in a dimension of extent {extent} \
                 (dynamic positions are refused)"
            )));
        }
        if extent > 1 {
            v = pick(b, v, d, p)?;
        }
    }
    let v = b.reshape(v, &result_type(op, 0)?.shape)?;
    s.define(op, 0, v)
}

/// A `vector.extract_strided_slice`'s `(offset, size)` per leading dimension it names, checked
/// against the operand's shape (in bounds, unit strides).
fn slice_bounds(op: &OperationRef<'_, '_>) -> Result<Vec<(i64, i64)>> {
    let offsets = text::int_list(&attr(op, "offsets")?)?;
    let sizes = text::int_list(&attr(op, "sizes")?)?;
    let strides = text::int_list(&attr(op, "strides")?)?;
    if strides.iter().any(|&st| st != 1) {
        return Err(Error::unsupported(format!(
            "a strided slice of a value (strides {strides:?})"
        )));
    }
    let shape = operand_type(op, 0)?.shape;
    if offsets.len() != sizes.len() || offsets.len() > shape.len() {
        return Err(Error::new(format!(
            "a slice with offsets {offsets:?} and sizes {sizes:?} of a value of shape {shape:?}"
        )));
    }
    for (d, (&o, &n)) in offsets.iter().zip(&sizes).enumerate() {
        if o < 0 || n < 0 || o + n > shape[d] as i64 {
            return Err(Error::new(format!(
                "a slice of elements {o}..{} of dimension {d} of a value of shape {shape:?}",
                o + n
            )));
        }
    }
    Ok(offsets.into_iter().zip(sizes).collect())
}

/// `Some(())` when the slice narrows some dimension to more than one element but not all of
/// them: it goes through a scratch buffer (see [`mosaic_scratch_type`]).
fn wide_slice(op: &OperationRef<'_, '_>) -> Result<Option<()>> {
    let shape = operand_type(op, 0)?.shape;
    let wide = slice_bounds(op)?
        .iter()
        .zip(&shape)
        .any(|(&(_, n), &extent)| n > 1 && n != extent as i64);
    Ok(wide.then_some(()))
}

/// `vector.extract_strided_slice` (a static slice of a value, as `x[3]` or `x[:16]` lowers),
/// unit strides only. When every dimension is kept whole or narrowed to one element, the
/// elements are picked as [`extract`] does; a wider slice stores the value into its scratch
/// buffer and loads the slice back (the IR slices refs, not values).
fn extract_strided_slice(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let bounds = slice_bounds(op)?;
    let mut v = s.value(op, 0)?;
    let shape = b.ty(v).shape.clone();
    if wide_slice(op)?.is_some() {
        let buf = s.scratch_of(op, "the slice")?;
        b.store(buf, &vec![Ix::Full; shape.len()], v)?;
        let mut window = vec![Ix::Full; shape.len()];
        for (d, &(o, n)) in bounds.iter().enumerate() {
            window[d] = Ix::Ds(Arg::Lit(Literal::Int(o)), n as usize);
        }
        let v = b.load(buf, &window)?;
        return s.define(op, 0, v);
    }
    for (d, &(o, n)) in bounds.iter().enumerate() {
        if n != shape[d] as i64 {
            v = pick(b, v, d, o)?;
        }
    }
    let v = b.reshape(v, &result_type(op, 0)?.shape)?;
    s.define(op, 0, v)
}

/// Element `p` of dimension `d` of `v`, keeping `d` with extent 1: a maximum over `d` where
/// every element but the `p`-th is the dtype's lowest value (exact: the maximum of `x` and
/// values no larger than any `x` is `x`, NaN and -0.0 included).
fn pick(b: &mut KernelBuilder, v: ValueId, d: usize, p: i64) -> Result<ValueId> {
    let ty = b.ty(v).clone();
    let lowest = match ty.dtype {
        d if d.is_float() => Literal::Float(f64::NEG_INFINITY),
        DType::I32 => Literal::Int(i32::MIN as i64),
        DType::I16 => Literal::Int(i16::MIN as i64),
        DType::I8 => Literal::Int(i8::MIN as i64),
        other => {
            return Err(Error::unsupported(format!(
                "`vector.extract` from a {other} vector at a non-unit dimension"
            )));
        }
    };
    let at = b.iota(DType::I32, &ty.shape, d)?;
    let here = b.compare(CmpOp::Eq, at, p)?;
    let masked = b.select(here, v, Arg::Lit(lowest))?;
    b.reduce_keepdims(ReduceOp::Max, masked, &[d as i64])
}

/// The seven lists of `#tpu.dot_dimension_numbers<[lc], [rc], [lnc], [rnc], [out], [lb], [rb]>`.
fn dot_dimension_numbers(a: &str) -> Result<Vec<Vec<i64>>> {
    let mut lists = Vec::new();
    let mut rest = a;
    while let Some(open) = rest.find('[') {
        let close = rest[open..]
            .find(']')
            .ok_or_else(|| Error::new(format!("malformed dimension numbers `{a}`")))?;
        lists.push(text::int_list(&rest[open..open + close + 1])?);
        rest = &rest[open + close + 1..];
    }
    Ok(lists)
}

/// `tpu.matmul %lhs, %rhs, %acc`: a `dot` (f32 accumulation) plus the accumulator unless it
/// is zero. Unbatched, with the output laid out `(lhs free dims, rhs free dims)`. A 1-D
/// operand (`jnp.dot` of a matrix and a vector, either way round) has no free dimension; it
/// is made 2-D with a unit free dimension and the product reshaped to the result's shape.
fn matmul(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let (mut lhs, mut rhs, acc) = (s.value(op, 0)?, s.value(op, 1)?, s.value(op, 2)?);
    let out = result_type(op, 0)?;
    let dims = match attr_opt(op, "dimension_numbers") {
        Some(dn) => matmul_dims(&dn)?,
        None => {
            let flag = |n: &str| attr_opt(op, n).is_some_and(|a| a.starts_with("true"));
            DotDims {
                lhs_contract: if flag("transpose_lhs") { 0 } else { 1 },
                rhs_contract: if flag("transpose_rhs") { 1 } else { 0 },
            }
        }
    };
    let (lt, rt) = (b.ty(lhs).shape.clone(), b.ty(rhs).shape.clone());
    // libtpu cannot shape-cast a packed 1-D 16-bit float vector on every generation (v5e:
    // "unsupported shape cast"); f32 copies hold the operands exactly and the product
    // accumulates in f32 either way, so the result is the same.
    let narrow =
        |b: &KernelBuilder, v: ValueId| b.ty(v).dtype.is_float() && b.ty(v).dtype != DType::F32;
    // Mixed float operands (paged attention's f32 query times its bf16 pages): Mosaic
    // widens the narrower one, exactly, so the product is the f32 one.
    let mixed = b.ty(lhs).dtype.is_float()
        && b.ty(rhs).dtype.is_float()
        && b.ty(lhs).dtype != b.ty(rhs).dtype;
    if mixed || ((lt.len() == 1 || rt.len() == 1) && (narrow(b, lhs) || narrow(b, rhs))) {
        lhs = b.cast(lhs, DType::F32)?;
        rhs = b.cast(rhs, DType::F32)?;
    }
    if let [k] = lt[..] {
        lhs = b.reshape(lhs, &[1, k])?;
    }
    if let [k] = rt[..] {
        rhs = b.reshape(rhs, &[k, 1])?;
    }
    let dims = DotDims {
        lhs_contract: if lt.len() == 1 { 1 } else { dims.lhs_contract },
        rhs_contract: if rt.len() == 1 { 0 } else { dims.rhs_contract },
    };
    let d = b.dot(lhs, rhs, dims, out.dtype)?;
    let d = b.reshape(d, &out.shape)?;
    let v = if is_const(s, acc, 0.0) {
        d
    } else {
        b.binary(BinaryOp::Add, acc, d)?
    };
    s.define(op, 0, v)
}

/// The contraction of `#tpu.dot_dimension_numbers` when the IR's `dot` can express it: one
/// contracting dimension per side, no batch dimensions or dimension 0 of both (a batched
/// `dot_general`, the batch first in the output), at most one free dimension per side (none
/// for a 1-D operand), and the output ordered lhs free dimension, rhs free dimension.
fn matmul_dims(dn: &str) -> Result<DotDims> {
    let refuse = || {
        Error::unsupported(format!(
            "matmul dimension numbers {dn} (rank 1 or 2, or batched over dimension 0 of \
             both, one contracting dimension)"
        ))
    };
    let [lc, rc, lnc, rnc, order, lb, rb] = &dot_dimension_numbers(dn)?[..] else {
        return Err(refuse());
    };
    let batched = match (&lb[..], &rb[..]) {
        ([], []) => false,
        ([0], [0]) => true,
        _ => return Err(refuse()),
    };
    let expected: Vec<i64> = (batched.then_some([0, 0]).into_iter())
        .chain(lnc.iter().map(|&d| [0, d]))
        .chain(rnc.iter().map(|&d| [1, d]))
        .flatten()
        .collect();
    match (&lc[..], &rc[..]) {
        ([l], [r])
            if (!batched || (*l > 0 && *r > 0 && lnc.len() == 1 && rnc.len() == 1))
                && lnc.len() <= 1
                && rnc.len() <= 1
                && *order == expected
                && *l >= 0
                && *r >= 0 =>
        {
            Ok(DotDims {
                lhs_contract: *l as usize,
                rhs_contract: *r as usize,
            })
        }
        _ => Err(refuse()),
    }
}

/// `tpu.trace_start`/`tpu.trace_stop` (a named scope, as `jax.named_scope`, `jnp.einsum` and
/// `jax.vjp` emit): a profiler annotation with no effect on values, imported as nothing.
fn trace(_: &mut Scope, _: &mut KernelBuilder, _: &OperationRef<'_, '_>, _: &Table) -> Result<()> {
    Ok(())
}

/// `tpu.log` (`pl.debug_print` of scalars): a `print` of its tag, whose `$i` placeholders
/// (when `formatted`) take the i32 operands. A message with values but no placeholders, and
/// a vector's `tpu.log_buffer`, are not imported.
fn log(s: &mut Scope, b: &mut KernelBuilder, op: &OperationRef<'_, '_>, _: &Table) -> Result<()> {
    let tag = op
        .attribute("tag")
        .map_err(|_| Error::new("tpu.log without a tag"))?;
    let message = melior::ir::attribute::StringAttribute::try_from(tag)
        .map_err(|_| Error::new("tpu.log's tag is not a string"))?
        .value()
        .to_string();
    let formatted = attr_opt(op, "formatted").is_some_and(|f| f.trim() == "true");
    let args = (0..op.operand_count())
        .map(|i| s.value(op, i))
        .collect::<Result<Vec<_>>>()?;
    if !args.is_empty() && !formatted {
        return Err(Error::unsupported(
            "a debug_print of values without `{}` placeholders",
        ));
    }
    b.print(&message, &args)
}

/// `tpu.iteration_bound {dim = d}`: `pl.num_programs(d)` of a dynamic grid axis.
fn iteration_bound(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let axis = text::int(&attr(op, "dim")?)?;
    let v = b.num_programs(axis as usize)?;
    s.define(op, 0, v)
}

/// `tpu.iota {dimensions = array<i32: d>}`.
fn iota(s: &mut Scope, b: &mut KernelBuilder, op: &OperationRef<'_, '_>, _: &Table) -> Result<()> {
    let ty = result_type(op, 0)?;
    let dims = match attr_opt(op, "dimensions") {
        Some(a) => text::int_array(&a)?,
        None => vec![text::int(&attr(op, "dimension")?)?],
    };
    let [dim] = dims[..] else {
        return Err(Error::unsupported(format!("iota over dimensions {dims:?}")));
    };
    let v = b.iota(ty.dtype, &ty.shape, dim as usize)?;
    s.define(op, 0, v)
}

/// `scf.for %iv = %lb to %ub step %st iter_args(…)`.
fn scf_for(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    t: &Table,
) -> Result<()> {
    let (lower, upper, step) = (s.arg(op, 0)?, s.arg(op, 1)?, s.arg(op, 2)?);
    let init = (3..op.operand_count())
        .map(|i| s.value(op, i))
        .collect::<Result<Vec<_>>>()?;
    let body = op
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| Error::new("loop without a body"))?;
    let results = b.for_loop(lower, upper, step, &init, |b, iv, carried| {
        let mut args = vec![iv];
        args.extend(carried);
        s.block(b, body, &args, t)
    })?;
    for (i, v) in results.into_iter().enumerate() {
        s.define(op, i, v)?;
    }
    Ok(())
}

/// `scf.if %cond { … } else { … }`; an absent else region yields nothing.
fn scf_if(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    t: &Table,
) -> Result<()> {
    let cond = s.value(op, 0)?;
    let then_block = op.region(0).ok().and_then(|r| r.first_block());
    let else_block = op.region(1).ok().and_then(|r| r.first_block());
    // Both branches import into the one scope; `if_else` runs them one after the other.
    let scope = RefCell::new(&mut *s);
    let branch = |b: &mut KernelBuilder, block: Option<BlockRef<'_, '_>>| match block {
        Some(block) => scope.borrow_mut().block(b, block, &[], t),
        None => Ok(vec![]),
    };
    let results = b.if_else(
        Arg::Value(cond),
        |b| branch(b, then_block),
        |b| branch(b, else_block),
    )?;
    for (i, v) in results.into_iter().enumerate() {
        s.define(op, i, v)?;
    }
    Ok(())
}

/// `scf.while` as `lax.while_loop` lowers it: the before region computes the condition and
/// ends in `scf.condition(%c) %args…` forwarding its own arguments unchanged; the after region
/// yields the next carried values. A before region that forwards anything else (values it
/// computed, in another order) is refused by name.
fn scf_while(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    t: &Table,
) -> Result<()> {
    let init = (0..op.operand_count())
        .map(|i| s.value(op, i))
        .collect::<Result<Vec<_>>>()?;
    let block = |i: usize| {
        op.region(i)
            .ok()
            .and_then(|r| r.first_block())
            .ok_or_else(|| Error::new("a while loop without its regions"))
    };
    let (before, after) = (block(0)?, block(1)?);
    if op.result_count() != init.len() {
        return Err(Error::unsupported(
            "a while loop whose results are not its carried values",
        ));
    }
    let scope = RefCell::new(&mut *s);
    let results = b.while_loop(
        &init,
        |b, carried| {
            let yielded = scope.borrow_mut().block(b, before, carried, t)?;
            match yielded.split_first() {
                Some((c, forwarded)) if forwarded == carried => Ok(*c),
                _ => Err(Error::unsupported(
                    "a while loop whose condition region forwards values other than its \
                     arguments",
                )),
            }
        },
        |b, carried| scope.borrow_mut().block(b, after, carried, t),
    )?;
    for (i, v) in results.into_iter().enumerate() {
        s.define(op, i, v)?;
    }
    Ok(())
}

/// Every Mosaic op tpukit imports, with its rule.
pub const MOSAIC: &Table = &Table {
    column: |i| i.mosaic,
    rules: &[
        ("arith.constant", constant),
        ("arith.cmpf", cmpf),
        ("arith.cmpi", cmpi),
        ("arith.select", select),
        ("arith.extf", cast),
        ("arith.truncf", cast),
        ("arith.extsi", cast),
        ("arith.trunci", cast),
        ("arith.extui", super::unsigned::extui),
        ("arith.sitofp", cast),
        ("arith.fptosi", cast),
        ("arith.uitofp", super::unsigned::uitofp),
        ("arith.fptoui", super::unsigned::fptoui),
        ("arith.maxui", super::unsigned::maxui),
        ("arith.minui", super::unsigned::minui),
        ("arith.index_cast", identity),
        ("arith.bitcast", super::bitcast::bitcast),
        ("tpu.dynamic_gather", super::gather::dynamic_gather),
        ("vector.load", load),
        ("vector.store", store),
        ("memref.load", load),
        ("memref.store", store),
        ("tpu.vector_store", tpu_vector_store),
        ("vector.broadcast", broadcast),
        ("vector.shape_cast", shape_cast),
        ("vector.transpose", transpose),
        ("tpu.transpose", transpose),
        ("tpu.concatenate", super::stablehlo::concatenate),
        ("tpu.dynamic_rotate", dynamic_rotate),
        ("vector.multi_reduction", multi_reduction),
        ("vector.extract", extract),
        ("vector.extract_strided_slice", extract_strided_slice),
        ("tpu.matmul", matmul),
        ("tpu.iota", iota),
        ("tpu.iteration_bound", iteration_bound),
        ("tpu.log", log),
        ("tpu.trace_start", trace),
        ("tpu.trace_stop", trace),
        ("tpu.assume_multiple", identity),
        ("scf.for", scf_for),
        ("scf.if", scf_if),
        ("scf.while", scf_while),
        ("scf.yield", terminator),
        ("scf.condition", terminator),
        ("func.return", terminator),
        ("tpu.memref_slice", super::dma::memref_slice),
        ("tpu.memref_squeeze", super::dma::memref_squeeze),
        ("tpu.memref_reshape", super::ref_view::memref_reshape),
        ("tpu.memref_bitcast", super::ref_view::memref_bitcast),
        ("tpu.strided_load", super::ref_view::strided_load),
        ("tpu.enqueue_dma", super::dma::enqueue_dma),
        ("tpu.wait_dma2", super::dma::wait_dma),
        ("tpu.wait_dma", super::dma::wait_dma),
        ("tpu.sem_signal", super::dma::sem_signal),
        ("tpu.sem_wait", super::dma::sem_wait),
        ("tpu.sem_read", super::dma::sem_read),
        ("tpu.region", super::dma::region),
        ("tpu.yield", terminator),
        ("memref.alloca", super::dma::alloc),
        ("tpu.sem_alloc", super::dma::alloc),
        ("tpu.bitcast", super::bitcast::bitcast),
        ("tpu.reduce_index", super::reduce_index::reduce_index),
        ("tpu.prng_set_seed_32", super::prng::set_seed),
        ("tpu.prng_random_bits", super::prng::random_bits),
    ],
};
