//! Every path the generated code names, in one place. The macro is used through the facade
//! crate, which re-exports the DSL as `tpukit::dsl`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// `::tpukit::dsl::NAME`.
pub fn dsl(name: &str) -> TokenStream {
    let name = format_ident!("{}", name);
    quote!(::tpukit::dsl::#name)
}
