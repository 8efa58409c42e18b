//! `arith.uitofp` and `arith.fptoui`: conversions between floats and unsigned integers
//! (JAX's `uint32`/`uint16`/`uint8`, held by the IR as the signless bits of `i32`/`i16`/`i8`), built from
//! the IR's signed conversions so that both are exact:
//!
//! - `uitofp` of 32 bits converts the high and low 16 bits separately: both convert to f32
//!   exactly, `hi * 65536` is exact, and the one rounding is their sum's — the correctly
//!   rounded f32. A bf16/f16 result is that f32 rounded again, as XLA converts (JAX's
//!   `uint32.astype(bfloat16)` on the CPU goes through f32 too). Of 16 or 8 bits, the bits
//!   zero-extended to i32 convert exactly.
//! - `fptoui` truncates toward zero and saturates, as JAX does on the CPU: NaN and
//!   negatives give 0, values past the type's maximum give the maximum.
//!
//! Unsigned orders (`arith.cmpi` with `ult`…, `arith.maxui`/`minui`) compare the operands
//! with their sign bit flipped (`x ^ MIN`, [`sign_flipped`]), which orders two's complement
//! bits as unsigned numbers: exact.

use super::rules::Table;
use super::scope::{Scope, result_type};
use melior::ir::operation::OperationRef;
use tpukit_dsl::{Arg, BinaryOp, CmpOp, DType, Error, KernelBuilder, Literal, Result, ValueId};

pub(crate) fn uitofp(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let x = s.value(op, 0)?;
    let to = result_type(op, 0)?.dtype;
    let r = match b.ty(x).dtype {
        DType::I32 => {
            let f = u32_to_f32(b, x)?;
            b.cast(f, to)?
        }
        d @ (DType::I16 | DType::I8) => {
            let wide = b.cast(x, DType::I32)?;
            let mask = (1i64 << d.bit_width()) - 1;
            let bits = b.binary(BinaryOp::And, wide, mask)?;
            b.cast(bits, to)?
        }
        DType::Bool => b.cast(x, to)?,
        d => return Err(Error::unsupported(format!("a conversion of {d} to {to}"))),
    };
    s.define(op, 0, r)
}

/// The f32 nearest the unsigned value of the bits of `x` (i32).
fn u32_to_f32(b: &mut KernelBuilder, x: ValueId) -> Result<ValueId> {
    let hi = b.binary(BinaryOp::ShrL, x, 16)?;
    let lo = b.binary(BinaryOp::And, x, 0xffff)?;
    let (hi, lo) = (b.cast(hi, DType::F32)?, b.cast(lo, DType::F32)?);
    let hi = b.binary(BinaryOp::Mul, hi, 65536.0)?;
    b.binary(BinaryOp::Add, hi, lo)
}

pub(crate) fn fptoui(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let x = s.value(op, 0)?;
    let to = result_type(op, 0)?.dtype;
    let from = b.ty(x).dtype;
    if !from.is_float() {
        return Err(Error::unsupported(format!(
            "a conversion of {from} to {to}"
        )));
    }
    let x = b.cast(x, DType::F32)?;
    // max propagates NaN, which the signed conversion turns into 0.
    let x = b.binary(BinaryOp::Max, x, 0.0)?;
    let r = match to {
        DType::I32 => {
            // Below 2^31 the signed conversion is the answer; from 2^31 on, the conversion
            // of x - 2^31 (exact in f32 there, saturating past 2^32) with the top bit set.
            let low = b.cast(x, DType::I32)?;
            let shifted = b.binary(BinaryOp::Sub, x, 2_147_483_648.0)?;
            let high = b.cast(shifted, DType::I32)?;
            let high = b.binary(BinaryOp::Xor, high, i32::MIN)?;
            let big = b.compare(CmpOp::Ge, x, 2_147_483_648.0)?;
            b.select(big, high, low)?
        }
        d @ (DType::I16 | DType::I8) => {
            let max = ((1i64 << d.bit_width()) - 1) as f64;
            let x = b.binary(BinaryOp::Min, x, max)?;
            let wide = b.cast(x, DType::I32)?;
            b.cast(wide, d)?
        }
        d => {
            return Err(Error::unsupported(format!(
                "a conversion of {from} to unsigned {d}"
            )));
        }
    };
    s.define(op, 0, r)
}

/// `x` with its sign bit flipped (`x ^ MIN` of its dtype): signed comparisons of such values
/// order the original bits as unsigned numbers. `what` names the op refused for other dtypes.
pub(crate) fn sign_flipped(b: &mut KernelBuilder, x: ValueId, what: &str) -> Result<ValueId> {
    let min = match b.ty(x).dtype {
        DType::I32 => i64::from(i32::MIN),
        DType::I16 => i64::from(i16::MIN),
        DType::I8 => i64::from(i8::MIN),
        other => return Err(Error::unsupported(format!("{what} of {other} values"))),
    };
    b.binary(BinaryOp::Xor, x, Arg::Lit(Literal::Int(min)))
}

/// `arith.maxui`: the larger of two integers read as unsigned.
pub(crate) fn maxui(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    extremum(s, b, op, CmpOp::Gt)
}

/// `arith.minui`: the smaller of two integers read as unsigned.
pub(crate) fn minui(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    extremum(s, b, op, CmpOp::Lt)
}

/// The operand `pick` prefers: `x` where `x pick y` in the unsigned order, else `y`.
fn extremum(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    pick: CmpOp,
) -> Result<()> {
    let (x, y) = (s.value(op, 0)?, s.value(op, 1)?);
    let what = "an unsigned maximum or minimum";
    let (fx, fy) = (sign_flipped(b, x, what)?, sign_flipped(b, y, what)?);
    let first = b.compare(pick, fx, fy)?;
    let r = b.select(first, x, y)?;
    s.define(op, 0, r)
}

/// `arith.extui`: zero extension (uint8/uint16 widened, `astype` of an unsigned int to a
/// wider int): the IR's widening cast, which extends the sign, with the bits above the
/// source's width cleared.
pub(crate) fn extui(
    s: &mut Scope,
    b: &mut KernelBuilder,
    op: &OperationRef<'_, '_>,
    _: &Table,
) -> Result<()> {
    let x = s.value(op, 0)?;
    let (from, to) = (b.ty(x).dtype, result_type(op, 0)?.dtype);
    let wide = b.cast(x, to)?;
    let r = match from {
        DType::I8 | DType::I16 => {
            let mask = (1i64 << from.bit_width()) - 1;
            b.binary(BinaryOp::And, wide, mask)?
        }
        // A bool widens to 0 or 1.
        _ => wide,
    };
    s.define(op, 0, r)
}
