//! Constants, elementwise arithmetic, comparisons, `select` and casts: `arith` and `math` ops
//! on scalars or vectors of the value's own dtype.
//!
//! bf16 and f16 values are operated on in their own type, as Pallas emits them: for the basic
//! IEEE ops (add, sub, mul, div, sqrt, comparisons, min/max) computing in f32 and rounding
//! once — the IR's semantics — is exactly the correctly rounded narrow result, because f32
//! carries more than twice the narrow precision plus two bits; Mosaic widens to f32 itself on
//! chips without a bf16 VPU.

use crate::{
    emit::{Emitter, Val},
    lowering::FuncLowering,
    types,
};
use melior::ir::Attribute;
use tpukit_dsl::{BinaryOp, CmpOp, DType, Literal, Op, OpKind, Result, Type, UnaryOp};

/// The `fastmath` attribute every float `arith`/`math` op carries in Pallas output.
fn no_fastmath<'c>(em: &Emitter<'c>) -> Result<(&'static str, Attribute<'c>)> {
    Ok(("fastmath", em.attr("#arith.fastmath<none>")?))
}

/// `value` of `ty`'s dtype, splat to `ty`'s shape (a scalar constant for a scalar type).
pub fn splat<'c>(em: &Emitter<'c>, value: Literal, ty: &Type) -> Result<Val<'c>> {
    let lit = types::literal(value, ty.dtype);
    let text = types::value(ty);
    if ty.is_scalar() {
        em.constant(&lit, &text)
    } else {
        em.constant(&format!("dense<{lit}>"), &text)
    }
}

pub fn constant<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::Const { value } = op.kind else {
        unreachable!()
    };
    Ok(vec![splat(em, value, lw.ty(op.results[0]))?])
}

