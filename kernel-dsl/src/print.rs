//! The stable textual form of a kernel, for debugging, snapshot tests and hashing.
//!
//! The format is MLIR-like: `%N` names SSA values by number, every value-defining op ends in
//! `: type`. It is deterministic, so the same kernel always prints the same text, and
//! [`crate::parse_kernel`] reads it back: names that are not plain words (see [`is_word`])
//! are printed quoted, so every kernel round-trips (see `parse/mod.rs` for what exactly).

use crate::{
    BlockDim, Dim, Extent, Func, Indexer, Initial, Kernel, Literal, Op, OpKind, Region, Start,
    ValueId, Window,
};
use std::{
    borrow::Cow,
    fmt::{self, Write},
};

/// How to print.
#[derive(Copy, Clone, Debug, Default)]
pub struct PrintOptions {
    /// Append `// file:line:col` to ops that have a source location.
    pub locations: bool,
}

/// The kernel as text: the form [`crate::parse_kernel`] reads back, and (without locations)
/// what [`Kernel::structural_hash`] hashes.
pub fn print_kernel(k: &Kernel, options: PrintOptions) -> String {
    let mut out = String::new();
    let p = Printer {
        options,
        names: k.operands.iter().map(|o| name(&o.name).into()).collect(),
    };
    p.kernel(&mut out, k).expect("writing to a String");
    out
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_kernel(self, PrintOptions::default()))
    }
}

struct Printer {
    options: PrintOptions,
    /// Operand names by [`crate::OperandId`].
    names: Vec<String>,
}

/// Whether `s` prints bare as a name (after `%` or `@`): letters, digits and `_ . $ -`.
pub(crate) fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(is_name_char)
}

pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.$-".contains(c)
}

/// Whether `s` prints bare as a symbol of a shape: a name that starts with a letter or `_`
/// (not like a number).
pub(crate) fn is_word(s: &str) -> bool {
    is_name(s) && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// `s` in double quotes, with `"` and `\` escaped by a backslash.
fn quoted(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        if c == '"' || c == '\\' {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

/// A kernel or operand name, quoted unless it [`is_name`].
fn name(s: &str) -> Cow<'_, str> {
    if is_name(s) {
        s.into()
    } else {
        quoted(s).into()
    }
}

/// A symbol, quoted unless it [`is_word`].
fn symbol(s: &str) -> Cow<'_, str> {
    if is_word(s) {
        s.into()
    } else {
        quoted(s).into()
    }
}

fn dim(d: &Dim) -> Cow<'_, str> {
    match d {
        Dim::Static(n) => n.to_string().into(),
        Dim::Sym(s) => symbol(s),
    }
}

fn extent(e: &Extent) -> String {
    match e {
        Extent::Static(n) => n.to_string(),
        Extent::CeilDiv { sym, block } => format!("cdiv({}, {block})", symbol(sym)),
        Extent::Value { operand } => format!("value({operand})"),
    }
}

