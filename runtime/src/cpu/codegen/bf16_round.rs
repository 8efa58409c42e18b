//! Rounding f32 to bf16 with AVX-512 BF16's `vcvtneps2bf16`, exactly.
//!
//! The instruction rounds to nearest, ties to even, and quietens NaNs as the IR's semantics
//! say, in one instruction where the integer sequence takes eight (plus a narrowing store),
//! but it flushes subnormal inputs to zero (`0x0001_2345` → `0x0000`; a bf16 has the same
//! exponent range as an f32, so its subnormals are where they differ). Each rounding is a call
//! of [`SCALAR`], an integer rounding correct for every input, whose vector variants (`N4`,
//! `N8`, `N16`, named to LLVM's loop vectoriser by the call's `vector-function-abi-variant`)
//! convert the whole vector with the instruction unless `vfpclassps` finds a subnormal lane,
//! and then take the integer path lane by lane (a branch that is never taken on the usual
//! data, so a vector costs the conversion, the class test and the branch). The helpers stay
//! out of line (and alive) through `default<O3>`, so the vectoriser sees the calls; then
//! [`finish`](super::finish) inlines them (see `kept`).

use super::{Emitter, Result, kept};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::{BasicValue, FloatValue, FunctionValue, IntValue, ValueKind, VectorValue};
use inkwell::{FloatPredicate, IntPredicate};

/// The scalar rounding: `float` → the bf16's bits (`i16`).
const SCALAR: &str = "tpukit.round_bf16";

/// The vector widths given a variant, with the `vfpclassps` intrinsic of each.
const VARIANTS: [(u32, &str); 3] = [
    (4, "llvm.x86.avx512.fpclass.ps.128"),
    (8, "llvm.x86.avx512.fpclass.ps.256"),
    (16, "llvm.x86.avx512.fpclass.ps.512"),
];

/// `vfpclassps`'s class bit for subnormals.
const FPCLASS_SUBNORMAL: u64 = 0x20;

impl<'ctx> Emitter<'ctx, '_> {
    /// The bits of `x` rounded to bf16 (ties to even, NaN quietened) through [`SCALAR`].
    pub(super) fn round_bf16_converted(&self, x: FloatValue<'ctx>) -> Result<IntValue<'ctx>> {
        let f = self.bf16_rounding()?;
        let widths = VARIANTS.map(|(n, _)| n);
        Ok(kept::call_with_variants(&self.b, f, x.into(), &widths)?.into_int_value())
    }

    /// [`SCALAR`] and its vector variants, defined on first use.
    fn bf16_rounding(&self) -> Result<FunctionValue<'ctx>> {
        if let Some(f) = self.module.get_function(SCALAR) {
            return Ok(f);
        }
        let (ctx, m) = (self.ctx, &self.module);
        let (f32t, i16t) = (ctx.f32_type(), ctx.i16_type());
        let scalar = kept::helper(ctx, m, SCALAR, i16t.fn_type(&[f32t.into()], false));
        let (b, x) = kept::entry(scalar);
        let x = x.into_float_value();
        let bits = integer_rounding(ctx, &b, x)?;
        b.build_return(Some(&bits))?;
        for (n, fpclass) in VARIANTS {
            vector_variant(ctx, m, scalar, n, fpclass)?;
        }
        kept::keep(m);
        Ok(scalar)
    }
}

/// The bits of `x` rounded to bf16 with integer arithmetic, correct for every input:
/// `(bits + 0x7fff + lsb) >> 16` rounds to nearest, ties to even, subnormals included (as
/// integers, f32 bit patterns order like their magnitudes); a NaN keeps its payload's high
/// bits with the quiet bit set (the addition could carry it into an infinity).
fn integer_rounding<'ctx>(
    ctx: &'ctx Context,
    b: &Builder<'ctx>,
    x: FloatValue<'ctx>,
) -> Result<IntValue<'ctx>> {
    let i32t = ctx.i32_type();
    let c = |v: u32| i32t.const_int(v as u64, false);
    let bits = b.build_bit_cast(x, i32t, "bits")?.into_int_value();
    let lsb = b.build_and(b.build_right_shift(bits, c(16), false, "hi")?, c(1), "lsb")?;
    let bias = b.build_int_add(lsb, c(0x7fff), "bias")?;
    let rounded = b.build_int_add(bits, bias, "rounded")?;
    let quiet = b.build_or(bits, c(0x0040_0000), "quiet")?;
    let nan = b.build_float_compare(FloatPredicate::UNO, x, x, "isnan")?;
    let pick = b
        .build_select(nan, quiet, rounded, "pick")?
        .into_int_value();
    let high = b.build_right_shift(pick, c(16), false, "high")?;
    Ok(b.build_int_truncate(high, ctx.i16_type(), "bf16")?)
}