/// A float op `name` on `operands` with a result like the first operand.
fn float_op<'c>(em: &Emitter<'c>, name: &str, operands: &[Val<'c>], ty: &Type) -> Result<Val<'c>> {
    em.op1(
        name,
        operands,
        em.ty(&types::value(ty))?,
        &[no_fastmath(em)?],
    )
}

fn int_op<'c>(em: &Emitter<'c>, name: &str, operands: &[Val<'c>], ty: &Type) -> Result<Val<'c>> {
    em.op1(name, operands, em.ty(&types::value(ty))?, &[])
}

/// The dtype Mosaic computes an op on `dtype` in, when it is not `dtype` itself: TPU vector
/// units have no 8-bit integer arithmetic (libtpu: "Only vector<i16> and vector<i32> are
/// supported"), so i8 widens to i32 and the result wraps back; i16 has vector arithmetic,
/// but `arith.divsi`/`remsi`/`maxsi`/`minsi` on i16 vectors do not legalize (v5e, v6e), so
/// those compute in i32, which holds their results exactly; narrow float remainders
/// (`arith.remf` does not legalize on bf16) compute in f32, which holds them exactly.
/// `binary` is the binary op computed (`None`: a unary op or a comparison).
fn widened(dtype: DType, binary: Option<BinaryOp>) -> Option<DType> {
    use BinaryOp::{Div, Max, Min, Rem};
    match (dtype, binary) {
        (DType::I8, _) => Some(DType::I32),
        (DType::I16, Some(Div | Rem | Max | Min)) => Some(DType::I32),
        (DType::BF16 | DType::F16, Some(Rem)) => Some(DType::F32),
        _ => None,
    }
}

/// `f` on `operands` (of IR type `ty`) computed in `wide` where that is some ([`widened`]),
/// converted back to `out`'s dtype (`None`: the result of `f` as it is, e.g. a comparison's
/// bool); where it is none, `f` on `operands` as they are.
fn in_wider<'c>(
    em: &Emitter<'c>,
    operands: &[Val<'c>],
    ty: &Type,
    wide: Option<DType>,
    out: Option<DType>,
    f: impl FnOnce(&[Val<'c>], &Type) -> Result<Val<'c>>,
) -> Result<Val<'c>> {
    let Some(wide) = wide else {
        return f(operands, ty);
    };
    let wide_ty = ty.with_dtype(wide);
    let widened = operands
        .iter()
        .map(|&v| convert(em, v, ty, wide))
        .collect::<Result<Vec<_>>>()?;
    let r = f(&widened, &wide_ty)?;
    match out {
        Some(d) => convert(em, r, &wide_ty, d),
        None => Ok(r),
    }
}

pub fn unary<'c>(lw: &mut FuncLowering<'c, '_>, em: &Emitter<'c>, op: &Op) -> Result<Vec<Val<'c>>> {
    let OpKind::Unary { op: u, x } = op.kind else {
        unreachable!()
    };
    let (ty, v) = (lw.ty(x), lw.value(x));
    let wide = widened(ty.dtype, None);
    let out = in_wider(em, &[v], ty, wide, Some(ty.dtype), |v, t| {
        unary_value(em, u, v[0], t)
    })?;
    Ok(vec![out])
}

/// `u` of `v`, a value of type `ty` Mosaic computes in.
fn unary_value<'c>(em: &Emitter<'c>, u: UnaryOp, v: Val<'c>, ty: &Type) -> Result<Val<'c>> {
    let out = if ty.dtype.is_float() {
        let math = |name: &str| float_op(em, name, &[v], ty);
        match u {
            UnaryOp::Neg => math("arith.negf")?,
            UnaryOp::Abs => math("math.absf")?,
            UnaryOp::Exp => math("math.exp")?,
            UnaryOp::Exp2 => math("math.exp2")?,
            UnaryOp::Log => math("math.log")?,
            UnaryOp::Log1p => math("math.log1p")?,
            UnaryOp::Sqrt => math("math.sqrt")?,
            UnaryOp::Rsqrt => math("math.rsqrt")?,
            UnaryOp::Tanh => math("math.tanh")?,
            UnaryOp::Erf => math("math.erf")?,
            UnaryOp::Floor => math("math.floor")?,
            UnaryOp::Ceil => math("math.ceil")?,
            UnaryOp::RoundEven => math("math.roundeven")?,
            UnaryOp::Round => math("math.round")?,
            UnaryOp::Sin => math("math.sin")?,
            UnaryOp::Cos => math("math.cos")?,
            // `jax.nn.sigmoid` lowers to `1 / (1 + exp(-x))` in arith/math ops.
            UnaryOp::Logistic => {
                let neg = math("arith.negf")?;
                let e = float_op(em, "math.exp", &[neg], ty)?;
                let one = splat(em, Literal::Float(1.0), ty)?;
                let den = float_op(em, "arith.addf", &[one, e], ty)?;
                float_op(em, "arith.divf", &[one, den], ty)?
            }
            UnaryOp::Not => unreachable!("the verifier rejects `not` on floats"),
        }
    } else {
        match u {
            UnaryOp::Neg => {
                let zero = splat(em, Literal::Int(0), ty)?;
                int_op(em, "arith.subi", &[zero, v], ty)?
            }
            UnaryOp::Abs => int_op(em, "math.absi", &[v], ty)?,
            UnaryOp::Not => {
                let ones = splat(em, all_ones(ty.dtype), ty)?;
                int_op(em, "arith.xori", &[v, ones], ty)?
            }
            tpukit_dsl::float_unary_ops!() => {
                unreachable!("the verifier rejects `{}` on integers", u.name())
            }
        }
    };
    Ok(out)
}

/// The value with every bit set: -1, or `true`.
fn all_ones(dtype: DType) -> Literal {
    if dtype == DType::Bool {
        Literal::Bool(true)
    } else {
        Literal::Int(-1)
    }
}

pub fn binary<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::Binary { op: b, lhs, rhs } = op.kind else {
        unreachable!()
    };
    let (ty, x, y) = (lw.ty(lhs), lw.value(lhs), lw.value(rhs));
    if matches!(b, BinaryOp::Shl | BinaryOp::ShrA | BinaryOp::ShrL) {
        return Ok(vec![shift(em, b, x, y, ty)?]);
    }
    if matches!(b, BinaryOp::DivU | BinaryOp::RemU) {
        return Ok(vec![unsigned_division(em, b == BinaryOp::RemU, x, y, ty)?]);
    }
    let wide = widened(ty.dtype, Some(b));
    let out = in_wider(em, &[x, y], ty, wide, Some(ty.dtype), |v, t| {
        binary_value(em, b, v[0], v[1], t)
    })?;
    Ok(vec![out])
}

