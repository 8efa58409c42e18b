//! syn → the macro's AST. Everything the body may say is recognised here; anything else is an
//! error at its span, naming the construct.

use crate::ast::{BinOp, DTypeArg, Expr, IndexItem, Kernel, Param, Place, Stmt};
use quote::ToTokens;
use std::collections::HashMap;
use syn::{Error, Ident, Result, spanned::Spanned};
use tpukit_dsl::{BinaryOp, CmpOp, ReduceOp, UnaryOp};

#[derive(Copy, Clone, PartialEq)]
enum Name {
    Ref,
    Host,
    Value { mutable: bool },
}

/// Names in scope, innermost block last.
struct Scope(Vec<HashMap<String, Name>>);

impl Scope {
    fn get(&self, name: &Ident) -> Option<Name> {
        self.0
            .iter()
            .rev()
            .find_map(|s| s.get(&name.to_string()).copied())
    }
    fn insert(&mut self, name: &Ident, n: Name) {
        self.0
            .last_mut()
            .expect("a scope")
            .insert(name.to_string(), n);
    }
}

pub const DTYPES: [(&str, &str); 7] = [
    ("f32", "F32"),
    ("bf16", "BF16"),
    ("f16", "F16"),
    ("i32", "I32"),
    ("i16", "I16"),
    ("i8", "I8"),
    ("bool", "Bool"),
];

pub fn dtype(e: &syn::Expr) -> Result<&'static str> {
    if let syn::Expr::Path(p) = e
        && let Some(id) = p.path.get_ident()
        && let Some((_, v)) = DTYPES.iter().find(|(n, _)| id == n)
    {
        return Ok(v);
    }
    Err(Error::new_spanned(
        e,
        "expected a dtype: f32, bf16, f16, i32, i16, i8 or bool",
    ))
}

/// The role a parameter type names (`In` → `Input`, …), if it is a ref.
fn role_of(ty: &syn::Type) -> Option<&'static str> {
    let syn::Type::Path(tp) = ty else { return None };
    if tp.path.segments.len() != 1 {
        return None;
    }
    match tp.path.segments[0].ident.to_string().as_str() {
        "In" => Some("Input"),
        "Out" => Some("Output"),
        "Scratch" => Some("Scratch"),
        "Prefetch" => Some("Prefetch"),
        _ => None,
    }
}

pub fn is_ref_type(ty: &syn::Type) -> bool {
    role_of(ty).is_some()
}

pub fn kernel(item: &syn::ItemFn) -> Result<Kernel> {
    let sig = &item.sig;
    if let Some(g) = sig.generics.params.first() {
        return Err(Error::new_spanned(
            g,
            "#[tpu_kernel] functions take no generic parameters; pass dtypes in the call spec",
        ));
    }
    if let syn::ReturnType::Type(_, t) = &sig.output {
        return Err(Error::new_spanned(
            t,
            "a #[tpu_kernel] function returns nothing: it writes its outputs",
        ));
    }
    let mut scope = Scope(vec![HashMap::new()]);
    let mut params = Vec::new();
    for arg in &sig.inputs {
        let syn::FnArg::Typed(pt) = arg else {
            return Err(Error::new_spanned(
                arg,
                "#[tpu_kernel] functions take no `self`",
            ));
        };
        let syn::Pat::Ident(pi) = &*pt.pat else {
            return Err(Error::new_spanned(&pt.pat, "expected a parameter name"));
        };
        let name = pi.ident.clone();
        let role = role_of(&pt.ty);
        match role {
            Some(role) => {
                scope.insert(&name, Name::Ref);
                params.push(Param::Ref { name, role });
            }
            None => {
                scope.insert(&name, Name::Host);
                params.push(Param::Host {
                    name,
                    ty: pt.ty.clone(),
                });
            }
        }
    }
    let body = block(&mut scope, &item.block)?;
    Ok(Kernel {
        attrs: item.attrs.clone(),
        vis: item.vis.clone(),
        name: sig.ident.clone(),
        params,
        body,
    })
}

