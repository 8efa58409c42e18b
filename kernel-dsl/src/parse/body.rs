//! Functions (the kernel body, index maps), their regions and ops, each op as
//! [`crate::print`] writes it: `%r, … = NAME operands… : type`.

use super::{
    Parser,
    lexer::{Tok, Token},
};
use crate::{
    BinaryOp, CmpOp, DType, DotDims, Func, Indexer, Op, OpKind, OperandId, ReduceOp, Region,
    Result, Start, Type, UnaryOp, ValueId,
};

/// The value types of one function, gathered from the ops that define the values.
#[derive(Default)]
pub(super) struct FuncState {
    types: Vec<Option<Type>>,
}

/// A loop's carried values: the token and value each defines, with its initial value.
type Carried = Vec<((Token, ValueId), ValueId)>;

impl FuncState {
    /// Records that `v` (written at `t`) has type `ty`; each value is defined once.
    pub(super) fn define(&mut self, p: &Parser, t: &Token, v: ValueId, ty: Type) -> Result<()> {
        let i = v.0 as usize;
        if self.types.len() <= i {
            self.types.resize(i + 1, None);
        }
        if self.types[i].is_some() {
            return Err(p.error_at(t, format!("%{} is defined twice", v.0)));
        }
        self.types[i] = Some(ty);
        Ok(())
    }

    /// The region `{ … }` of a function whose arguments are `args` (already defined), and
    /// the function's type table.
    pub(super) fn func(mut self, p: &mut Parser, args: Vec<ValueId>) -> Result<Func> {
        let open = p.peek().clone();
        let body = p.region(&mut self, args)?;
        let types = self
            .types
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                t.ok_or_else(|| {
                    p.error_at(
                        &open,
                        format!(
                            "%{i} is never defined in this function: values are numbered \
                             %0, %1, … without gaps"
                        ),
                    )
                })
            })
            .collect::<Result<_>>()?;
        Ok(Func { types, body })
    }
}

/// How many results an op defines, and their types once they are parsed.
enum Results {
    None,
    One(Type),
    Many(Vec<Type>),
}

impl Parser {
    /// `%N`, a value.
    pub(super) fn value(&mut self, what: &str) -> Result<(Token, ValueId)> {
        let t = self.peek().clone();
        match &t.tok {
            Tok::Percent(n) if n.bytes().all(|b| b.is_ascii_digit()) => match n.parse() {
                Ok(v) => {
                    self.next();
                    Ok((t, ValueId(v)))
                }
                Err(_) => Err(self.error_at(&t, format!("value number `%{n}` is too large"))),
            },
            _ => Err(self.expected(what)),
        }
    }

    fn operand_value(&mut self) -> Result<ValueId> {
        Ok(self.value("a value `%N`")?.1)
    }

    /// `%name`, an operand declared before.
    fn operand_ref(&mut self) -> Result<OperandId> {
        let t = self.peek().clone();
        let Tok::Percent(name) = &t.tok else {
            return Err(self.expected("an operand `%name`"));
        };
        let i = self
            .operands
            .iter()
            .position(|o| o == name)
            .ok_or_else(|| {
                let known: Vec<String> = self.operands.iter().map(|o| format!("%{o}")).collect();
                self.error_at(
                    &t,
                    format!("unknown operand `%{name}` (declared: {})", known.join(", ")),
                )
            })?;
        self.next();
        Ok(OperandId(i as u32))
    }

    /// `{ op* }`: ops up to the closing brace.
    pub(super) fn region(&mut self, f: &mut FuncState, args: Vec<ValueId>) -> Result<Region> {
        self.punct('{')?;
        let mut ops = Vec::new();
        while !self.eat_punct('}') {
            if self.peek().tok == Tok::Eof {
                return Err(self.expected("an op or `}`"));
            }
            ops.push(self.op(f)?);
        }
        Ok(Region { args, ops })
    }