/// `b` of `x` and `y`, values of type `ty` Mosaic computes in.
fn binary_value<'c>(
    em: &Emitter<'c>,
    b: BinaryOp,
    x: Val<'c>,
    y: Val<'c>,
    ty: &Type,
) -> Result<Val<'c>> {
    let out = if ty.dtype.is_float() {
        let name = match b {
            BinaryOp::Add => "arith.addf",
            BinaryOp::Sub => "arith.subf",
            BinaryOp::Mul => "arith.mulf",
            BinaryOp::Div => "arith.divf",
            BinaryOp::Rem => "arith.remf",
            BinaryOp::Pow => "math.powf",
            BinaryOp::Max => "arith.maximumf",
            BinaryOp::Min => "arith.minimumf",
            BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Xor
            | BinaryOp::Shl
            | BinaryOp::ShrA
            | BinaryOp::ShrL
            | BinaryOp::DivU
            | BinaryOp::RemU => {
                unreachable!("the verifier rejects bitwise ops on floats")
            }
        };
        float_op(em, name, &[x, y], ty)?
    } else {
        let bool_ = ty.dtype == DType::Bool;
        let name = match b {
            BinaryOp::Add => "arith.addi",
            BinaryOp::Sub => "arith.subi",
            BinaryOp::Mul => "arith.muli",
            BinaryOp::Div => return int_division(em, x, y, ty, false),
            BinaryOp::Rem => return int_division(em, x, y, ty, true),
            BinaryOp::Max if bool_ => "arith.ori",
            BinaryOp::Min if bool_ => "arith.andi",
            BinaryOp::Max => "arith.maxsi",
            BinaryOp::Min => "arith.minsi",
            BinaryOp::And => "arith.andi",
            BinaryOp::Or => "arith.ori",
            BinaryOp::Xor => "arith.xori",
            BinaryOp::Shl | BinaryOp::ShrA | BinaryOp::ShrL => unreachable!("lowered by `shift`"),
            BinaryOp::DivU | BinaryOp::RemU => unreachable!("lowered by `unsigned_division`"),
            BinaryOp::Pow => unreachable!("the verifier rejects integer pow"),
        };
        int_op(em, name, &[x, y], ty)?
    };
    Ok(out)
}

/// A shift with the IR's defined out-of-range amounts (see `BinaryOp::Shl`), computed in
/// i32 (an i8's bits are zero-extended first for a logical shift): the amount, compared
/// unsigned with the width, is made safe (`arith.shli`/`shrsi`/`shrui` leave larger amounts
/// undefined) and the result chosen.
fn shift<'c>(em: &Emitter<'c>, b: BinaryOp, x: Val<'c>, y: Val<'c>, ty: &Type) -> Result<Val<'c>> {
    let bits = 8 * ty.dtype.size_bytes() as i64;
    let wide = ty.with_dtype(DType::I32);
    let (mut x, y) = (
        convert(em, x, ty, DType::I32)?,
        convert(em, y, ty, DType::I32)?,
    );
    let int = |v: i64| splat(em, Literal::Int(v), &wide);
    if b == BinaryOp::ShrL && bits < 32 {
        x = int_op(em, "arith.andi", &[x, int((1 << bits) - 1)?], &wide)?;
    }
    let out = cmpi(em, "uge", y, int(bits)?, &wide)?;
    let r = if b == BinaryOp::ShrA {
        let amount = select_values(em, out, int(bits - 1)?, y, &wide)?;
        int_op(em, "arith.shrsi", &[x, amount], &wide)?
    } else {
        let amount = select_values(em, out, int(0)?, y, &wide)?;
        let name = if b == BinaryOp::Shl {
            "arith.shli"
        } else {
            "arith.shrui"
        };
        let r = int_op(em, name, &[x, amount], &wide)?;
        select_values(em, out, int(0)?, r, &wide)?
    };
    convert(em, r, &wide, ty.dtype)
}

/// `div_u`/`rem_u` computed in i32 on the operands' bits zero-extended (`arith.divui`,
/// `remui`), a zero divisor replaced by 1 and the result chosen, as in [`int_division`].
fn unsigned_division<'c>(
    em: &Emitter<'c>,
    rem: bool,
    x: Val<'c>,
    y: Val<'c>,
    ty: &Type,
) -> Result<Val<'c>> {
    let bits = 8 * ty.dtype.size_bytes() as i64;
    let wide = ty.with_dtype(DType::I32);
    let int = |v: i64| splat(em, Literal::Int(v), &wide);
    let (mut x, mut y) = (
        convert(em, x, ty, DType::I32)?,
        convert(em, y, ty, DType::I32)?,
    );
    if bits < 32 {
        x = int_op(em, "arith.andi", &[x, int((1 << bits) - 1)?], &wide)?;
        y = int_op(em, "arith.andi", &[y, int((1 << bits) - 1)?], &wide)?;
    }
    let zero = int(0)?;
    let is_zero = cmpi(em, "eq", y, zero, &wide)?;
    let safe = select_values(em, is_zero, int(1)?, y, &wide)?;
    let (name, on_zero) = if rem {
        ("arith.remui", x)
    } else {
        ("arith.divui", zero)
    };
    let q = int_op(em, name, &[x, safe], &wide)?;
    let r = select_values(em, is_zero, on_zero, q, &wide)?;
    convert(em, r, &wide, ty.dtype)
}

