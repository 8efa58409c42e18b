//! A launch whose arrays leave a kernel symbol unbound (one only its grid uses) is a shape
//! error naming the symbol, and a launch binding every symbol runs (`launch::bind` checks
//! the symbols in place and lists them only for the error).

mod common;

use tpukit_dsl::*;
use tpukit_runtime::{Device, HostArray, launch};

/// `o = x` over (8, 128) blocks of `[m, 128]`, on a grid of `cdiv(m, 8)` steps and, with
/// `extra`, a second axis of `cdiv(k, 1)` steps over a symbol no operand has.
fn copy(extra: bool) -> tpukit_dsl::Result<Kernel> {
    let mut spec = common::rows_spec();
    if extra {
        spec.grid.push(GridAxis::arbitrary(Extent::cdiv("k", 1)));
    }
    let mut b = KernelBuilder::new("copy_rows", &spec)?;
    let x = b.declare(Role::Input, "x")?;
    let o = b.declare(Role::Output, "o")?;
    let xv = b.load(x, &[])?;
    b.store(o, &[], xv)?;
    b.finish()
}

#[test]
fn an_unbound_symbol_is_a_shape_error_naming_it() {
    let data: Vec<f64> = (0..16 * 128).map(|i| i as f64).collect();
    let x = HostArray::from_f64(DType::F32, &[16, 128], &data);
    let out = launch(&copy(false).unwrap(), Device::Cpu, &[&x]).unwrap();
    assert_eq!(out[0].to_f64_vec(), data);
    let err = launch(&copy(true).unwrap(), Device::Cpu, &[&x]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Shape, "{err}");
    assert!(err.to_string().contains("symbol `k` is not bound"), "{err}");
}