    fn op(&mut self, f: &mut FuncState) -> Result<Op> {
        let start = self.peek().clone();
        let mut results = Vec::new();
        if matches!(start.tok, Tok::Percent(_)) {
            results = self.comma_values()?;
            self.punct('=')?;
        }
        let (name_tok, name) = self.word("an op name")?;
        let (kind, types) = self.op_kind(f, &name_tok, &name)?;
        let types = match types {
            Results::None => Vec::new(),
            Results::One(t) => vec![t],
            Results::Many(ts) => ts,
        };
        if types.len() != results.len() {
            return Err(self.error_at(
                &start,
                format!(
                    "`{name}` defines {} value(s), but {} are named before `=`",
                    types.len(),
                    results.len()
                ),
            ));
        }
        for (&r, ty) in results.iter().zip(types) {
            f.define(self, &start, r, ty)?;
        }
        let loc = match self.trailing_location()? {
            Some(loc) => loc,
            None => self.place(&start),
        };
        Ok(Op {
            results,
            kind,
            loc: Some(loc),
        })
    }

    /// `%a, %b, …` (at least one).
    fn comma_values(&mut self) -> Result<Vec<ValueId>> {
        let mut vs = vec![self.operand_value()?];
        while self.eat_punct(',') {
            vs.push(self.operand_value()?);
        }
        Ok(vs)
    }

    /// `: type`.
    fn one_type(&mut self) -> Result<Results> {
        self.punct(':')?;
        Ok(Results::One(self.ty()?))
    }

    /// `: (type, …)`.
    fn type_list(&mut self) -> Result<Vec<Type>> {
        self.punct(':')?;
        self.punct('(')?;
        self.list(')', Parser::ty)
    }

    fn axis(&mut self) -> Result<usize> {
        self.integer("an axis")
    }

    /// `[a, b, …]`, a list of axes.
    fn axes(&mut self) -> Result<Vec<usize>> {
        self.punct('[')?;
        self.list(']', Parser::axis)
    }

    /// `[ds(start, size) | ds(start, size, stride) | start, …]`.
    fn indexers(&mut self) -> Result<Vec<Indexer>> {
        self.punct('[')?;
        self.list(']', |p| {
            if p.eat_word("ds") {
                p.punct('(')?;
                let start = p.start()?;
                p.punct(',')?;
                let size = p.integer("a slice size")?;
                let stride = if p.eat_punct(',') {
                    p.integer("a slice stride")?
                } else {
                    1
                };
                p.punct(')')?;
                Ok(Indexer::Slice {
                    start,
                    size,
                    stride,
                })
            } else {
                Ok(Indexer::Point(p.start()?))
            }
        })
    }

    /// `%operand[indexers]`: a copy's end or a semaphore.
    fn ref_place(&mut self) -> Result<crate::Place> {
        let operand = self.operand_ref()?;
        let index = self.indexers()?;
        Ok(crate::Place { operand, index })
    }

    fn start(&mut self) -> Result<Start> {
        match self.peek().tok {
            Tok::Number(_) => Ok(Start::Static(self.integer("an index")?)),
            Tok::Percent(_) => Ok(Start::Dynamic(self.operand_value()?)),
            _ => Err(self.expected("an index (a number or `%N`) or `ds(start, size)`")),
        }
    }

