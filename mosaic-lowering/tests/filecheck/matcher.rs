//! A small FileCheck: `// PREFIX:` lines of a test file, matched in order against an output.
//!
//! - `PREFIX: pat` — `pat` occurs after the previous match;
//! - `PREFIX-NEXT: pat` — on the line after the previous match;
//! - `PREFIX-SAME: pat` — on the line of the previous match, after it;
//! - `PREFIX-NOT: pat` — not between the previous match and the next one (or the end);
//! - `PREFIX-LABEL: pat` — found first, in order; it cuts the output into blocks, each checked
//!   by the directives that follow its label, so a failure stays within its block.
//!
//! A pattern is literal text, with `{{regex}}` for a regular expression; runs of whitespace
//! match any run of spaces and tabs. Matches never span lines.

use regex::Regex;
use std::fmt::Write as _;

#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Kind {
    Check,
    Next,
    Same,
    Not,
    Label,
}

#[derive(Debug)]
pub struct Directive {
    pub kind: Kind,
    /// As written, for messages.
    pub text: String,
    pattern: Regex,
    /// The 1-based line of the test file it is on.
    pub line: usize,
}

impl Directive {
    fn name(&self, prefix: &str) -> String {
        match self.kind {
            Kind::Check => prefix.to_string(),
            Kind::Next => format!("{prefix}-NEXT"),
            Kind::Same => format!("{prefix}-SAME"),
            Kind::Not => format!("{prefix}-NOT"),
            Kind::Label => format!("{prefix}-LABEL"),
        }
    }
}

/// The `// PREFIX…:` directives of `text`, in order.
pub fn directives(text: &str, prefix: &str) -> Result<Vec<Directive>, String> {
    let kinds = [
        ("", Kind::Check),
        ("-NEXT", Kind::Next),
        ("-SAME", Kind::Same),
        ("-NOT", Kind::Not),
        ("-LABEL", Kind::Label),
    ];
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(comment) = line.trim_start().strip_prefix("//") else {
            continue;
        };
        let Some(rest) = comment.trim_start().strip_prefix(prefix) else {
            continue;
        };
        let Some((kind, text)) = kinds.iter().find_map(|(suffix, kind)| {
            rest.strip_prefix(suffix)
                .and_then(|r| r.strip_prefix(':'))
                .map(|t| (*kind, t.trim()))
        }) else {
            continue;
        };
        if text.is_empty() {
            return Err(format!("line {}: an empty {prefix} pattern", i + 1));
        }
        let pattern = compile(text).map_err(|e| format!("line {}: {e}", i + 1))?;
        out.push(Directive {
            kind,
            text: text.to_string(),
            pattern,
            line: i + 1,
        });
    }
    Ok(out)
}

/// Literal text with `{{regex}}` blocks, as one regular expression.
fn compile(pattern: &str) -> Result<Regex, String> {
    let mut re = String::new();
    let mut rest = pattern;
    while let Some(open) = rest.find("{{") {
        re += &literal(&rest[..open]);
        let close = rest[open..]
            .find("}}")
            .ok_or_else(|| format!("`{{{{` without `}}}}` in `{pattern}`"))?;
        write!(re, "(?:{})", &rest[open + 2..open + close]).expect("a String");
        rest = &rest[open + close + 2..];
    }
    re += &literal(rest);
    Regex::new(&re).map_err(|e| format!("bad regex in `{pattern}`: {e}"))
}

fn literal(text: &str) -> String {
    let space = "[ \\t]+";
    let mut re = String::new();
    if text.starts_with(char::is_whitespace) {
        re += space;
    }
    re += &text
        .split_whitespace()
        .map(regex::escape)
        .collect::<Vec<_>>()
        .join(space);
    if text.ends_with(char::is_whitespace) && !text.trim().is_empty() {
        re += space;
    }
    re
}

/// A place in the output: line index and byte column.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pos {
    line: usize,
    col: usize,
}

struct Checker<'a> {
    lines: Vec<&'a str>,
    file: &'a str,
    prefix: &'a str,
}

