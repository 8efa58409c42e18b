//! The op table: the elementwise, comparison and reduction vocabulary of the kernel IR,
//! declared once.
//!
//! Each family ([`UnaryOp`], [`BinaryOp`], [`CmpOp`], [`ReduceOp`]) is one invocation of
//! [`op_family!`], one line per op: its variant, its IR name (printed, parsed, named in
//! errors), which element types it accepts ([`Typing`]), how `#[tpu_kernel]` spells it
//! (operators and method names), and the Mosaic and StableHLO names the importer maps to it.
//! Every other layer derives its vocabulary from here: the printer and the IR parser by
//! [`UnaryOp::name`]/[`UnaryOp::from_name`], the macro by [`UnaryOp::from_rust`], the
//! importer by [`UnaryOp::from_mosaic`]/[`UnaryOp::from_stablehlo`], the rule-coverage tests by
//! [`UnaryOp::ALL`].
//!
//! What an op *means* is not here: each backend (the interpreter, the CPU code generator, the
//! Mosaic lowering) defines it by an exhaustive `match` on the variant, so a new line in a
//! table is a compiler error in every backend until each gives it a meaning.

use crate::DType;

/// The element types an op accepts. The result has its operands' dtype (comparisons: bool).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Typing {
    /// f32, bf16, f16: transcendentals, rounding, `pow`.
    Float,
    /// Floats and integers, not bool: arithmetic.
    Numeric,
    /// Integers and bool, not floats: bitwise and logical ops.
    Integral,
    /// Integers only (not bool, not floats): shifts.
    Int,
    /// Every dtype: `max`/`min` (on bool: or/and), comparisons.
    Any,
}

impl Typing {
    /// Whether an operand of dtype `d` is one this typing admits.
    pub fn accepts(self, d: DType) -> bool {
        match self {
            Typing::Float => d.is_float(),
            Typing::Numeric => !d.is_bool(),
            Typing::Integral => !d.is_float(),
            Typing::Int => d.is_int(),
            Typing::Any => true,
        }
    }

    /// The dtypes accepted, in [`DType::ALL`] order.
    pub fn dtypes(self) -> &'static [DType] {
        use DType::*;
        match self {
            Typing::Float => &[F32, BF16, F16],
            Typing::Numeric => &[F32, BF16, F16, I32, I16, I8],
            Typing::Integral => &[I32, I16, I8, Bool],
            Typing::Int => &[I32, I16, I8],
            Typing::Any => &DType::ALL,
        }
    }
}

/// One row of the op table: everything tools know of an op besides its semantics.
#[derive(Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// The Rust variant's name (`Exp`): what `#[tpu_kernel]` generates code with.
    pub variant: &'static str,
    /// The IR name (`exp`): printed, parsed and named in errors; unique across families.
    pub name: &'static str,
    /// Which dtypes the op accepts.
    pub typing: Typing,
    /// How `#[tpu_kernel]` spells the op: operators (`+`, `==`, `!`) and method names
    /// (`.exp()`, `.max(y)`, `.reduce_sum(axes)`).
    pub rust: &'static [&'static str],
    /// Mosaic names imported as this op: `arith`/`math` ops (unary, binary), `arith.cmpf`/
    /// `cmpi` predicates (comparisons), `vector.multi_reduction` kinds (reductions).
    pub mosaic: &'static [&'static str],
    /// StableHLO names imported as this op: ops (unary, binary, and the combiner of a
    /// reduction's body), comparison directions (comparisons).
    pub stablehlo: &'static [&'static str],
}