fn block(scope: &mut Scope, b: &syn::Block) -> Result<Vec<Stmt>> {
    scope.0.push(HashMap::new());
    let mut out = Vec::new();
    for s in &b.stmts {
        out.push(stmt(scope, s)?);
    }
    scope.0.pop();
    Ok(out)
}

fn stmt(scope: &mut Scope, s: &syn::Stmt) -> Result<Stmt> {
    let span = s.span();
    match s {
        syn::Stmt::Local(l) => {
            let (pat, ty_span) = match &l.pat {
                syn::Pat::Type(pt) => (&*pt.pat, Some(pt.ty.span())),
                p => (p, None),
            };
            if let Some(t) = ty_span {
                return Err(Error::new(
                    t,
                    "type annotations are not supported in #[tpu_kernel]: values take their types from the call spec",
                ));
            }
            let syn::Pat::Ident(pi) = pat else {
                return Err(Error::new_spanned(
                    pat,
                    "only `let name = …` and `let mut name = …` are supported in #[tpu_kernel]",
                ));
            };
            let Some(init) = &l.init else {
                return Err(Error::new_spanned(
                    l,
                    "a `let` in #[tpu_kernel] needs a value",
                ));
            };
            if let Some((_, e)) = &init.diverge {
                return Err(Error::new_spanned(
                    e,
                    "`let … else` is not supported in #[tpu_kernel]",
                ));
            }
            let mutable = pi.mutability.is_some();
            if !mutable && is_host(scope, &init.expr) && !matches!(&*init.expr, syn::Expr::Lit(_)) {
                scope.insert(&pi.ident, Name::Host);
                return Ok(Stmt::HostLet {
                    name: pi.ident.clone(),
                    init: (*init.expr).clone(),
                    span,
                });
            }
            let init = expr(scope, &init.expr)?;
            scope.insert(&pi.ident, Name::Value { mutable });
            Ok(Stmt::Let {
                name: pi.ident.clone(),
                mutable,
                init,
                span,
            })
        }
        syn::Stmt::Expr(e, _) => expr_stmt(scope, e, span),
        syn::Stmt::Item(i) => Err(Error::new_spanned(
            i,
            "items are not supported inside #[tpu_kernel]; define them outside the kernel",
        )),
        syn::Stmt::Macro(m) => Err(Error::new_spanned(
            m,
            "macros are not supported inside #[tpu_kernel]",
        )),
    }
}

/// The op of a compound assignment (`+=` is the op table's `+`).
fn compound_op(op: &syn::BinOp) -> Option<BinaryOp> {
    let compound = matches!(
        op,
        syn::BinOp::AddAssign(_)
            | syn::BinOp::SubAssign(_)
            | syn::BinOp::MulAssign(_)
            | syn::BinOp::DivAssign(_)
            | syn::BinOp::RemAssign(_)
            | syn::BinOp::BitAndAssign(_)
            | syn::BinOp::BitOrAssign(_)
            | syn::BinOp::BitXorAssign(_)
            | syn::BinOp::ShlAssign(_)
            | syn::BinOp::ShrAssign(_)
    );
    let spelling = op.to_token_stream().to_string();
    BinaryOp::from_rust(spelling.strip_suffix('=')?).filter(|_| compound)
}

