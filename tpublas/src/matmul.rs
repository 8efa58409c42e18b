//! The matmul family (`mm`, `bmm`, `addmm`): blocked products with an f32 scratch
//! accumulator over an `arbitrary` k axis, every extent symbolic. No extent need divide its
//! block: overhanging parts of the operands read 0 along k, so they add nothing, and the
//! overhanging rows and columns of the output are never stored. Blocks are 128 along every
//! axis, except that a 2-D product whose output is a single block otherwise runs in blocks
//! of 64 rows ([`Rows::Half`]), so its grid has two parallel steps.
//!
//! `addmm`'s `self` is added in the epilogue, as a `[1, n]` row (a Linear layer's bias:
//! `self` of shape `[n]` or `[1, n]`) or as a full `[m, n]` operand (anything else that
//! broadcasts to `[m, n]` is expanded on the host first). `beta` and `alpha` are run-time
//! scalars (`[1, 1]` f32), so one kernel serves every value. With `beta = 0` `self` is
//! ignored, NaNs included, as in ATen: the row kernel runs with a zero row instead.
//!
//! Either operand may come transposed ([`Transposed`]: a [`Value::Transposed`] argument, a
//! `w.t()` view as it lies): its kernel reads the stored `[k, m]` or `[n, k]` blocks and
//! contracts the other axis (`dot_general`), so no transposing copy is made. A CPU `dot`
//! packs a transposed block by register tiles; a TPU `tpu.matmul` takes the contraction in its
//! dimension numbers.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::value::{Args, Value};
use crate::{layout, promote};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{BlockDim, CallSpec, DType, Dim, Kernel};
use tpukit::prelude::*;

/// Block extent along m, n and k.
pub const B: usize = 128;

/// `o = a @ b`, grid `(m, n, k)`; `(b, m, n, k)` with a squeezed batch dim. `ak` and `bk`
/// are the blocks' contracted axes ([`Transposed::axes`]).
#[tpu_kernel]
fn mm_kernel(a: In, b: In, o: Out, acc: Scratch, k_axis: usize, ak: usize, bk: usize, out: DType) {
    if program_id(k_axis) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot_general(a[..], b[..], ak, bk);
    if program_id(k_axis) == num_programs(k_axis) - 1 {
        o[..] = acc[..].cast(out);
    }
}

/// `o = beta · c + alpha · (a @ b)` with `c` a `[1, n]` row or an `[m, n]` array.
#[tpu_kernel]
#[allow(clippy::too_many_arguments)]
fn addmm_kernel(
    c: In,
    a: In,
    b: In,
    beta: In,
    alpha: In,
    o: Out,
    acc: Scratch,
    ak: usize,
    bk: usize,
    out: DType,
) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot_general(a[..], b[..], ak, bk);
    if program_id(2) == num_programs(2) - 1 {
        o[..] = (c[..].cast(f32) * beta[..] + acc[..] * alpha[..]).cast(out);
    }
}

fn array(dtype: DType, r: &str, c: &str) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::sym(r), Dim::sym(c)])
}

/// Which operands of a product lie transposed: `a` stored as `[k, m]`, `b` as `[n, k]`
/// (batched: the last two axes).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Transposed {
    pub a: bool,
    pub b: bool,
}

impl Transposed {
    /// Both operands row-major.
    pub const NONE: Transposed = Transposed { a: false, b: false };

    /// Every combination, each a kernel of its own.
    pub const ALL: [Transposed; 4] = [
        Transposed::NONE,
        Transposed { a: false, b: true },
        Transposed { a: true, b: false },
        Transposed { a: true, b: true },
    ];

    /// The contracted axis of an `a` block and of a `b` block.
    fn axes(self) -> (usize, usize) {
        (usize::from(!self.a), usize::from(self.b))
    }

    /// The windows' rows and columns (grid axes, or symbols) of an operand stored as
    /// `(r, c)` when row-major, swapped when `transposed`.
    fn order<T>(transposed: bool, r: T, c: T) -> [T; 2] {
        if transposed { [c, r] } else { [r, c] }
    }
}

/// The `(m, n, k)` grid and the `a`, `b`, `o` specs of a 2-D product, its blocks `rows`
/// high along m.
fn mm_spec(dtype: DType, t: Transposed, rows: Rows) -> CallSpec {
    let bm = rows.extent();
    let operand = |transposed, (r, c): (&str, &str), (gr, gc), (br, bc): (usize, usize)| {
        let [r, c] = Transposed::order(transposed, r, c);
        let [gr, gc] = Transposed::order(transposed, grid(gr), grid(gc));
        let [br, bc] = Transposed::order(transposed, br, bc);
        array(dtype, r, c).blocked([br, bc], [gr, gc])
    };
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", bm)),
            GridAxis::parallel(Extent::cdiv("n", B)),
            GridAxis::arbitrary(Extent::cdiv("k", B)),
        ],
        inputs: vec![
            operand(t.a, ("m", "k"), (0, 2), (bm, B)),
            operand(t.b, ("k", "n"), (2, 1), (B, B)),
        ],
        outputs: vec![array(dtype, "m", "n").blocked([bm, B], [grid(0), grid(1)])],
        scratch: vec![ArraySpec::new(DType::F32, [bm, B])],
        ..Default::default()
    }
}

