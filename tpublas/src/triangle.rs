//! `tril(self, diagonal)` and `triu(self, diagonal)`: the lower (upper) triangle of the last
//! two dims, the rest 0 — one kernel over `[b, m, n]` tiles ([`rows::matrices`]) keeping an
//! element where `col − row ≤ diagonal` (tril) or `≥ diagonal` (triu), `diagonal` a
//! run-time scalar. Dropped elements are 0 whatever they held (NaN too), as in ATen. f32,
//! bf16 and bool (a causal mask made by `tril` of ones).

use crate::launch::{Prepared, memo};
use crate::promote;
use crate::rows::{self, BM, BN};
use crate::value::{Args, Value};
use crate::{BlasError, Result};
use tpukit::dsl::{DType, ErrorKind};
use tpukit::prelude::*;

/// `o = x` where `sign·(col − row − diagonal) ≤ 0`, else 0 (`sign` 1: tril, −1: triu).
#[tpu_kernel]
fn triangle_k(x: In, diagonal: In, sign: In, o: Out, out: DType) {
    let row = iota(i32, [16, 512], 0) + program_id(1) * 16;
    let col = iota(i32, [16, 512], 1) + program_id(2) * 512;
    let keep = ((col - row).cast(f32) - diagonal[..]) * sign[..] <= 0.0;
    o[..] = where_(keep, x[..].cast(f32), 0.0).cast(out);
}

/// The same on a bool tensor (`tril` of a mask).
#[tpu_kernel]
fn triangle_bool(x: In, diagonal: In, sign: In, o: Out) {
    let row = iota(i32, [16, 512], 0) + program_id(1) * 16;
    let col = iota(i32, [16, 512], 1) + program_id(2) * 512;
    let keep = ((col - row).cast(f32) - diagonal[..]) * sign[..] <= 0.0;
    o[..] = x[..] & keep;
}

const _: () = assert!(BM == 16 && BN == 512);

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Triangle {
    Lower,
    Upper,
}

impl Triangle {
    pub fn aten(self) -> &'static str {
        match self {
            Triangle::Lower => "aten.tril.default",
            Triangle::Upper => "aten.triu.default",
        }
    }

    pub fn kernel(dtype: DType) -> Result<Prepared> {
        memo(("triangle", dtype), || {
            let spec = rows::matrices(dtype, dtype, 2);
            Ok(if dtype == DType::Bool {
                triangle_bool(&spec)?
            } else {
                triangle_k(&spec, dtype)?
            })
        })
    }

    /// Every kernel for tensors of `dtype` (with f32, the bool one too).
    pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
        let mut k = vec![Self::kernel(dtype)?];
        if dtype == DType::F32 {
            k.push(Self::kernel(DType::Bool)?);
        }
        Ok(k)
    }

    /// `tril(self, diagonal=0)` / `triu(self, diagonal=0)` on a tensor of rank ≥ 2.
    pub fn run(self, args: &[Value]) -> Result<Vec<HostArray>> {
        let a = Args::new(self.aten(), args);
        let x = a.tensor(0)?;
        if x.dtype() != DType::Bool {
            promote::check(self.aten(), x)?;
        }
        let s = x.shape();
        if s.len() < 2 {
            return Err(BlasError::new(
                self.aten(),
                "input tensor must have at least 2 dimensions",
            )
            .with_kind(ErrorKind::Shape));
        }
        let (m, n) = (s[s.len() - 2], s[s.len() - 1]);
        let b: usize = s[..s.len() - 2].iter().product();
        let diagonal = a.int(1).unwrap_or(0) as f64;
        let sign = if self == Triangle::Lower { 1.0 } else { -1.0 };
        let x3 = x.clone().reshape(&[b, m, n]).expect("same size");
        let scalar = |v| crate::layout::scalar_operand(v, 2);
        let o = crate::launch::one(
            &Self::kernel(x.dtype())?,
            &[&x3, &scalar(diagonal), &scalar(sign)],
        )?;
        Ok(vec![o.reshape(s).expect("same size")])
    }
}