fn expr_stmt(scope: &mut Scope, e: &syn::Expr, span: proc_macro2::Span) -> Result<Stmt> {
    match e {
        syn::Expr::Assign(a) => assignment(scope, &a.left, None, &a.right, span),
        syn::Expr::Binary(b) if compound_op(&b.op).is_some() => {
            assignment(scope, &b.left, compound_op(&b.op), &b.right, span)
        }
        syn::Expr::ForLoop(f) => {
            let syn::Pat::Ident(pi) = &*f.pat else {
                return Err(Error::new_spanned(
                    &f.pat,
                    "a `for` loop in #[tpu_kernel] binds one name: `for i in a..b`",
                ));
            };
            let (lower, upper, step) = range(scope, &f.expr)?;
            scope.0.push(HashMap::new());
            scope.insert(&pi.ident, Name::Value { mutable: false });
            let body = block(scope, &f.body);
            scope.0.pop();
            Ok(Stmt::For {
                var: pi.ident.clone(),
                lower,
                upper,
                step,
                body: body?,
                span,
            })
        }
        syn::Expr::While(w) => {
            if let Some(label) = &w.label {
                return Err(Error::new_spanned(
                    label,
                    "loop labels are not supported in #[tpu_kernel]",
                ));
            }
            let cond = expr(scope, &w.cond)?;
            Ok(Stmt::While {
                cond,
                body: block(scope, &w.body)?,
                span,
            })
        }
        syn::Expr::If(i) => {
            let cond = expr(scope, &i.cond)?;
            let then_body = block(scope, &i.then_branch)?;
            let else_body = match &i.else_branch {
                None => vec![],
                Some((_, e)) => match &**e {
                    syn::Expr::Block(b) => block(scope, &b.block)?,
                    e @ syn::Expr::If(_) => vec![expr_stmt(scope, e, e.span())?],
                    e => return Err(Error::new_spanned(e, "unexpected `else` branch")),
                },
            };
            Ok(Stmt::If {
                cond,
                then_body,
                else_body,
                span,
            })
        }
        syn::Expr::Call(c) if matches!(callee(c).as_deref(), Some("dma_start" | "dma_wait")) => {
            let name = callee(c).expect("matched");
            let [src, dst, sem] = c.args.iter().collect::<Vec<_>>()[..] else {
                return Err(Error::new_spanned(
                    c,
                    format!("`{name}(src[..], dst[..], sem[i])` takes 3 arguments"),
                ));
            };
            Ok(Stmt::Dma {
                wait: name == "dma_wait",
                src: place(scope, &name, src)?,
                dst: place(scope, &name, dst)?,
                sem: place(scope, &name, sem)?,
                span,
            })
        }
        syn::Expr::Call(c)
            if matches!(
                callee(c).as_deref(),
                Some("semaphore_signal" | "semaphore_wait")
            ) =>
        {
            let name = callee(c).expect("matched");
            let [sem, amount] = c.args.iter().collect::<Vec<_>>()[..] else {
                return Err(Error::new_spanned(
                    c,
                    format!("`{name}(sem[i], amount)` takes 2 arguments"),
                ));
            };
            Ok(Stmt::Semaphore {
                wait: name == "semaphore_wait",
                sem: place(scope, &name, sem)?,
                amount: expr(scope, amount)?,
                span,
            })
        }
        syn::Expr::Call(c) if callee(c).as_deref() == Some("store") => {
            let [target, index, value, mask] = c.args.iter().collect::<Vec<_>>()[..] else {
                return Err(Error::new_spanned(
                    c,
                    "`store(ref, (index…), value, mask)` takes 4 arguments; write `ref[index] = value` for an unmasked store",
                ));
            };
            Ok(Stmt::MaskedStore {
                target: ref_name(scope, target)?,
                index: index_items(scope, index)?,
                value: expr(scope, value)?,
                mask: expr(scope, mask)?,
                span,
            })
        }
        e => Err(unsupported(e)),
    }
}

