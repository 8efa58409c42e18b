//! Every kernel tpukit ships — the catalog's and every kernel a tpuBLAS operator declares —
//! round-trips through the IR text: printed (with and without source locations) and parsed
//! back, it is the same kernel, with the same text and structural hash. Here because this
//! crate sees both sources without linking MLIR.

use tpukit::catalog::{Catalog, KernelSource};
use tpukit::dsl::{DType, Kernel, PrintOptions, parse_kernel, print_kernel};
use tpukit_blas::TpuBlas;

/// Structural equality that also holds for NaN constants (the derived `Debug` shows every
/// field).
fn same(a: &Kernel, b: &Kernel) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

#[test]
fn every_shipped_kernel_round_trips_through_text() {
    let sources: [&dyn KernelSource; 2] = [&Catalog, &TpuBlas];
    for source in sources {
        for dtype in [DType::F32, DType::BF16] {
            let shipped = source.kernels(dtype).unwrap();
            assert!(
                !shipped.is_empty(),
                "{} ships no {dtype} kernel",
                source.name()
            );
            for s in shipped {
                let k = &s.instance.kernel;
                let what = format!("{} {} ({dtype})", source.name(), s.id);
                let located = print_kernel(k, PrintOptions { locations: true });
                let parsed = parse_kernel(&located).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(same(&parsed, k), "{what}: not the same kernel\n{located}");
                let plain = k.to_string();
                let parsed = parse_kernel(&plain).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(same(&parsed, &k.without_locations()), "{what}\n{plain}");
                assert_eq!(parsed.to_string(), plain, "{what}");
                assert_eq!(parsed.structural_hash(), k.structural_hash(), "{what}");
            }
        }
    }
}
