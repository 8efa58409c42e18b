//! The IR's `bitcast`: an f32's bits read as an i32 and back, exactly (signed zeros,
//! infinities, NaN, subnormals), and a bf16's as an i16 and back, and i16 pairs packed into
//! i32 rows, on every device; its text form parses back to itself.

mod common;

use common::*;
use rand::Rng;
use tpukit::dsl::parse_kernel;
use tpukit::prelude::*;

const KERNEL: &str = "kernel @bits grid() {
  input %x: f32[5,130]
  input %i: i32[5,130]
  output %bits: i32[5,130]
  output %floats: f32[5,130]
body {
  %0 = load %x[ds(0, 5), ds(0, 130)] : f32[5,130]
  %1 = bitcast %0 : i32[5,130]
  store %bits[ds(0, 5), ds(0, 130)], %1
  %2 = load %i[ds(0, 5), ds(0, 130)] : i32[5,130]
  %3 = bitcast %2 : f32[5,130]
  store %floats[ds(0, 5), ds(0, 130)], %3
  yield
}
";

fn bitcasts_are_exact(device: Device) {
    let k = parse_kernel(KERNEL).unwrap();
    assert_eq!(
        parse_kernel(&k.to_string()).unwrap().to_string(),
        k.to_string()
    );
    let mut r = rng(11);
    let n = 5 * 130;
    let mut floats: Vec<f32> = (0..n).map(|_| r.random_range(-1e3f32..1e3)).collect();
    floats[..6].copy_from_slice(&[0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-40]);
    // Bit patterns of finite floats (a NaN's payload may be quieted on the way through f64).
    let ints: Vec<i32> = (0..n)
        .map(|_| r.random::<i32>())
        .map(|b| {
            if f32::from_bits(b as u32).is_nan() {
                b & !0x4000_0000
            } else {
                b
            }
        })
        .collect();
    let x = HostArray::from_f64(
        DType::F32,
        &[5, 130],
        &floats.iter().map(|&f| f as f64).collect::<Vec<_>>(),
    );
    let i = HostArray::from_f64(
        DType::I32,
        &[5, 130],
        &ints.iter().map(|&b| b as f64).collect::<Vec<_>>(),
    );
    let out = launch(&k, device, &[&x, &i]).unwrap();
    let bits: Vec<i32> = out[0].as_i32().unwrap().iter().copied().collect();
    let back: Vec<f32> = out[1].as_f32().unwrap().iter().copied().collect();
    for j in 0..n {
        let want = floats[j].to_bits() as i32;
        if floats[j].is_nan() {
            assert!(
                f32::from_bits(bits[j] as u32).is_nan(),
                "bits of NaN: {:#x}",
                bits[j]
            );
        } else {
            assert_eq!(bits[j], want, "bits of {}", floats[j]);
        }
        assert_eq!(back[j].to_bits(), ints[j] as u32, "float of {:#x}", ints[j]);
    }
}

const KERNEL_16: &str = "kernel @bits16 grid() {
  input %h: bf16[16,130]
  input %i: i16[16,130]
  output %bits: i16[16,130]
  output %floats: bf16[16,130]
  output %packed: i32[8,130]
body {
  %0 = load %h[ds(0, 16), ds(0, 130)] : bf16[16,130]
  %1 = bitcast %0 : i16[16,130]
  store %bits[ds(0, 16), ds(0, 130)], %1
  %2 = load %i[ds(0, 16), ds(0, 130)] : i16[16,130]
  %3 = bitcast %2 : bf16[16,130]
  store %floats[ds(0, 16), ds(0, 130)], %3
  %4 = bitcast %2 : i32[8,130]
  store %packed[ds(0, 8), ds(0, 130)], %4
  yield
}
";

/// bf16 <-> i16 keep every bit (finite values: a NaN's payload is not promised); i16 rows
/// `2r` and `2r + 1` are the low and high halves of i32 row `r`, as Mosaic packs them.
fn bf16_i16_bitcasts_are_exact(device: Device) {
    let k = parse_kernel(KERNEL_16).unwrap();
    let mut r = rng(12);
    let n = 16 * 130;
    let bits: Vec<i16> = (0..n)
        .map(|_| r.random::<i16>())
        .map(|b| if b & 0x7f80 == 0x7f80 { b & !0x4000 } else { b })
        .collect();
    let as_bf16 = |b: i16| tpukit::dsl::bf16::from_bits(b as u16).to_f64();
    let h = HostArray::from_f64(
        DType::BF16,
        &[16, 130],
        &bits.iter().map(|&b| as_bf16(b)).collect::<Vec<_>>(),
    );
    let i = HostArray::from_f64(
        DType::I16,
        &[16, 130],
        &bits.iter().map(|&b| b as f64).collect::<Vec<_>>(),
    );
    let out = launch(&k, device, &[&h, &i]).unwrap();
    let got: Vec<i16> = out[0].as_i16().unwrap().iter().copied().collect();
    assert_eq!(got, bits, "bits of bf16");
    let floats: Vec<u16> = out[1]
        .as_bf16()
        .unwrap()
        .iter()
        .map(|f| f.to_bits())
        .collect();
    assert_eq!(
        floats,
        bits.iter().map(|&b| b as u16).collect::<Vec<_>>(),
        "bf16 of bits"
    );
    let packed = out[2].as_i32().unwrap();
    for row in 0..8 {
        for col in 0..130 {
            let (lo, hi) = (bits[2 * row * 130 + col], bits[(2 * row + 1) * 130 + col]);
            let want = (lo as u16 as u32 | (hi as u16 as u32) << 16) as i32;
            assert_eq!(packed[[row, col]], want, "packed ({row}, {col})");
        }
    }
}

#[test]
fn interpret() {
    bitcasts_are_exact(Device::Interpret);
    bf16_i16_bitcasts_are_exact(Device::Interpret);
}

#[test]
fn cpu() {
    bitcasts_are_exact(Device::Cpu);
    bf16_i16_bitcasts_are_exact(Device::Cpu);
}
