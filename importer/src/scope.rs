//! The state of one import: which kernel-IR value each MLIR value became, plus the helpers
//! every rule uses to read an op's operands, results and attributes.

use super::text;
use melior::ir::{
    BlockLike, BlockRef, Value, ValueLike,
    operation::{OperationLike, OperationRef},
};
use std::collections::HashMap;
use tpukit_dsl::{Arg, Error, Ix, KernelBuilder, Literal, Ref, Result, Type, ValueId};

/// What an MLIR value became.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Val {
    Value(ValueId),
    /// A memref argument of the kernel: an operand's ref.
    Ref(Ref),
}

/// MLIR values → kernel-IR values, for one kernel function (nested regions included).
///
/// Invariant: an MLIR value is bound once, before any op that uses it is imported (MLIR's
/// dominance guarantees the order when ops are imported in block order).
#[derive(Default)]
pub struct Scope {
    values: HashMap<usize, Val>,
    /// Values known to be splat constants (for static slice starts and identities).
    consts: HashMap<ValueId, Literal>,
    /// What the last terminator (`scf.yield`, `func.return`) gave back.
    pub yielded: Option<Vec<ValueId>>,
    /// Scratch buffers set aside for particular ops (by [`op_key`]): StableHLO's slices and
    /// concatenations go through memory, as the IR slices only refs.
    pub scratch: HashMap<usize, Ref>,
    /// The PRNG's state buffer, when the kernel seeds or draws ([`super::prng`]).
    pub prng_state: Option<Ref>,
    /// Views of refs (`tpu.memref_slice`, `memref_squeeze`): the ref and one indexer per
    /// dimension of its ref shape.
    views: HashMap<usize, (Ref, Vec<Ix>)>,
    /// Refs seen through a reshape or bitcast (`tpu.memref_reshape`, `memref_bitcast`),
    /// which loads, stores, slices and copies take ([`super::ref_view`]).
    shaped: HashMap<usize, super::ref_view::Shaped>,
    /// Views with one dimension of traced size (`tpu.memref_slice` with a dynamic size, which
    /// only copies take, [`super::dma`]): the position of that dimension's indexer (a slice of
    /// one element at the view's start) and the size.
    dynamic: HashMap<usize, (usize, Arg)>,
    /// Views whose traced sizes are each one of two constants (`emit_pipeline`'s edge
    /// blocks, [`Chosen`]), which only copies take.
    chosen: HashMap<usize, Vec<Chosen>>,
}

/// One dimension of a view whose size is one of two constants, `arith.select %cond, A, B`
/// (as `pltpu.emit_pipeline` sizes a block that may be the last, partial one): its
/// indexer's position (a slice of one element at the view's start until a copy picks the
/// size) and the sizes when `cond` holds and when not.
#[derive(Copy, Clone, Debug)]
pub struct Chosen {
    pub at: usize,
    pub cond: Arg,
    pub sizes: [usize; 2],
}

/// An op's identity (stable while its module lives).
pub fn op_key(op: &OperationRef<'_, '_>) -> usize {
    op.to_raw().ptr as usize
}

pub fn key(v: Value<'_, '_>) -> usize {
    v.to_raw().ptr as usize
}

/// The op's name without the `stable_mosaic.` prefix of the serialized form.
pub fn op_name(op: &OperationRef<'_, '_>) -> String {
    let full = op
        .name()
        .as_string_ref()
        .as_str()
        .unwrap_or("?")
        .to_string();
    full.strip_prefix("stable_mosaic.")
        .map(str::to_string)
        .unwrap_or(full)
}

impl Scope {
    /// The scratch buffer set aside for `op` before import (see [`Scope::scratch`]); `what`
    /// names it in the error when none was.
    pub fn scratch_of(&self, op: &OperationRef<'_, '_>, what: &str) -> Result<Ref> {
        self.scratch
            .get(&op_key(op))
            .copied()
            .ok_or_else(|| Error::new(format!("no scratch buffer set aside for {what}")))
    }

    pub fn bind(&mut self, v: Value<'_, '_>, val: Val) {
        self.values.insert(key(v), val);
    }

    pub fn bind_value(&mut self, v: Value<'_, '_>, id: ValueId) {
        self.bind(v, Val::Value(id));
    }

    /// Records that `id` is a splat constant.
    pub fn note_const(&mut self, id: ValueId, lit: Literal) {
        self.consts.insert(id, lit);
    }

    pub fn constant(&self, id: ValueId) -> Option<Literal> {
        self.consts.get(&id).copied()
    }

