//! Random *valid* kernels from a seed: for fuzzing the two CPU backends against each other
//! (`tests/fuzz_kernels.rs`) and the Mosaic lowering against libtpu (`tpukit random-kernels`,
//! `tests/conformance/test_random_kernels.py`).
//!
//! Every kernel runs on a 2-D parallel grid over `m × n` operands in `bm × bn` blocks that need
//! not divide the extents (edge blocks), and computes `o` from `x`, `y` (`m × n`), `a`
//! (`m × k`) and `w` (`k × n`) by a random DAG of: elementwise unary and binary ops, compares
//! feeding selects, row and column reductions (sum, max, min) broadcast back to the block,
//! a matmul `a @ w` (floats), iotas along either dim, and casts through the other float
//! dtype. The dtype is f32, bf16 or i32. Edge blocks read the windows' fill outside the
//! array, so reductions over them are defined (the same on every backend).
//!
//! Values stay tame so that backends, not ill-conditioned math, are compared: the float ops
//! are squashing or piecewise (no exp, log or division), and the matmul operands hold small
//! integers (see [`RandomKernel::input_range`]), so its products and sums are exact in f32 in
//! any order. Same seed, same kernel: the generator uses its own small PRNG (SplitMix64).

use tpukit_dsl::{
    ArraySpec, BinaryOp, CallSpec, CmpOp, DType, Dim, Extent, GridAxis, Kernel, KernelBuilder,
    ReduceOp, Result, Role, UnaryOp, ValueId, grid,
};

/// A generated kernel and what it takes.
#[derive(Clone, Debug)]
pub struct RandomKernel {
    pub kernel: Kernel,
    pub dtype: DType,
    /// `(bm, bn)`.
    pub block: (usize, usize),
    /// The contraction size of `a @ w` (static).
    pub k: usize,
    /// Ops in the DAG.
    pub ops: usize,
    /// The least precise dtype the DAG's values pass through: results carry its rounding (an
    /// f32 kernel that rounds a value through bf16 agrees across backends to bf16's precision
    /// only, since f32 results a few ulp apart may round to neighbouring bf16 values).
    pub precision: DType,
}

/// Block shapes the generator picks from (Mosaic's native tiles and multiples).
pub const BLOCKS: [(usize, usize); 3] = [(8, 128), (16, 128), (8, 256)];

const FLOAT_UNARY: [UnaryOp; 4] = [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Tanh, UnaryOp::Logistic];
const INT_UNARY: [UnaryOp; 2] = [UnaryOp::Neg, UnaryOp::Abs];
const BINARY: [BinaryOp; 5] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Max,
    BinaryOp::Min,
];
const REDUCE: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];

/// SplitMix64: a tiny deterministic generator (no dependency, stable across versions).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}

impl RandomKernel {
    /// The kernel for `seed`.
    pub fn new(seed: u64) -> RandomKernel {
        let mut r = Rng(seed);
        let dtype = r.pick(&[DType::F32, DType::BF16, DType::I32]);
        let block = r.pick(&BLOCKS);
        let k = r.pick(&[8, 16, 128]);
        let ops = 1 + r.below(10);
        let (kernel, precision) = build(&mut r, dtype, block, k, ops)
            .unwrap_or_else(|e| panic!("the generator built an invalid kernel (seed {seed}): {e}"));
        RandomKernel {
            kernel,
            dtype,
            block,
            k,
            ops,
            precision,
        }
    }

    /// Symbol values for extents `m × n`.
    pub fn bindings(&self, m: usize, n: usize) -> Vec<(String, usize)> {
        vec![("m".into(), m), ("n".into(), n)]
    }

    /// The shapes of `x`, `y`, `a`, `w` for extents `m × n`.
    pub fn input_shapes(&self, m: usize, n: usize) -> Vec<Vec<usize>> {
        vec![vec![m, n], vec![m, n], vec![m, self.k], vec![self.k, n]]
    }

