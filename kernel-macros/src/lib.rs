//! `#[tpu_kernel]`: a Rust function whose parameters are refs and whose body uses a small,
//! natural Rust syntax becomes a function that builds the kernel's IR for a call spec.
//!
//! ```ignore
//! #[tpu_kernel]
//! fn add_vectors(x: In, y: In, o: Out) {
//!     o[..] = x[..] + y[..];
//! }
//! let kernel = add_vectors(&spec)?; // spec: grid, dtypes, shapes and block specs
//! ```
//!
//! The macro is a tiny compiler: `parse` turns syn's tree into the macro's own AST
//! (`ast`), `generate` turns that into builder calls; every generated path comes from
//! `paths`. Parameters typed `In`, `Out`, `Scratch` or `Prefetch` are refs (declared in
//! order); any other parameter is a host value, a plain Rust value used while building.
//!
//! Control flow: `if`/`else` (a branch, `pl.when`), `for i in a..b` (`.step_by(s)`; a
//! `fori_loop`) and `while cond { .. }` (a data-dependent loop, `lax.while_loop`: `cond` is
//! a bool scalar, re-evaluated before each iteration). The variables of enclosing scopes a
//! body assigns are carried through it.
//!
//! Products: `dot(a, b)` (`a @ b`, f32 results for floats), `dot_t(a, b)` (`a @ bᵀ`) and
//! `dot_general(a, b, lc, rc)`, which contracts `a`'s axis `lc` with `b`'s axis `rc` (host
//! values: one of the last two axes each, as `lax.dot_general`), so a kernel chosen by a
//! parameter reads either operand transposed without a transpose of its own.
//!
//! Manual DMA, for inputs left in HBM (`ArraySpec::any`) and semaphore scratch
//! (`ArraySpec::semaphores`): `dma_start(src[..], dst[..], sem[i])` and
//! `dma_wait(src[..], dst[..], sem[i])` (`pltpu.make_async_copy(src, dst, sem).start()` and
//! `.wait()`), `semaphore_signal(sem[i], n)`, `semaphore_wait(sem[i], n)` and
//! `semaphore_read(sem[i])` (`pl.semaphore_*`).

mod ast;
mod error;
mod generate;
mod parse;
mod paths;

use proc_macro::TokenStream;

#[proc_macro_attribute]
pub fn tpu_kernel(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = syn::parse_macro_input!(item as syn::ItemFn);
    if !args.is_empty() {
        let e = syn::Error::new(
            proc_macro2::TokenStream::from(args)
                .into_iter()
                .next()
                .map_or_else(proc_macro2::Span::call_site, |t| t.span()),
            "#[tpu_kernel] takes no arguments",
        );
        return error::fallback(e, &item).into();
    }
    match parse::kernel(&item) {
        Ok(k) => generate::kernel(&k).into(),
        Err(e) => error::fallback(e, &item).into(),
    }
}
