//! The kernel's frame: `kernel @name grid(…) {`, one line per operand (with its window and
//! index map), then `body { … }`.

use super::{Parser, body::FuncState, lexer::Tok};
use crate::{
    BlockDim, BlockSpec, DType, Dim, Extent, GridAxis, Initial, Kernel, Literal, Operand, Result,
    Role, Semantics, Type, Window,
};

const SEMANTICS: [Semantics; 2] = [Semantics::Parallel, Semantics::Arbitrary];
const ROLES: [Role; 4] = [Role::Prefetch, Role::Input, Role::Output, Role::Scratch];

impl Parser {
    pub(super) fn kernel(&mut self) -> Result<Kernel> {
        self.keyword("kernel")?;
        let name = match &self.peek().tok {
            Tok::At(n) => n.clone(),
            _ => return Err(self.expected("the kernel's name `@name`")),
        };
        self.next();
        self.keyword("grid")?;
        self.punct('(')?;
        let grid = self.list(')', Parser::grid_axis)?;
        self.punct('{')?;
        let mut operands = Vec::new();
        while !self.eat_word("body") {
            operands.push(self.operand()?);
        }
        let body = FuncState::default().func(self, Vec::new())?;
        if self.peek().tok != Tok::Eof {
            return Err(self.expected("the end of the kernel"));
        }
        Ok(Kernel {
            name,
            grid,
            operands,
            body,
        })
    }

    fn grid_axis(&mut self) -> Result<GridAxis> {
        let (t, word) = self.word("`parallel` or `arbitrary`")?;
        let semantics = SEMANTICS
            .into_iter()
            .find(|s| s.name() == word)
            .ok_or_else(|| {
                self.error_at(
                    &t,
                    format!("expected `parallel` or `arbitrary`, found `{word}`"),
                )
            })?;
        let extent = if self.eat_word("cdiv") {
            self.punct('(')?;
            let sym = self.symbol()?;
            self.punct(',')?;
            let block = self.integer("a block size")?;
            self.punct(')')?;
            Extent::CeilDiv { sym, block }
        } else if self.eat_word("value") {
            self.punct('(')?;
            let operand = self.integer("an operand index")?;
            self.punct(')')?;
            Extent::Value { operand }
        } else {
            Extent::Static(self.integer("a grid extent or `cdiv(symbol, block)`")?)
        };
        Ok(GridAxis { extent, semantics })
    }

    /// A symbolic extent: a word or a quoted string.
    fn symbol(&mut self) -> Result<String> {
        match &self.peek().tok {
            Tok::Word(w) | Tok::Str(w) => {
                let w = w.clone();
                self.next();
                Ok(w)
            }
            _ => Err(self.expected("a symbol")),
        }
    }

    /// `role %name: dtype[dims]`, then for a blocked window
    /// `block[dims] fill LITERAL map(%0, …) { … }`.
    fn operand(&mut self) -> Result<Operand> {
        let what = "an operand (`prefetch`, `input`, `output` or `scratch`) or `body`";
        let (t, word) = self.word(what)?;
        let role = ROLES
            .into_iter()
            .find(|r| r.name() == word)
            .ok_or_else(|| self.error_at(&t, format!("expected {what}, found `{word}`")))?;
        let name = match &self.peek().tok {
            Tok::Percent(n) => n.clone(),
            _ => return Err(self.expected("the operand's name `%name`")),
        };
        self.next();
        self.operands.push(name.clone());
        self.punct(':')?;
        let dtype = self.dtype()?;
        self.punct('[')?;
        let shape = self.list(']', |p| match &p.peek().tok {
            Tok::Number(_) => p.integer("an extent").map(Dim::Static),
            _ => p.symbol().map(Dim::Sym),
        })?;
        let space = crate::Space::NAMED
            .into_iter()
            .find(|s| s.name().is_some_and(|n| self.eat_word(n)))
            .unwrap_or_default();
        let initial = if self.eat_word("undefined") {
            Initial::Undefined
        } else {
            Initial::Caller
        };
        let window = if self.eat_word("block") {
            self.punct('[')?;
            let block = self.list(']', |p| {
                if p.eat_word("sq") {
                    Ok(BlockDim::Squeezed)
                } else if let Some(n) = p.eat_element_block()? {
                    Ok(BlockDim::Element(n))
                } else {
                    p.integer("a block size, `elN` or `sq`")
                        .map(BlockDim::Blocked)
                }
            })?;
            self.keyword("fill")?;
            let fill = self.literal()?;
            self.keyword("map")?;
            self.punct('(')?;
            let mut state = FuncState::default();
            let args = self.list(')', |p| {
                let (t, v) = p.value("a grid index `%N`")?;
                state.define(p, &t, v, Type::scalar(DType::I32))?;
                Ok(v)
            })?;
            let index_map = state.func(self, args)?;
            Window::Blocked(BlockSpec {
                block,
                index_map,
                fill,
            })
        } else {
            Window::Whole
        };
        Ok(Operand {
            name,
            role,
            dtype,
            shape,
            window,
            space,
            initial,
        })
    }

    pub(super) fn dtype(&mut self) -> Result<DType> {
        let what = "a dtype (f32, bf16, f16, i32, i16, i8, bool)";
        let (t, word) = self.word(what)?;
        DType::parse(&word)
            .ok_or_else(|| self.error_at(&t, format!("expected {what}, found `{word}`")))
    }

    /// `dtype[n, …]`: a value's type.
    pub(super) fn ty(&mut self) -> Result<Type> {
        let dtype = self.dtype()?;
        self.punct('[')?;
        let shape = self.list(']', |p| p.integer("a static extent"))?;
        Ok(Type::new(dtype, shape))
    }

    /// A constant: an integer, a float (`0.5`, `1e-7`, `-inf`, `NaN`), `true` or `false`.
    pub(super) fn literal(&mut self) -> Result<Literal> {
        let t = self.peek().clone();
        let lit = match &t.tok {
            Tok::Word(w) if w == "true" || w == "false" => Literal::Bool(w == "true"),
            Tok::Word(w) if w == "inf" || w == "NaN" => Literal::Float(w.parse().expect("a float")),
            Tok::Number(n) if n.contains(['.', 'e', 'E', 'i']) => match n.parse() {
                Ok(x) => Literal::Float(x),
                Err(_) => return Err(self.error_at(&t, format!("`{n}` is not a float"))),
            },
            Tok::Number(n) => match n.parse() {
                Ok(i) => Literal::Int(i),
                Err(_) => return Err(self.error_at(&t, format!("`{n}` is not a 64-bit integer"))),
            },
            _ => return Err(self.expected("a constant (a number, `true` or `false`)")),
        };
        self.next();
        Ok(lit)
    }
}
