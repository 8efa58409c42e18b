//! Element types, as TPUs have them: bf16 is first-class, there are no 64-bit types.

use std::fmt;

/// The element type of an array, a block or a value.
///
/// Integers are signless two's complement (as in Mosaic); `Bool` is one bit of truth, stored as
/// one byte on the host.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE single precision.
    F32,
    /// bfloat16: f32's exponent range with 8 bits of mantissa (TPUs' native matmul input).
    BF16,
    /// IEEE half precision.
    F16,
    /// 32-bit integer (the index type of grids, index maps and gathers).
    I32,
    /// 16-bit integer.
    I16,
    /// 8-bit integer.
    I8,
    /// A truth value (comparison results, masks).
    Bool,
}

impl DType {
    /// Every dtype, in the order the printer and the tests enumerate them.
    pub const ALL: [DType; 7] = [
        DType::F32,
        DType::BF16,
        DType::F16,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::Bool,
    ];

    /// Whether this is a floating-point type (`f32`, `bf16`, `f16`).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::BF16 | DType::F16)
    }

    /// Whether this is an integer type (`i32`, `i16`, `i8`; bool is not).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I16 | DType::I8)
    }

    /// Whether this is [`DType::Bool`].
    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    /// Bytes per element in host memory.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::BF16 | DType::F16 | DType::I16 => 2,
            DType::I8 | DType::Bool => 1,
        }
    }

    /// Bits per element as TPUs hold it (bool: 1), the unit of [`crate::OpKind::Bitcast`].
    pub fn bit_width(self) -> usize {
        match self {
            DType::Bool => 1,
            d => 8 * d.size_bytes(),
        }
    }

    /// The short name used by the printer, the CLI and the Python API (`f32`, `bf16`, …).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::I8 => "i8",
            DType::Bool => "bool",
        }
    }

    /// The dtype whose [`DType::name`] is `name`, if any (the inverse of `name`).
    pub fn parse(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Rounds an f64 to the nearest value of this float type (ties to even), returned as f64.
    /// Integers and bools are converted as [`DType::cast_f64_to_int`] does.
    pub fn round_f64(self, x: f64) -> f64 {
        match self {
            DType::F32 => x as f32 as f64,
            DType::BF16 => crate::narrow::bf16_from_f64(x).to_f64(),
            DType::F16 => crate::narrow::f16_from_f64(x).to_f64(),
            DType::I32 | DType::I16 | DType::I8 => self.cast_f64_to_int(x) as f64,
            DType::Bool => (x != 0.0) as u8 as f64,
        }
    }

    /// Float → integer conversion: truncation toward zero, saturating at the type's bounds,
    /// NaN → 0 (the rule Rust's `as` and LLVM's `fptosi.sat` follow).
    pub fn cast_f64_to_int(self, x: f64) -> i64 {
        match self {
            DType::I32 => x as i32 as i64,
            DType::I16 => x as i16 as i64,
            DType::I8 => x as i8 as i64,
            DType::Bool => (x != 0.0) as i64,
            _ => panic!("cast_f64_to_int to {self}"),
        }
    }

    /// Wraps an integer into this integer type's range (two's complement), or to 0/1 for bool.
    pub fn wrap_int(self, x: i64) -> i64 {
        match self {
            DType::I32 => x as i32 as i64,
            DType::I16 => x as i16 as i64,
            DType::I8 => x as i8 as i64,
            DType::Bool => (x != 0) as i64,
            _ => panic!("wrap_int to {self}"),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
