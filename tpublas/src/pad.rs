//! `constant_pad_nd(self, pad, value)`: `pad` lists `(before, after)` pairs from the last dim
//! backwards; each padded dim is a concatenation `[fill(before), x, fill(after)]` along it —
//! the fill kernel of [`crate::factory`] and the row scatters of [`crate::concat`], so no
//! element is computed on the host. f32, bf16 and int32 (`tpublas.mode()` narrows int64
//! labels to it). Negative pads (cropping) are not served: a clear error.

use crate::launch::Prepared;
use crate::value::{Args, Value};
use crate::{Result, concat, factory};
use tpukit::dsl::{DType, ErrorKind};
use tpukit::prelude::*;

pub const ATEN: &str = "aten.constant_pad_nd.default";

/// Every kernel for tensors of `dtype` (with f32, the int32 ones too).
pub fn kernels(dtype: DType) -> Result<Vec<Prepared>> {
    let mut k = vec![factory::fill_kernel(dtype)?];
    k.extend(concat::kernels(dtype)?);
    if dtype == DType::F32 {
        k.push(factory::fill_kernel(DType::I32)?);
        k.extend(concat::kernels(DType::I32)?);
    }
    Ok(k)
}

pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN, args);
    let x = a.tensor(0)?;
    if !matches!(x.dtype(), DType::F32 | DType::BF16 | DType::I32) {
        return Err(a
            .err(format!(
                "serves f32, bf16 and int32 tensors, got {}",
                x.dtype()
            ))
            .with_kind(ErrorKind::DType));
    }
    let pad = a.int_list(1)?;
    let value = a.scalar_or(2, 0.0)?;
    let rank = x.shape().len();
    if pad.len() % 2 != 0 || pad.len() > 2 * rank {
        return Err(a
            .err(format!(
                "pad {pad:?} must be (before, after) pairs for at most {rank} dims"
            ))
            .with_kind(ErrorKind::Shape));
    }
    if pad.iter().any(|&p| p < 0) {
        return Err(a
            .err(format!(
                "negative pads (cropping) are not served, got {pad:?}"
            ))
            .with_kind(ErrorKind::Unsupported));
    }
    let mut cur = x.clone();
    for (i, pair) in pad.chunks(2).enumerate() {
        let d = rank - 1 - i;
        let (before, after) = (pair[0] as usize, pair[1] as usize);
        if before == 0 && after == 0 {
            continue;
        }
        let side = |n: usize| {
            let mut s = cur.shape().to_vec();
            s[d] = n;
            factory::filled(ATEN, x.dtype(), &s, value)
        };
        let mut parts = Vec::new();
        if before > 0 {
            parts.push(side(before)?);
        }
        parts.push(cur.clone());
        if after > 0 {
            parts.push(side(after)?);
        }
        cur = concat::cat(&parts, d)?;
    }
    Ok(vec![cur])
}
