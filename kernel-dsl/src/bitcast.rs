//! The bitcast rule ([`crate::OpKind::Bitcast`]) shared by the verifier, the builder and the
//! backends: the result shape, and an element's bits as the interpreter holds values (f64).

use crate::{DType, Type};

/// The shape of `t` bitcast to `to`, or `None` where no bitcast exists: a bool on either
/// side, or, between different widths, a rank below 2 or a second-minor dimension that does
/// not pack into whole elements of the wider type.
pub fn bitcast_shape(t: &Type, to: DType) -> Option<Vec<usize>> {
    let (from_w, to_w) = (t.dtype.bit_width(), to.bit_width());
    if t.dtype.is_bool() || to.is_bool() {
        return None;
    }
    if from_w == to_w {
        return Some(t.shape.clone());
    }
    let rank = t.rank();
    if rank < 2 {
        return None;
    }
    let mut shape = t.shape.clone();
    let bits = shape[rank - 2] * from_w;
    if !bits.is_multiple_of(to_w) {
        return None;
    }
    shape[rank - 2] = bits / to_w;
    Some(shape)
}

/// The bits of `x`, a value of `dtype` (not bool), zero-extended to 64 bits. A NaN keeps its
/// sign and payload (the f64 holds the float's payload in its top mantissa bits), so values
/// bitcast in and out, or copied through the interpreter, keep every bit.
pub fn bits_of(dtype: DType, x: f64) -> u64 {
    if let Some(man) = mantissa_bits(dtype)
        && x.is_nan()
    {
        let b = x.to_bits();
        let width = dtype.bit_width() as u64;
        let payload = ((b & ((1 << 52) - 1)) >> (52 - man)).max(1);
        let exp = ((1u64 << (width - 1 - man)) - 1) << man;
        return (b >> 63) << (width - 1) | exp | payload;
    }
    match dtype {
        DType::F32 => (x as f32).to_bits() as u64,
        DType::BF16 => crate::bf16_from_f64(x).to_bits() as u64,
        DType::F16 => crate::f16_from_f64(x).to_bits() as u64,
        DType::I32 => x as i64 as u32 as u64,
        DType::I16 => x as i64 as u16 as u64,
        DType::I8 => x as i64 as u8 as u64,
        DType::Bool => panic!("bits_of a bool"),
    }
}

/// The value of `dtype` (not bool) whose bits are the low bits of `bits` (a NaN keeps its
/// payload, see [`bits_of`]).
pub fn from_bits(dtype: DType, bits: u64) -> f64 {
    if let Some(man) = mantissa_bits(dtype) {
        let width = dtype.bit_width() as u64;
        let bits = bits & ((1 << width) - 1);
        let exp_mask = ((1u64 << (width - 1 - man)) - 1) << man;
        let payload = bits & ((1 << man) - 1);
        if bits & exp_mask == exp_mask && payload != 0 {
            let sign = bits >> (width - 1);
            return f64::from_bits(sign << 63 | 0x7ff << 52 | payload << (52 - man));
        }
    }
    match dtype {
        DType::F32 => f32::from_bits(bits as u32) as f64,
        DType::BF16 => half::bf16::from_bits(bits as u16).to_f64(),
        DType::F16 => half::f16::from_bits(bits as u16).to_f64(),
        DType::I32 => bits as u32 as i32 as f64,
        DType::I16 => bits as u16 as i16 as f64,
        DType::I8 => bits as u8 as i8 as f64,
        DType::Bool => panic!("from_bits of a bool"),
    }
}

/// The explicit mantissa bits of a float dtype.
fn mantissa_bits(dtype: DType) -> Option<u64> {
    match dtype {
        DType::F32 => Some(23),
        DType::BF16 => Some(7),
        DType::F16 => Some(10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_pack_along_the_second_minor_dimension() {
        let t = Type::new(DType::BF16, vec![3, 16, 128]);
        assert_eq!(bitcast_shape(&t, DType::I32), Some(vec![3, 8, 128]));
        assert_eq!(bitcast_shape(&t, DType::F16), Some(vec![3, 16, 128]));
        let i8s = Type::new(DType::I32, vec![8, 128]);
        assert_eq!(bitcast_shape(&i8s, DType::I8), Some(vec![32, 128]));
        assert_eq!(
            bitcast_shape(&Type::new(DType::BF16, vec![3, 128]), DType::F32),
            None
        );
        assert_eq!(
            bitcast_shape(&Type::new(DType::BF16, vec![128]), DType::F32),
            None
        );
        assert_eq!(bitcast_shape(&i8s, DType::Bool), None);
        assert_eq!(bitcast_shape(&i8s, DType::I16), Some(vec![16, 128]));
        let bf16s = Type::new(DType::BF16, vec![16, 128]);
        assert_eq!(bitcast_shape(&bf16s, DType::I16), Some(vec![16, 128]));
    }

    #[test]
    fn bits_round_trip() {
        for (d, x) in [
            (DType::F32, -1.5),
            (DType::BF16, 3.0),
            (DType::F16, -0.25),
            (DType::I32, -7.0),
            (DType::I16, -32768.0),
            (DType::I8, -128.0),
        ] {
            assert_eq!(from_bits(d, bits_of(d, x)), x, "{d}");
        }
        assert_eq!(bits_of(DType::F32, 1.0), 0x3f80_0000);
        for (d, nan) in [
            (DType::F32, 0xff80_0001),
            (DType::BF16, 0x7f81),
            (DType::F16, 0xfc01),
        ] {
            assert_eq!(bits_of(d, from_bits(d, nan)), nan, "{d} signalling NaN");
        }
        assert_eq!(from_bits(DType::I32, 0x8000_0000), i32::MIN as f64);
        assert_eq!(from_bits(DType::I16, 0xbf80), -16512.0);
        assert_eq!(bits_of(DType::I16, -1.0), 0xffff);
    }
}