    fn lookup(&self, op: &OperationRef<'_, '_>, i: usize) -> Result<Val> {
        let v = op
            .operand(i)
            .map_err(|_| Error::new(format!("`{}` has no operand {i}", op_name(op))))?;
        self.values.get(&key(v)).copied().ok_or_else(|| {
            Error::new(format!(
                "operand {i} of `{}` is defined by an op tpukit did not import",
                op_name(op)
            ))
        })
    }

    /// Operand `i` as a value.
    pub fn value(&self, op: &OperationRef<'_, '_>, i: usize) -> Result<ValueId> {
        match self.lookup(op, i)? {
            Val::Value(v) => Ok(v),
            Val::Ref(_) => Err(Error::new(format!(
                "operand {i} of `{}` is a buffer where a value was expected",
                op_name(op)
            ))),
        }
    }

    /// Operand `i` as a builder argument: a literal when it is a known constant, so that
    /// constant slice starts stay static.
    pub fn arg(&self, op: &OperationRef<'_, '_>, i: usize) -> Result<Arg> {
        let v = self.value(op, i)?;
        Ok(match self.constant(v) {
            Some(Literal::Int(n)) => Arg::Lit(Literal::Int(n)),
            _ => Arg::Value(v),
        })
    }

    /// Operand `i` as an operand ref.
    pub fn buffer(&self, op: &OperationRef<'_, '_>, i: usize) -> Result<Ref> {
        if let Ok(v) = op.operand(i)
            && self.views.contains_key(&key(v))
        {
            return Err(Error::unsupported(format!(
                "operand {i} of `{}` is a view of a ref (`tpu.memref_slice`/`memref_squeeze`); \
                 this op takes a whole ref",
                op_name(op)
            )));
        }
        match self.lookup(op, i)? {
            Val::Ref(r) => Ok(r),
            Val::Value(_) => Err(Error::new(format!(
                "operand {i} of `{}` must be a kernel argument buffer (a ref)",
                op_name(op)
            ))),
        }
    }

    /// Binds result `i` of `op` to a view of `r`.
    pub fn define_view(
        &mut self,
        op: &OperationRef<'_, '_>,
        i: usize,
        r: Ref,
        index: Vec<Ix>,
    ) -> Result<()> {
        let v = op
            .result(i)
            .map_err(|_| Error::new(format!("`{}` has no result {i}", op_name(op))))?;
        self.views.insert(key(v.into()), (r, index));
        Ok(())
    }

    /// Binds result 0 of `op` to a reshaped or bitcast view.
    pub fn define_shaped(
        &mut self,
        op: &OperationRef<'_, '_>,
        v: super::ref_view::Shaped,
    ) -> Result<()> {
        let r = op
            .result(0)
            .map_err(|_| Error::new(format!("`{}` has no result", op_name(op))))?;
        self.shaped.insert(key(r.into()), v);
        Ok(())
    }

    /// Operand `i` of `op` if it is a reshaped or bitcast view.
    pub fn shaped(&self, op: &OperationRef<'_, '_>, i: usize) -> Option<super::ref_view::Shaped> {
        let v = op.operand(i).ok()?;
        self.shaped.get(&key(v)).cloned()
    }

    /// Operand `i` as a ref or a view of one: the ref and its indexers (none for a whole
    /// ref).
    pub fn place(&self, op: &OperationRef<'_, '_>, i: usize) -> Result<(Ref, Vec<Ix>)> {
        if self.dynamic_of(op, i).is_some() || self.chosen_of(op, i).is_some() {
            return Err(Error::unsupported(format!(
                "operand {i} of `{}` is a slice of traced size, which tpukit imports for \
                 copies only",
                op_name(op)
            )));
        }
        self.place_of_any_size(op, i)
    }

    /// [`Scope::place`], a view of traced size included (its slice of one element there,
    /// see [`Scope::dynamic_of`]).
    pub fn place_of_any_size(&self, op: &OperationRef<'_, '_>, i: usize) -> Result<(Ref, Vec<Ix>)> {
        if self.shaped(op, i).is_some() {
            return Err(Error::unsupported(format!(
                "operand {i} of `{}` is a reshaped or bitcast ref (`tpu.memref_reshape`/\
                 `memref_bitcast`), which tpukit imports for loads, unmasked stores and copies of \
                 reshaped refs only",
                op_name(op)
            )));
        }
        if let Ok(v) = op.operand(i)
            && let Some(view) = self.views.get(&key(v))
        {
            return Ok(view.clone());
        }
        Ok((self.buffer(op, i)?, Vec::new()))
    }

