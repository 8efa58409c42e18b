//! Operators run on the device the caller chooses (`tpukit_blas::on_device`): on the
//! interpreter nothing is compiled or fetched for the CPU backend, and both devices agree
//! with an f64 reference. A test binary of its own: it reads the process-wide compilation
//! counters, which other tests' launches would move.

#[path = "ops/common/mod.rs"]
mod common;

use common::{close, random, rng, tol};
use tpukit::dsl::DType;
use tpukit::runtime::cpu;
use tpukit::{Device, HostArray};
use tpukit_blas::{Value, device, on_device, run};

/// `aten._softmax(x, -1, false)` of `x` (`rows x n`), in f64.
fn softmax_reference(x: &[f64], n: usize) -> Vec<f64> {
    x.chunks(n)
        .flat_map(|row| {
            let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
            row.iter().map(move |v| (v - max).exp() / sum)
        })
        .collect()
}

fn softmax(x: &HostArray) -> HostArray {
    let args = [Value::Tensor(x.clone()), Value::Int(-1), Value::Bool(false)];
    run("aten._softmax", &args).unwrap().remove(0)
}

/// Kernels the CPU backend has linked so far, by where they came from.
fn fetched() -> usize {
    let s = cpu::stats();
    s.compiled + s.disk_hits + s.bundle_hits
}

#[test]
fn operators_run_on_the_device_chosen() {
    let mut r = rng(7);
    for dtype in [DType::F32, DType::BF16] {
        let (x, xv) = random(&mut r, dtype, &[37, 300], -4.0, 4.0);
        let want: Vec<f64> = softmax_reference(&xv, 300)
            .into_iter()
            .map(|v| dtype.round_f64(v))
            .collect();
        let before = fetched();
        let exact = on_device(Device::Interpret, || softmax(&x));
        assert_eq!(fetched(), before, "the interpreter compiles nothing");
        close("interpret", &exact, &want, tol(dtype));
        let compiled = softmax(&x);
        assert!(
            fetched() > before,
            "outside on_device, operators run compiled"
        );
        close("cpu", &compiled, &want, tol(dtype));
    }
}

#[test]
fn the_device_is_scoped_and_restored_after_a_panic() {
    assert_eq!(device(), Device::Cpu);
    on_device(Device::Interpret, || {
        assert_eq!(device(), Device::Interpret);
        on_device(Device::Cpu, || assert_eq!(device(), Device::Cpu));
        assert_eq!(device(), Device::Interpret);
    });
    let caught = std::panic::catch_unwind(|| on_device(Device::Interpret, || panic!("inside")));
    assert!(caught.is_err());
    assert_eq!(device(), Device::Cpu);
}
