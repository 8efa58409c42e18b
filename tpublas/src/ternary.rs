//! Pointwise operators of three tensors and a number, an optimizer's updates: `addcmul`
//! (`x + s·a·b`, Adam's second moment), `addcdiv` (`x + s·a / b`, its step) and `lerp` with a
//! scalar weight (`x + s·(a − x)`, its first moment). ATen broadcasts the three tensors and
//! promotes their dtypes; the kernels compute in f32 (ATen's `opmath` for bf16) and round
//! once. Broadcast operands are materialised on the host (an optimizer's are all one
//! shape, so its calls are planned); the number is a run-time scalar.

use crate::Result;
use crate::elementwise::{check_dtype, run};
use crate::launch::{Prepared, memo};
use crate::layout::{self, BLOCK, flat};
use crate::promote::{promote, to};
use tpukit::dsl::DType;
use tpukit::prelude::*;

#[tpu_kernel]
fn addcmul_k(x: In, a: In, b: In, s: In, o: Out, out: DType) {
    let v = s[..].broadcast_to([4096]);
    o[..] = (x[..].cast(f32) + v * a[..].cast(f32) * b[..].cast(f32)).cast(out);
}

#[tpu_kernel]
fn addcdiv_k(x: In, a: In, b: In, s: In, o: Out, out: DType) {
    let v = s[..].broadcast_to([4096]);
    o[..] = (x[..].cast(f32) + v * a[..].cast(f32) / b[..].cast(f32)).cast(out);
}

/// ATen's two-sided form: from `x` for weights under ½ in magnitude, else from `a`, so
/// weight 1 gives `a` exactly.
#[tpu_kernel]
fn lerp_k(x: In, a: In, s: In, o: Out, out: DType) {
    let w = s[..].broadcast_to([4096]);
    let from = x[..].cast(f32);
    let to = a[..].cast(f32);
    let d = to - from;
    o[..] = where_(w.abs() < 0.5, from + w * d, to - d * (1.0 - w)).cast(out);
}

const _: () = assert!(
    BLOCK == 4096,
    "the kernels above spell the block size as 4096"
);

/// The operators.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Ternary {
    /// `addcmul(self, tensor1, tensor2, *, value=1)`
    Addcmul,
    /// `addcdiv(self, tensor1, tensor2, *, value=1)`
    Addcdiv,
    /// `lerp.Scalar(self, end, weight)`
    Lerp,
}

impl Ternary {
    pub fn aten(self) -> &'static str {
        match self {
            Ternary::Addcmul => "aten.addcmul.default",
            Ternary::Addcdiv => "aten.addcdiv.default",
            Ternary::Lerp => "aten.lerp.Scalar",
        }
    }

    /// How many tensors it takes (`lerp`: two), the number following them.
    pub fn tensors(self) -> usize {
        match self {
            Ternary::Lerp => 2,
            _ => 3,
        }
    }

    /// The kernel for results of `dtype`.
    pub fn kernel(self, dtype: DType) -> Result<Prepared> {
        memo(("ternary", self.aten(), dtype), || {
            let mut inputs = vec![flat(dtype); self.tensors()];
            inputs.push(layout::scalar(1));
            let spec = layout::elementwise(inputs, dtype);
            Ok(match self {
                Ternary::Addcmul => addcmul_k(&spec, dtype)?,
                Ternary::Addcdiv => addcdiv_k(&spec, dtype)?,
                Ternary::Lerp => lerp_k(&spec, dtype)?,
            })
        })
    }

    /// `op(tensors…, s)`: the tensors broadcast and promoted to one dtype.
    pub fn run(self, tensors: &[&HostArray], s: f64) -> Result<HostArray> {
        let name = self.aten();
        debug_assert_eq!(tensors.len(), self.tensors());
        let mut dtype = tensors[0].dtype();
        for t in tensors {
            check_dtype(name, t)?;
            dtype = promote(dtype, t.dtype());
        }
        let shape = layout::broadcast_all(name, tensors)?;
        let mut inputs = Vec::with_capacity(tensors.len() + 1);
        for t in tensors {
            let t = to(t, dtype);
            inputs.push(layout::expand(name, &t, &shape)?.expect("broadcast checked"));
        }
        inputs.push(layout::scalar_operand(s, 1));
        let refs: Vec<&HostArray> = inputs.iter().collect();
        run(&self.kernel(dtype)?, &refs, &shape)
    }
}
