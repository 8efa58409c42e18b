//! Correctly rounded f64 → bf16 and f64 → f16 conversions (to nearest, ties to even).
//!
//! `half`'s `from_f64` drops the low 32 bits of the f64 mantissa before rounding, so a value
//! just above a halfway point whose excess lies in those bits (an f32 such as `0xBF18_8001`,
//! whose last bits land there) is taken for an exact tie and rounded down: the interpreter,
//! the reference every backend is checked against, disagreed with the compiled `cpu` device
//! (found by `tests/fuzz_kernels.rs`). Rounding through f32 instead is exact when the value
//! is an f32, and for any f64 when the f32 step rounds to odd: a result with at least two bits
//! more than the target keeps "above, at or below halfway" intact.

/// `x` as an f32, rounded to odd: truncated toward zero, with the last mantissa bit set if
/// that lost anything (infinities and NaN as `as f32` gives them).
fn f32_round_to_odd(x: f64) -> f32 {
    let nearest = x as f32;
    if !nearest.is_finite() || f64::from(nearest) == x {
        return nearest;
    }
    // Rounded away from zero: one step back toward it (bits order magnitudes).
    let truncated = if f64::from(nearest).abs() > x.abs() {
        f32::from_bits(nearest.to_bits() - 1)
    } else {
        nearest
    };
    f32::from_bits(truncated.to_bits() | 1)
}

/// `x` rounded to the nearest bf16 (ties to even).
pub fn bf16_from_f64(x: f64) -> half::bf16 {
    half::bf16::from_f32(f32_round_to_odd(x))
}

/// `x` rounded to the nearest f16 (ties to even).
pub fn f16_from_f64(x: f64) -> half::f16 {
    half::f16::from_f32(f32_round_to_odd(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_just_above_halfway_round_up() {
        // Halfway between bf16 0xBF18 and 0xBF19 is f32 0xBF18_8000; 0xBF18_8001 is above it.
        let x = f64::from(f32::from_bits(0xBF18_8001));
        assert_eq!(bf16_from_f64(x).to_bits(), 0xBF19);
        // An exact tie goes to the even neighbour.
        let tie = f64::from(f32::from_bits(0xBF18_8000));
        assert_eq!(bf16_from_f64(tie).to_bits(), 0xBF18);
        // Excess below f32 precision (an f64 just above halfway) still rounds up.
        let above = tie - 1e-12;
        assert_eq!(bf16_from_f64(above).to_bits(), 0xBF19);
        // f16: halfway between 1.0 and the next f16 (1 + 2^-10) is 1 + 2^-11.
        let h = 1.0 + 2f64.powi(-11);
        assert_eq!(f16_from_f64(h).to_f64(), 1.0);
        assert_eq!(
            f16_from_f64(h + 2f64.powi(-40)).to_f64(),
            1.0 + 2f64.powi(-10)
        );
    }

    #[test]
    fn agrees_with_f32_rounding_on_f32_values() {
        // Every 2^12th f32 bit pattern, both signs: from an f32, rounding must equal half's
        // (correct) f32 conversion.
        for hi in (0..=u32::MAX).step_by(4093) {
            let f = f32::from_bits(hi);
            if f.is_nan() {
                continue;
            }
            assert_eq!(
                bf16_from_f64(f64::from(f)).to_bits(),
                half::bf16::from_f32(f).to_bits(),
                "{hi:#x}"
            );
            assert_eq!(
                f16_from_f64(f64::from(f)).to_bits(),
                half::f16::from_f32(f).to_bits(),
                "{hi:#x}"
            );
        }
    }
}