    /// The op called `name` after its results: its operands, attributes and types.
    fn op_kind(
        &mut self,
        f: &mut FuncState,
        name_tok: &Token,
        name: &str,
    ) -> Result<(OpKind, Results)> {
        if let Some(op) = UnaryOp::from_name(name) {
            let x = self.operand_value()?;
            return Ok((OpKind::Unary { op, x }, self.one_type()?));
        }
        if let Some(op) = BinaryOp::from_name(name) {
            let (lhs, rhs) = self.two_values()?;
            return Ok((OpKind::Binary { op, lhs, rhs }, self.one_type()?));
        }
        if let Some(op) = CmpOp::from_name(name) {
            let (lhs, rhs) = self.two_values()?;
            return Ok((OpKind::Compare { op, lhs, rhs }, self.one_type()?));
        }
        if let Some(op) = ReduceOp::from_name(name) {
            let x = self.operand_value()?;
            let axes = self.axes()?;
            return Ok((OpKind::Reduce { op, x, axes }, self.one_type()?));
        }
        let kind = match name {
            "const" => OpKind::Const {
                value: self.literal()?,
            },
            "dense" => {
                self.punct('[')?;
                OpKind::Dense {
                    values: self.list(']', Parser::literal)?,
                }
            }
            "program_id" => OpKind::ProgramId { axis: self.axis()? },
            "num_programs" => OpKind::NumPrograms { axis: self.axis()? },
            "array_dim" => OpKind::ArrayDim {
                operand: self.operand_ref()?,
                axis: self.axis()?,
            },
            "load" => {
                let operand = self.operand_ref()?;
                let index = self.indexers()?;
                let (mut mask, mut other) = (None, None);
                if self.eat_word("mask") {
                    mask = Some(self.operand_value()?);
                    self.keyword("other")?;
                    other = Some(self.operand_value()?);
                }
                OpKind::Load {
                    operand,
                    index,
                    mask,
                    other,
                }
            }
            "store" => {
                let operand = self.operand_ref()?;
                let index = self.indexers()?;
                self.punct(',')?;
                let value = self.operand_value()?;
                let mask = if self.eat_word("mask") {
                    Some(self.operand_value()?)
                } else {
                    None
                };
                let kind = OpKind::Store {
                    operand,
                    index,
                    value,
                    mask,
                };
                return Ok((kind, Results::None));
            }
            "dma_start" => {
                let src = self.ref_place()?;
                self.punct(',')?;
                let dst = self.ref_place()?;
                self.punct(',')?;
                let sem = self.ref_place()?;
                return Ok((OpKind::DmaStart { src, dst, sem }, Results::None));
            }
            "dma_wait" => {
                let sem = self.ref_place()?;
                self.punct(',')?;
                let src = self.ref_place()?;
                self.punct(',')?;
                let dst = self.ref_place()?;
                return Ok((OpKind::DmaWait { sem, src, dst }, Results::None));
            }
            "semaphore_signal" | "semaphore_wait" => {
                let sem = self.ref_place()?;
                self.punct(',')?;
                let amount = self.operand_value()?;
                let kind = if name == "semaphore_signal" {
                    OpKind::SemaphoreSignal { sem, amount }
                } else {
                    OpKind::SemaphoreWait { sem, amount }
                };
                return Ok((kind, Results::None));
            }
            "print" => {
                let message = match &self.peek().tok {
                    Tok::Str(m) => m.clone(),
                    _ => return Err(self.expected("a quoted message")),
                };
                self.next();
                let mut args = Vec::new();
                while self.eat_punct(',') {
                    args.push(self.operand_value()?);
                }
                return Ok((OpKind::Print { message, args }, Results::None));
            }
            "semaphore_read" => OpKind::SemaphoreRead {
                sem: self.ref_place()?,
            },
            "cast" => OpKind::Cast {
                x: self.operand_value()?,
            },
            "roll" => {
                let (x, shift) = self.two_values()?;
                self.keyword("axis")?;
                let axis = self.axis()?;
                let stride = if self.eat_word("stride") {
                    let k = self.integer("a stride")?;
                    self.keyword("along")?;
                    Some((k, self.axis()?))
                } else {
                    None
                };
                OpKind::Roll {
                    x,
                    shift,
                    axis,
                    stride,
                }
            }
            "gather" => {
                let (x, indices) = self.two_values()?;
                self.keyword("axis")?;
                OpKind::Gather {
                    x,
                    indices,
                    axis: self.axis()?,
                }
            }
            "bitcast" => OpKind::Bitcast {
                x: self.operand_value()?,
            },
            "broadcast" => OpKind::Broadcast {
                x: self.operand_value()?,
            },
            "reshape" => OpKind::Reshape {
                x: self.operand_value()?,
            },
            "select" => {
                let cond = self.operand_value()?;
                let (on_true, on_false) = {
                    self.punct(',')?;
                    self.two_values()?
                };
                OpKind::Select {
                    cond,
                    on_true,
                    on_false,
                }
            }
            "transpose" => OpKind::Transpose {
                x: self.operand_value()?,
                perm: self.axes()?,
            },
            "iota" => OpKind::Iota { dim: self.axis()? },
            "dot" => {
                let (lhs, rhs) = self.two_values()?;
                self.keyword("contract")?;
                self.punct('(')?;
                let lhs_contract = self.axis()?;
                self.punct(',')?;
                let rhs_contract = self.axis()?;
                self.punct(')')?;
                let dims = DotDims {
                    lhs_contract,
                    rhs_contract,
                };
                OpKind::Dot { lhs, rhs, dims }
            }
            "for" => return self.for_loop(f),
            "while" => return self.while_loop(f),
            "if" => {
                let cond = self.operand_value()?;
                let types = self.type_list()?;
                let then_region = self.region(f, Vec::new())?;
                self.keyword("else")?;
                let else_region = self.region(f, Vec::new())?;
                let kind = OpKind::If {
                    cond,
                    then_region,
                    else_region,
                };
                return Ok((kind, Results::Many(types)));
            }
            "yield" => {
                let values = if matches!(self.peek().tok, Tok::Percent(_)) {
                    self.comma_values()?
                } else {
                    Vec::new()
                };
                return Ok((OpKind::Yield { values }, Results::None));
            }
            _ => return Err(self.error_at(name_tok, format!("unknown op `{name}`"))),
        };
        Ok((kind, self.one_type()?))
    }