fn values(vs: &[ValueId]) -> String {
    vs.iter()
        .map(|v| format!("%{}", v.0))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn literal(l: Literal) -> String {
    match l {
        Literal::Float(x) => format!("{x:?}"),
        Literal::Int(i) => i.to_string(),
        Literal::Bool(b) => b.to_string(),
    }
}

fn start(s: Start) -> String {
    match s {
        Start::Static(i) => i.to_string(),
        Start::Dynamic(v) => format!("%{}", v.0),
    }
}

fn indexers(index: &[Indexer]) -> String {
    index
        .iter()
        .map(|ix| match *ix {
            Indexer::Slice {
                start: s,
                size,
                stride: 1,
            } => format!("ds({}, {size})", start(s)),
            Indexer::Slice {
                start: s,
                size,
                stride,
            } => format!("ds({}, {size}, {stride})", start(s)),
            Indexer::Point(s) => start(s),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Printer {
    fn kernel(&self, out: &mut String, k: &Kernel) -> fmt::Result {
        let grid = k
            .grid
            .iter()
            .map(|a| format!("{} {}", a.semantics.name(), extent(&a.extent)))
            .collect::<Vec<_>>()
            .join(", ");
        writeln!(out, "kernel @{} grid({grid}) {{", name(&k.name))?;
        for o in &k.operands {
            let shape = o.shape.iter().map(dim).collect::<Vec<_>>().join(",");
            write!(
                out,
                "  {} %{}: {}[{shape}]",
                o.role.name(),
                name(&o.name),
                o.dtype
            )?;
            if let Some(space) = o.space.name() {
                write!(out, " {space}")?;
            }
            if o.initial == Initial::Undefined {
                write!(out, " undefined")?;
            }
            match &o.window {
                Window::Whole => writeln!(out)?,
                Window::Blocked(b) => {
                    let block = b
                        .block
                        .iter()
                        .map(|d| match d {
                            BlockDim::Blocked(n) => n.to_string(),
                            BlockDim::Element(n) => format!("el{n}"),
                            BlockDim::Squeezed => "sq".into(),
                        })
                        .collect::<Vec<_>>()
                        .join(",");
                    write!(
                        out,
                        " block[{block}] fill {} map({})",
                        literal(b.fill),
                        values(&b.index_map.body.args)
                    )?;
                    self.region_body(out, &b.index_map, &b.index_map.body, 2)?;
                    writeln!(out)?;
                }
            }
        }
        out.push_str("body");
        self.region_body(out, &k.body, &k.body.body, 0)?;
        writeln!(out)?;
        Ok(())
    }

    /// ` {` + ops + `}` at `indent`.
    fn region_body(&self, out: &mut String, f: &Func, r: &Region, indent: usize) -> fmt::Result {
        writeln!(out, " {{")?;
        for op in &r.ops {
            self.op(out, f, op, indent + 2)?;
        }
        write!(out, "{:indent$}}}", "")
    }

    fn op(&self, out: &mut String, f: &Func, op: &Op, indent: usize) -> fmt::Result {
        write!(out, "{:indent$}", "")?;
        if !op.results.is_empty() {
            write!(out, "{} = ", values(&op.results))?;
        }
        let ty = || {
            op.results
                .iter()
                .map(|&r| f.ty(r).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let name = op.kind.name();
        match &op.kind {
            OpKind::Const { value } => write!(out, "const {} : {}", literal(*value), ty())?,
            OpKind::Dense { values } => {
                let values: Vec<String> = values.iter().map(|v| literal(*v)).collect();
                write!(out, "dense [{}] : {}", values.join(", "), ty())?
            }
            OpKind::ProgramId { axis } | OpKind::NumPrograms { axis } => {
                write!(out, "{name} {axis} : {}", ty())?
            }
            OpKind::ArrayDim { operand, axis } => write!(
                out,
                "array_dim %{} {axis} : {}",
                self.operand_name(operand.0),
                ty()
            )?,
            OpKind::Load {
                operand,
                index,
                mask,
                other,
            } => {
                write!(
                    out,
                    "load %{}[{}]",
                    self.operand_name(operand.0),
                    indexers(index)
                )?;
                if let (Some(m), Some(o)) = (mask, other) {
                    write!(out, " mask %{} other %{}", m.0, o.0)?;
                }
                write!(out, " : {}", ty())?;
            }
            OpKind::Store {
                operand,
                index,
                value,
                mask,
            } => {
                write!(
                    out,
                    "store %{}[{}], %{}",
                    self.operand_name(operand.0),
                    indexers(index),
                    value.0
                )?;
                if let Some(m) = mask {
                    write!(out, " mask %{}", m.0)?;
                }
            }
            OpKind::Unary { x, .. }
            | OpKind::Cast { x }
            | OpKind::Bitcast { x }
            | OpKind::Broadcast { x }
            | OpKind::Reshape { x } => write!(out, "{name} %{} : {}", x.0, ty())?,
            OpKind::Binary { lhs, rhs, .. } | OpKind::Compare { lhs, rhs, .. } => {
                write!(out, "{name} %{}, %{} : {}", lhs.0, rhs.0, ty())?
            }
            OpKind::Select {
                cond,
                on_true,
                on_false,
            } => write!(
                out,
                "select %{}, %{}, %{} : {}",
                cond.0,
                on_true.0,
                on_false.0,
                ty()
            )?,
            OpKind::Roll {
                x,
                shift,
                axis,
                stride,
            } => {
                write!(out, "roll %{}, %{} axis {axis}", x.0, shift.0)?;
                if let Some((k, e)) = stride {
                    write!(out, " stride {k} along {e}")?;
                }
                write!(out, " : {}", ty())?
            }
            OpKind::Gather { x, indices, axis } => write!(
                out,
                "gather %{}, %{} axis {axis} : {}",
                x.0,
                indices.0,
                ty()
            )?,
            OpKind::Transpose { x, perm } => write!(out, "transpose %{} {perm:?} : {}", x.0, ty())?,
            OpKind::Iota { dim } => write!(out, "iota {dim} : {}", ty())?,
            OpKind::Reduce { x, axes, .. } => write!(out, "{name} %{} {axes:?} : {}", x.0, ty())?,
            OpKind::Dot { lhs, rhs, dims } => write!(
                out,
                "dot %{}, %{} contract({}, {}) : {}",
                lhs.0,
                rhs.0,
                dims.lhs_contract,
                dims.rhs_contract,
                ty()
            )?,
            OpKind::For {
                lower,
                upper,
                step,
                init,
                body,
            } => {
                let carried: Vec<String> = body.args[1..]
                    .iter()
                    .zip(init)
                    .map(|(a, i)| format!("%{} = %{}", a.0, i.0))
                    .collect();
                write!(
                    out,
                    "for %{} = %{} to %{} step %{} iter({}) : ({})",
                    body.args[0].0,
                    lower.0,
                    upper.0,
                    step.0,
                    carried.join(", "),
                    ty()
                )?;
                self.region_body(out, f, body, indent)?;
            }
            OpKind::While { init, cond, body } => {
                let carried: Vec<String> = cond
                    .args
                    .iter()
                    .zip(init)
                    .map(|(a, i)| format!("%{} = %{}", a.0, i.0))
                    .collect();
                write!(out, "while iter({}) : ({})", carried.join(", "), ty())?;
                self.region_body(out, f, cond, indent)?;
                write!(out, " do({})", values(&body.args))?;
                self.region_body(out, f, body, indent)?;
            }
            OpKind::If {
                cond,
                then_region,
                else_region,
            } => {
                write!(out, "if %{} : ({})", cond.0, ty())?;
                self.region_body(out, f, then_region, indent)?;
                out.push_str(" else");
                self.region_body(out, f, else_region, indent)?;
            }
            OpKind::Yield { values: vs } if vs.is_empty() => out.push_str("yield"),
            OpKind::Yield { values: vs } => write!(out, "yield {}", values(vs))?,
            OpKind::DmaStart { src, dst, sem } => write!(
                out,
                "dma_start {}, {}, {}",
                self.place(src),
                self.place(dst),
                self.place(sem)
            )?,
            OpKind::DmaWait { sem, src, dst } => write!(
                out,
                "dma_wait {}, {}, {}",
                self.place(sem),
                self.place(src),
                self.place(dst)
            )?,
            OpKind::SemaphoreSignal { sem, amount } | OpKind::SemaphoreWait { sem, amount } => {
                write!(out, "{name} {}, %{}", self.place(sem), amount.0)?
            }
            OpKind::SemaphoreRead { sem } => write!(out, "{name} {} : {}", self.place(sem), ty())?,
            OpKind::Print { message, args } => {
                write!(out, "print {}", quoted(message))?;
                for a in args {
                    write!(out, ", %{}", a.0)?;
                }
            }
        }
        if self.options.locations
            && let Some(loc) = &op.loc
        {
            write!(out, "  // {loc}")?;
        }
        writeln!(out)
    }

    /// `%operand[indexers]`.
    fn place(&self, p: &crate::Place) -> String {
        format!(
            "%{}[{}]",
            self.operand_name(p.operand.0),
            indexers(&p.index)
        )
    }

    fn operand_name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }
}