/// Integer `x / y` or `x % y` with the IR's total semantics: dividing by zero gives 0 (a
/// remainder gives `x`), so the divisor is replaced by 1 where it is 0 and the result chosen.
fn int_division<'c>(
    em: &Emitter<'c>,
    x: Val<'c>,
    y: Val<'c>,
    ty: &Type,
    rem: bool,
) -> Result<Val<'c>> {
    let zero = splat(em, Literal::Int(0), ty)?;
    let one = splat(em, Literal::Int(1), ty)?;
    let is_zero = cmpi(em, "eq", y, zero, ty)?;
    let safe = select_values(em, is_zero, one, y, ty)?;
    let (name, on_zero) = if rem {
        ("arith.remsi", x)
    } else {
        ("arith.divsi", zero)
    };
    let q = int_op(em, name, &[x, safe], ty)?;
    select_values(em, is_zero, on_zero, q, ty)
}

/// `arith.cmpi` with predicate `pred` (`eq`, `slt`, …).
pub fn cmpi<'c>(
    em: &Emitter<'c>,
    pred: &str,
    x: Val<'c>,
    y: Val<'c>,
    ty: &Type,
) -> Result<Val<'c>> {
    let code = [
        "eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge",
    ]
    .iter()
    .position(|p| *p == pred)
    .expect("cmpi predicate");
    let result = em.ty(&types::value(&ty.with_dtype(DType::Bool)))?;
    em.op1(
        "arith.cmpi",
        &[x, y],
        result,
        &[("predicate", em.attr(&format!("{code} : i64"))?)],
    )
}

/// `arith.cmpf` with predicate `pred` (`oeq`, `une`, …).
pub fn cmpf<'c>(
    em: &Emitter<'c>,
    pred: &str,
    x: Val<'c>,
    y: Val<'c>,
    ty: &Type,
) -> Result<Val<'c>> {
    let code = [
        "false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult",
        "ule", "une", "uno", "true",
    ]
    .iter()
    .position(|p| *p == pred)
    .expect("cmpf predicate");
    let result = em.ty(&types::value(&ty.with_dtype(DType::Bool)))?;
    em.op1(
        "arith.cmpf",
        &[x, y],
        result,
        &[
            ("predicate", em.attr(&format!("{code} : i64"))?),
            no_fastmath(em)?,
        ],
    )
}

pub fn compare<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::Compare { op: c, lhs, rhs } = op.kind else {
        unreachable!()
    };
    let (ty, x, y) = (lw.ty(lhs), lw.value(lhs), lw.value(rhs));
    let wide = widened(ty.dtype, None);
    let out = in_wider(em, &[x, y], ty, wide, None, |v, t| {
        compare_values(em, c, v[0], v[1], t)
    })?;
    Ok(vec![out])
}

/// The bool `c(x, y)` of values of type `ty` Mosaic computes in.
fn compare_values<'c>(
    em: &Emitter<'c>,
    c: CmpOp,
    x: Val<'c>,
    y: Val<'c>,
    ty: &Type,
) -> Result<Val<'c>> {
    if ty.dtype.is_float() {
        // Ordered predicates are false on NaN; `ne` is true on NaN, the negation of `oeq`
        // (Mosaic has no `une`).
        let pred = match c {
            CmpOp::Eq => "oeq",
            CmpOp::Ne => return float_ne(em, x, y, ty),
            CmpOp::Lt => "olt",
            CmpOp::Le => "ole",
            CmpOp::Gt => "ogt",
            CmpOp::Ge => "oge",
        };
        return cmpf(em, pred, x, y, ty);
    }
    if ty.dtype == DType::Bool {
        // false < true, in boolean algebra: Mosaic cannot order i1 vectors.
        let not = |v| {
            int_op(
                em,
                "arith.xori",
                &[v, splat(em, Literal::Bool(true), ty)?],
                ty,
            )
        };
        return match c {
            CmpOp::Eq => cmpi(em, "eq", x, y, ty),
            CmpOp::Ne => cmpi(em, "ne", x, y, ty),
            CmpOp::Lt => int_op(em, "arith.andi", &[not(x)?, y], ty),
            CmpOp::Le => int_op(em, "arith.ori", &[not(x)?, y], ty),
            CmpOp::Gt => int_op(em, "arith.andi", &[x, not(y)?], ty),
            CmpOp::Ge => int_op(em, "arith.ori", &[x, not(y)?], ty),
        };
    }
    let pred = match c {
        CmpOp::Eq => "eq",
        CmpOp::Ne => "ne",
        CmpOp::Lt => "slt",
        CmpOp::Le => "sle",
        CmpOp::Gt => "sgt",
        CmpOp::Ge => "sge",
    };
    cmpi(em, pred, x, y, ty)
}

