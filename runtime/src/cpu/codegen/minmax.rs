//! `maximum` and `minimum` of f32 vectors with AVX-512 DQ's `vrangeps`.
//!
//! The IR's `max`/`min` (and the row maxima of softmax and the norms) are LLVM's
//! `llvm.maximum`/`llvm.minimum`: a NaN in either operand gives NaN, and −0 < +0. x86 has no
//! one instruction for that, and LLVM spends six on a vector (a sign test and two blends to
//! order the zeros, `vmaxps`, an unordered compare and a blend for the NaN). `vrangeps`
//! (imm `0b01_01`: the larger, sign by comparison) orders the zeros itself but, given one
//! quiet NaN, returns the other operand; one unordered compare of the two and a blend of a
//! NaN make it `maximum`: three instructions. After vectorisation (`finish`), every vector `llvm.maximum.vNf32` /
//! `llvm.minimum.vNf32` the module calls is replaced by such a function, inlined.

use super::Result;
use inkwell::FloatPredicate;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::module::{Linkage, Module};
use inkwell::types::VectorType;
use inkwell::values::{BasicMetadataValueEnum, FunctionValue, ValueKind};

/// `vrangeps`' immediate: bits 1:0 select min (00) or max (01), bits 3:2 the sign (01: by
/// comparison, so max(−0, +0) = +0 and min(−0, +0) = −0).
const RANGE_MAX: u64 = 0b0101;
const RANGE_MIN: u64 = 0b0100;

/// Replaces the module's vector f32 `llvm.maximum`/`llvm.minimum` by `alwaysinline`
/// `vrangeps` functions (see the module doc); whether it replaced any.
pub(super) fn use_range(m: &Module<'_>) -> Result<bool> {
    let mut any = false;
    for (op, imm) in [("maximum", RANGE_MAX), ("minimum", RANGE_MIN)] {
        for n in [4u32, 8, 16] {
            let Some(intrinsic) = m.get_function(&format!("llvm.{op}.v{n}f32")) else {
                continue;
            };
            let f = range_function(m, op, n, imm)?;
            intrinsic.replace_all_uses_with(f);
            any = true;
        }
    }
    Ok(any)
}

/// `select(isnan(a) || isnan(b), NaN, vrangeps(a, b, imm))` on `n` f32 lanes.
fn range_function<'ctx>(
    m: &Module<'ctx>,
    op: &str,
    n: u32,
    imm: u64,
) -> Result<FunctionValue<'ctx>> {
    let ctx = m.get_context();
    let v = ctx.f32_type().vec_type(n);
    let f = m.add_function(
        &format!("tpukit.{op}.v{n}"),
        v.fn_type(&[v.into(), v.into()], false),
        Some(Linkage::Internal),
    );
    for attr in ["alwaysinline", "nounwind", "willreturn"] {
        let kind = Attribute::get_named_enum_kind_id(attr);
        f.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(kind, 0));
    }
    let (i32t, name) = (
        ctx.i32_type(),
        format!("llvm.x86.avx512.mask.range.ps.{}", 32 * n),
    );
    let mask = if n == 16 {
        ctx.i16_type()
    } else {
        ctx.i8_type()
    };
    let range = m.get_function(&name).unwrap_or_else(|| {
        let mut params = vec![v.into(), v.into(), i32t.into(), v.into(), mask.into()];
        if n == 16 {
            params.push(i32t.into());
        }
        m.add_function(&name, v.fn_type(&params, false), None)
    });
    let b = ctx.create_builder();
    b.position_at_end(ctx.append_basic_block(f, "entry"));
    let (x, y) = (
        f.get_nth_param(0)
            .expect("two parameters")
            .into_vector_value(),
        f.get_nth_param(1)
            .expect("two parameters")
            .into_vector_value(),
    );
    let mut args: Vec<BasicMetadataValueEnum> = vec![
        x.into(),
        y.into(),
        i32t.const_int(imm, false).into(),
        x.into(),
        mask.const_all_ones().into(),
    ];
    if n == 16 {
        // The current rounding direction (no embedded rounding).
        args.push(i32t.const_int(4, false).into());
    }
    let r = match b.build_call(range, &args, "range")?.try_as_basic_value() {
        ValueKind::Basic(r) => r.into_vector_value(),
        _ => return Err(super::CodegenError::internal("vrangeps returns no value")),
    };
    let nan = b.build_float_compare(FloatPredicate::UNO, x, y, "nan")?;
    let quiet = ctx.f32_type().const_float(f64::NAN);
    let quiet = VectorType::const_vector(&vec![quiet; n as usize]);
    let out = b.build_select(nan, quiet, r, "minmax")?;
    b.build_return(Some(&out))?;
    Ok(f)
}
