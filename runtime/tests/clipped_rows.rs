//! Row kernels whose edge steps the compiled backend clips (`cpu::codegen::clip`): a
//! two-phase kernel (statistics of each row in scratch, then the row rewritten from them,
//! tpuBLAS's softmax and norm shape) whose reductions run only over the elements inside the
//! array — a sum of masked values (`where(iota + j·128 < n, 2x + 1, 0)`), a maximum of an
//! input that overhangs with −∞ — gives the interpreter's results, over shapes neither block
//! dimension divides, f32 and bf16 inputs, by a launch and by a bound launch.

use common::random;
use std::sync::Arc;
use tpukit_dsl::{DType, parse_kernel};
use tpukit_runtime::{BoundLaunch, Device, HostArray, Prepared, launch};

mod common;

/// Phase 0: per row, `sum` of `2x + 1` over the row and `max` of `x`; phase 1:
/// `o = (x − max) · sum`, and `sum` as a statistic. `[m, n]` in `[8, 128]` windows.
fn two_phase(dtype: &str) -> String {
    format!(
        "kernel @stats grid(parallel cdiv(m, 8), arbitrary 2, arbitrary cdiv(n, 128)) {{
  input %x: {dtype}[m,n] block[8,128] fill -inf map(%0, %1, %2) {{
    yield %0, %2
  }}
  output %o: f32[m,n] block[8,128] fill 0.0 map(%0, %1, %2) {{
    %3 = const 1 : i32[]
    %4 = div %1, %3 : i32[]
    %5 = mul %2, %4 : i32[]
    yield %0, %5
  }}
  output %s: f32[m,1] block[8,1] fill 0.0 map(%0, %1, %2) {{
    %3 = const 0 : i32[]
    yield %0, %3
  }}
  scratch %sum: f32[8,1]
  scratch %max: f32[8,1]
body {{
  %0 = load %x[ds(0, 8), ds(0, 128)] : {dtype}[8,128]
  %1 = cast %0 : f32[8,128]
  %2 = program_id 1 : i32[]
  %3 = const 0 : i32[]
  %4 = eq %2, %3 : bool[]
  if %4 : () {{
    %5 = program_id 2 : i32[]
    %6 = const 0 : i32[]
    %7 = eq %5, %6 : bool[]
    if %7 : () {{
      %8 = const 0.0 : f32[8,1]
      store %sum[ds(0, 8), ds(0, 1)], %8
      %9 = const -inf : f32[8,1]
      store %max[ds(0, 8), ds(0, 1)], %9
      yield
    }} else {{
      yield
    }}
    %10 = program_id 2 : i32[]
    %11 = const 128 : i32[]
    %12 = mul %10, %11 : i32[]
    %13 = broadcast %12 : i32[8,128]
    %14 = iota 1 : i32[8,128]
    %15 = add %14, %13 : i32[8,128]
    %16 = array_dim %x 1 : i32[]
    %17 = broadcast %16 : i32[8,128]
    %18 = lt %15, %17 : bool[8,128]
    %19 = const 2.0 : f32[8,128]
    %20 = mul %1, %19 : f32[8,128]
    %21 = const 1.0 : f32[8,128]
    %22 = add %20, %21 : f32[8,128]
    %23 = const 0.0 : f32[8,128]
    %24 = select %18, %22, %23 : f32[8,128]
    %25 = reduce_sum %24 [1] : f32[8]
    %26 = reshape %25 : f32[8,1]
    %27 = load %sum[ds(0, 8), ds(0, 1)] : f32[8,1]
    %28 = add %27, %26 : f32[8,1]
    store %sum[ds(0, 8), ds(0, 1)], %28
    %29 = reduce_max %1 [1] : f32[8]
    %30 = reshape %29 : f32[8,1]
    %31 = load %max[ds(0, 8), ds(0, 1)] : f32[8,1]
    %32 = max %31, %30 : f32[8,1]
    store %max[ds(0, 8), ds(0, 1)], %32
    yield
  }} else {{
    yield
  }}
  %33 = program_id 1 : i32[]
  %34 = const 1 : i32[]
  %35 = eq %33, %34 : bool[]
  if %35 : () {{
    %36 = load %sum[ds(0, 8), ds(0, 1)] : f32[8,1]
    %37 = load %max[ds(0, 8), ds(0, 1)] : f32[8,1]
    %38 = broadcast %37 : f32[8,128]
    %39 = sub %1, %38 : f32[8,128]
    %40 = broadcast %36 : f32[8,128]
    %41 = mul %39, %40 : f32[8,128]
    store %o[ds(0, 8), ds(0, 128)], %41
    store %s[ds(0, 8), ds(0, 1)], %36
    yield
  }} else {{
    yield
  }}
  yield
}}
"
    )
}

/// Whether `got` is `want` up to f32 summation order: `tol` of the largest magnitude.
fn close(got: &[f64], want: &[f64], tol: f64) -> bool {
    let scale = want.iter().fold(1.0f64, |m, w| m.max(w.abs()));
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| (g - w).abs() <= tol * scale)
}

fn check(text: &str, x: &HostArray) {
    let kernel = parse_kernel(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let want = launch(&kernel, Device::Interpret, &[x]).unwrap();
    let shape = x.shape().to_vec();
    let agree = |got: &[HostArray], how: &str| {
        for (g, w) in got.iter().zip(&want) {
            assert!(
                close(&g.to_f64_vec(), &w.to_f64_vec(), 1e-5),
                "{how} {shape:?}"
            );
        }
    };
    agree(&launch(&kernel, Device::Cpu, &[x]).unwrap(), "launch");
    let prepared = Arc::new(Prepared::new(kernel).unwrap());
    let bound = BoundLaunch::new(prepared, &[(x.dtype(), x.shape())])
        .unwrap()
        .unwrap();
    for _ in 0..2 {
        // SAFETY: the array is row-major, of the bound dtype and shape, alive and unwritten
        // for the call.
        let got = unsafe { bound.run(&[x.data_ptr()]) }.unwrap();
        agree(&got, "bound");
    }
}

#[test]
fn two_phase_rows_over_shapes_the_windows_overhang() {
    for dtype in [DType::F32, DType::BF16] {
        let text = two_phase(dtype.name());
        // Fewer rows than a window, a partial last row block and column block, rows of one
        // column block, rows of exactly one, and enough rows for the pool to split.
        for (m, n) in [
            (1, 1000),
            (5, 100),
            (37, 1000),
            (8, 128),
            (300, 129),
            (1100, 300),
        ] {
            check(&text, &random(dtype, &[m, n], 7));
        }
    }
}