fn assignment(
    scope: &mut Scope,
    left: &syn::Expr,
    op: Option<BinaryOp>,
    right: &syn::Expr,
    span: proc_macro2::Span,
) -> Result<Stmt> {
    match left {
        syn::Expr::Index(ix) => Ok(Stmt::Store {
            target: ref_name(scope, &ix.expr)?,
            index: index_items(scope, &ix.index)?,
            op,
            value: expr(scope, right)?,
            span,
        }),
        syn::Expr::Path(p) if p.path.get_ident().is_some() => {
            let name = p.path.get_ident().expect("checked").clone();
            match scope.get(&name) {
                Some(Name::Value { mutable: true }) => {}
                Some(Name::Ref) => {
                    return Err(Error::new_spanned(
                        left,
                        format!("assign to a window of the ref: `{name}[..] = …`"),
                    ));
                }
                Some(_) => {
                    return Err(Error::new_spanned(
                        left,
                        format!("`{name}` is not declared `let mut`"),
                    ));
                }
                None => return Err(Error::new_spanned(left, format!("unknown name `{name}`"))),
            }
            let mut value = expr(scope, right)?;
            if let Some(op) = op {
                value = Expr::Binary {
                    op: BinOp::Arith(op),
                    lhs: Box::new(Expr::Var(name.clone())),
                    rhs: Box::new(value),
                };
            }
            Ok(Stmt::Assign { name, value, span })
        }
        other => Err(Error::new_spanned(
            other,
            "only variables and ref windows (`o[..]`) can be assigned in #[tpu_kernel]",
        )),
    }
}

/// `a..b` or `(a..b).step_by(s)`.
fn range(scope: &Scope, e: &syn::Expr) -> Result<(Expr, Expr, Option<Expr>)> {
    let (r, step) = match e {
        syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
            (strip_parens(&m.receiver), Some(expr(scope, &m.args[0])?))
        }
        e => (e, None),
    };
    match r {
        syn::Expr::Range(syn::ExprRange {
            start: Some(a),
            end: Some(b),
            limits: syn::RangeLimits::HalfOpen(_),
            ..
        }) => Ok((expr(scope, a)?, expr(scope, b)?, step)),
        _ => Err(Error::new_spanned(
            e,
            "a `for` loop in #[tpu_kernel] runs over `a..b` or `(a..b).step_by(s)`",
        )),
    }
}

fn strip_parens(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip_parens(&p.expr),
        e => e,
    }
}

fn callee(c: &syn::ExprCall) -> Option<String> {
    match &*c.func {
        syn::Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}

/// The window `x[index]` that copy and semaphore ops (`op`) name.
fn place(scope: &Scope, op: &str, e: &syn::Expr) -> Result<Place> {
    let syn::Expr::Index(ix) = e else {
        return Err(Error::new_spanned(
            e,
            format!("`{op}` takes windows of refs: `x[..]`, `x[ds(i, 8), ..]`, `sem[i]`"),
        ));
    };
    Ok(Place {
        target: ref_name(scope, &ix.expr)?,
        index: index_items(scope, &ix.index)?,
    })
}

fn ref_name(scope: &Scope, e: &syn::Expr) -> Result<Ident> {
    if let syn::Expr::Path(p) = e
        && let Some(id) = p.path.get_ident()
        && scope.get(id) == Some(Name::Ref)
    {
        return Ok(id.clone());
    }
    Err(Error::new_spanned(
        e,
        "only refs (the kernel's In/Out/Scratch/Prefetch parameters) can be indexed",
    ))
}

fn index_items(scope: &Scope, e: &syn::Expr) -> Result<Vec<IndexItem>> {
    match e {
        syn::Expr::Tuple(t) => t.elems.iter().map(|e| index_item(scope, e)).collect(),
        e => Ok(vec![index_item(scope, e)?]),
    }
}

fn index_item(scope: &Scope, e: &syn::Expr) -> Result<IndexItem> {
    match e {
        syn::Expr::Range(syn::ExprRange {
            start: None,
            end: None,
            ..
        }) => Ok(IndexItem::Full),
        syn::Expr::Call(c) if callee(c).as_deref() == Some("ds") => {
            let [start, size] = c.args.iter().collect::<Vec<_>>()[..] else {
                return Err(Error::new_spanned(c, "`ds(start, size)` takes 2 arguments"));
            };
            Ok(IndexItem::Ds(expr(scope, start)?, size.clone()))
        }
        syn::Expr::Range(r) => Err(Error::new_spanned(
            r,
            "use `..` for a whole dimension or `ds(start, size)` for a slice",
        )),
        e => Ok(IndexItem::At(expr(scope, e)?)),
    }
}

/// True when `e` mentions only literals and host values: it is evaluated as plain Rust.
fn is_host(scope: &Scope, e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Lit(_) => true,
        syn::Expr::Path(p) => p
            .path
            .get_ident()
            .is_some_and(|i| scope.get(i) == Some(Name::Host)),
        syn::Expr::Paren(p) => is_host(scope, &p.expr),
        syn::Expr::Unary(u) => matches!(u.op, syn::UnOp::Neg(_)) && is_host(scope, &u.expr),
        syn::Expr::Binary(b) => is_host(scope, &b.left) && is_host(scope, &b.right),
        syn::Expr::Cast(c) => {
            is_host(scope, &c.expr) && !matches!(dtype_of_type(&c.ty), Some("BF16" | "F16"))
        }
        _ => false,
    }
}

