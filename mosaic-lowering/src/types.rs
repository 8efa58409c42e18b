//! How kernel-IR types are spelled in Mosaic.
//!
//! Scalars are MLIR scalars, every shaped value is a `vector`. Memory holds `bool` as `i32`
//! (as Pallas does at the kernel boundary: Mosaic has no `i1` memrefs), so bool loads compare
//! with zero and bool stores widen.

use melior::{
    Context,
    ir::{Attribute, Type as MlirType, r#type::MemRefType},
};
use tpukit_dsl::{DType, Error, ErrorKind, Result, SemaphoreKind, Space, Type};

/// The element type of a value of `dtype`.
pub fn element(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        DType::I32 => "i32",
        DType::I16 => "i16",
        DType::I8 => "i8",
        DType::Bool => "i1",
    }
}

/// The element type of `dtype` in memory (memrefs and tensors).
pub fn memory_element(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "i32",
        d => element(d),
    }
}

/// Mosaic extracts only 32-bit scalars from vectors (libtpu: "Only 32-bit scalar
/// vector.extracts supported", v5e and v6e), so reading one element of an 8- or 16-bit vector
/// as a scalar is refused, with what to do instead.
pub fn check_scalar_extract(element: &str) -> Result<()> {
    if matches!(element, "i16" | "i8" | "bf16" | "f16") {
        return Err(Error::unsupported(format!(
            "a scalar {element} read out of a vector: TPU scalar units hold 32-bit values only; \
             cast to a 32-bit type before taking one element"
        )));
    }
    Ok(())
}

/// `AxBx` (the shape prefix of a vector, memref or tensor type).
fn dims(shape: &[usize]) -> String {
    shape.iter().map(|d| format!("{d}x")).collect()
}

/// A value of IR type `ty`: a scalar, or a vector.
pub fn value(ty: &Type) -> String {
    vector(&ty.shape, element(ty.dtype))
}

/// `vector<…xT>`, or the bare element type for an empty shape.
pub fn vector(shape: &[usize], element: &str) -> String {
    if shape.is_empty() {
        element.to_string()
    } else {
        format!("vector<{}{element}>", dims(shape))
    }
}

/// Where a kernel buffer lives on the TensorCore.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MemorySpace {
    /// Vector memory: windows and scratch.
    Vmem,
    /// Scalar memory: scalar-prefetch operands, and operands in [`Space::Smem`].
    Smem,
    /// Left in HBM (`memory_space=pl.ANY`), reached by DMA.
    Any,
    /// Semaphores (`semaphore_mem`), of the kind the element type says.
    Semaphore(SemaphoreKind),
}

impl MemorySpace {
    /// Where an operand of `role` in `space` lives.
    pub fn of(role: tpukit_dsl::Role, space: Space) -> MemorySpace {
        match space {
            Space::Any => MemorySpace::Any,
            Space::Semaphore(kind) => MemorySpace::Semaphore(kind),
            Space::Smem => MemorySpace::Smem,
            Space::Local if role == tpukit_dsl::Role::Prefetch => MemorySpace::Smem,
            Space::Local => MemorySpace::Vmem,
        }
    }
}

/// `memref<…xT, #tpu.memory_space<…>>`, a buffer in kernel memory.
///
/// Upstream MLIR's parser rejects a memory space from an unregistered dialect, so the type is
/// built through the C API, whose unchecked constructor takes the opaque `#tpu` attribute; it
/// prints, and serializes into bytecode, as the text libtpu's tpu dialect reads.
pub fn memref<'c>(
    context: &'c Context,
    shape: &[usize],
    dtype: DType,
    space: MemorySpace,
) -> Result<MlirType<'c>> {
    let name = match space {
        MemorySpace::Vmem => "vmem",
        MemorySpace::Smem => "smem",
        MemorySpace::Any => "any",
        MemorySpace::Semaphore(_) => "semaphore_mem",
    };
    let element = match space {
        MemorySpace::Semaphore(SemaphoreKind::Dma) => "!tpu.dma_semaphore",
        MemorySpace::Semaphore(SemaphoreKind::Regular) => "!tpu.semaphore",
        _ => memory_element(dtype),
    };
    let space_attr =
        Attribute::parse(context, &format!("#tpu.memory_space<{name}>")).ok_or_else(|| {
            Error::new("internal error: bad memory space").with_kind(ErrorKind::Internal)
        })?;
    let element = crate::emit::parse_type(context, element)?;
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    Ok(MemRefType::new(element, &dims, None, Some(space_attr)).into())
}

/// A StableHLO operand or result of the custom call.
pub fn tensor(shape: &[usize], dtype: DType) -> String {
    format!("tensor<{}{}>", dims(shape), memory_element(dtype))
}

/// A float or integer constant of `dtype`, as an MLIR attribute literal (followed by
/// `: type`, or inside `dense<…>`).
///
/// Bools are spelled `1` and `0`: `1 : i1` is the `i1` integer attribute MLIR prints as `true`,
/// whereas `true : i1` does not parse (the keyword `true` is already a typed attribute).
pub fn literal(value: tpukit_dsl::Literal, dtype: DType) -> String {
    match dtype {
        DType::Bool => u8::from(value.as_i64() != 0).to_string(),
        d if d.is_int() => d.wrap_int(value.as_i64()).to_string(),
        d => {
            let x = d.round_f64(value.as_f64());
            if x.is_nan() {
                // MLIR spells non-finite floats as bit patterns of their type.
                match d {
                    DType::F32 => "0x7FC00000".into(),
                    DType::BF16 => "0x7FC0".into(),
                    _ => "0x7E00".into(),
                }
            } else if x.is_infinite() {
                let neg = x < 0.0;
                match (d, neg) {
                    (DType::F32, false) => "0x7F800000".into(),
                    (DType::F32, true) => "0xFF800000".into(),
                    (DType::BF16, false) => "0x7F80".into(),
                    (DType::BF16, true) => "0xFF80".into(),
                    (_, false) => "0x7C00".into(),
                    (_, true) => "0xFC00".into(),
                }
            } else {
                float_text(x)
            }
        }
    }
}

/// A finite float as MLIR reads it: the shortest exact decimal, always with a `.` (MLIR reads
/// `1e0` as an integer followed by garbage).
fn float_text(x: f64) -> String {
    if x == x.trunc() && x.abs() < 1e15 {
        return format!("{x:.1}");
    }
    let text = format!("{x:e}");
    match text.split_once('e') {
        Some((mantissa, exp)) if !mantissa.contains('.') => format!("{mantissa}.0e{exp}"),
        _ => text,
    }
}
