//! Splits kernel IR text into tokens, each with the line and column it starts at.
//!
//! A comment (`//` to the end of the line) on a line of its own is dropped; one after a
//! token on the same line is kept as a [`Tok::Comment`], because the printer writes an op's
//! source location there.

use crate::print::is_name_char;
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    /// A bare word: a keyword, an op name, a dtype, a symbol.
    Word(String),
    /// A number as written: an integer, or a float (`1.5`, `1e-7`, `-inf`).
    Number(String),
    /// A quoted string (a symbol that is not a plain word).
    Str(String),
    /// `%name`: an SSA value (`%3`) or an operand (`%x`).
    Percent(String),
    /// `@name`: the kernel's name.
    At(String),
    /// One of `{ } ( ) [ ] , : =`.
    Punct(char),
    /// The text of a comment after a token on its line, without the `//`.
    Comment(String),
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Word(w) | Tok::Number(w) => write!(f, "`{w}`"),
            Tok::Str(s) => write!(f, "{s:?}"),
            Tok::Percent(n) => write!(f, "`%{n}`"),
            Tok::At(n) => write!(f, "`@{n}`"),
            Tok::Punct(c) => write!(f, "`{c}`"),
            Tok::Comment(c) => write!(f, "the comment `//{c}`"),
            Tok::Eof => f.write_str("the end of the input"),
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Token {
    pub tok: Tok,
    pub line: u32,
    pub col: u32,
}

/// A lexing failure: what is wrong, and where (1-based line and column).
pub(super) struct LexError {
    pub message: String,
    pub line: u32,
    pub col: u32,
}

pub(super) fn lex(text: &str) -> Result<Vec<Token>, LexError> {
    let mut lexer = Lexer {
        chars: text.chars().collect(),
        i: 0,
        line: 1,
        col: 1,
        line_has_token: false,
    };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next()?;
        let end = token.tok == Tok::Eof;
        tokens.push(token);
        if end {
            return Ok(tokens);
        }
    }
}

struct Lexer {
    chars: Vec<char>,
    i: usize,
    line: u32,
    col: u32,
    /// Whether a token started on the current line (so a comment there is trailing).
    line_has_token: bool,
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.i + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.i += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
            self.line_has_token = false;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn take_while(&mut self, mut keep: impl FnMut(char) -> bool) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek(0).filter(|&c| keep(c)) {
            s.push(c);
            self.bump();
        }
        s
    }

    fn error(&self, message: String, line: u32, col: u32) -> LexError {
        LexError { message, line, col }
    }

    fn next(&mut self) -> Result<Token, LexError> {
        loop {
            self.take_while(char::is_whitespace);
            if self.peek(0) == Some('/') && self.peek(1) == Some('/') {
                let (line, col, trailing) = (self.line, self.col, self.line_has_token);
                self.bump();
                self.bump();
                let text = self.take_while(|c| c != '\n');
                if trailing {
                    return Ok(Token {
                        tok: Tok::Comment(text),
                        line,
                        col,
                    });
                }
                continue;
            }
            break;
        }
        let (line, col) = (self.line, self.col);
        self.line_has_token = true;
        let token = |tok| Ok(Token { tok, line, col });
        let Some(c) = self.peek(0) else {
            return token(Tok::Eof);
        };
        let starts_number = |l: &Lexer, at: usize| {
            l.peek(at).is_some_and(|c| c.is_ascii_digit())
                || (l.peek(at) == Some('i') && l.peek(at + 1) == Some('n'))
        };
        match c {
            '{' | '}' | '(' | ')' | '[' | ']' | ',' | ':' | '=' => {
                self.bump();
                token(Tok::Punct(c))
            }
            '%' | '@' => {
                self.bump();
                let name = if self.peek(0) == Some('"') {
                    self.string(line, col)?
                } else {
                    self.take_while(is_name_char)
                };
                if name.is_empty() {
                    return Err(self.error(format!("expected a name after `{c}`"), line, col));
                }
                token(if c == '%' {
                    Tok::Percent(name)
                } else {
                    Tok::At(name)
                })
            }
            '"' => {
                let s = self.string(line, col)?;
                token(Tok::Str(s))
            }
            '-' if starts_number(self, 1) => {
                self.bump();
                let n = self.number();
                token(Tok::Number(format!("-{n}")))
            }
            _ if c.is_ascii_digit() => {
                let n = self.number();
                token(Tok::Number(n))
            }
            _ if c.is_ascii_alphabetic() || c == '_' => {
                let w = self.take_while(is_name_char);
                token(Tok::Word(w))
            }
            _ => Err(self.error(format!("unexpected character `{c}`"), line, col)),
        }
    }

    /// Digits with an optional fraction and exponent, or `inf`.
    fn number(&mut self) -> String {
        if self.peek(0) == Some('i') {
            return self.take_while(|c| c.is_ascii_alphabetic());
        }
        let mut n = self.take_while(|c| c.is_ascii_digit());
        if self.peek(0) == Some('.') {
            self.bump();
            n.push('.');
            n += &self.take_while(|c| c.is_ascii_digit());
        }
        if matches!(self.peek(0), Some('e' | 'E')) {
            let sign = matches!(self.peek(1), Some('+' | '-'));
            if self
                .peek(1 + sign as usize)
                .is_some_and(|c| c.is_ascii_digit())
            {
                n.push(self.bump().expect("the exponent mark"));
                if sign {
                    n.push(self.bump().expect("the exponent sign"));
                }
                n += &self.take_while(|c| c.is_ascii_digit());
            }
        }
        n
    }

    /// A double-quoted string; `\` escapes the next character.
    fn string(&mut self, line: u32, col: u32) -> Result<String, LexError> {
        self.bump();
        let mut s = String::new();
        loop {
            match self.bump() {
                Some('"') => return Ok(s),
                Some('\\') => match self.bump() {
                    Some(c) if c != '\n' => s.push(c),
                    _ => break,
                },
                Some('\n') | None => break,
                Some(c) => s.push(c),
            }
        }
        Err(self.error("unterminated string".into(), line, col))
    }
}
