//! The macro's AST → Rust that builds the kernel IR with `KernelBuilder`.
//!
//! Every DSL expression becomes a block evaluating to an `Arg` (a value or a weak literal);
//! operands are evaluated into temporaries before each builder call, so the builder is never
//! borrowed twice. Loops and branches become `for_loop` / `if_else` closures; outer `let mut`
//! values assigned inside are carried through them.

use crate::{
    ast::{BinOp, DTypeArg, Expr, IndexItem, Kernel, Param, Place, Stmt},
    paths::dsl,
};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

pub fn kernel(k: &Kernel) -> TokenStream {
    let (attrs, vis, name) = (&k.attrs, &k.vis, &k.name);
    let (call_spec, result, kernel_ty, builder, role) = (
        dsl("CallSpec"),
        dsl("Result"),
        dsl("Kernel"),
        dsl("KernelBuilder"),
        dsl("Role"),
    );
    let host: Vec<TokenStream> = k
        .params
        .iter()
        .filter_map(|p| match p {
            Param::Host { name, ty } => Some(quote!(#name: #ty)),
            Param::Ref { .. } => None,
        })
        .collect();
    let refs: Vec<TokenStream> = k
        .params
        .iter()
        .filter_map(|p| match p {
            Param::Ref { name, role: r } => {
                let r = format_ident!("{}", r);
                let label = name.to_string();
                Some(quote!(let #name = __b.declare(#role::#r, #label)?;))
            }
            Param::Host { .. } => None,
        })
        .collect();
    let body = stmts(&k.body);
    let label = name.to_string();
    quote! {
        #(#attrs)*
        #[allow(unused_variables, unused_mut, clippy::all)]
        #vis fn #name(__spec: &#call_spec, #(#host),*) -> #result<#kernel_ty> {
            let mut __builder = #builder::new(#label, __spec)?;
            {
                let __b = &mut __builder;
                #(#refs)*
                #body
            }
            __builder.finish()
        }
    }
}

fn stmts(body: &[Stmt]) -> TokenStream {
    body.iter().map(stmt).collect()
}

fn set_loc(span: Span) -> TokenStream {
    let loc = dsl("Loc");
    quote_spanned!(span=> __b.set_loc(::core::option::Option::Some(#loc::new(::core::file!(), ::core::line!(), ::core::column!())));)
}

fn value(e: &Expr) -> TokenStream {
    let a = expr(e);
    quote!({ let __a = #a; __b.value(__a, ::core::option::Option::None)? })
}

fn stmt(s: &Stmt) -> TokenStream {
    let (loc, code) = match s {
        Stmt::Let {
            name,
            mutable,
            init,
            span,
        } => {
            let m = mutable.then(|| quote!(mut));
            let v = value(init);
            (set_loc(*span), quote!(let #m #name = #v;))
        }
        Stmt::HostLet { name, init, span } => (set_loc(*span), quote!(let #name = #init;)),
        Stmt::Assign {
            name,
            value: e,
            span,
        } => {
            let v = value(e);
            (set_loc(*span), quote!(#name = #v;))
        }
        Stmt::Store {
            target,
            index,
            op,
            value: e,
            span,
        } => {
            let ix = index_array(index);
            let v = expr(e);
            let code = match op {
                None => quote!({ let __ix = #ix; let __v = #v; __b.store(#target, &__ix, __v)?; }),
                Some(op) => {
                    let (bin, op) = (dsl("BinaryOp"), format_ident!("{}", op.info().variant));
                    quote!({
                        let __ix = #ix;
                        let __v = #v;
                        let __old = __b.load(#target, &__ix)?;
                        let __new = __b.binary(#bin::#op, __old, __v)?;
                        __b.store(#target, &__ix, __new)?;
                    })
                }
            };
            (set_loc(*span), code)
        }
        Stmt::MaskedStore {
            target,
            index,
            value: e,
            mask,
            span,
        } => {
            let (ix, v, m) = (index_array(index), expr(e), value(mask));
            (
                set_loc(*span),
                quote!({ let __ix = #ix; let __v = #v; let __m = #m; __b.store_masked(#target, &__ix, __v, __m)?; }),
            )
        }
        Stmt::For {
            var,
            lower,
            upper,
            step,
            body,
            span,
        } => {
            let carried = assigned(body);
            let (lo, hi) = (expr(lower), expr(upper));
            let st = step.as_ref().map_or_else(|| quote!(1i32), expr);
            let idx = (0..carried.len()).map(syn::Index::from);
            let idx2 = (0..carried.len()).map(syn::Index::from);
            let inner = stmts(body);
            (
                set_loc(*span),
                quote!({
                    let __lo = #lo;
                    let __hi = #hi;
                    let __st = #st;
                    let __r = __b.for_loop(__lo, __hi, __st, &[#(#carried),*], |__b, #var, __c| {
                        #(let mut #carried = __c[#idx];)*
                        #inner
                        ::core::result::Result::Ok(::std::vec![#(#carried),*])
                    })?;
                    #(#carried = __r[#idx2];)*
                }),
            )
        }
        Stmt::If {
            cond,
            then_body,
            else_body,
            span,
        } => {
            let mut carried = assigned(then_body);
            for c in assigned(else_body) {
                if !carried.contains(&c) {
                    carried.push(c);
                }
            }
            let c = expr(cond);
            let (t, e) = (stmts(then_body), stmts(else_body));
            let idx = (0..carried.len()).map(syn::Index::from);
            let branch = |body: TokenStream| {
                quote!(|__b| {
                    #(let mut #carried = #carried;)*
                    #body
                    ::core::result::Result::Ok(::std::vec![#(#carried),*])
                })
            };
            let (tb, eb) = (branch(t), branch(e));
            (
                set_loc(*span),
                quote!({
                    let __cond = #c;
                    let __r = __b.if_else(__cond, #tb, #eb)?;
                    #(#carried = __r[#idx];)*
                }),
            )
        }
        Stmt::Dma {
            wait,
            src,
            dst,
            sem,
            span,
        } => {
            let (s, si) = (&src.target, index_array(&src.index));
            let (d, di) = (&dst.target, index_array(&dst.index));
            let (m, mi) = (&sem.target, index_array(&sem.index));
            let call = if *wait {
                quote!(__b.dma_wait((#m, &__m), (#s, &__s), (#d, &__d))?;)
            } else {
                quote!(__b.dma_start((#s, &__s), (#d, &__d), (#m, &__m))?;)
            };
            (
                set_loc(*span),
                quote!({ let __s = #si; let __d = #di; let __m = #mi; #call }),
            )
        }
        Stmt::Semaphore {
            wait,
            sem,
            amount,
            span,
        } => {
            let (m, mi, n) = (&sem.target, index_array(&sem.index), expr(amount));
            let method = format_ident!(
                "{}",
                if *wait {
                    "semaphore_wait"
                } else {
                    "semaphore_signal"
                }
            );
            (
                set_loc(*span),
                quote!({ let __m = #mi; let __n = #n; __b.#method(#m, &__m, __n)?; }),
            )
        }
        Stmt::While { cond, body, span } => {
            let carried = assigned(body);
            let c = expr(cond);
            let inner = stmts(body);
            let idx = (0..carried.len()).map(syn::Index::from);
            let idx2 = idx.clone();
            let idx3 = idx.clone();
            (
                set_loc(*span),
                quote!({
                    let __r = __b.while_loop(
                        &[#(#carried),*],
                        |__b, __c| {
                            #(#[allow(unused_variables)] let #carried = __c[#idx];)*
                            let __cond = #c;
                            __b.value(__cond, ::core::option::Option::None)
                        },
                        |__b, __c| {
                            #(let mut #carried = __c[#idx2];)*
                            #inner
                            ::core::result::Result::Ok(::std::vec![#(#carried),*])
                        },
                    )?;
                    #(#carried = __r[#idx3];)*
                }),
            )
        }
    };
    quote!(#loc #code)
}

/// Variables of enclosing scopes assigned in `body` (in order of first assignment): the
/// values a loop or branch must carry out.
fn assigned(body: &[Stmt]) -> Vec<Ident> {
    fn walk(body: &[Stmt], local: &mut Vec<Ident>, out: &mut Vec<Ident>) {
        let mark = local.len();
        for s in body {
            match s {
                Stmt::Let { name, .. } | Stmt::HostLet { name, .. } => local.push(name.clone()),
                Stmt::Assign { name, .. } => {
                    if !local.contains(name) && !out.contains(name) {
                        out.push(name.clone());
                    }
                }
                Stmt::For { var, body, .. } => {
                    local.push(var.clone());
                    walk(body, local, out);
                    local.pop();
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(then_body, local, out);
                    walk(else_body, local, out);
                }
                Stmt::While { body, .. } => walk(body, local, out),
                Stmt::Store { .. }
                | Stmt::MaskedStore { .. }
                | Stmt::Dma { .. }
                | Stmt::Semaphore { .. } => {}
            }
        }
        local.truncate(mark);
    }
    let mut out = Vec::new();
    walk(body, &mut Vec::new(), &mut out);
    out
}

fn index_array(items: &[IndexItem]) -> TokenStream {
    let ix = dsl("Ix");
    let items = items.iter().map(|i| match i {
        IndexItem::Full => quote!(#ix::Full),
        IndexItem::At(e) => {
            let a = expr(e);
            quote!(#ix::At(#a))
        }
        IndexItem::Ds(start, size) => {
            let a = expr(start);
            quote!(#ix::Ds(#a, (#size) as usize))
        }
    });
    quote!([#(#items),*])
}

/// A block evaluating to an `Arg`.
fn expr(e: &Expr) -> TokenStream {
    let arg = dsl("Arg");
    let wrap = |call: TokenStream| quote!(#arg::from(#call));
    match e {
        Expr::Host(h) => {
            let mut h = h;
            while let syn::Expr::Paren(p) = h {
                h = &p.expr;
            }
            quote!(#arg::from(#h))
        }
        Expr::Var(v) => quote!(#arg::from(#v)),
        Expr::Unary { op, x } => {
            let (u, op) = (dsl("UnaryOp"), format_ident!("{}", op.info().variant));
            let x = expr(x);
            wrap(quote!({ let __x = #x; __b.unary(#u::#op, __x)? }))
        }
        Expr::Binary { op, lhs, rhs } => {
            let (l, r) = (expr(lhs), expr(rhs));
            let call = match op {
                BinOp::Arith(op) => {
                    let (b, op) = (dsl("BinaryOp"), format_ident!("{}", op.info().variant));
                    quote!(__b.binary(#b::#op, __l, __r)?)
                }
                BinOp::Cmp(op) => {
                    let (c, op) = (dsl("CmpOp"), format_ident!("{}", op.info().variant));
                    quote!(__b.compare(#c::#op, __l, __r)?)
                }
            };
            wrap(quote!({ let __l = #l; let __r = #r; #call }))
        }
        Expr::Reduce {
            op,
            keepdims,
            x,
            axes: a,
        } => {
            let (r, op) = (dsl("ReduceOp"), format_ident!("{}", op.info().variant));
            let (x, axes) = (value(x), axes(a));
            let call = if *keepdims {
                quote!(__b.reduce_keepdims(#r::#op, __x, &#axes)?)
            } else {
                quote!(__b.reduce(#r::#op, __x, &#axes)?)
            };
            wrap(quote!({ let __x = #x; #call }))
        }
        Expr::SemaphoreRead(Place { target, index }) => {
            let ix = index_array(index);
            wrap(quote!({ let __ix = #ix; __b.semaphore_read(#target, &__ix)? }))
        }
        Expr::Load { target, index } => {
            let ix = index_array(index);
            wrap(quote!({ let __ix = #ix; __b.load(#target, &__ix)? }))
        }
        Expr::MaskedLoad {
            target,
            index,
            mask,
            other,
        } => {
            let (ix, m, o) = (index_array(index), value(mask), expr(other));
            wrap(
                quote!({ let __ix = #ix; let __m = #m; let __o = #o; __b.load_masked(#target, &__ix, __m, __o)? }),
            )
        }
        Expr::Cast { x, dtype } => {
            let dtype = match dtype {
                DTypeArg::Named(name) => {
                    let (d, name) = (dsl("DType"), format_ident!("{}", name));
                    quote!(#d::#name)
                }
                DTypeArg::Host(h) => quote!(#h),
            };
            let x = expr(x);
            wrap(quote!({ let __x = #x; __b.cast(__x, #dtype)? }))
        }
        Expr::Call {
            name,
            args,
            host_args,
            refs,
            span,
        } => wrap(call(name, args, host_args, refs, *span)),
    }
}

/// The builder call for a named method or function (see `parse.rs` for the accepted names).
fn call(name: &str, args: &[Expr], host: &[syn::Expr], refs: &[Ident], span: Span) -> TokenStream {
    // `full` takes its fill as an `Arg`, so a literal stays a literal and folds into the splat.
    let vals: Vec<TokenStream> = if name == "full" {
        args.iter().map(expr).collect()
    } else {
        args.iter().map(value).collect()
    };
    let bind = vals.iter().enumerate().map(|(i, v)| {
        let n = format_ident!("__v{}", i);
        quote!(let #n = #v;)
    });
    let (v0, v1, v2) = (
        format_ident!("__v0"),
        format_ident!("__v1"),
        format_ident!("__v2"),
    );
    let dtype = dsl("DType");
    let body = match name {
        "reshape" | "broadcast_to" => {
            let (m, shape) = (format_ident!("{}", name), &host[0]);
            quote!({ let __s: ::std::vec::Vec<usize> = (#shape).iter().map(|&d| d as usize).collect(); __b.#m(#v0, &__s)? })
        }
        "transpose" => {
            let perm = &host[0];
            quote!({ let __p: ::std::vec::Vec<usize> = (#perm).iter().map(|&d| d as usize).collect(); __b.transpose(#v0, &__p)? })
        }
        "t" => quote!(__b.transpose(#v0, &[1, 0])?),
        "program_id" | "num_programs" => {
            let (m, a) = (format_ident!("{}", name), &host[0]);
            quote!(__b.#m((#a) as usize)?)
        }
        "dim" => {
            let (r, a) = (&refs[0], &host[0]);
            quote!(__b.array_dim(#r, (#a) as usize)?)
        }
        "dot" => quote!(__b.matmul(#v0, #v1)?),
        "dot_t" => {
            let dims = dsl("DotDims");
            quote!({
                let __r = __b.ty(#v0).rank();
                let __out = if __b.ty(#v0).dtype.is_float() { #dtype::F32 } else { #dtype::I32 };
                __b.dot(#v0, #v1, #dims { lhs_contract: __r - 1, rhs_contract: __r - 1 }, __out)?
            })
        }
        "dot_general" => {
            let (dims, (l, r)) = (dsl("DotDims"), (&host[0], &host[1]));
            quote!({
                let __out = if __b.ty(#v0).dtype.is_float() { #dtype::F32 } else { #dtype::I32 };
                __b.dot(#v0, #v1, #dims { lhs_contract: (#l) as usize, rhs_contract: (#r) as usize }, __out)?
            })
        }
        "where_" => quote!(__b.select(#v0, #v1, #v2)?),
        "gather" => {
            let a = &host[0];
            quote!(__b.gather(#v0, #v1, (#a) as usize)?)
        }
        "roll" => {
            let a = &host[0];
            quote!(__b.roll(#v0, #v1, (#a) as usize)?)
        }
        "iota" => {
            let (d, shape, dim) = (&host[0], &host[1], &host[2]);
            quote!({ let __s: ::std::vec::Vec<usize> = (#shape).iter().map(|&d| d as usize).collect(); __b.iota(#d, &__s, (#dim) as usize)? })
        }
        "zeros" | "full" => {
            let (d, shape) = (&host[0], &host[1]);
            let fill = if name == "zeros" {
                quote!(0i64)
            } else {
                quote!(#v0)
            };
            quote!({
                let __s: ::std::vec::Vec<usize> = (#shape).iter().map(|&d| d as usize).collect();
                __b.splat(#fill, #d, &__s)?
            })
        }
        "zeros_like" => quote!({ let __t = __b.ty(#v0).clone(); __b.zeros(__t.dtype, &__t.shape) }),
        other => {
            let msg = format!("internal error: no generator for `{other}`");
            return quote_spanned!(span=> ::core::compile_error!(#msg));
        }
    };
    quote!({ #(#bind)* #body })
}

/// Axes as `[i64; N]`: an integer, or an array of integers.
fn axes(e: &syn::Expr) -> TokenStream {
    match e {
        syn::Expr::Array(a) => {
            let elems = a.elems.iter();
            quote!([#((#elems) as i64),*])
        }
        e => quote!([(#e) as i64]),
    }
}