/// `x != y` on floats, true on NaN: `!(x == y)`.
fn float_ne<'c>(em: &Emitter<'c>, x: Val<'c>, y: Val<'c>, ty: &Type) -> Result<Val<'c>> {
    let eq = cmpf(em, "oeq", x, y, ty)?;
    let bools = ty.with_dtype(DType::Bool);
    let all = splat(em, Literal::Bool(true), &bools)?;
    int_op(em, "arith.xori", &[eq, all], &bools)
}

/// `arith.select cond, a, b` with a result of type `ty`.
pub fn select_values<'c>(
    em: &Emitter<'c>,
    cond: Val<'c>,
    a: Val<'c>,
    b: Val<'c>,
    ty: &Type,
) -> Result<Val<'c>> {
    em.op1(
        "arith.select",
        &[cond, a, b],
        em.ty(&types::value(ty))?,
        &[],
    )
}

pub fn select<'c>(
    lw: &mut FuncLowering<'c, '_>,
    em: &Emitter<'c>,
    op: &Op,
) -> Result<Vec<Val<'c>>> {
    let OpKind::Select {
        cond,
        on_true,
        on_false,
    } = op.kind
    else {
        unreachable!()
    };
    let ty = lw.ty(on_true);
    let out = select_values(
        em,
        lw.value(cond),
        lw.value(on_true),
        lw.value(on_false),
        ty,
    )?;
    Ok(vec![out])
}

pub fn cast<'c>(lw: &mut FuncLowering<'c, '_>, em: &Emitter<'c>, op: &Op) -> Result<Vec<Val<'c>>> {
    let OpKind::Cast { x } = op.kind else {
        unreachable!()
    };
    let to = lw.ty(op.results[0]).dtype;
    Ok(vec![convert(em, lw.value(x), lw.ty(x), to)?])
}

/// Converts `v` (of IR type `from`) to `to`: floats round to nearest even, float → int
/// truncates (Mosaic's conversion saturates), → bool compares with zero.
pub fn convert<'c>(em: &Emitter<'c>, v: Val<'c>, from: &Type, to: DType) -> Result<Val<'c>> {
    let (f, t) = (from.dtype, to);
    let out_ty = from.with_dtype(t);
    let out = em.ty(&types::value(&out_ty))?;
    let width = |d: DType| match d {
        DType::F32 | DType::I32 => 32,
        DType::BF16 | DType::F16 | DType::I16 => 16,
        DType::I8 => 8,
        DType::Bool => 1,
    };
    if f == t {
        return Ok(v);
    }
    if t == DType::Bool {
        let zero = splat(em, Literal::Int(0), from)?;
        return if f.is_float() {
            float_ne(em, v, zero, from)
        } else {
            cmpi(em, "ne", v, zero, from)
        };
    }
    if f == DType::Bool {
        let wide = em.op1(
            "arith.extui",
            &[v],
            em.ty(&types::value(&from.with_dtype(DType::I32)))?,
            &[],
        )?;
        return convert(em, wide, &from.with_dtype(DType::I32), t);
    }
    match (f.is_float(), t.is_float()) {
        (true, true) if width(f) == width(t) => {
            // bf16 <-> f16 goes through f32, which holds both exactly.
            let wide = convert(em, v, from, DType::F32)?;
            convert(em, wide, &from.with_dtype(DType::F32), t)
        }
        // No `fastmath` on extf/truncf: Pallas leaves that optional attribute out.
        (true, true) if width(f) < width(t) => em.op1("arith.extf", &[v], out, &[]),
        (true, true) => em.op1("arith.truncf", &[v], out, &[]),
        (false, false) if width(f) < width(t) => em.op1("arith.extsi", &[v], out, &[]),
        (false, false) => em.op1("arith.trunci", &[v], out, &[]),
        (false, true) => em.op1("arith.sitofp", &[v], out, &[]),
        (true, false) => em.op1("arith.fptosi", &[v], out, &[]),
    }
}
