//! One element's arithmetic, on values in registers.
//!
//! Register representation: every float dtype is held as an `f32` already rounded to its
//! dtype (bf16 and f16 compute in f32 and round after each op, as the IR's semantics say);
//! `i32`, `i16` and `i8` as themselves; `bool` as `i1`.

use super::{Emitter, Result};
use inkwell::intrinsics::Intrinsic;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use tpukit_dsl::{BinaryOp, CmpOp, DType, UnaryOp};

impl<'ctx> Emitter<'ctx, '_> {
    /// The register type of `dtype`.
    pub fn reg_type(&self, dtype: DType) -> BasicTypeEnum<'ctx> {
        match dtype {
            DType::F32 | DType::BF16 | DType::F16 => self.ctx.f32_type().into(),
            DType::I32 => self.ctx.i32_type().into(),
            DType::I16 => self.ctx.i16_type().into(),
            DType::I8 => self.ctx.i8_type().into(),
            DType::Bool => self.ctx.bool_type().into(),
        }
    }

    /// A constant of `dtype` with value `x` (already a value of the dtype).
    pub fn constant(&self, dtype: DType, x: f64) -> BasicValueEnum<'ctx> {
        match dtype {
            DType::F32 | DType::BF16 | DType::F16 => self.ctx.f32_type().const_float(x).into(),
            DType::I32 => self.ctx.i32_type().const_int(x as i64 as u64, true).into(),
            DType::I16 => self.ctx.i16_type().const_int(x as i64 as u64, true).into(),
            DType::I8 => self.ctx.i8_type().const_int(x as i64 as u64, true).into(),
            DType::Bool => self
                .ctx
                .bool_type()
                .const_int((x != 0.0) as u64, false)
                .into(),
        }
    }

    pub fn f32c(&self, x: f32) -> FloatValue<'ctx> {
        self.ctx.f32_type().const_float(x as f64)
    }

    pub fn i32c(&self, x: i32) -> IntValue<'ctx> {
        self.ctx.i32_type().const_int(x as i64 as u64, true)
    }

    /// Calls an LLVM intrinsic overloaded on `ty`.
    pub fn intrinsic(
        &self,
        name: &str,
        ty: BasicTypeEnum<'ctx>,
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let decl = Intrinsic::find(name)
            .and_then(|i| i.get_declaration(&self.module, &[ty]))
            .ok_or_else(|| format!("internal error: LLVM has no intrinsic `{name}`"))?;
        let args: Vec<_> = args.iter().map(|a| (*a).into()).collect();
        self.call_value(decl, &args)
    }

    /// Calls the C library's single-precision `name(x)` (`erff`, `log1pf`, …).
    pub fn libm(&self, name: &str, args: &[FloatValue<'ctx>]) -> Result<FloatValue<'ctx>> {
        let f32t = self.ctx.f32_type();
        let decl = self.module.get_function(name).unwrap_or_else(|| {
            let params = vec![f32t.into(); args.len()];
            self.module
                .add_function(name, f32t.fn_type(&params, false), None)
        });
        let args: Vec<_> = args.iter().map(|a| (*a).into()).collect();
        Ok(self.call_value(decl, &args)?.into_float_value())
    }

    /// `a·b + c` in one rounding (`llvm.fma` on f32).
    pub fn fma(
        &self,
        a: FloatValue<'ctx>,
        b: FloatValue<'ctx>,
        c: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>> {
        let f32t = self.ctx.f32_type().into();
        Ok(self
            .intrinsic("llvm.fma", f32t, &[a.into(), b.into(), c.into()])?
            .into_float_value())
    }

    /// Rounds an f32 register to `dtype`'s precision (a no-op for f32 and non-floats).
    pub fn round(&self, dtype: DType, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>> {
        Ok(match dtype {
            DType::BF16 => self.round_bf16(x)?,
            DType::F16 => {
                let h = self.b.build_float_trunc(x, self.ctx.f16_type(), "f16")?;
                self.b.build_float_ext(h, self.ctx.f32_type(), "f16.f32")?
            }
            _ => x,
        })
    }

    /// The bits of `x` rounded to bf16 (ties to even, NaN kept quiet), as an f32 whose low
    /// 16 bits are zero. Integer arithmetic only: LLVM's `fptrunc` to bfloat needs a runtime
    /// helper (`__truncsfbf2`) that this platform's libgcc lacks.
    /// With [`CodegenOptions::bf16_convert`](super::CodegenOptions), through AVX-512 BF16's
    /// conversion (see `bf16_round`).
    pub fn round_bf16(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>> {
        let i32t = self.ctx.i32_type();
        if self.options.bf16_convert {
            let bits = self.round_bf16_converted(x)?;
            let wide = self.b.build_int_z_extend(bits, i32t, "bf16.w")?;
            let high = self.b.build_left_shift(wide, self.i32c(16), "bf16.hi")?;
            return Ok(self
                .b
                .build_bit_cast(high, self.ctx.f32_type(), "bf16.f32")?
                .into_float_value());
        }
        let bits = self.b.build_bit_cast(x, i32t, "bits")?.into_int_value();
        let lsb = self.b.build_and(
            self.b.build_right_shift(bits, self.i32c(16), false, "hi")?,
            self.i32c(1),
            "lsb",
        )?;
        let bias = self.b.build_int_add(lsb, self.i32c(0x7fff), "bias")?;
        let rounded = self.b.build_int_add(bits, bias, "rounded")?;
        let quiet = self.b.build_or(bits, self.i32c(0x0040_0000), "quiet")?;
        let nan = self
            .b
            .build_float_compare(FloatPredicate::UNO, x, x, "isnan")?;
        let pick = self
            .b
            .build_select(nan, quiet, rounded, "pick")?
            .into_int_value();
        let masked = self
            .b
            .build_and(pick, self.i32c(0xffff_0000u32 as i32), "bf16")?;
        Ok(self
            .b
            .build_bit_cast(masked, self.ctx.f32_type(), "bf16.f32")?
            .into_float_value())
    }

    pub fn unary(
        &self,
        op: UnaryOp,
        dtype: DType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        if !dtype.is_float() {
            let x = x.into_int_value();
            let t = x.get_type();
            return Ok(match op {
                UnaryOp::Neg => self.b.build_int_neg(x, "neg")?.into(),
                UnaryOp::Abs => self.intrinsic(
                    "llvm.abs",
                    t.into(),
                    &[x.into(), self.ctx.bool_type().const_zero().into()],
                )?,
                UnaryOp::Not => self.b.build_not(x, "not")?.into(),
                tpukit_dsl::float_unary_ops!() => {
                    return Err(format!("`{}` on {dtype}", op.name()).into());
                }
            });
        }
        let f = x.into_float_value();
        let f32t = self.ctx.f32_type().into();
        let intr = |name: &str| -> Result<FloatValue<'ctx>> {
            Ok(self.intrinsic(name, f32t, &[f.into()])?.into_float_value())
        };
        let one = self.f32c(1.0);
        let r = match op {
            UnaryOp::Neg => self.b.build_float_neg(f, "neg")?,
            UnaryOp::Abs => intr("llvm.fabs")?,
            UnaryOp::Exp => self.exp(f)?,
            UnaryOp::Exp2 => intr("llvm.exp2")?,
            UnaryOp::Log => self.log(f)?,
            UnaryOp::Log1p => self.libm("log1pf", &[f])?,
            UnaryOp::Sqrt => intr("llvm.sqrt")?,
            UnaryOp::Rsqrt => self.b.build_float_div(one, intr("llvm.sqrt")?, "rsqrt")?,
            UnaryOp::Tanh => self.tanh(f)?,
            UnaryOp::Erf => self.erf(f)?,
            UnaryOp::Logistic => {
                let e = self.exp(self.b.build_float_neg(f, "negx")?)?;
                let d = self.b.build_float_add(one, e, "1+e")?;
                self.b.build_float_div(one, d, "logistic")?
            }
            UnaryOp::Floor => intr("llvm.floor")?,
            UnaryOp::Ceil => intr("llvm.ceil")?,
            UnaryOp::RoundEven => intr("llvm.roundeven")?,
            UnaryOp::Round => intr("llvm.round")?,
            UnaryOp::Sin => intr("llvm.sin")?,
            UnaryOp::Cos => intr("llvm.cos")?,
            UnaryOp::Not => return Err(format!("`not` on {dtype}").into()),
        };
        Ok(self.round(dtype, r)?.into())
    }

    /// `c[0]·t^(n-1) + … + c[n-1]`, by Horner's rule with fused multiply-adds.
    fn horner(&self, t: FloatValue<'ctx>, c: &[f32]) -> Result<FloatValue<'ctx>> {
        let mut p = self.f32c(c[0]);
        for &ci in &c[1..] {
            p = self.fma(p, t, self.f32c(ci))?;
        }
        Ok(p)
    }

    fn fabs(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>> {
        let f32t = self.ctx.f32_type().into();
        Ok(self
            .intrinsic("llvm.fabs", f32t, &[x.into()])?
            .into_float_value())
    }

    /// `e^x` in f32, inline so loops over it vectorise: Cody–Waite range reduction to
    /// `x = n·ln2 + r`, a degree-6 polynomial for `e^r`, and `2^n` applied in two halves so
    /// results down to the smallest subnormal are exact in exponent (with AVX-512, in one
    /// `llvm.ldexp`, which is `vscalefps`: fewer instructions). Max error ≈ 2 ULP.
    pub fn exp(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>> {
        let b = &self.b;
        let f32t = self.ctx.f32_type();
        let lo = self.intrinsic(
            "llvm.maxnum",
            f32t.into(),
            &[x.into(), self.f32c(-104.0).into()],
        )?;
        let xc = self
            .intrinsic("llvm.minnum", f32t.into(), &[lo, self.f32c(89.0).into()])?
            .into_float_value();
        let t = b.build_float_mul(xc, self.f32c(std::f32::consts::LOG2_E), "t")?;
        let n = self
            .intrinsic("llvm.roundeven", f32t.into(), &[t.into()])?
            .into_float_value();
        let r = self.fma(b.build_float_neg(n, "-n")?, self.f32c(0.693_359_4), xc)?;
        let r = self.fma(b.build_float_neg(n, "-n")?, self.f32c(-2.121_944_4e-4), r)?;
        let p = self.horner(
            r,
            &[
                1.987_569_1e-4,
                1.398_199_9e-3,
                8.333_452e-3,
                4.166_579_6e-2,
                0.166_666_65,
                0.5,
            ],
        )?;
        let r2 = b.build_float_mul(r, r, "r2")?;
        let p = self.fma(p, r2, r)?;
        let p = b.build_float_add(p, self.f32c(1.0), "p")?;
        let i32t = self.ctx.i32_type();
        let ni = b.build_float_to_signed_int(n, i32t, "n")?;
        if self.options.vector_lanes == 16 {
            // AVX-512: `vscalefps` scales by 2^n in one rounding (subnormals included).
            let y = self.ldexp(p, ni)?;
            let nan = b.build_float_compare(FloatPredicate::UNO, x, x, "isnan")?;
            return Ok(b.build_select(nan, x, y, "exp")?.into_float_value());
        }
        let n1 = b.build_right_shift(ni, self.i32c(1), true, "n1")?;
        let n2 = b.build_int_sub(ni, n1, "n2")?;
        let pow2 = |k: IntValue<'ctx>| -> Result<FloatValue<'ctx>> {
            let biased = b.build_int_add(k, self.i32c(127), "biased")?;
            let bits = b.build_left_shift(biased, self.i32c(23), "bits")?;
            Ok(b.build_bit_cast(bits, f32t, "pow2")?.into_float_value())
        };
        let y = b.build_float_mul(p, pow2(n1)?, "y1")?;
        let y = b.build_float_mul(y, pow2(n2)?, "y")?;
        let nan = b.build_float_compare(FloatPredicate::UNO, x, x, "isnan")?;
        Ok(b.build_select(nan, x, y, "exp")?.into_float_value())
    }

    /// `x·2^n` in one rounding (`llvm.ldexp`).
    fn ldexp(&self, x: FloatValue<'ctx>, n: IntValue<'ctx>) -> Result<FloatValue<'ctx>> {
        let types = [self.ctx.f32_type().into(), self.ctx.i32_type().into()];
        let decl = Intrinsic::find("llvm.ldexp")
            .and_then(|i| i.get_declaration(&self.module, &types))
            .ok_or("internal error: LLVM has no intrinsic `llvm.ldexp`")?;
        Ok(self
            .call_value(decl, &[x.into(), n.into()])?
            .into_float_value())
    }

    /// `ln x` in f32, inline so loops over it vectorise: `x = m·2^e` with `m` in
    /// `[√½, √2)`, a degree-9 polynomial for `ln m` (Cephes' `logf`), plus `e·ln 2` in two
    /// parts. Subnormals are scaled up first; 0 → -inf, +inf → +inf, negatives and NaN → NaN.
    /// Max error ≈ 1 ULP.
    pub fn log(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>> {
        let b = &self.b;
        let (f32t, i32t) = (self.ctx.f32_type(), self.ctx.i32_type());
        // Subnormals: scale by 2^23 (and take 23 off the exponent).
        let tiny =
            b.build_float_compare(FloatPredicate::OLT, x, self.f32c(f32::MIN_POSITIVE), "tiny")?;
        let scaled = b.build_float_mul(x, self.f32c(8_388_608.0), "scaled")?;
        let xs = b.build_select(tiny, scaled, x, "xs")?.into_float_value();
        let bias = b
            .build_select(tiny, self.i32c(126 + 23), self.i32c(126), "bias")?
            .into_int_value();
        let bits = b.build_bit_cast(xs, i32t, "bits")?.into_int_value();
        let exp = b.build_right_shift(bits, self.i32c(23), false, "exp")?;
        let exp = b.build_and(exp, self.i32c(0xff), "exp8")?;
        let e = b.build_int_sub(exp, bias, "e")?;
        let mbits = b.build_and(bits, self.i32c(0x007f_ffff), "mant")?;
        let mbits = b.build_or(mbits, self.i32c(0x3f00_0000), "m.bits")?;
        let m = b.build_bit_cast(mbits, f32t, "m")?.into_float_value();
        // m in [0.5, 1): below √½ use 2m and e - 1, so the argument is in [√½ - 1, √2 - 1).
        let low = b.build_float_compare(
            FloatPredicate::OLT,
            m,
            self.f32c(std::f32::consts::FRAC_1_SQRT_2),
            "low",
        )?;
        let e = b.build_int_sub(e, b.build_int_z_extend(low, i32t, "low.i")?, "e1")?;
        let m2 = b.build_float_add(m, m, "2m")?;
        let m = b.build_select(low, m2, m, "m1")?.into_float_value();
        let t = b.build_float_sub(m, self.f32c(1.0), "t")?;
        let z = b.build_float_mul(t, t, "z")?;
        let p = self.horner(
            t,
            &[
                7.037_683_6e-2,
                -1.151_461e-1,
                1.167_699_9e-1,
                -1.242_014_1e-1,
                1.424_932_3e-1,
                -1.666_805_8e-1,
                2.000_071_4e-1,
                -2.499_999_4e-1,
                3.333_333e-1,
            ],
        )?;
        let y = b.build_float_mul(b.build_float_mul(t, z, "tz")?, p, "y")?;
        let ef = b.build_signed_int_to_float(e, f32t, "ef")?;
        let y = self.fma(ef, self.f32c(-2.121_944_4e-4), y)?;
        let y = self.fma(z, self.f32c(-0.5), y)?;
        let r = b.build_float_add(t, y, "r")?;
        let r = self.fma(ef, self.f32c(0.693_359_4), r)?;
        // Special values: only finite positive x took the path above.
        let finite_pos = b.build_and(
            b.build_float_compare(FloatPredicate::OGT, x, self.f32c(0.0), "pos")?,
            b.build_float_compare(FloatPredicate::OLT, x, self.f32c(f32::INFINITY), "fin")?,
            "ok",
        )?;
        let zero = b.build_float_compare(FloatPredicate::OEQ, x, self.f32c(0.0), "zero")?;
        let inf = b.build_float_compare(FloatPredicate::OEQ, x, self.f32c(f32::INFINITY), "inf")?;
        let special = b.build_select(inf, self.f32c(f32::INFINITY), self.f32c(f32::NAN), "sp")?;
        let special = b.build_select(zero, self.f32c(f32::NEG_INFINITY).into(), special, "sp0")?;
        Ok(b.build_select(finite_pos, r.into(), special, "log")?
            .into_float_value())
    }

    /// `erf x` in f32, inline and branch-free so loops over it vectorise: on `a = min(|x|, C)`,
    /// `C = 3.84`, the rational `a·P(a²)/Q(a²)` (both of degree 5 in `a²`, all coefficients
    /// positive, so Horner's rule does not cancel), clamped to at most 1 and exactly 1 where
    /// `erf` rounds to 1 in f32 (|x| ≥ 3.919206), with the sign of `x`. A relative-error
    /// minimax fit of `erf(a)/a` (iteratively reweighted linearised least squares in f64),
    /// rounded to f32 with `P(0)/Q(0)` kept within 1e-13 of 2/√π (both scaled so the ratio is
    /// exact) and the rest nudged by a few ulps for the rounded fit (error 2.6e-8). Against
    /// libm's f64 `erf`, max error below 6 ulp (5.8, relative 3.5e-7, over 4.5M random and
    /// swept inputs: the four roundings of `P`, `Q`, the division and the product), as XLA's
    /// f32 `erf` (6.7 there); `tests/ops.rs` holds it to that, on CPUs without AVX-512 too
    /// (`rational_erf_on_the_portable_target`). ±inf → ±1, NaN → NaN, -0 → -0.
    /// About 20 vector instructions (ten of them FMAs and one division).
    /// With [`CodegenOptions::erf_table`](super::CodegenOptions), `erf_table`'s tables are
    /// used instead (in vector lanes and scalar code alike).
    pub fn erf(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>> {
        if self.options.erf_table {
            return self.erf_by_table(x);
        }
        self.erf_rational(x)
    }

    /// The rational `erf` [`erf`](Self::erf) describes, inline.
    pub(super) fn erf_rational(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>> {
        let b = &self.b;
        let f32t = self.ctx.f32_type();
        let ax = self.fabs(x)?;
        // `OGT` is false for NaN, which so stays NaN to the end.
        let clamp = self.f32c(3.84);
        let big = b.build_float_compare(FloatPredicate::OGT, ax, clamp, "big?")?;
        let a = b.build_select(big, clamp, ax, "a")?.into_float_value();
        let s = b.build_float_mul(a, a, "s")?;
        let p = self.horner(
            s,
            &[
                2.116_305_3e-6,
                2.857_667_6e-4,
                3.661_038_1e-3,
                5.243_373_7e-2,
                1.875_213_7e-1,
                1.128_145,
            ],
        )?;
        let q = self.horner(
            s,
            &[
                3.881_860_5e-5,
                1.143_086_4e-3,
                1.475_753_2e-2,
                1.129_746_66e-1,
                4.994_502e-1,
                9.997_924_6e-1,
            ],
        )?;
        let r = b.build_float_mul(a, b.build_float_div(p, q, "p/q")?, "r")?;
        // 1 from the least f32 whose `erf` rounds to 1 on (the fit gives 0.99999982 at the
        // clamp): so `gelu(x)` is `x` for large `x`. NaN compares false and stays NaN.
        let one = self.f32c(1.0);
        let saturated = b.build_float_compare(
            FloatPredicate::OGE,
            ax,
            self.f32c(f32::from_bits(super::erf_table::CLAMP_BITS)),
            "sat?",
        )?;
        let over = b.build_float_compare(FloatPredicate::OGT, r, one, "over?")?;
        let r = b.build_select(b.build_or(saturated, over, "one?")?, one, r, "r1")?;
        Ok(self
            .intrinsic("llvm.copysign", f32t.into(), &[r, x.into()])?
            .into_float_value())
    }

    /// `tanh x` in f32, inline: an odd polynomial below |x| = 0.625 (Cephes' `tanhf`), else
    /// `1 - 2/(e^{2|x|} + 1)` with the sign of `x` (saturating to ±1; NaN stays NaN).
    pub fn tanh(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>> {
        let b = &self.b;
        let f32t = self.ctx.f32_type();
        let ax = self.fabs(x)?;
        let z = b.build_float_mul(x, x, "z")?;
        let p = self.horner(
            z,
            &[
                -5.704_988_7e-3,
                2.063_908_8e-2,
                -5.373_971_6e-2,
                1.333_144_2e-1,
                -3.333_328e-1,
            ],
        )?;
        let small = self.fma(b.build_float_mul(p, z, "pz")?, x, x)?;
        let e = self.exp(b.build_float_add(ax, ax, "2x")?)?;
        let d = b.build_float_add(e, self.f32c(1.0), "e+1")?;
        let big = b.build_float_sub(
            self.f32c(1.0),
            b.build_float_div(self.f32c(2.0), d, "q")?,
            "big",
        )?;
        let big = self
            .intrinsic("llvm.copysign", f32t.into(), &[big.into(), x.into()])?
            .into_float_value();
        let is_small =
            b.build_float_compare(FloatPredicate::OLT, ax, self.f32c(0.625), "small?")?;
        let r = b
            .build_select(is_small, small, big, "tanh")?
            .into_float_value();
        let nan = b.build_float_compare(FloatPredicate::UEQ, x, self.f32c(0.0), "nan.0")?; // or ±0
        Ok(b.build_select(nan, x, r, "tanh.nan")?.into_float_value())
    }

    pub fn binary(
        &self,
        op: BinaryOp,
        dtype: DType,
        a: BasicValueEnum<'ctx>,
        c: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let b = &self.b;
        if dtype.is_float() {
            let (x, y) = (a.into_float_value(), c.into_float_value());
            let f32t = self.ctx.f32_type().into();
            let r = match op {
                BinaryOp::Add => b.build_float_add(x, y, "add")?,
                BinaryOp::Sub => b.build_float_sub(x, y, "sub")?,
                BinaryOp::Mul => b.build_float_mul(x, y, "mul")?,
                BinaryOp::Div => b.build_float_div(x, y, "div")?,
                BinaryOp::Rem => b.build_float_rem(x, y, "rem")?,
                BinaryOp::Pow => self
                    .intrinsic("llvm.pow", f32t, &[a, c])?
                    .into_float_value(),
                BinaryOp::Max => self
                    .intrinsic("llvm.maximum", f32t, &[a, c])?
                    .into_float_value(),
                BinaryOp::Min => self
                    .intrinsic("llvm.minimum", f32t, &[a, c])?
                    .into_float_value(),
                BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::Shl
                | BinaryOp::ShrA
                | BinaryOp::ShrL
                | BinaryOp::DivU
                | BinaryOp::RemU => {
                    return Err(format!("`{}` on {dtype}", op.name()).into());
                }
            };
            return Ok(self.round(dtype, r)?.into());
        }
        let (x, y) = (a.into_int_value(), c.into_int_value());
        let t = x.get_type();
        let zero = t.const_zero();
        Ok(match op {
            BinaryOp::Add => b.build_int_add(x, y, "add")?.into(),
            BinaryOp::Sub => b.build_int_sub(x, y, "sub")?.into(),
            BinaryOp::Mul => b.build_int_mul(x, y, "mul")?.into(),
            // Division by zero gives 0 and remainder by zero the dividend (the IR's rule: the
            // padding lanes of an edge block must not trap). `MIN / -1` wraps. LLVM's
            // `sdiv`/`srem` are undefined in both cases, so the divisor is made safe first.
            BinaryOp::Div | BinaryOp::Rem => {
                let minus1 = t.const_all_ones();
                let is0 = b.build_int_compare(IntPredicate::EQ, y, zero, "y0")?;
                let ism1 = b.build_int_compare(IntPredicate::EQ, y, minus1, "ym1")?;
                let odd = b.build_or(is0, ism1, "odd")?;
                let safe = b
                    .build_select(odd, t.const_int(1, false), y, "safe")?
                    .into_int_value();
                if op == BinaryOp::Div {
                    let q = b.build_int_signed_div(x, safe, "q")?;
                    let neg = b.build_int_neg(x, "negx")?;
                    let q = b.build_select(ism1, neg, q, "q1")?;
                    b.build_select(is0, zero, q.into_int_value(), "div")?
                } else {
                    let r = b.build_int_signed_rem(x, safe, "r")?;
                    let r = b.build_select(ism1, zero, r, "r1")?;
                    b.build_select(is0, x, r.into_int_value(), "rem")?
                }
            }
            BinaryOp::Max | BinaryOp::Min => {
                let unsigned = dtype == DType::Bool;
                let name = match (op == BinaryOp::Max, unsigned) {
                    (true, false) => "llvm.smax",
                    (false, false) => "llvm.smin",
                    (true, true) => "llvm.umax",
                    (false, true) => "llvm.umin",
                };
                self.intrinsic(name, t.into(), &[a, c])?
            }
            BinaryOp::And => b.build_and(x, y, "and")?.into(),
            BinaryOp::Or => b.build_or(x, y, "or")?.into(),
            BinaryOp::Xor => b.build_xor(x, y, "xor")?.into(),
            // LLVM shifts by at least the width are poison; the IR's are defined (see
            // `BinaryOp::Shl`): the amount, compared unsigned, is made safe and the result chosen.
            BinaryOp::Shl | BinaryOp::ShrA | BinaryOp::ShrL => {
                let bits = t.const_int(t.get_bit_width() as u64, false);
                let out = b.build_int_compare(IntPredicate::UGE, y, bits, "oob")?;
                let top = t.const_int(t.get_bit_width() as u64 - 1, false);
                if op == BinaryOp::ShrA {
                    let amount = b.build_select(out, top, y, "amt")?.into_int_value();
                    b.build_right_shift(x, amount, true, "shra")?.into()
                } else {
                    let amount = b.build_select(out, zero, y, "amt")?.into_int_value();
                    let r = if op == BinaryOp::Shl {
                        b.build_left_shift(x, amount, "shl")?
                    } else {
                        b.build_right_shift(x, amount, false, "shrl")?
                    };
                    b.build_select(out, zero, r, "shift")?
                }
            }
            // Unsigned: only a zero divisor needs care (0, or the dividend; see `DivU`).
            BinaryOp::DivU | BinaryOp::RemU => {
                let is0 = b.build_int_compare(IntPredicate::EQ, y, zero, "y0")?;
                let safe = b
                    .build_select(is0, t.const_int(1, false), y, "safe")?
                    .into_int_value();
                if op == BinaryOp::DivU {
                    let q = b.build_int_unsigned_div(x, safe, "q")?;
                    b.build_select(is0, zero, q, "divu")?
                } else {
                    let r = b.build_int_unsigned_rem(x, safe, "r")?;
                    b.build_select(is0, x, r, "remu")?
                }
            }
            BinaryOp::Pow => return Err(format!("`pow` on {dtype}").into()),
        })
    }

    pub fn compare(
        &self,
        op: CmpOp,
        dtype: DType,
        a: BasicValueEnum<'ctx>,
        c: BasicValueEnum<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        if dtype.is_float() {
            let p = match op {
                CmpOp::Eq => FloatPredicate::OEQ,
                CmpOp::Ne => FloatPredicate::UNE,
                CmpOp::Lt => FloatPredicate::OLT,
                CmpOp::Le => FloatPredicate::OLE,
                CmpOp::Gt => FloatPredicate::OGT,
                CmpOp::Ge => FloatPredicate::OGE,
            };
            return Ok(self.b.build_float_compare(
                p,
                a.into_float_value(),
                c.into_float_value(),
                "cmp",
            )?);
        }
        let unsigned = dtype == DType::Bool;
        let p = match (op, unsigned) {
            (CmpOp::Eq, _) => IntPredicate::EQ,
            (CmpOp::Ne, _) => IntPredicate::NE,
            (CmpOp::Lt, false) => IntPredicate::SLT,
            (CmpOp::Le, false) => IntPredicate::SLE,
            (CmpOp::Gt, false) => IntPredicate::SGT,
            (CmpOp::Ge, false) => IntPredicate::SGE,
            (CmpOp::Lt, true) => IntPredicate::ULT,
            (CmpOp::Le, true) => IntPredicate::ULE,
            (CmpOp::Gt, true) => IntPredicate::UGT,
            (CmpOp::Ge, true) => IntPredicate::UGE,
        };
        Ok(self
            .b
            .build_int_compare(p, a.into_int_value(), c.into_int_value(), "cmp")?)
    }

    pub fn cast(
        &self,
        from: DType,
        to: DType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let b = &self.b;
        Ok(match (from.is_float(), to) {
            (true, t) if t.is_float() => self.round(t, x.into_float_value())?.into(),
            (true, DType::Bool) => b
                .build_float_compare(
                    FloatPredicate::UNE,
                    x.into_float_value(),
                    self.f32c(0.0),
                    "f2b",
                )?
                .into(),
            (true, t) => {
                let it = self.reg_type(t);
                let name = "llvm.fptosi.sat";
                let decl = Intrinsic::find(name)
                    .and_then(|i| {
                        i.get_declaration(&self.module, &[it, self.ctx.f32_type().into()])
                    })
                    .ok_or("LLVM has no llvm.fptosi.sat")?;
                self.call_value(decl, &[x.into()])?
            }
            (false, t) if t.is_float() => {
                let x = x.into_int_value();
                let f = if from == DType::Bool {
                    b.build_unsigned_int_to_float(x, self.ctx.f32_type(), "b2f")?
                } else {
                    b.build_signed_int_to_float(x, self.ctx.f32_type(), "i2f")?
                };
                self.round(t, f)?.into()
            }
            (false, DType::Bool) => {
                let x = x.into_int_value();
                b.build_int_compare(IntPredicate::NE, x, x.get_type().const_zero(), "i2b")?
                    .into()
            }
            (false, t) => {
                let x = x.into_int_value();
                let it = self.reg_type(t).into_int_type();
                let (wf, wt) = (x.get_type().get_bit_width(), it.get_bit_width());
                if wf == wt {
                    x.into()
                } else if wf > wt {
                    b.build_int_truncate(x, it, "trunc")?.into()
                } else if from == DType::Bool {
                    b.build_int_z_extend(x, it, "zext")?.into()
                } else {
                    b.build_int_s_extend(x, it, "sext")?.into()
                }
            }
        })
    }
}
