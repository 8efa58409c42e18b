//! Elementwise kernels whose edge steps the compiled backend clips (runs on views of the
//! arrays, its loops cut at their ends, instead of staging the windows: `cpu::codegen::clip`)
//! give the interpreter's results bit for bit: a 1-D kernel with a run-time scalar operand
//! (tpuBLAS's shape of kernel) over sizes below, at and between its blocks, and 2-D kernels
//! whose second input broadcasts a row or a column, over shapes the blocks do not divide;
//! f32 and bf16, by a launch and by a bound launch.

use common::random;
use std::sync::Arc;
use tpukit_dsl::{DType, parse_kernel};
use tpukit_runtime::{BoundLaunch, Device, HostArray, Prepared, launch};

mod common;

/// `o = x + y * alpha` over `n` elements in blocks of 4096, computed in f32.
fn flat(dtype: &str) -> String {
    format!(
        "kernel @axpy grid(parallel cdiv(n, 4096)) {{
  input %x: {dtype}[n] block[4096] fill 0.0 map(%0) {{
    yield %0
  }}
  input %y: {dtype}[n] block[4096] fill 0.0 map(%0) {{
    yield %0
  }}
  input %alpha: f32[1]
  output %o: {dtype}[n] block[4096] fill 0.0 map(%0) {{
    yield %0
  }}
body {{
  %0 = load %x[ds(0, 4096)] : {dtype}[4096]
  %1 = load %y[ds(0, 4096)] : {dtype}[4096]
  %2 = load %alpha[ds(0, 1)] : f32[1]
  %3 = cast %0 : f32[4096]
  %4 = cast %1 : f32[4096]
  %5 = broadcast %2 : f32[4096]
  %6 = mul %4, %5 : f32[4096]
  %7 = add %3, %6 : f32[4096]
  %8 = cast %7 : {dtype}[4096]
  store %o[ds(0, 4096)], %8
  yield
}}
"
    )
}

/// `o = x > y ? x - y : y * 3` over `[m, n]` in `[16, 512]` blocks, `y` a `[1, n]` row
/// (`row`) or an `[m, 1]` column broadcast to the block.
fn broadcast(dtype: &str, row: bool) -> String {
    let (y_shape, y_block, y_map, y_ref) = if row {
        ("1,n", "1,512", "%2, %1", "1,512")
    } else {
        ("m,1", "16,1", "%0, %2", "16,1")
    };
    let y_index = if row {
        "ds(0, 1), ds(0, 512)"
    } else {
        "ds(0, 16), ds(0, 1)"
    };
    format!(
        "kernel @pick grid(parallel cdiv(m, 16), parallel cdiv(n, 512)) {{
  input %x: {dtype}[m,n] block[16,512] fill 0.0 map(%0, %1) {{
    yield %0, %1
  }}
  input %y: {dtype}[{y_shape}] block[{y_block}] fill 0.0 map(%0, %1) {{
    %2 = const 0 : i32[]
    yield {y_map}
  }}
  output %o: {dtype}[m,n] block[16,512] fill 0.0 map(%0, %1) {{
    yield %0, %1
  }}
body {{
  %0 = load %x[ds(0, 16), ds(0, 512)] : {dtype}[16,512]
  %1 = load %y[{y_index}] : {dtype}[{y_ref}]
  %2 = cast %0 : f32[16,512]
  %3 = cast %1 : f32[{y_ref}]
  %4 = broadcast %3 : f32[16,512]
  %5 = gt %2, %4 : bool[16,512]
  %6 = sub %2, %4 : f32[16,512]
  %7 = const 3.0 : f32[]
  %8 = broadcast %7 : f32[16,512]
  %9 = mul %4, %8 : f32[16,512]
  %10 = select %5, %6, %9 : f32[16,512]
  %11 = cast %10 : {dtype}[16,512]
  store %o[ds(0, 16), ds(0, 512)], %11
  yield
}}
"
    )
}

/// Runs `text` on `inputs` compiled (a launch, and a bound launch twice) and interpreted, and
/// compares the results bit for bit.
fn check(text: &str, inputs: &[HostArray]) {
    let kernel = parse_kernel(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let refs: Vec<&HostArray> = inputs.iter().collect();
    let want = launch(&kernel, Device::Interpret, &refs).unwrap()[0].to_f64_vec();
    let got = launch(&kernel, Device::Cpu, &refs).unwrap();
    let shape = inputs[0].shape().to_vec();
    assert_eq!(got[0].to_f64_vec(), want, "{shape:?}\n{text}");
    let signature: Vec<(DType, &[usize])> = inputs.iter().map(|a| (a.dtype(), a.shape())).collect();
    let prepared = Arc::new(Prepared::new(kernel).unwrap());
    let bound = BoundLaunch::new(prepared, &signature).unwrap().unwrap();
    let ptrs: Vec<*const u8> = inputs.iter().map(HostArray::data_ptr).collect();
    for _ in 0..2 {
        // SAFETY: the arrays are row-major, of the bound dtypes and shapes, alive and
        // unwritten for the call.
        let got = unsafe { bound.run(&ptrs) }.unwrap();
        assert_eq!(got[0].to_f64_vec(), want, "bound {shape:?}");
    }
}

#[test]
fn flat_kernels_with_a_scalar_operand() {
    for dtype in [DType::F32, DType::BF16] {
        let text = flat(dtype.name());
        // Within one block, exactly one, between blocks, and many blocks (split over the
        // pool) ending in a partial one.
        for n in [1, 100, 1024, 4000, 4096, 6144, 300_001] {
            let alpha = HostArray::from_f64(DType::F32, &[1], &[-1.5]);
            let inputs = [random(dtype, &[n], 1), random(dtype, &[n], 2), alpha];
            check(&text, &inputs);
        }
    }
}

#[test]
fn broadcast_rows_and_columns() {
    for dtype in [DType::F32, DType::BF16] {
        for row in [true, false] {
            let text = broadcast(dtype.name(), row);
            for (m, n) in [(37, 1000), (5, 100), (16, 512), (1, 1), (300, 1100)] {
                let y = if row { [1, n] } else { [m, 1] };
                let inputs = [random(dtype, &[m, n], 3), random(dtype, &y, 4)];
                check(&text, &inputs);
            }
        }
    }
}