fn dtype_of_type(t: &syn::Type) -> Option<&'static str> {
    if let syn::Type::Path(p) = t
        && let Some(id) = p.path.get_ident()
    {
        return DTYPES.iter().find(|(n, _)| id == n).map(|(_, v)| *v);
    }
    None
}

fn expr(scope: &Scope, e: &syn::Expr) -> Result<Expr> {
    if is_host(scope, e) {
        return Ok(Expr::Host(e.clone()));
    }
    let call =
        |name: &str, args: Vec<Expr>, host_args: Vec<syn::Expr>, refs: Vec<Ident>| Expr::Call {
            name: name.to_string(),
            args,
            host_args,
            refs,
            span: e.span(),
        };
    Ok(match e {
        syn::Expr::Path(p) if p.path.get_ident().is_some() => {
            let id = p.path.get_ident().expect("checked");
            match scope.get(id) {
                Some(Name::Value { .. }) => Expr::Var(id.clone()),
                Some(Name::Ref) => {
                    return Err(Error::new_spanned(
                        e,
                        format!("read a window of the ref: `{id}[..]`"),
                    ));
                }
                _ => {
                    return Err(Error::new_spanned(
                        e,
                        format!("unknown name `{id}` in #[tpu_kernel]"),
                    ));
                }
            }
        }
        syn::Expr::Paren(p) => expr(scope, &p.expr)?,
        syn::Expr::Group(g) => expr(scope, &g.expr)?,
        syn::Expr::Unary(u) => {
            let spelling = u.op.to_token_stream().to_string();
            let Some(op) = UnaryOp::from_rust(&spelling) else {
                return Err(Error::new_spanned(
                    e,
                    format!("`{spelling}` is not supported in #[tpu_kernel]"),
                ));
            };
            Expr::Unary {
                op,
                x: Box::new(expr(scope, &u.expr)?),
            }
        }
        syn::Expr::Binary(b) => {
            let spelling = b.op.to_token_stream().to_string();
            let op = match (BinaryOp::from_rust(&spelling), CmpOp::from_rust(&spelling)) {
                (Some(op), _) => BinOp::Arith(op),
                (None, Some(op)) => BinOp::Cmp(op),
                (None, None) => {
                    return Err(Error::new_spanned(
                        b,
                        "this operator is not supported in #[tpu_kernel] expressions (assignments are statements)",
                    ));
                }
            };
            Expr::Binary {
                op,
                lhs: Box::new(expr(scope, &b.left)?),
                rhs: Box::new(expr(scope, &b.right)?),
            }
        }
        syn::Expr::Index(ix) => Expr::Load {
            target: ref_name(scope, &ix.expr)?,
            index: index_items(scope, &ix.index)?,
        },
        syn::Expr::Cast(c) => {
            let Some(dtype) = dtype_of_type(&c.ty) else {
                return Err(Error::new_spanned(
                    &c.ty,
                    "cast to a dtype: f32, bf16, f16, i32, i16, i8 or bool",
                ));
            };
            Expr::Cast {
                x: Box::new(expr(scope, &c.expr)?),
                dtype: DTypeArg::Named(dtype),
            }
        }
        syn::Expr::MethodCall(m) => {
            let name = m.method.to_string();
            let recv = expr(scope, &m.receiver)?;
            let n = m.args.len();
            let args: Vec<&syn::Expr> = m.args.iter().collect();
            let arity = |want: usize| -> Result<()> {
                if n != want {
                    return Err(Error::new_spanned(
                        &m.method,
                        format!("`.{name}()` takes {want} argument(s)"),
                    ));
                }
                Ok(())
            };
            let reduction = name.strip_suffix("_keepdims");
            if let Some(op) = UnaryOp::from_rust(&name) {
                arity(0)?;
                return Ok(Expr::Unary {
                    op,
                    x: Box::new(recv),
                });
            }
            if let Some(op) = BinaryOp::from_rust(&name) {
                arity(1)?;
                return Ok(Expr::Binary {
                    op: BinOp::Arith(op),
                    lhs: Box::new(recv),
                    rhs: Box::new(expr(scope, args[0])?),
                });
            }
            if let Some(op) = ReduceOp::from_rust(reduction.unwrap_or(&name)) {
                arity(1)?;
                return Ok(Expr::Reduce {
                    op,
                    keepdims: reduction.is_some(),
                    x: Box::new(recv),
                    axes: args[0].clone(),
                });
            }
            match name.as_str() {
                "cast" => {
                    arity(1)?;
                    let dtype = match dtype(args[0]) {
                        Ok(d) => DTypeArg::Named(d),
                        Err(_) if is_host(scope, args[0]) => DTypeArg::Host(args[0].clone()),
                        Err(e) => return Err(e),
                    };
                    Expr::Cast {
                        x: Box::new(recv),
                        dtype,
                    }
                }
                "reshape" | "broadcast_to" | "transpose" => {
                    arity(1)?;
                    call(&name, vec![recv], vec![args[0].clone()], vec![])
                }
                "t" => {
                    arity(0)?;
                    call("t", vec![recv], vec![], vec![])
                }
                _ => {
                    return Err(Error::new_spanned(
                        &m.method,
                        format!("method `.{name}()` is not supported in #[tpu_kernel]"),
                    ));
                }
            }
        }
        syn::Expr::Call(c) => {
            let Some(name) = callee(c) else {
                return Err(Error::new_spanned(
                    &c.func,
                    "only the kernel functions (program_id, dot, where_, …) can be called in #[tpu_kernel]",
                ));
            };
            let args: Vec<&syn::Expr> = c.args.iter().collect();
            let arity = |want: usize| -> Result<()> {
                if args.len() != want {
                    return Err(Error::new_spanned(
                        c,
                        format!("`{name}` takes {want} argument(s)"),
                    ));
                }
                Ok(())
            };
            if name == "semaphore_read" {
                arity(1)?;
                return Ok(Expr::SemaphoreRead(place(scope, &name, args[0])?));
            }
            let dt = |e: &syn::Expr| -> Result<syn::Expr> {
                let d = syn::Ident::new(dtype(e)?, e.span());
                Ok(syn::parse_quote!(::tpukit::dsl::DType::#d))
            };
            match name.as_str() {
                "program_id" | "num_programs" => {
                    arity(1)?;
                    call(&name, vec![], vec![args[0].clone()], vec![])
                }
                "dim" => {
                    arity(2)?;
                    call(
                        "dim",
                        vec![],
                        vec![args[1].clone()],
                        vec![ref_name(scope, args[0])?],
                    )
                }
                "dot" | "dot_t" => {
                    arity(2)?;
                    call(
                        &name,
                        vec![expr(scope, args[0])?, expr(scope, args[1])?],
                        vec![],
                        vec![],
                    )
                }
                "dot_general" => {
                    arity(4)?;
                    call(
                        &name,
                        vec![expr(scope, args[0])?, expr(scope, args[1])?],
                        vec![args[2].clone(), args[3].clone()],
                        vec![],
                    )
                }
                "where_" | "select" => {
                    arity(3)?;
                    call(
                        "where_",
                        vec![
                            expr(scope, args[0])?,
                            expr(scope, args[1])?,
                            expr(scope, args[2])?,
                        ],
                        vec![],
                        vec![],
                    )
                }
                "gather" | "roll" => {
                    arity(3)?;
                    call(
                        &name,
                        vec![expr(scope, args[0])?, expr(scope, args[1])?],
                        vec![args[2].clone()],
                        vec![],
                    )
                }
                "iota" => {
                    arity(3)?;
                    call(
                        "iota",
                        vec![],
                        vec![dt(args[0])?, args[1].clone(), args[2].clone()],
                        vec![],
                    )
                }
                "zeros" => {
                    arity(2)?;
                    call("zeros", vec![], vec![dt(args[0])?, args[1].clone()], vec![])
                }
                "full" => {
                    arity(3)?;
                    call(
                        "full",
                        vec![expr(scope, args[2])?],
                        vec![dt(args[0])?, args[1].clone()],
                        vec![],
                    )
                }
                "zeros_like" => {
                    arity(1)?;
                    call("zeros_like", vec![expr(scope, args[0])?], vec![], vec![])
                }
                "load" => {
                    arity(4)?;
                    Expr::MaskedLoad {
                        target: ref_name(scope, args[0])?,
                        index: index_items(scope, args[1])?,
                        mask: Box::new(expr(scope, args[2])?),
                        other: Box::new(expr(scope, args[3])?),
                    }
                }
                _ => {
                    return Err(Error::new_spanned(
                        &c.func,
                        format!("function `{name}` is not supported in #[tpu_kernel]"),
                    ));
                }
            }
        }
        e => return Err(unsupported(e)),
    })
}

/// The error for a construct the kernel language does not have.
fn unsupported(e: &syn::Expr) -> Error {
    let what = match e {
        syn::Expr::Loop(_) => {
            "`loop` is not supported in #[tpu_kernel]; use `while cond` or `for i in a..b`"
        }
        syn::Expr::Match(_) => {
            "`match` is not supported in #[tpu_kernel]; use `if`/`else` or `where_`"
        }
        syn::Expr::Closure(_) => "closures are not supported in #[tpu_kernel]",
        syn::Expr::Return(_) => {
            "`return` is not supported in #[tpu_kernel]; kernels write their outputs"
        }
        syn::Expr::Break(_) | syn::Expr::Continue(_) => {
            "`break`/`continue` are not supported in #[tpu_kernel]"
        }
        syn::Expr::Macro(_) => "macros are not supported inside #[tpu_kernel]",
        syn::Expr::Field(_) => "field access is not supported in #[tpu_kernel]",
        syn::Expr::Array(_) => {
            "arrays are host values here: use them as shapes (`zeros(f32, [8, 128])`)"
        }
        syn::Expr::Block(_) | syn::Expr::Unsafe(_) => {
            "nested blocks are not supported in #[tpu_kernel]"
        }
        syn::Expr::Index(_)
        | syn::Expr::Call(_)
        | syn::Expr::MethodCall(_)
        | syn::Expr::Path(_)
        | syn::Expr::Binary(_) => {
            "this expression has no effect: a statement in #[tpu_kernel] stores, assigns, loops or branches"
        }
        _ => "this expression is not supported in #[tpu_kernel]",
    };
    Error::new_spanned(e, what)
}
