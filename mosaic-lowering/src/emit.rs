//! Appending generic MLIR operations to a block: the one place that turns melior's borrowed
//! handles into the `'static` ones the lowering keeps in its tables.
//!
//! Every op is built by name with [`OperationBuilder`], with attributes and types written as
//! MLIR text. That keeps the lowering rules close to the Mosaic they produce (a rule reads like
//! the IR it emits) and makes `tpu` ops, which upstream MLIR does not know, no different from
//! `arith` ones.

use melior::{
    Context,
    ir::{
        Attribute, Block, BlockLike, BlockRef, Identifier, Location, Region, Type, Value,
        ValueLike, operation::OperationBuilder, operation::OperationLike,
    },
};
use tpukit_dsl::{Error, ErrorKind, Result};

/// An SSA value of the module under construction.
///
/// Invariant: every block the lowering creates ends up owned by the module (blocks are built
/// first, then moved into their region), and the module outlives the lowering, so values
/// never dangle even though their borrow of the block is erased.
pub type Val<'c> = Value<'c, 'static>;

/// Appends ops at the end of one block.
#[derive(Clone, Copy)]
pub struct Emitter<'c> {
    pub context: &'c Context,
    block: BlockRef<'c, 'c>,
    pub location: Location<'c>,
}

impl<'c> Emitter<'c> {
    /// An emitter appending to `block` (see [`Val`] for why the borrow may be erased).
    pub fn new(context: &'c Context, block: &Block<'c>) -> Emitter<'c> {
        Emitter {
            context,
            // SAFETY: the block is owned by the module being built once the caller moves it
            // into a region, and the module outlives every emitter (see `Val`).
            block: unsafe { BlockRef::from_raw(block.to_raw()) },
            location: Location::unknown(context),
        }
    }

    /// The same block, with ops tagged with `location`.
    pub fn at(self, location: Location<'c>) -> Emitter<'c> {
        Emitter { location, ..self }
    }

    /// A new block, for the caller to move into a region, whose arguments have `types` and
    /// this emitter's location.
    pub fn block(&self, types: &[Type<'c>]) -> Block<'c> {
        let args: Vec<_> = types.iter().map(|&t| (t, self.location)).collect();
        Block::new(&args)
    }

    /// Argument `i` of the block.
    pub fn argument(&self, i: usize) -> Val<'c> {
        let arg = self.block.argument(i).expect("block argument in range");
        // SAFETY: see `Val`.
        unsafe { Value::from_raw(arg.to_raw()) }
    }

    /// Appends `name(operands) {attributes} : results` and returns its results.
    pub fn op(
        &self,
        name: &str,
        operands: &[Val<'c>],
        results: &[Type<'c>],
        attributes: &[(&str, Attribute<'c>)],
    ) -> Result<Vec<Val<'c>>> {
        self.op_with_regions(name, operands, results, attributes, Vec::new())
    }

    /// [`Self::op`] with one result.
    pub fn op1(
        &self,
        name: &str,
        operands: &[Val<'c>],
        result: Type<'c>,
        attributes: &[(&str, Attribute<'c>)],
    ) -> Result<Val<'c>> {
        Ok(self.op(name, operands, &[result], attributes)?[0])
    }

    pub fn op_with_regions(
        &self,
        name: &str,
        operands: &[Val<'c>],
        results: &[Type<'c>],
        attributes: &[(&str, Attribute<'c>)],
        regions: Vec<Region<'c>>,
    ) -> Result<Vec<Val<'c>>> {
        let attributes: Vec<_> = attributes
            .iter()
            .map(|(k, v)| (Identifier::new(self.context, k), *v))
            .collect();
        let op = OperationBuilder::new(name, self.location)
            .add_operands(operands)
            .add_results(results)
            .add_attributes(&attributes)
            .add_regions_vec(regions)
            .build()
            .map_err(|e| {
                Error::new(format!("internal error building `{name}`: {e}"))
                    .with_kind(ErrorKind::Internal)
            })?;
        let op = self.block.append_operation(op);
        Ok(op
            .results()
            // SAFETY: see `Val`.
            .map(|r| unsafe { Value::from_raw(r.to_raw()) })
            .collect())
    }

    /// An attribute written as MLIR text (`array<i64: 4>`, `#tpu.core_type<tc>`, …).
    pub fn attr(&self, text: &str) -> Result<Attribute<'c>> {
        Attribute::parse(self.context, text).ok_or_else(|| {
            Error::new(format!("internal error: bad attribute `{text}`"))
                .with_kind(ErrorKind::Internal)
        })
    }

    /// A type written as MLIR text (`vector<8x128xf32>`, `memref<4xi32>`, …).
    pub fn ty(&self, text: &str) -> Result<Type<'c>> {
        parse_type(self.context, text)
    }

    /// `arith.constant` of the attribute `value` (text, with its type).
    pub fn constant(&self, value: &str, ty: &str) -> Result<Val<'c>> {
        let attr = self.attr(&format!("{value} : {ty}"))?;
        self.op1("arith.constant", &[], self.ty(ty)?, &[("value", attr)])
    }

    /// An `index` constant (memory access indices).
    pub fn index(&self, i: i64) -> Result<Val<'c>> {
        self.constant(&i.to_string(), "index")
    }

    /// An `i32` constant (grid indices, block indices, loop bounds).
    pub fn i32(&self, i: i64) -> Result<Val<'c>> {
        self.constant(&i.to_string(), "i32")
    }
}

pub fn parse_type<'c>(context: &'c Context, text: &str) -> Result<Type<'c>> {
    Type::parse(context, text).ok_or_else(|| {
        Error::new(format!("internal error: bad type `{text}`")).with_kind(ErrorKind::Internal)
    })
}