/// The `n`-lane variant of `scalar`: `vcvtneps2bf16` of the vector (LLVM's `fptrunc` to
/// bfloat on this target) unless some lane is subnormal, else `scalar` on each lane.
fn vector_variant<'ctx>(
    ctx: &'ctx Context,
    m: &Module<'ctx>,
    scalar: FunctionValue<'ctx>,
    n: u32,
    fpclass: &str,
) -> Result<FunctionValue<'ctx>> {
    let (f32v, i16v) = (ctx.f32_type().vec_type(n), ctx.i16_type().vec_type(n));
    let f = kept::helper(
        ctx,
        m,
        &kept::variant_name(SCALAR, n),
        i16v.fn_type(&[f32v.into()], false),
    );
    let class = m.get_function(fpclass).unwrap_or_else(|| {
        let t = ctx.bool_type().vec_type(n);
        m.add_function(
            fpclass,
            t.fn_type(&[f32v.into(), ctx.i32_type().into()], false),
            None,
        )
    });
    let b = ctx.create_builder();
    let entry = ctx.append_basic_block(f, "entry");
    let (fast, slow) = (
        ctx.append_basic_block(f, "fast"),
        ctx.append_basic_block(f, "slow"),
    );
    b.position_at_end(entry);
    let x = f
        .get_nth_param(0)
        .expect("one parameter")
        .into_vector_value();
    let flags = b.build_call(
        class,
        &[
            x.into(),
            ctx.i32_type().const_int(FPCLASS_SUBNORMAL, false).into(),
        ],
        "subnormal",
    )?;
    let flags = match flags.try_as_basic_value() {
        ValueKind::Basic(v) => v,
        _ => return Err(super::CodegenError::internal("fpclass returns no value")),
    };
    let mask_type = std::num::NonZeroU32::new(n)
        .and_then(|w| ctx.custom_width_int_type(w).ok())
        .ok_or_else(|| super::CodegenError::internal("no {n}-bit integer type"))?;
    let mask = b.build_bit_cast(flags, mask_type, "mask")?.into_int_value();
    let any = b.build_int_compare(IntPredicate::NE, mask, mask.get_type().const_zero(), "any")?;
    let branch = b.build_conditional_branch(any, slow, fast)?;
    // Subnormals are rare: the vector path is the likely one.
    let weights = ctx.metadata_node(&[
        ctx.metadata_string("branch_weights").into(),
        ctx.i32_type().const_int(1, false).into(),
        ctx.i32_type().const_int(1 << 20, false).into(),
    ]);
    branch
        .set_metadata(weights, ctx.get_kind_id("prof"))
        .map_err(|e| super::CodegenError::internal(format!("branch weights: {e}")))?;

    b.position_at_end(fast);
    let narrow = b.build_float_trunc(x, ctx.bf16_type().vec_type(n), "cvt")?;
    let bits = b.build_bit_cast(narrow, i16v, "bits")?;
    b.build_return(Some(&bits))?;

    b.position_at_end(slow);
    let mut out: VectorValue<'ctx> = i16v.get_undef();
    for lane in 0..n as u64 {
        let i = ctx.i32_type().const_int(lane, false);
        let v = b.build_extract_element(x, i, "lane")?;
        let r = b.build_call(scalar, &[v.into()], "lane.bf16")?;
        let r = match r.try_as_basic_value() {
            ValueKind::Basic(v) => v,
            _ => {
                return Err(super::CodegenError::internal(
                    "bf16 rounding returns no value",
                ));
            }
        };
        out = b.build_insert_element(out, r.as_basic_value_enum(), i, "v")?;
    }
    b.build_return(Some(&out))?;
    Ok(f)
}