/// The batched product: `[b, m, k] @ [b, k, n]`, batch dim squeezed from the windows.
fn bmm_spec(dtype: DType, t: Transposed) -> CallSpec {
    let block = [
        BlockDim::Squeezed,
        BlockDim::Blocked(B),
        BlockDim::Blocked(B),
    ];
    let array3 =
        |r: &str, c: &str| ArraySpec::new(dtype, [Dim::sym("b"), Dim::sym(r), Dim::sym(c)]);
    let operand = |transposed, (r, c): (&str, &str), (gr, gc): (usize, usize)| {
        let [r, c] = Transposed::order(transposed, r, c);
        let [gr, gc] = Transposed::order(transposed, grid(gr), grid(gc));
        array3(r, c).blocked(block, [grid(0), gr, gc])
    };
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("b", 1)),
            GridAxis::parallel(Extent::cdiv("m", B)),
            GridAxis::parallel(Extent::cdiv("n", B)),
            GridAxis::arbitrary(Extent::cdiv("k", B)),
        ],
        inputs: vec![
            operand(t.a, ("m", "k"), (1, 3)),
            operand(t.b, ("k", "n"), (3, 2)),
        ],
        outputs: vec![array3("m", "n").blocked(block, [grid(0), grid(1), grid(2)])],
        scratch: vec![ArraySpec::new(DType::F32, [B, B])],
        ..Default::default()
    }
}

/// How many rows (along m) a 2-D product's blocks hold.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Rows {
    /// [`B`].
    Full,
    /// `B / 2`, for a product whose output would otherwise be one block (m and n at most
    /// `B`, m above `B / 2`): its two halves are two grid steps, which the CPU runs on two
    /// cores. Only where A lies row-major: a transposed A stores m along its last axis, whose
    /// TPU blocks hold 128 elements (or the whole extent).
    Half,
}

impl Rows {
    fn extent(self) -> usize {
        match self {
            Rows::Full => B,
            Rows::Half => B / 2,
        }
    }
}

/// How `addmm`'s `self` is presented.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Bias {
    /// `[1, n]`, read by every row block.
    Row,
    /// `[m, n]`.
    Full,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Matmul {
    Mm,
    Bmm,
    Addmm,
}

