//! The matmul family (`mm`, `bmm`, `addmm`): blocked products with an f32 scratch
//! accumulator over an `arbitrary` k axis, every extent symbolic. No extent need divide its
//! block: overhanging parts of the operands read 0 along k, so they add nothing, and the
//! overhanging rows and columns of the output are never stored.
//!
//! `addmm`'s `self` is added in the epilogue, as a `[1, n]` row (a Linear layer's bias:
//! `self` of shape `[n]` or `[1, n]`) or as a full `[m, n]` operand (anything else that
//! broadcasts to `[m, n]` is expanded on the host first). `beta` and `alpha` are run-time
//! scalars (`[1, 1]` f32), so one kernel serves every value. With `beta = 0` `self` is
//! ignored, NaNs included, as in ATen: the row kernel runs with a zero row instead.

use crate::Result;
use crate::launch::{Prepared, memo};
use crate::value::{Args, Value};
use crate::{layout, promote};
use tpukit::dsl::ErrorKind;
use tpukit::dsl::{BlockDim, CallSpec, DType, Dim, Kernel};
use tpukit::prelude::*;

/// Block extent along m, n and k.
pub const B: usize = 128;

/// `o = a @ b`, grid `(m, n, k)`; `(b, m, n, k)` with a squeezed batch dim.
#[tpu_kernel]
fn mm_kernel(a: In, b: In, o: Out, acc: Scratch, k_axis: usize, out: DType) {
    if program_id(k_axis) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    if program_id(k_axis) == num_programs(k_axis) - 1 {
        o[..] = acc[..].cast(out);
    }
}

/// `o = beta · c + alpha · (a @ b)` with `c` a `[1, n]` row or an `[m, n]` array.
#[tpu_kernel]
fn addmm_kernel(c: In, a: In, b: In, beta: In, alpha: In, o: Out, acc: Scratch, out: DType) {
    if program_id(2) == 0 {
        acc[..] = 0.0;
    }
    acc[..] += dot(a[..], b[..]);
    if program_id(2) == num_programs(2) - 1 {
        o[..] = (c[..].cast(f32) * beta[..] + acc[..] * alpha[..]).cast(out);
    }
}

fn array(dtype: DType, r: &str, c: &str) -> ArraySpec {
    ArraySpec::new(dtype, [Dim::sym(r), Dim::sym(c)])
}

/// The `(m, n, k)` grid and the `a`, `b`, `o` specs of a 2-D product.
fn mm_spec(dtype: DType) -> CallSpec {
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("m", B)),
            GridAxis::parallel(Extent::cdiv("n", B)),
            GridAxis::arbitrary(Extent::cdiv("k", B)),
        ],
        inputs: vec![
            array(dtype, "m", "k").blocked([B, B], [grid(0), grid(2)]),
            array(dtype, "k", "n").blocked([B, B], [grid(2), grid(1)]),
        ],
        outputs: vec![array(dtype, "m", "n").blocked([B, B], [grid(0), grid(1)])],
        scratch: vec![ArraySpec::new(DType::F32, [B, B])],
        ..Default::default()
    }
}

/// The batched product: `[b, m, k] @ [b, k, n]`, batch dim squeezed from the windows.
fn bmm_spec(dtype: DType) -> CallSpec {
    let block = [
        BlockDim::Squeezed,
        BlockDim::Blocked(B),
        BlockDim::Blocked(B),
    ];
    let array3 =
        |r: &str, c: &str| ArraySpec::new(dtype, [Dim::sym("b"), Dim::sym(r), Dim::sym(c)]);
    CallSpec {
        grid: vec![
            GridAxis::parallel(Extent::cdiv("b", 1)),
            GridAxis::parallel(Extent::cdiv("m", B)),
            GridAxis::parallel(Extent::cdiv("n", B)),
            GridAxis::arbitrary(Extent::cdiv("k", B)),
        ],
        inputs: vec![
            array3("m", "k").blocked(block, [grid(0), grid(1), grid(3)]),
            array3("k", "n").blocked(block, [grid(0), grid(3), grid(2)]),
        ],
        outputs: vec![array3("m", "n").blocked(block, [grid(0), grid(1), grid(2)])],
        scratch: vec![ArraySpec::new(DType::F32, [B, B])],
        ..Default::default()
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

    /// The kernel for operands of `dtype` (`bias` only matters for `addmm`).
    pub fn kernel(self, dtype: DType, bias: Bias) -> Result<Prepared> {
        memo(("matmul", self, dtype, bias), || {
            Ok(self.build(dtype, bias)?)
        })
    }

    fn build(self, dtype: DType, bias: Bias) -> tpukit::dsl::Result<Kernel> {
        match self {
            Matmul::Mm => mm_kernel(&mm_spec(dtype), 2, dtype),
            Matmul::Bmm => mm_kernel(&bmm_spec(dtype), 3, dtype),
            Matmul::Addmm => {
                let mut spec = mm_spec(dtype);
                let c = match bias {
                    Bias::Row => ArraySpec::new(dtype, [Dim::Static(1), Dim::sym("n")])
                        .blocked([1, B], [0.into(), grid(1)]),
                    Bias::Full => array(dtype, "m", "n").blocked([B, B], [grid(0), grid(1)]),
                };
                spec.inputs.insert(0, c);
                spec.inputs.extend([layout::scalar(2), layout::scalar(2)]);
                addmm_kernel(&spec, dtype)
            }
        }
    }

    /// Every kernel for operands of `dtype` (`addmm`: a row bias and a full one).
    pub fn kernels(self, dtype: DType) -> Result<Vec<Prepared>> {
        match self {
            Matmul::Addmm => Ok(vec![
                self.kernel(dtype, Bias::Row)?,
                self.kernel(dtype, Bias::Full)?,
            ]),
            _ => Ok(vec![self.kernel(dtype, Bias::Row)?]),
        }
    }

    /// `mm(a, b)`, `bmm(a, b)`, `addmm(self, a, b, beta=1, alpha=1)`. Operands must share
    /// one dtype (as in ATen); the result has it.
    pub fn run(self, args: &[Value]) -> Result<Vec<HostArray>> {
        let a = Args::new(self.aten(), args);
        let first = usize::from(self == Matmul::Addmm);
        let (x, y) = (a.tensor(first)?, a.tensor(first + 1)?);
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
        let (xs, ys) = (x.shape(), y.shape());
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
        if self != Matmul::Addmm {
            let k = self.kernel(dtype, Bias::Row)?;
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
        let k = self.kernel(dtype, bias)?;
        let (beta, alpha) = (
            layout::scalar_operand(beta, 2),
            layout::scalar_operand(alpha, 2),
        );
        Ok(vec![crate::launch::one(&k, &[&c, x, y, &beta, &alpha])?])
    }
}
