//! Elementwise kernels over narrow blocks, which the compiled backend runs coalesced (several
//! steps of the last grid axis as one, `cpu::coalesce`), give the interpreter's results bit
//! for bit: static grids (`parallel` and `arbitrary`, whose independent steps the backend
//! runs parallel) over rows the blocks do not divide, f32 and bf16, by a launch and by a bound
//! launch; so do those it leaves as written (symbolic grids) and those ending in a clipped
//! edge block along the row; a static grid whose last windows start past the array is still
//! refused.

use common::random;
use std::sync::Arc;
use tpukit_dsl::{DType, parse_kernel};
use tpukit_runtime::{BoundLaunch, Device, Prepared, launch};

mod common;

/// `o = x > 0 ? max(x, y) * 2 : y - x` over `[8, 128]` blocks of `[m, n]` arrays of `dtype`
/// (computed in f32), with the grid `grid`.
fn kernel_text(grid: &str, shape: &str, dtype: &str) -> String {
    format!(
        "kernel @narrow grid({grid}) {{
  input %x: {dtype}[{shape}] block[8,128] fill 0.0 map(%0, %1) {{
    yield %0, %1
  }}
  input %y: {dtype}[{shape}] block[8,128] fill 0.0 map(%0, %1) {{
    yield %0, %1
  }}
  output %o: {dtype}[{shape}] block[8,128] fill 0.0 map(%0, %1) {{
    yield %0, %1
  }}
body {{
  %0 = load %x[ds(0, 8), ds(0, 128)] : {dtype}[8,128]
  %1 = load %y[ds(0, 8), ds(0, 128)] : {dtype}[8,128]
  %2 = cast %0 : f32[8,128]
  %3 = cast %1 : f32[8,128]
  %4 = const 0.0 : f32[]
  %5 = broadcast %4 : f32[8,128]
  %6 = gt %2, %5 : bool[8,128]
  %7 = max %2, %3 : f32[8,128]
  %8 = const 2.0 : f32[8,128]
  %9 = mul %7, %8 : f32[8,128]
  %10 = sub %3, %2 : f32[8,128]
  %11 = select %6, %9, %10 : f32[8,128]
  %12 = cast %11 : {dtype}[8,128]
  store %o[ds(0, 8), ds(0, 128)], %12
  yield
}}
"
    )
}

fn check(text: &str, dtype: DType, shape: &[usize]) {
    let kernel = parse_kernel(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (x, y) = (random(dtype, shape, 1), random(dtype, shape, 2));
    let want = launch(&kernel, Device::Interpret, &[&x, &y]).unwrap();
    let got = launch(&kernel, Device::Cpu, &[&x, &y]).unwrap();
    assert_eq!(
        got[0].to_f64_vec(),
        want[0].to_f64_vec(),
        "{shape:?} {dtype}"
    );
    let prepared = Arc::new(Prepared::new(kernel).unwrap());
    let bound = BoundLaunch::new(prepared, &[(dtype, shape), (dtype, shape)])
        .unwrap()
        .unwrap();
    for _ in 0..2 {
        // SAFETY: `x` and `y` are row-major arrays of the bound dtype and shape, alive and
        // unwritten for the call.
        let got = unsafe { bound.run(&[x.data_ptr(), y.data_ptr()]) }.unwrap();
        assert_eq!(got[0].to_f64_vec(), want[0].to_f64_vec(), "bound {shape:?}");
    }
}

#[test]
fn static_grids() {
    for dtype in [DType::F32, DType::BF16] {
        let name = dtype.name();
        // 12 column blocks of 128 (run as 2 of 768) over rows the 8-row blocks do not
        // divide; 5 (prime: run as one of 640); Pallas's default semantics.
        for (grid, shape) in [
            ("parallel 5, parallel 12", [37, 1536]),
            ("parallel 2, parallel 5", [13, 640]),
            ("arbitrary 5, arbitrary 12", [37, 1536]),
            // Independent steps: run parallel, split over the pool (6 MiB of work).
            ("arbitrary 64, arbitrary 8", [509, 1024]),
        ] {
            let dims = format!("{},{}", shape[0], shape[1]);
            check(&kernel_text(grid, &dims, name), dtype, &shape);
        }
    }
}

#[test]
fn grids_left_as_written_still_agree() {
    // Symbolic grids (not coalesced: a launch may end in an edge block anywhere), checked
    // the same; and a static grid whose last block overhangs the rows' end (a 1500-wide
    // array in 12 blocks of 128), coalesced with its edge step clipped (`codegen::clip`).
    for dtype in [DType::F32, DType::BF16] {
        let name = dtype.name();
        check(
            &kernel_text("parallel 5, parallel 12", "40,1500", name),
            dtype,
            &[40, 1500],
        );
        let symbolic = kernel_text("parallel cdiv(m, 8), parallel cdiv(n, 128)", "m,n", name);
        for shape in [[37, 1000], [8, 128], [64, 4096]] {
            check(&symbolic, dtype, &shape);
        }
    }
}

#[test]
fn windows_starting_past_the_array_are_still_refused() {
    // 9 column blocks of a 1024-wide array: the ninth starts at 1024.
    let text = kernel_text("parallel 2, parallel 9", "16,1024", "f32");
    let kernel = parse_kernel(&text).unwrap();
    let x = random(DType::F32, &[16, 1024], 3);
    for device in [Device::Interpret, Device::Cpu] {
        assert!(
            launch(&kernel, device, &[&x, &x]).is_err(),
            "{device:?} ran a grid past the array"
        );
    }
}
