//! On error the macro emits `compile_error!` at the offending span *and* a function with the
//! signature the kernel would have had, so call sites still type-check and editors keep
//! working: the user sees one error, where it is.

use crate::paths::dsl;
use proc_macro2::TokenStream;
use quote::quote;

pub fn fallback(error: syn::Error, item: &syn::ItemFn) -> TokenStream {
    let e = error.to_compile_error();
    let (attrs, vis, name) = (&item.attrs, &item.vis, &item.sig.ident);
    let host = item.sig.inputs.iter().filter_map(|a| match a {
        syn::FnArg::Typed(pt) if !crate::parse::is_ref_type(&pt.ty) => Some(quote!(#pt)),
        _ => None,
    });
    let (spec, result, kernel) = (dsl("CallSpec"), dsl("Result"), dsl("Kernel"));
    quote! {
        #e
        #(#attrs)*
        #[allow(unused_variables)]
        #vis fn #name(__spec: &#spec, #(#host),*) -> #result<#kernel> {
            ::core::unreachable!("#[tpu_kernel] reported a compile error for this kernel")
        }
    }
}
