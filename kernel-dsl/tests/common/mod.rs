//! Kernels shared by the kernel-dsl tests, built with the plain builder API.
#![allow(dead_code)]

pub mod random;

use tpukit_dsl::*;

pub fn rows(dtype: DType, block: [usize; 2]) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::sym("m"), Dim::sym("n")]).blocked(block, [grid(0), grid(1)])
}

/// `o = x + y` over a 2-D grid of (8, 128) blocks.
pub fn add(dtype: DType) -> Kernel {
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", 8)),
            GridAxis::parallel(Extent::cdiv("n", 128)),
        ],
        inputs: vec![rows(dtype, [8, 128]), rows(dtype, [8, 128])],
        outputs: vec![rows(dtype, [8, 128])],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("add", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let y = b.declare(Role::Input, "y").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    b.set_loc(Some(Loc::new("add.rs", 3, 5)));
    let xv = b.load(x, &[]).unwrap();
    let yv = b.load(y, &[]).unwrap();
    let s = b.binary(BinaryOp::Add, xv, yv).unwrap();
    b.store(o, &[], s).unwrap();
    b.finish().unwrap()
}

/// A blocked matmul with an f32 scratch accumulator over an `arbitrary` k axis.
pub fn matmul() -> Kernel {
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(2),
            GridAxis::parallel(2),
            GridAxis::arbitrary(4),
        ],
        inputs: vec![
            ArraySpec::new(DType::BF16, [256usize, 512]).blocked([128, 128], [grid(0), grid(2)]),
            ArraySpec::new(DType::BF16, [512usize, 256]).blocked([128, 128], [grid(2), grid(1)]),
        ],
        outputs: vec![
            ArraySpec::new(DType::BF16, [256usize, 256]).blocked([128, 128], [grid(0), grid(1)]),
        ],
        scratch: vec![ArraySpec::new(DType::F32, [128usize, 128])],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("matmul", &spec).unwrap();
    let a = b.declare(Role::Input, "a").unwrap();
    let w = b.declare(Role::Input, "w").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let acc = b.declare(Role::Scratch, "acc").unwrap();
    let k = b.program_id(2).unwrap();
    let first = b.compare(CmpOp::Eq, k, 0).unwrap();
    b.when(first, |b| b.store(acc, &[], 0.0)).unwrap();
    let av = b.load(a, &[]).unwrap();
    let wv = b.load(w, &[]).unwrap();
    let p = b.matmul(av, wv).unwrap();
    let cur = b.load(acc, &[]).unwrap();
    let sum = b.binary(BinaryOp::Add, cur, p).unwrap();
    b.store(acc, &[], sum).unwrap();
    let last = b.compare(CmpOp::Eq, k, 3).unwrap();
    b.when(last, |b| {
        let v = b.load(acc, &[])?;
        let v = b.cast(v, DType::BF16)?;
        b.store(o, &[], v)
    })
    .unwrap();
    b.finish().unwrap()
}

/// Row sums with a `for` loop carrying two values over 128-wide column chunks.
pub fn chunked_sum() -> Kernel {
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", 8))],
        inputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(512)])
                .blocked([8, 512], [grid(0), 0.into()]),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)])
                .blocked([8, 128], [grid(0), 0.into()]),
        ],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("chunked_sum", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let zero = b.zeros(DType::F32, &[8, 128]);
    let r = b
        .for_loop(0, 4, 1, &[zero, zero], |b, j, c| {
            let start = b.binary(BinaryOp::Mul, j, 128)?;
            let v = b.load(x, &[Ix::Full, Ix::Ds(start.into(), 128)])?;
            let s = b.binary(BinaryOp::Add, c[0], v)?;
            let m = b.binary(BinaryOp::Max, c[1], v)?;
            Ok(vec![s, m])
        })
        .unwrap();
    let out = b.binary(BinaryOp::Sub, r[0], r[1]).unwrap();
    b.store(o, &[], out).unwrap();
    b.finish().unwrap()
}

/// A row gather: the index map reads the scalar-prefetch array.
pub fn gather() -> Kernel {
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("k", 1))],
        prefetch: vec![ArraySpec::new(DType::I32, [Dim::sym("k")])],
        inputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("rows"), Dim::Static(128)]).blocked(
                [BlockDim::Squeezed, BlockDim::Blocked(128)],
                [prefetch(0, [grid(0)]), 0.into()],
            ),
        ],
        outputs: vec![
            ArraySpec::new(DType::F32, [Dim::sym("k"), Dim::Static(128)]).blocked(
                [BlockDim::Squeezed, BlockDim::Blocked(128)],
                [grid(0), 0.into()],
            ),
        ],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("gather", &spec).unwrap();
    b.declare(Role::Prefetch, "idx").unwrap();
    let x = b.declare(Role::Input, "table").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let v = b.load(x, &[]).unwrap();
    b.store(o, &[], v).unwrap();
    b.finish().unwrap()
}