    /// The dimension of traced size of operand `i`'s view, if it has one: its indexer's
    /// position and the size.
    pub fn dynamic_of(&self, op: &OperationRef<'_, '_>, i: usize) -> Option<(usize, Arg)> {
        let v = op.operand(i).ok()?;
        self.dynamic.get(&key(v)).copied()
    }

    /// The dimensions of operand `i`'s view whose sizes are chosen ([`Chosen`]), if any.
    pub fn chosen_of(&self, op: &OperationRef<'_, '_>, i: usize) -> Option<Vec<Chosen>> {
        let v = op.operand(i).ok()?;
        self.chosen.get(&key(v)).cloned()
    }

    /// Marks result `i` of `op`, a view, as of the chosen sizes `dims`.
    pub fn define_chosen(
        &mut self,
        op: &OperationRef<'_, '_>,
        i: usize,
        dims: Vec<Chosen>,
    ) -> Result<()> {
        let v = op
            .result(i)
            .map_err(|_| Error::new(format!("`{}` has no result {i}", op_name(op))))?;
        self.chosen.insert(key(v.into()), dims);
        Ok(())
    }

    /// Marks result `i` of `op`, a view, as of traced size `size` along indexer `at`.
    pub fn define_dynamic(
        &mut self,
        op: &OperationRef<'_, '_>,
        i: usize,
        at: usize,
        size: Arg,
    ) -> Result<()> {
        let v = op
            .result(i)
            .map_err(|_| Error::new(format!("`{}` has no result {i}", op_name(op))))?;
        self.dynamic.insert(key(v.into()), (at, size));
        Ok(())
    }

    /// Binds result `i` of `op`.
    pub fn define(&mut self, op: &OperationRef<'_, '_>, i: usize, id: ValueId) -> Result<()> {
        let r = op
            .result(i)
            .map_err(|_| Error::new(format!("`{}` has no result {i}", op_name(op))))?;
        self.bind_value(r.into(), id);
        Ok(())
    }

    /// Imports the ops of `block` into the builder's open region, its arguments bound to
    /// `args`; returns what its terminator yields.
    pub fn block(
        &mut self,
        b: &mut KernelBuilder,
        block: BlockRef<'_, '_>,
        args: &[ValueId],
        rules: &super::rules::Table,
    ) -> Result<Vec<ValueId>> {
        if block.argument_count() != args.len() {
            return Err(Error::new(format!(
                "a region has {} arguments, expected {}",
                block.argument_count(),
                args.len()
            )));
        }
        for (i, &a) in args.iter().enumerate() {
            let arg = block.argument(i).expect("argument in range");
            self.bind_value(arg.into(), a);
        }
        self.ops(b, block, rules)
    }

    /// Imports the ops of `block`, whose arguments are already bound; returns what its
    /// terminator yields.
    pub fn ops(
        &mut self,
        b: &mut KernelBuilder,
        block: BlockRef<'_, '_>,
        rules: &super::rules::Table,
    ) -> Result<Vec<ValueId>> {
        self.yielded = None;
        let mut op = block.first_operation();
        while let Some(o) = op {
            super::rules::import_op(self, b, &o, rules)?;
            op = o.next_in_block();
        }
        Ok(self.yielded.take().unwrap_or_default())
    }
}

/// The printed attribute `name` of `op`.
pub fn attr(op: &OperationRef<'_, '_>, name: &str) -> Result<String> {
    op.attribute(name)
        .map(|a| a.to_string())
        .map_err(|_| Error::new(format!("`{}` has no attribute `{name}`", op_name(op))))
}

/// The printed attribute `name` of `op`, if present.
pub fn attr_opt(op: &OperationRef<'_, '_>, name: &str) -> Option<String> {
    op.attribute(name).ok().map(|a| a.to_string())
}

/// The value type of result `i`.
pub fn result_type(op: &OperationRef<'_, '_>, i: usize) -> Result<Type> {
    let r = op
        .result(i)
        .map_err(|_| Error::new(format!("`{}` has no result {i}", op_name(op))))?;
    text::value_ty(&r.r#type().to_string())
}

/// The value type of operand `i`.
pub fn operand_type(op: &OperationRef<'_, '_>, i: usize) -> Result<Type> {
    let v = op
        .operand(i)
        .map_err(|_| Error::new(format!("`{}` has no operand {i}", op_name(op))))?;
    text::value_ty(&v.r#type().to_string())
}