/// Declares one op family: the enum, its [`OpInfo`] per variant, `ALL`, and the lookups by
/// name, Rust spelling, Mosaic name and StableHLO name.
macro_rules! op_family {
    (
        $(#[$meta:meta])*
        pub enum $Enum:ident {
            $(
                $(#[$vmeta:meta])*
                $Variant:ident = $name:literal, $typing:ident,
                    rust [$($rust:literal),*],
                    mosaic [$($mosaic:literal),*],
                    stablehlo [$($shlo:literal),*];
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $Enum {
            $($(#[$vmeta])* $Variant,)*
        }

        impl $Enum {
            /// Every op of the family, in table order.
            pub const ALL: &'static [$Enum] = &[$($Enum::$Variant),*];

            /// This op's row of the op table.
            pub fn info(self) -> &'static OpInfo {
                match self {
                    $($Enum::$Variant => &OpInfo {
                        variant: stringify!($Variant),
                        name: $name,
                        typing: Typing::$typing,
                        rust: &[$($rust),*],
                        mosaic: &[$($mosaic),*],
                        stablehlo: &[$($shlo),*],
                    },)*
                }
            }

            /// The op's IR name.
            pub fn name(self) -> &'static str {
                self.info().name
            }

            /// Whether the op is defined on `dtype`.
            pub fn accepts(self, dtype: DType) -> bool {
                self.info().typing.accepts(dtype)
            }

            /// The op whose IR name is `name`.
            pub fn from_name(name: &str) -> Option<$Enum> {
                Self::find(|i| i.name == name)
            }

            /// The op `#[tpu_kernel]` spells `spelling` (an operator or a method name).
            pub fn from_rust(spelling: &str) -> Option<$Enum> {
                Self::find(|i| i.rust.contains(&spelling))
            }

            /// The op imported from the Mosaic name `name`.
            pub fn from_mosaic(name: &str) -> Option<$Enum> {
                Self::find(|i| i.mosaic.contains(&name))
            }

            /// The op imported from the StableHLO name `name`.
            pub fn from_stablehlo(name: &str) -> Option<$Enum> {
                Self::find(|i| i.stablehlo.contains(&name))
            }

            fn find(pred: impl Fn(&OpInfo) -> bool) -> Option<$Enum> {
                Self::ALL.iter().copied().find(|op| pred(op.info()))
            }
        }
    };
}

op_family! {
    /// Elementwise ops of one operand.
    pub enum UnaryOp {
        /// `-x`.
        Neg = "neg", Numeric, rust ["-", "neg"], mosaic ["arith.negf"], stablehlo ["stablehlo.negate"];
        /// `|x|` (on integers the minimum value stays itself, wrapping as two's complement does).
        Abs = "abs", Numeric, rust ["abs"], mosaic ["math.absf", "math.absi"], stablehlo ["stablehlo.abs"];
        /// `e^x`.
        Exp = "exp", Float, rust ["exp"], mosaic ["math.exp"], stablehlo ["stablehlo.exponential"];
        /// `2^x`.
        Exp2 = "exp2", Float, rust ["exp2"], mosaic ["math.exp2"], stablehlo [];
        /// The natural logarithm (`-inf` at 0, NaN below).
        Log = "log", Float, rust ["log"], mosaic ["math.log"], stablehlo ["stablehlo.log"];
        /// `ln(1 + x)`, accurate near 0.
        Log1p = "log1p", Float, rust ["log1p"], mosaic ["math.log1p"], stablehlo ["stablehlo.log_plus_one"];
        /// The square root (NaN below 0).
        Sqrt = "sqrt", Float, rust ["sqrt"], mosaic ["math.sqrt"], stablehlo ["stablehlo.sqrt"];
        /// `1 / sqrt(x)`.
        Rsqrt = "rsqrt", Float, rust ["rsqrt"], mosaic ["math.rsqrt"], stablehlo ["stablehlo.rsqrt"];
        /// The hyperbolic tangent.
        Tanh = "tanh", Float, rust ["tanh"], mosaic ["math.tanh"], stablehlo ["stablehlo.tanh"];
        /// The error function.
        Erf = "erf", Float, rust ["erf"], mosaic ["math.erf"], stablehlo ["chlo.erf"];
        /// `1 / (1 + exp(-x))`.
        Logistic = "logistic", Float, rust ["sigmoid", "logistic"], mosaic [], stablehlo ["stablehlo.logistic"];
        /// Rounds toward negative infinity.
        Floor = "floor", Float, rust ["floor"], mosaic ["math.floor"], stablehlo ["stablehlo.floor"];
        /// Rounds toward positive infinity.
        Ceil = "ceil", Float, rust ["ceil"], mosaic ["math.ceil"], stablehlo ["stablehlo.ceil"];
        /// Rounds to the nearest integer, halves to the even one (`jnp.round`, `np.round`).
        RoundEven = "round_even", Float, rust ["round_ties_even"], mosaic ["math.roundeven"], stablehlo ["stablehlo.round_nearest_even"];
        /// Rounds to the nearest integer, halves away from zero (`lax.round`'s default,
        /// Rust's `f32::round`).
        Round = "round", Float, rust ["round"], mosaic ["math.round"], stablehlo ["stablehlo.round_nearest_afz"];
        /// The sine (radians).
        Sin = "sin", Float, rust ["sin"], mosaic ["math.sin"], stablehlo ["stablehlo.sine"];
        /// The cosine (radians).
        Cos = "cos", Float, rust ["cos"], mosaic ["math.cos"], stablehlo ["stablehlo.cosine"];
        /// Logical not on bool, bitwise not on integers.
        Not = "not", Integral, rust ["!"], mosaic [], stablehlo ["stablehlo.not"];
    }
}

/// A pattern matching exactly the [`UnaryOp`]s whose typing is [`Typing::Float`]: the arm
/// an integer `match` gives to the ops the verifier never lets reach it. Written once here so
/// the backends' exhaustive matches do not each list them; `float_unary_matches_the_table`
/// checks it against the table, so a float-only op added above and not here fails a test.
#[macro_export]
macro_rules! float_unary_ops {
    () => {
        $crate::UnaryOp::Exp
            | $crate::UnaryOp::Exp2
            | $crate::UnaryOp::Log
            | $crate::UnaryOp::Log1p
            | $crate::UnaryOp::Sqrt
            | $crate::UnaryOp::Rsqrt
            | $crate::UnaryOp::Tanh
            | $crate::UnaryOp::Erf
            | $crate::UnaryOp::Logistic
            | $crate::UnaryOp::Floor
            | $crate::UnaryOp::Ceil
            | $crate::UnaryOp::RoundEven
            | $crate::UnaryOp::Round
            | $crate::UnaryOp::Sin
            | $crate::UnaryOp::Cos
    };
}

op_family! {
    /// Elementwise ops of two operands of one type.
    pub enum BinaryOp {
        /// `x + y` (integers wrap).
        Add = "add", Numeric, rust ["+"], mosaic ["arith.addf", "arith.addi"], stablehlo ["stablehlo.add"];
        /// `x - y` (integers wrap).
        Sub = "sub", Numeric, rust ["-"], mosaic ["arith.subf", "arith.subi"], stablehlo ["stablehlo.subtract"];
        /// `x * y` (integers wrap).
        Mul = "mul", Numeric, rust ["*"], mosaic ["arith.mulf", "arith.muli"], stablehlo ["stablehlo.multiply"];
        /// Float division, or integer division truncating toward zero. Integer division by
        /// zero gives 0: it must not trap, because the padding lanes of an edge block divide
        /// by the fill value (TPUs do not trap either).
        Div = "div", Numeric, rust ["/"], mosaic ["arith.divf", "arith.divsi"], stablehlo ["stablehlo.divide"];
        /// Remainder with the sign of the dividend (C's `%`, `fmod` for floats). An integer
        /// remainder by zero gives the dividend, so `x == (x / y) * y + x % y` always holds.
        Rem = "rem", Numeric, rust ["%"], mosaic ["arith.remf", "arith.remsi"], stablehlo ["stablehlo.remainder"];
        /// `x^y` for floats.
        Pow = "pow", Float, rust ["pow", "powf"], mosaic ["math.powf"], stablehlo ["stablehlo.power"];
        /// NaN-propagating maximum (`jnp.maximum`); `or` on bool.
        Max = "max", Any, rust ["max"], mosaic ["arith.maximumf", "arith.maxsi"], stablehlo ["stablehlo.maximum"];
        /// NaN-propagating minimum (`jnp.minimum`); `and` on bool.
        Min = "min", Any, rust ["min"], mosaic ["arith.minimumf", "arith.minsi"], stablehlo ["stablehlo.minimum"];
        /// Bitwise and (logical on bool).
        And = "and", Integral, rust ["&", "&&"], mosaic ["arith.andi"], stablehlo ["stablehlo.and"];
        /// Bitwise or (logical on bool).
        Or = "or", Integral, rust ["|", "||"], mosaic ["arith.ori"], stablehlo ["stablehlo.or"];
        /// Bitwise exclusive or (logical on bool).
        Xor = "xor", Integral, rust ["^"], mosaic ["arith.xori"], stablehlo ["stablehlo.xor"];
        /// `x << y`. The shift amount is read as unsigned (a negative amount is huge); an
        /// amount of at least the bit width gives 0, as XLA's `shift_left` does (LLVM and
        /// Mosaic leave it undefined, so backends guard it).
        Shl = "shl", Int, rust ["<<", "shl"], mosaic ["arith.shli"], stablehlo ["stablehlo.shift_left"];
        /// Arithmetic (sign-filling) `x >> y`. An amount of at least the bit width (read as
        /// unsigned) gives the sign fill, 0 or -1, as XLA's `shift_right_arithmetic` does.
        ShrA = "shr_a", Int, rust [">>", "shr"], mosaic ["arith.shrsi"], stablehlo ["stablehlo.shift_right_arithmetic"];
        /// Logical (zero-filling) `x >> y` of the bits of `x` in its own width (an i8 shifts
        /// its 8 bits). An amount of at least the bit width (read as unsigned) gives 0, as
        /// XLA's `shift_right_logical` does.
        ShrL = "shr_l", Int, rust ["shr_logical"], mosaic ["arith.shrui"], stablehlo ["stablehlo.shift_right_logical"];
        /// Division of the bits of `x` and `y` in their own width read as unsigned (an i8 of
        /// -1 is 255); by zero gives 0, as `div` does.
        DivU = "div_u", Int, rust ["div_unsigned"], mosaic ["arith.divui"], stablehlo [];
        /// Remainder of the bits read as unsigned, as `div_u` reads them, given back in the
        /// operand's dtype; by zero gives the dividend, as `rem` does.
        RemU = "rem_u", Int, rust ["rem_unsigned"], mosaic ["arith.remui"], stablehlo [];
    }
}

op_family! {
    /// Elementwise comparisons; the result is bool. Comparisons with NaN are false except
    /// `Ne`. Mosaic names are `arith.cmpf`/`cmpi` predicates with the same meaning (ordered
    /// float comparisons, `une` for `!=`); StableHLO names are comparison directions.
    pub enum CmpOp {
        /// `x == y`.
        Eq = "eq", Any, rust ["=="], mosaic ["oeq", "eq"], stablehlo ["EQ"];
        /// `x != y` (true when either is NaN).
        Ne = "ne", Any, rust ["!="], mosaic ["une", "ne"], stablehlo ["NE"];
        /// `x < y`.
        Lt = "lt", Any, rust ["<"], mosaic ["olt", "slt"], stablehlo ["LT"];
        /// `x <= y`.
        Le = "le", Any, rust ["<="], mosaic ["ole", "sle"], stablehlo ["LE"];
        /// `x > y`.
        Gt = "gt", Any, rust [">"], mosaic ["ogt", "sgt"], stablehlo ["GT"];
        /// `x >= y`.
        Ge = "ge", Any, rust [">="], mosaic ["oge", "sge"], stablehlo ["GE"];
    }
}

op_family! {
    /// Reductions over axes. Floats accumulate in f32 whatever their storage type. Mosaic
    /// names are `vector.multi_reduction` kinds; StableHLO names the combiner of a `reduce`
    /// body. `#[tpu_kernel]` also accepts each method with a `_keepdims` suffix.
    pub enum ReduceOp {
        /// The sum over the axes.
        Sum = "reduce_sum", Numeric, rust ["sum", "reduce_sum"], mosaic ["add"], stablehlo ["stablehlo.add"];
        /// The maximum over the axes.
        Max = "reduce_max", Numeric, rust ["reduce_max"], mosaic ["maximumf", "maxsi"], stablehlo ["stablehlo.maximum"];
        /// The minimum over the axes.
        Min = "reduce_min", Numeric, rust ["reduce_min"], mosaic ["minimumf", "minsi"], stablehlo ["stablehlo.minimum"];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name is written once: no IR name, Rust spelling (within a family of one arity)
    /// or import name maps to two ops.
    #[test]
    fn names_are_unique() {
        let mut ir: Vec<&str> = UnaryOp::ALL.iter().map(|o| o.name()).collect();
        ir.extend(BinaryOp::ALL.iter().map(|o| o.name()));
        ir.extend(CmpOp::ALL.iter().map(|o| o.name()));
        ir.extend(ReduceOp::ALL.iter().map(|o| o.name()));
        let mut sorted = ir.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ir.len(), "duplicate IR names in {ir:?}");
        fn unique(rows: Vec<&'static OpInfo>, column: fn(&OpInfo) -> &[&'static str]) {
            let mut all: Vec<&str> = rows.iter().flat_map(|r| column(r).to_vec()).collect();
            let n = all.len();
            all.sort();
            all.dedup();
            assert_eq!(all.len(), n, "a name maps to two ops");
        }
        for column in [
            (|i: &OpInfo| i.rust) as fn(&OpInfo) -> &[&'static str],
            |i| i.mosaic,
            |i| i.stablehlo,
        ] {
            unique(UnaryOp::ALL.iter().map(|o| o.info()).collect(), column);
            unique(BinaryOp::ALL.iter().map(|o| o.info()).collect(), column);
            unique(CmpOp::ALL.iter().map(|o| o.info()).collect(), column);
            unique(ReduceOp::ALL.iter().map(|o| o.info()).collect(), column);
        }
    }

    #[test]
    fn dtypes_are_the_accepted_ones() {
        for t in [
            Typing::Float,
            Typing::Numeric,
            Typing::Integral,
            Typing::Int,
            Typing::Any,
        ] {
            let accepted: Vec<DType> = DType::ALL.into_iter().filter(|&d| t.accepts(d)).collect();
            assert_eq!(t.dtypes(), accepted, "{t:?}");
        }
    }

    #[test]
    fn lookups_invert_the_table() {
        for &op in UnaryOp::ALL {
            assert_eq!(UnaryOp::from_name(op.name()), Some(op));
            assert_eq!(format!("{op:?}"), op.info().variant);
            for s in op.info().rust {
                assert_eq!(UnaryOp::from_rust(s), Some(op));
            }
        }
        assert_eq!(BinaryOp::from_mosaic("arith.maxsi"), Some(BinaryOp::Max));
        assert_eq!(CmpOp::from_stablehlo("GE"), Some(CmpOp::Ge));
        assert_eq!(ReduceOp::from_rust("sum"), Some(ReduceOp::Sum));
        assert_eq!(UnaryOp::from_name("nope"), None);
    }

    #[test]
    fn float_unary_matches_the_table() {
        for &op in UnaryOp::ALL {
            let float_only = op.info().typing == Typing::Float;
            assert_eq!(matches!(op, float_unary_ops!()), float_only, "{op:?}");
        }
    }
}
