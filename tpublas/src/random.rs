//! `bernoulli.p(self, p, generator)`: a tensor of `self`'s shape and dtype holding 1 with
//! probability `p`, else 0 (dropout's mask: `tpublas.mode()` serves `bernoulli_` with it).
//!
//! The random numbers are tpukit's own, not torch's: a counter-based generator in the kernel.
//! Element `i` hashes `i` with a 64-bit seed (two int32 words, run-time scalars) through two
//! rounds of the `lowbias32` integer mixer (xor-shift-multiply, wrapping int32 arithmetic),
//! and its top 24 bits are a uniform `u ∈ [0, 1)` on a 2^-24 grid; the element is `u < p`.
//! So a result depends only on the seed and the element's position, on every device. The
//! Python layer passes the seed as the `generator` argument: 62 bits drawn from the torch
//! generator given (or torch's default one), so `torch.manual_seed` makes runs repeatable —
//! but the masks differ from torch's own.

use crate::launch::{Prepared, memo};
use crate::layout::{BLOCK, elementwise};
use crate::promote;
use crate::value::{Args, Value};
use crate::{BlasError, Result};
use tpukit::dsl::{ArraySpec, DType, ErrorKind};
use tpukit::prelude::*;

pub const ATEN: &str = "aten.bernoulli.p";

/// `o[i] = [u_i < p]`, `u_i` from the counter `i` and the seed words `s0`, `s1`.
#[tpu_kernel]
fn bernoulli_k(s0: In, s1: In, p: In, o: Out, out: DType) {
    let i = iota(i32, [4096], 0) + program_id(0) * 4096;
    let a0 = i ^ s0[..].broadcast_to([4096]);
    let a1 = a0 ^ a0.shr_logical(16);
    let a2 = a1 * 2146121005;
    let a3 = a2 ^ a2.shr_logical(15);
    let a4 = a3 * -2073450869;
    let a5 = a4 ^ a4.shr_logical(16) ^ s1[..].broadcast_to([4096]);
    let b1 = a5 ^ a5.shr_logical(16);
    let b2 = b1 * 2146121005;
    let b3 = b2 ^ b2.shr_logical(15);
    let b4 = b3 * -2073450869;
    let b5 = b4 ^ b4.shr_logical(16);
    let u = b5.shr_logical(8).cast(f32) * 0.000_000_059_604_645;
    o[..] = where_(u < p[..].broadcast_to([4096]), 1.0, 0.0).cast(out);
}

const _: () = assert!(BLOCK == 4096);

pub fn kernel(dtype: DType) -> Result<Prepared> {
    memo(("bernoulli", dtype), || {
        let word = ArraySpec::new(DType::I32, [1]);
        let spec = elementwise(vec![word.clone(), word, crate::layout::scalar(1)], dtype);
        Ok(bernoulli_k(&spec, dtype)?)
    })
}

/// `bernoulli.p(self, p=0.5, *, generator)`; `generator` is the seed, an int.
pub fn run(args: &[Value]) -> Result<Vec<HostArray>> {
    let a = Args::new(ATEN, args);
    let x = a.tensor(0)?;
    promote::check(ATEN, x)?;
    let p = a.scalar_or(1, 0.5)?;
    if !(0.0..=1.0).contains(&p) {
        return Err(a.err(format!("expects p to be in [0, 1], got {p}")));
    }
    let seed = match a.values.get(2) {
        Some(Value::Int(s)) => *s,
        _ => {
            return Err(a
                .err("needs a seed as `generator` (an int; tpublas draws one from torch's generator)")
                .with_kind(ErrorKind::Invalid));
        }
    };
    // The two words, as int32 values (a bit pattern, read back as signed).
    let words = [seed as u32 as i32, (seed >> 32) as u32 as i32];
    let w = |v: i32| HostArray::from_f64(DType::I32, &[1], &[f64::from(v)]);
    let n = crate::layout::check_size(ATEN, x.shape())?;
    let mut o = HostArray::try_zeros(x.dtype(), &[n], "the result")
        .map_err(|e| BlasError::new(ATEN, e.message).with_kind(e.kind))?;
    if n > 0 {
        let ps = crate::layout::scalar_operand(p, 1);
        crate::launch::into(
            &kernel(x.dtype())?,
            &[&w(words[0]), &w(words[1]), &ps],
            std::slice::from_mut(&mut o),
        )?;
    }
    Ok(vec![o.reshape(x.shape()).expect("same size")])
}
