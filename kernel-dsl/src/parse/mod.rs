//! Reading kernel IR text: the inverse of the printer ([`crate::print_kernel`]).
//!
//! # What round-trips
//!
//! For every verified kernel `k`:
//! - `parse_kernel(&print_kernel(&k, PrintOptions { locations: true }))` is `k`, structurally:
//!   grid, operands (names, roles, dtypes, shapes, windows, fills, index maps), every op, and
//!   every source location (printed as `// file:line:column` after its op; a file name that
//!   begins or ends with whitespace or holds a line break does not survive that comment);
//! - `parse_kernel(&k.to_string())` is `k` without its source locations, so it prints the
//!   same text and has the same [`crate::KernelHash`].
//!
//! Value types are printed only on op results; the parser gives block arguments the types the
//! verifier requires of them (`i32` for index-map arguments and loop induction variables, the
//! result types for a loop's carried values), so a kernel the verifier accepts loses nothing.
//! Values must be numbered `%0 … %N` without gaps within each function (a kernel body or an
//! index map), as the builder numbers them; names that are not plain words are printed quoted
//! (`%"x y"`), so any operand, kernel or symbol name round-trips.
//!
//! # Beyond printed text
//!
//! Comments (`//` to the end of a line) on lines of their own are ignored, so IR files may
//! carry directives such as FileCheck's `// CHECK:` lines; a comment after an op is its source
//! location and must read `file:line:column`. The parsed kernel is verified. Syntax errors
//! (kind [`crate::ErrorKind::Invalid`]) carry the line and column where the text differs from
//! what was expected, and say what that was; verifier errors on an op without a source
//! location of its own carry the op's line and column.

mod body;
mod file;
mod kernel;
mod lexer;

pub use file::KernelFile;

use crate::{Error, Kernel, Loc, OpKind, Region, Result};
use lexer::{Tok, Token};
use std::sync::Arc;

/// Parses and verifies one kernel written as the printer writes it.
pub fn parse_kernel(text: &str) -> Result<Kernel> {
    parse_kernel_in(text, "<input>")
}

/// [`parse_kernel`], naming `file` in errors.
pub fn parse_kernel_in(text: &str, file: &str) -> Result<Kernel> {
    let tokens = lexer::lex(text)
        .map_err(|e| Error::new(e.message).at(Some(&Loc::new(file, e.line, e.col))))?;
    let mut p = Parser {
        tokens,
        pos: 0,
        file: file.into(),
        here: file.into(),
        operands: Vec::new(),
    };
    let mut kernel = p.kernel()?;
    crate::verify(&kernel)?;
    strip_positions(&mut kernel, &p.here);
    Ok(kernel)
}

impl Kernel {
    /// This kernel with no source locations: what `parse_kernel(&k.to_string())` gives.
    pub fn without_locations(&self) -> Kernel {
        let mut k = self.clone();
        drop_locations(&mut k, &|_| true);
        k
    }
}

/// Drops the locations the parser gave ops that had none (their place in the text, so that
/// verifier errors point at it): they are recognised by sharing the `here` file name.
fn strip_positions(k: &mut Kernel, here: &Arc<str>) {
    drop_locations(k, &|l| Arc::ptr_eq(&l.file, here));
}

/// Sets every op's location that `drop` selects to `None`.
fn drop_locations(k: &mut Kernel, drop: &dyn Fn(&Loc) -> bool) {
    fn region(r: &mut Region, drop: &dyn Fn(&Loc) -> bool) {
        for op in &mut r.ops {
            if op.loc.as_ref().is_some_and(drop) {
                op.loc = None;
            }
            match &mut op.kind {
                OpKind::For { body, .. } => region(body, drop),
                OpKind::If {
                    then_region,
                    else_region,
                    ..
                } => {
                    region(then_region, drop);
                    region(else_region, drop);
                }
                _ => {}
            }
        }
    }
    for o in &mut k.operands {
        if let crate::Window::Blocked(b) = &mut o.window {
            region(&mut b.index_map.body, drop);
        }
    }
    region(&mut k.body.body, drop);
}

/// A cursor over the tokens of one kernel.
pub(super) struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    /// The file name errors and explicit locations name.
    file: Arc<str>,
    /// The same name, shared by every location that only records an op's place in the text.
    here: Arc<str>,
    /// The operands declared so far, by name (their [`crate::OperandId`] is the index).
    operands: Vec<String>,
}