/// Checks `output` against `directives` (from `file`); the error names the directive's
/// `file:line`, its pattern and the region of the output it was looked for in.
pub fn check(
    output: &str,
    directives: &[Directive],
    file: &str,
    prefix: &str,
) -> Result<(), String> {
    let c = Checker {
        lines: output.lines().collect(),
        file,
        prefix,
    };
    let end = Pos {
        line: c.lines.len(),
        col: 0,
    };
    // Labels first: each block runs from its label's match to the next label's.
    let mut bounds = vec![(Pos { line: 0, col: 0 }, 0usize)];
    let mut at = Pos { line: 0, col: 0 };
    for (i, d) in directives.iter().enumerate() {
        if d.kind == Kind::Label {
            let (start, stop) = c.find(d, at, end).ok_or_else(|| c.not_found(d, at, end))?;
            bounds.push((start, i));
            at = stop;
        }
    }
    for (b, &(start, first)) in bounds.iter().enumerate() {
        let (stop, last) = bounds
            .get(b + 1)
            .map_or((end, directives.len()), |&(s, i)| (s, i));
        c.block(&directives[first..last], start, stop)?;
    }
    Ok(())
}

impl Checker<'_> {
    /// The first match of `d` in `[from, to)`: its start and end.
    fn find(&self, d: &Directive, from: Pos, to: Pos) -> Option<(Pos, Pos)> {
        for line in from.line..=to.line {
            let Some(&text) = self.lines.get(line) else {
                break;
            };
            let text = if line == to.line {
                &text[..to.col.min(text.len())]
            } else {
                text
            };
            let col = if line == from.line {
                from.col.min(text.len())
            } else {
                0
            };
            if let Some(m) = d.pattern.find_at(text, col) {
                return Some((
                    Pos {
                        line,
                        col: m.start(),
                    },
                    Pos { line, col: m.end() },
                ));
            }
        }
        None
    }

    /// The directives of one block, from `start` to `stop`.
    fn block(&self, directives: &[Directive], start: Pos, stop: Pos) -> Result<(), String> {
        let mut at = start;
        let mut previous: Option<Pos> = None;
        let mut nots: Vec<&Directive> = Vec::new();
        for d in directives {
            let (from, to) = match d.kind {
                Kind::Not => {
                    nots.push(d);
                    continue;
                }
                Kind::Check | Kind::Label => (at, stop),
                Kind::Next | Kind::Same => {
                    let Some(prev) = previous else {
                        return Err(self.message(d, "has no previous match to follow", at, stop));
                    };
                    let line = prev.line + (d.kind == Kind::Next) as usize;
                    let from = if d.kind == Kind::Next {
                        Pos { line, col: 0 }
                    } else {
                        at
                    };
                    (
                        from,
                        Pos {
                            line: line + 1,
                            col: 0,
                        }
                        .min(stop),
                    )
                }
            };
            let (begin, end) = self
                .find(d, from, to)
                .ok_or_else(|| self.not_found(d, from, to))?;
            for n in nots.drain(..) {
                self.excluded(n, at, begin)?;
            }
            at = end;
            previous = Some(end);
        }
        for n in nots {
            self.excluded(n, at, stop)?;
        }
        Ok(())
    }

    /// Fails if the CHECK-NOT `d` matches in `[from, to)`.
    fn excluded(&self, d: &Directive, from: Pos, to: Pos) -> Result<(), String> {
        match self.find(d, from, to) {
            Some((found, _)) => Err(self.message(
                d,
                &format!("found on output line {}", found.line + 1),
                Pos {
                    line: found.line.saturating_sub(2),
                    col: 0,
                },
                Pos {
                    line: found.line + 3,
                    col: 0,
                },
            )),
            None => Ok(()),
        }
    }

    fn not_found(&self, d: &Directive, from: Pos, to: Pos) -> String {
        let last = to.line.max(from.line + 1).min(from.line + 12);
        self.message(d, "not found", from, Pos { line: last, col: 0 })
    }

    /// `file:line: PREFIX-KIND: `pattern` what`, then output lines `[from, to)`.
    fn message(&self, d: &Directive, what: &str, from: Pos, to: Pos) -> String {
        let mut m = format!(
            "{}:{}: {}: `{}` {what}; output from line {}:\n",
            self.file,
            d.line,
            d.name(self.prefix),
            d.text,
            from.line + 1
        );
        for line in from.line..to.line.min(self.lines.len()) {
            let _ = writeln!(m, "{:>5} | {}", line + 1, self.lines[line]);
        }
        if from.line >= self.lines.len() {
            m += "      (the end of the output)\n";
        }
        m
    }
}