    /// `%a, %b`.
    fn two_values(&mut self) -> Result<(ValueId, ValueId)> {
        let a = self.operand_value()?;
        self.punct(',')?;
        Ok((a, self.operand_value()?))
    }

    /// `iter(%a = %x, …) : (types)` of the loop `what` (`for`, `while`) at `start`: each
    /// carried value (the token and value it defines) with its initial value, and one type
    /// per carried value.
    fn carried(&mut self, what: &str, start: &Token) -> Result<(Carried, Vec<Type>)> {
        self.keyword("iter")?;
        self.punct('(')?;
        let carried = self.list(')', |p| {
            let arg = p.value("a carried value `%N`")?;
            p.punct('=')?;
            Ok((arg, p.operand_value()?))
        })?;
        let types = self.type_list()?;
        if types.len() != carried.len() {
            return Err(self.error_at(
                start,
                format!(
                    "`{what}` carries {} value(s) but has {} result type(s)",
                    carried.len(),
                    types.len()
                ),
            ));
        }
        Ok((carried, types))
    }

    /// Defines each of `args` (a region's arguments) with its type in `types` (as many), and
    /// returns their ids.
    fn define_args<'a>(
        &self,
        f: &mut FuncState,
        args: impl IntoIterator<Item = &'a (Token, ValueId)>,
        types: &[Type],
    ) -> Result<Vec<ValueId>> {
        let mut ids = Vec::new();
        for ((t, arg), ty) in args.into_iter().zip(types) {
            f.define(self, t, *arg, ty.clone())?;
            ids.push(*arg);
        }
        Ok(ids)
    }

    /// `while iter(%a = %x, …) : (types) { cond } do(%b, …) { body }`.
    fn while_loop(&mut self, f: &mut FuncState) -> Result<(OpKind, Results)> {
        let start = self.peek().clone();
        let (carried, types) = self.carried("while", &start)?;
        let cond_args = self.define_args(f, carried.iter().map(|(a, _)| a), &types)?;
        let cond = self.region(f, cond_args)?;
        self.keyword("do")?;
        self.punct('(')?;
        let body_args = self.list(')', |p| p.value("a carried value `%N`"))?;
        if body_args.len() != types.len() {
            return Err(self.error_at(
                &start,
                "`while`'s body takes one argument per carried value",
            ));
        }
        let args = self.define_args(f, &body_args, &types)?;
        let body = self.region(f, args)?;
        let kind = OpKind::While {
            init: carried.iter().map(|(_, init)| *init).collect(),
            cond,
            body,
        };
        Ok((kind, Results::Many(types)))
    }

    /// `for %iv = %lo to %hi step %st iter(%arg = %init, …) : (types) { … }`: the
    /// induction variable is an i32, each carried value has its result's type.
    fn for_loop(&mut self, f: &mut FuncState) -> Result<(OpKind, Results)> {
        let (iv_tok, iv) = self.value("the induction variable `%N`")?;
        self.punct('=')?;
        let lower = self.operand_value()?;
        self.keyword("to")?;
        let upper = self.operand_value()?;
        self.keyword("step")?;
        let step = self.operand_value()?;
        let (carried, types) = self.carried("for", &iv_tok)?;
        f.define(self, &iv_tok, iv, Type::scalar(DType::I32))?;
        let mut args = vec![iv];
        args.extend(self.define_args(f, carried.iter().map(|(a, _)| a), &types)?);
        let body = self.region(f, args)?;
        let kind = OpKind::For {
            lower,
            upper,
            step,
            init: carried.iter().map(|(_, init)| *init).collect(),
            body,
        };
        Ok((kind, Results::Many(types)))
    }
}