impl Parser {
    /// The next token that is not a comment.
    fn peek(&self) -> &Token {
        self.tokens[self.pos..]
            .iter()
            .find(|t| !matches!(t.tok, Tok::Comment(_)))
            .expect("the token list ends with Eof")
    }

    fn next(&mut self) -> Token {
        while matches!(self.tokens[self.pos].tok, Tok::Comment(_)) {
            self.pos += 1;
        }
        let t = self.tokens[self.pos].clone();
        if t.tok != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    /// The place of `t`, as a location errors carry.
    fn place(&self, t: &Token) -> Loc {
        Loc {
            file: self.here.clone(),
            line: t.line,
            column: t.col,
        }
    }

    fn error_at(&self, t: &Token, message: impl Into<String>) -> Error {
        Error::new(message).at(Some(&Loc::new(&self.file, t.line, t.col)))
    }

    /// "expected `what`, found …" at the next token.
    fn expected(&self, what: &str) -> Error {
        let t = self.peek();
        self.error_at(t, format!("expected {what}, found {}", t.tok))
    }

    fn eat_punct(&mut self, c: char) -> bool {
        let hit = self.peek().tok == Tok::Punct(c);
        if hit {
            self.next();
        }
        hit
    }

    fn punct(&mut self, c: char) -> Result<()> {
        if self.eat_punct(c) {
            Ok(())
        } else {
            Err(self.expected(&format!("`{c}`")))
        }
    }

    fn eat_word(&mut self, w: &str) -> bool {
        let hit = matches!(&self.peek().tok, Tok::Word(x) if x == w);
        if hit {
            self.next();
        }
        hit
    }

    /// `elN`, an element-offset block dim of `N` elements, if it comes next.
    fn eat_element_block(&mut self) -> Result<Option<usize>> {
        let Tok::Word(w) = &self.peek().tok else {
            return Ok(None);
        };
        let Some(digits) = w.strip_prefix("el") else {
            return Ok(None);
        };
        let n = digits
            .parse::<usize>()
            .map_err(|_| self.expected("an element block size (`el8`)"))?;
        self.next();
        Ok(Some(n))
    }

    fn keyword(&mut self, w: &str) -> Result<()> {
        if self.eat_word(w) {
            Ok(())
        } else {
            Err(self.expected(&format!("`{w}`")))
        }
    }

    /// A bare word, described as `what` if it is missing.
    fn word(&mut self, what: &str) -> Result<(Token, String)> {
        match &self.peek().tok {
            Tok::Word(w) => {
                let w = w.clone();
                Ok((self.next(), w))
            }
            _ => Err(self.expected(what)),
        }
    }

    /// `item (, item)*` up to `close`, which it consumes (the opening bracket is already
    /// consumed).
    fn list<T>(
        &mut self,
        close: char,
        mut item: impl FnMut(&mut Self) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut items = Vec::new();
        if self.eat_punct(close) {
            return Ok(items);
        }
        loop {
            items.push(item(self)?);
            if self.eat_punct(close) {
                return Ok(items);
            }
            if !self.eat_punct(',') {
                return Err(self.expected(&format!("`,` or `{close}`")));
            }
        }
    }

    fn integer<T: std::str::FromStr>(&mut self, what: &str) -> Result<T> {
        let t = self.peek().clone();
        match &t.tok {
            Tok::Number(n) => match n.parse() {
                Ok(v) => {
                    self.next();
                    Ok(v)
                }
                Err(_) => Err(self.error_at(&t, format!("expected {what}, found {}", t.tok))),
            },
            _ => Err(self.expected(what)),
        }
    }

    /// The source location a comment after an op gives, if there is one.
    fn trailing_location(&mut self) -> Result<Option<Loc>> {
        let t = self.tokens[self.pos].clone();
        let Tok::Comment(text) = &t.tok else {
            return Ok(None);
        };
        self.pos += 1;
        let mut parts = text.trim().rsplitn(3, ':');
        let (col, line, file) = (parts.next(), parts.next(), parts.next());
        match (
            file,
            line.and_then(|l| l.parse().ok()),
            col.and_then(|c| c.parse().ok()),
        ) {
            (Some(file), Some(line), Some(column)) if !file.is_empty() => {
                Ok(Some(Loc::new(file, line, column)))
            }
            _ => Err(self.error_at(
                &t,
                format!(
                    "expected a source location `file:line:column` after the op, found `//{}`",
                    text
                ),
            )),
        }
    }
}