impl Matmul {
    pub fn aten(self) -> &'static str {
        match self {
            Matmul::Mm => "aten.mm.default",
            Matmul::Bmm => "aten.bmm.default",
            Matmul::Addmm => "aten.addmm.default",
        }
    }

    /// The kernel for row-major operands of `dtype` (`bias` only matters for `addmm`).
    pub fn kernel(self, dtype: DType, bias: Bias) -> Result<Prepared> {
        self.kernel_reading(dtype, bias, Transposed::NONE, Rows::Full)
    }

    /// The kernel for operands of `dtype` lying as `t` says, its blocks `rows` high (a
    /// batched product's are always [`Rows::Full`]).
    pub fn kernel_reading(
        self,
        dtype: DType,
        bias: Bias,
        t: Transposed,
        rows: Rows,
    ) -> Result<Prepared> {
        memo(("matmul", self, dtype, bias, t, rows), || {
            Ok(self.build(dtype, bias, t, rows)?)
        })
    }

    fn build(
        self,
        dtype: DType,
        bias: Bias,
        t: Transposed,
        rows: Rows,
    ) -> tpukit::dsl::Result<Kernel> {
        let (ak, bk) = t.axes();
        match self {
            Matmul::Mm => mm_kernel(&mm_spec(dtype, t, rows), 2, ak, bk, dtype),
            Matmul::Bmm => mm_kernel(&bmm_spec(dtype, t), 3, ak, bk, dtype),
            Matmul::Addmm => {
                let mut spec = mm_spec(dtype, t, rows);
                let c = match bias {
                    Bias::Row => ArraySpec::new(dtype, [Dim::Static(1), Dim::sym("n")])
                        .blocked([1, B], [0.into(), grid(1)]),
                    Bias::Full => {
                        array(dtype, "m", "n").blocked([rows.extent(), B], [grid(0), grid(1)])
                    }
                };
                spec.inputs.insert(0, c);
                spec.inputs.extend([layout::scalar(2), layout::scalar(2)]);
                addmm_kernel(&spec, ak, bk, dtype)
            }
        }
    }

    /// The block heights this product's kernels come in for operands lying as `t` says:
    /// also [`Rows::Half`] for `mm` and `addmm` with a row-major A.
    fn heights(self, t: Transposed) -> &'static [Rows] {
        match self != Matmul::Bmm && !t.a {
            true => &[Rows::Full, Rows::Half],
            false => &[Rows::Full],
        }
    }

    /// The block height for an `m × n` output (the last two axes) of operands lying as `t`
    /// says: [`Rows::Half`] where there is such a kernel and the output is otherwise one block.
    fn rows(self, m: usize, n: usize, t: Transposed) -> Rows {
        match self.heights(t).contains(&Rows::Half) && B / 2 < m && m <= B && n <= B {
            true => Rows::Half,
            false => Rows::Full,
        }
    }

    /// Every kernel for operands of `dtype`, row-major ones first: each [`Transposed`]
    /// layout, and for `addmm` with a row bias and a full one; for `mm` and `addmm` with a
    /// row-major A, also in [`Rows::Half`] blocks.
    pub fn kernels(self, dtype: DType) -> Result<Vec<Prepared>> {
        let biases: &[Bias] = match self {
            Matmul::Addmm => &[Bias::Row, Bias::Full],
            _ => &[Bias::Row],
        };
        let mut kernels = Vec::new();
        for rows in [Rows::Full, Rows::Half] {
            for t in Transposed::ALL {
                if !self.heights(t).contains(&rows) {
                    continue;
                }
                for &bias in biases {
                    kernels.push(self.kernel_reading(dtype, bias, t, rows)?);
                }
            }
        }
        Ok(kernels)
    }

    /// The positions of the operands (`Value::Transposed` is read at these only).
    pub fn operands(self) -> [usize; 2] {
        match self {
            Matmul::Addmm => [1, 2],
            _ => [0, 1],
        }
    }

    /// `mm(a, b)`, `bmm(a, b)`, `addmm(self, a, b, beta=1, alpha=1)`. Operands must share
    /// one dtype (as in ATen); the result has it.
    pub fn run(self, args: &[Value]) -> Result<Vec<HostArray>> {
        let a = Args::new(self.aten(), args);
        let [first, second] = self.operands();
        let ((x, ta), (y, tb)) = (a.operand(first)?, a.operand(second)?);
        let t = Transposed { a: ta, b: tb };
        for t in [x, y] {
            promote::check(self.aten(), t)?;
        }
        if x.dtype() != y.dtype() {
            return Err(a
                .err(format!(
                    "expected both operands to have the same dtype, got {} and {}",
                    x.dtype(),
                    y.dtype()
                ))
                .with_kind(ErrorKind::DType));
        }
        let rank = if self == Matmul::Bmm { 3 } else { 2 };
        let (xs, ys) = (logical(x.shape(), t.a), logical(y.shape(), t.b));
        let fits = xs.len() == rank
            && ys.len() == rank
            && xs[rank - 1] == ys[rank - 2]
            && (rank == 2 || xs[0] == ys[0]);
        if !fits {
            return Err(a
                .err(format!("shapes {xs:?} and {ys:?} cannot be multiplied"))
                .with_kind(ErrorKind::Shape));
        }
        let dtype = x.dtype();
        let (m, n) = (xs[rank - 2], ys[rank - 1]);
        let mut out_shape = vec![m, n];
        if rank == 3 {
            out_shape.insert(0, xs[0]);
        }
        layout::check_size(a.op, &out_shape)?;
        let rows = self.rows(m, n, t);
        if self != Matmul::Addmm {
            let k = self.kernel_reading(dtype, Bias::Row, t, rows)?;
            return Ok(vec![crate::launch::one(&k, &[x, y])?]);
        }
        let (beta, alpha) = (a.scalar_or(3, 1.0)?, a.scalar_or(4, 1.0)?);
        let c = promote::to(a.tensor(0)?, dtype);
        let (c, bias) = match c.shape() {
            _ if beta == 0.0 => (HostArray::zeros(dtype, &[1, n]), Bias::Row),
            [cn] | [1, cn] if *cn == n => (c.reshape(&[1, n]).expect("same size"), Bias::Row),
            s => {
                let full = layout::expand(a.op, &c, &out_shape)?.ok_or_else(|| {
                    a.err(format!(
                        "self of shape {s:?} does not broadcast to {out_shape:?}"
                    ))
                    .with_kind(ErrorKind::Shape)
                })?;
                (full, Bias::Full)
            }
        };
        if xs[1] == 0 {
            // An empty product: no k step runs, so no epilogue adds `beta · self`; the result
            // is that alone (rounded once, as the kernel would).
            let full = layout::expand(a.op, &c, &out_shape)?.expect("a row or the output's shape");
            let v: Vec<f64> = full.to_f64_vec().iter().map(|&c| c * beta).collect();
            return Ok(vec![HostArray::from_f64(dtype, &out_shape, &v)]);
        }
        let k = self.kernel_reading(dtype, bias, t, rows)?;
        let (beta, alpha) = (
            layout::scalar_operand(beta, 2),
            layout::scalar_operand(alpha, 2),
        );
        Ok(vec![crate::launch::one(&k, &[&c, x, y, &beta, &alpha])?])
    }
}

/// The shape of a tensor whose array has `stored` shape, transposed (last two axes) or not.
fn logical(stored: &[usize], transposed: bool) -> Vec<usize> {
    let mut shape = stored.to_vec();
    if transposed && shape.len() >= 2 {
        let r = shape.len();
        shape.swap(r - 2, r - 1);
    }
    shape
}
