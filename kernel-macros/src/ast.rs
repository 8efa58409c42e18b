//! The macro's own small AST: what a `#[tpu_kernel]` body may say, and nothing else.

use proc_macro2::Span;
use syn::Ident;
use tpukit_dsl::{BinaryOp, CmpOp, ReduceOp, UnaryOp};

pub struct Kernel {
    pub attrs: Vec<syn::Attribute>,
    pub vis: syn::Visibility,
    pub name: Ident,
    pub params: Vec<Param>,
    pub body: Vec<Stmt>,
}

pub enum Param {
    /// A ref; `role` is `Input`, `Output`, `Scratch` or `Prefetch`.
    Ref { name: Ident, role: &'static str },
    /// A plain Rust value available while the kernel is built.
    Host { name: Ident, ty: Box<syn::Type> },
}

pub enum Stmt {
    Let {
        name: Ident,
        mutable: bool,
        init: Expr,
        span: Span,
    },
    /// `let` of an expression of host values only: stays a Rust value.
    HostLet {
        name: Ident,
        init: syn::Expr,
        span: Span,
    },
    Assign {
        name: Ident,
        value: Expr,
        span: Span,
    },
    Store {
        target: Ident,
        index: Vec<IndexItem>,
        /// A compound assignment's op (`o[..] += v`).
        op: Option<BinaryOp>,
        value: Expr,
        span: Span,
    },
    MaskedStore {
        target: Ident,
        index: Vec<IndexItem>,
        value: Expr,
        mask: Expr,
        span: Span,
    },
    For {
        var: Ident,
        lower: Expr,
        upper: Expr,
        step: Option<Expr>,
        body: Vec<Stmt>,
        span: Span,
    },
    If {
        cond: Expr,
        then_body: Vec<Stmt>,
        else_body: Vec<Stmt>,
        span: Span,
    },
    /// `dma_start(src[..], dst[..], sem[i])` / `dma_wait(src[..], dst[..], sem[i])`: an
    /// asynchronous copy between windows, signalled on a DMA semaphore
    /// (`pltpu.make_async_copy(src, dst, sem).start()` / `.wait()`).
    Dma {
        wait: bool,
        src: Place,
        dst: Place,
        sem: Place,
        span: Span,
    },
    /// `semaphore_signal(sem[i], n)` / `semaphore_wait(sem[i], n)`.
    Semaphore {
        wait: bool,
        sem: Place,
        amount: Expr,
        span: Span,
    },
    /// `while cond { body }`: `cond` (a bool scalar) is evaluated on the variables the body
    /// assigns, before each iteration (`lax.while_loop`).
    While {
        cond: Expr,
        body: Vec<Stmt>,
        span: Span,
    },
}

/// A window of a ref that a copy or semaphore op names: `x[ds(i * 8, 8), ..]`.
pub struct Place {
    pub target: Ident,
    pub index: Vec<IndexItem>,
}

pub enum IndexItem {
    Full,
    At(Expr),
    /// `ds(start, size)`: `size` is a host expression.
    Ds(Expr, syn::Expr),
}

pub enum Expr {
    /// A literal or a Rust expression over host values: becomes a weakly typed literal.
    Host(syn::Expr),
    Var(Ident),
    Unary {
        op: UnaryOp,
        x: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Load {
        target: Ident,
        index: Vec<IndexItem>,
    },
    /// `semaphore_read(sem[i])`: the semaphore's count, an i32 scalar.
    SemaphoreRead(Place),
    MaskedLoad {
        target: Ident,
        index: Vec<IndexItem>,
        mask: Box<Expr>,
        other: Box<Expr>,
    },
    Cast {
        x: Box<Expr>,
        dtype: DTypeArg,
    },
    /// `x.reduce_sum(axes)` (`keepdims`: `x.reduce_sum_keepdims(axes)`); `axes` is a host
    /// expression, an integer or an array of them.
    Reduce {
        op: ReduceOp,
        keepdims: bool,
        x: Box<Expr>,
        axes: syn::Expr,
    },
    /// A builder call: `name` is a method of the table in `generate.rs`.
    Call {
        name: String,
        args: Vec<Expr>,
        host_args: Vec<syn::Expr>,
        refs: Vec<Ident>,
        span: Span,
    },
}

#[derive(Copy, Clone)]
pub enum BinOp {
    Arith(BinaryOp),
    Cmp(CmpOp),
}

/// The target of a cast: a dtype named in the body (`f32`), or a host value of type `DType`
/// (a kernel parameter), so one kernel can be instantiated for several dtypes.
pub enum DTypeArg {
    Named(&'static str),
    Host(syn::Expr),
}
