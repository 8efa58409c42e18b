//! `#[tpu_kernel]` rejects syntax outside its language with an error at the offending span
//! (and still emits a function with the kernel's signature). Expected messages live beside
//! each case in `tests/ui/*.stderr`; `TRYBUILD=overwrite` regenerates them for review.

#[test]
fn unsupported_syntax_is_a_spanned_compile_error() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