    /// The range input `i` is drawn from, and whether it holds integers only: small integers
    /// for the matmul operands (`a`, `w`) and for i32, values in `-2..2` otherwise.
    pub fn input_range(&self, i: usize) -> (f64, f64, bool) {
        match (i, self.dtype) {
            (2 | 3, _) => (-4.0, 5.0, true),
            (_, DType::I32) => (-50.0, 50.0, true),
            _ => (-2.0, 2.0, false),
        }
    }
}

fn build(
    r: &mut Rng,
    dtype: DType,
    (bm, bn): (usize, usize),
    k: usize,
    ops: usize,
) -> Result<(Kernel, DType)> {
    let tiles = ArraySpec::new(dtype, ["m", "n"]).blocked([bm, bn], [grid(0), grid(1)]);
    let spec = CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", bm)),
            GridAxis::parallel(Extent::cdiv("n", bn)),
        ],
        inputs: vec![
            tiles.clone(),
            tiles.clone(),
            ArraySpec::new(dtype, [Dim::sym("m"), Dim::Static(k)])
                .blocked([bm, k], [grid(0), 0.into()]),
            ArraySpec::new(dtype, [Dim::Static(k), Dim::sym("n")])
                .blocked([k, bn], [0.into(), grid(1)]),
        ],
        outputs: vec![tiles],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("random_kernel", &spec)?;
    let x = b.declare(Role::Input, "x")?;
    let y = b.declare(Role::Input, "y")?;
    let a = b.declare(Role::Input, "a")?;
    let w = b.declare(Role::Input, "w")?;
    let o = b.declare(Role::Output, "o")?;
    let mut pool: Vec<ValueId> = vec![b.load(x, &[])?, b.load(y, &[])?];
    let float = dtype.is_float();
    let unary: &[UnaryOp] = if float { &FLOAT_UNARY } else { &INT_UNARY };
    let shape = [bm, bn];
    let mut precision = dtype;
    for _ in 0..ops {
        let p = pool[r.below(pool.len())];
        let q = pool[r.below(pool.len())];
        let v = match r.below(8) {
            0 => b.unary(r.pick(unary), p)?,
            1 => b.binary(r.pick(&BINARY), p, q)?,
            2 => {
                let m = b.compare(r.pick(CmpOp::ALL), p, q)?;
                b.select(m, p, q)?
            }
            // A row (then a column) reduction, broadcast back and combined: row ops.
            kind @ (3 | 4) => {
                let axis = if kind == 3 { 1 } else { 0 };
                let red = b.reduce_keepdims(r.pick(&REDUCE), p, &[axis])?;
                let wide = b.broadcast_to(red, &shape)?;
                b.binary(r.pick(&BINARY), wide, q)?
            }
            5 if float => {
                let (av, wv) = (b.load(a, &[])?, b.load(w, &[])?);
                let mut prod = b.matmul(av, wv)?;
                if dtype != DType::F32 {
                    prod = b.cast(prod, dtype)?;
                }
                b.binary(r.pick(&BINARY), prod, q)?
            }
            5 | 6 => {
                let mut i = b.iota(DType::I32, &shape, r.below(2))?;
                if float {
                    i = b.cast(i, dtype)?;
                }
                b.binary(r.pick(&BINARY), i, p)?
            }
            // Through the other float dtype and back (f32 values round to bf16).
            _ if float => {
                let other = match dtype {
                    DType::F32 => DType::BF16,
                    _ => DType::F32,
                };
                if other == DType::BF16 {
                    precision = DType::BF16;
                }
                let there = b.cast(p, other)?;
                b.cast(there, dtype)?
            }
            _ => b.binary(BinaryOp::Max, p, q)?,
        };
        pool.push(v);
    }
    b.store(o, &[], *pool.last().expect("loads"))?;
    Ok((b.finish()?, precision))
}
