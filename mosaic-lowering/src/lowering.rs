//! Lowering one IR function — the kernel body, or an index map — into a block of Mosaic ops,
//! op by op through the rule table ([`crate::rules`]).

use crate::{
    Options, Shapes,
    emit::{Emitter, Val},
    rules,
};
use melior::ir::{Location, Region, RegionLike, Type};
use std::collections::HashMap;
use tpukit_dsl::{Error, Func, Kernel, Loc, Op, OpKind, Result, ValueId};

/// What ends a lowered region.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Terminator {
    /// `func.return` (the kernel body, a transform function).
    Return,
    /// `scf.yield` (the body of `scf.for`, the branches of `scf.if`).
    Yield,
    /// `scf.condition(%first) %args…` (the condition region of `scf.while`): the region's
    /// one yielded bool, forwarding its arguments.
    Condition,
    /// Nothing: the region is inlined and its yielded values returned to the caller (an
    /// index map evaluated inside the kernel body for edge-block masks).
    Inline,
}

/// The state of lowering one [`Func`]: where its operands live and what each SSA value became.
pub struct FuncLowering<'c, 'k> {
    pub kernel: &'k Kernel,
    pub func: &'k Func,
    pub shapes: &'k Shapes,
    pub options: &'k Options,
    /// The grid indices of this step (i32), one per grid axis.
    pub grid: Vec<Val<'c>>,
    /// Each operand's buffer as this function sees it, by operand index (`None` where the
    /// function cannot see it: index maps see only scalar-prefetch operands).
    pub refs: Vec<Option<Val<'c>>>,
    values: HashMap<ValueId, Val<'c>>,
}

impl<'c, 'k> FuncLowering<'c, 'k> {
    pub fn new(
        kernel: &'k Kernel,
        func: &'k Func,
        shapes: &'k Shapes,
        options: &'k Options,
        grid: Vec<Val<'c>>,
        refs: Vec<Option<Val<'c>>>,
    ) -> FuncLowering<'c, 'k> {
        FuncLowering {
            kernel,
            func,
            shapes,
            options,
            grid,
            refs,
            values: HashMap::new(),
        }
    }

    /// The Mosaic value an IR value became.
    pub fn value(&self, v: ValueId) -> Val<'c> {
        self.values[&v]
    }

    /// The IR type of `v`.
    pub fn ty(&self, v: ValueId) -> &'k tpukit_dsl::Type {
        self.func.ty(v)
    }

    /// Lowers `region`'s ops into `em`'s block, binding its arguments to `args`, and ends it
    /// as `terminator` says. Returns the region's yielded values.
    pub fn lower_region(
        &mut self,
        em: Emitter<'c>,
        region: &'k tpukit_dsl::Region,
        args: &[Val<'c>],
        terminator: Terminator,
    ) -> Result<Vec<Val<'c>>> {
        for (id, v) in region.args.iter().zip(args) {
            self.values.insert(*id, *v);
        }
        for op in &region.ops {
            let em = em.at(location(em.context, op.loc.as_ref()));
            if let OpKind::Yield { values } = &op.kind {
                let values: Vec<Val<'c>> = values.iter().map(|v| self.value(*v)).collect();
                match terminator {
                    Terminator::Return => em.op("func.return", &values, &[], &[])?,
                    Terminator::Yield => em.op("scf.yield", &values, &[], &[])?,
                    Terminator::Condition => {
                        let mut operands = values.clone();
                        operands.extend(args.iter().copied());
                        em.op("scf.condition", &operands, &[], &[])?
                    }
                    Terminator::Inline => Vec::new(),
                };
                return Ok(values);
            }
            let results = self.lower_op(&em, op).map_err(|e| blame(e, op))?;
            debug_assert_eq!(
                results.len(),
                op.results.len(),
                "rule for {}",
                op.kind.name()
            );
            for (id, v) in op.results.iter().zip(results) {
                self.values.insert(*id, v);
            }
        }
        Err(Error::new("region does not end in `yield`"))
    }

    fn lower_op(&mut self, em: &Emitter<'c>, op: &'k Op) -> Result<Vec<Val<'c>>> {
        rules::lower(self, em, op)
    }

    /// A new region of one block with arguments of `arg_types`, holding `region` lowered with
    /// an `scf.yield` at its end.
    pub fn nested_region(
        &mut self,
        em: &Emitter<'c>,
        region: &'k tpukit_dsl::Region,
        arg_types: &[Type<'c>],
    ) -> Result<Region<'c>> {
        self.nested_region_with(em, region, arg_types, Terminator::Yield)
    }

    /// [`Self::nested_region`] ending in `terminator`.
    pub fn nested_region_with(
        &mut self,
        em: &Emitter<'c>,
        region: &'k tpukit_dsl::Region,
        arg_types: &[Type<'c>],
        terminator: Terminator,
    ) -> Result<Region<'c>> {
        let block = em.block(arg_types);
        let inner = Emitter::new(em.context, &block).at(em.location);
        let args: Vec<Val<'c>> = (0..arg_types.len()).map(|i| inner.argument(i)).collect();
        self.lower_region(inner, region, &args, terminator)?;
        let out = Region::new();
        out.append_block(block);
        Ok(out)
    }
}

/// The MLIR location of an IR op: its source line, or unknown.
pub fn location<'c>(context: &'c melior::Context, loc: Option<&Loc>) -> Location<'c> {
    match loc {
        Some(l) => Location::new(context, &l.file, l.line as usize, l.column as usize),
        None => Location::unknown(context),
    }
}

/// Names the op and its source line on an error from its rule (innermost op wins).
fn blame(mut e: Error, op: &Op) -> Error {
    if e.op.is_none() {
        e.op = Some(op.kind.name().to_string());
    }
    e.at(op.loc.as_ref())
}
