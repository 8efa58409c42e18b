//! Reading the printed form of MLIR types and attributes.
//!
//! The importer works from printed text on purpose: tpu attributes are opaque to upstream
//! MLIR (no C API can look inside `#tpu.dot_dimension_numbers<…>`), and one small reader for
//! every attribute keeps the rules uniform. Each function accepts exactly the spellings MLIR
//! 22 and jaxlib 0.10.2 print and rejects anything else with an error quoting it.

use super::memory_space::MemorySpace;
use tpukit_dsl::{DType, Error, Literal, Result, Type};

/// An MLIR type the importer understands.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    /// A scalar or a vector (`f32`, `index`, `vector<8x128xi1>`). `index` is read as i32.
    Value(Type),
    /// A buffer: its block shape, element type and where it lives.
    MemRef { ty: Type, space: MemorySpace },
    /// A StableHLO tensor.
    Tensor(Type),
}

/// The dtype of a printed element type (`index` is i32: the IR's index type).
pub fn element(s: &str) -> Result<DType> {
    Ok(match s {
        "f32" => DType::F32,
        "bf16" => DType::BF16,
        "f16" => DType::F16,
        "i32" | "index" | "ui32" | "si32" => DType::I32,
        "i16" | "si16" | "ui16" => DType::I16,
        "i8" | "si8" | "ui8" => DType::I8,
        "i1" => DType::Bool,
        other => return Err(Error::unsupported(format!("element type `{other}`"))),
    })
}

/// `8x128xf32` → `([8, 128], "f32")`; `f32` → `([], "f32")`.
fn dims_and_element(s: &str) -> Result<(Vec<usize>, &str)> {
    let mut parts: Vec<&str> = s.split('x').collect();
    let elem = parts.pop().unwrap_or_default();
    let dims = parts
        .into_iter()
        .map(|d| {
            d.trim().parse::<usize>().map_err(|_| {
                Error::unsupported(format!(
                    "extent `{d}` in `{s}` (dynamic shapes are not imported)"
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((dims, elem.trim()))
}

/// The text between the outermost `<` and `>` of `kind<…>`, if `s` has that form.
fn inside<'a>(s: &'a str, kind: &str) -> Option<&'a str> {
    s.strip_prefix(kind)?.strip_prefix('<')?.strip_suffix('>')
}

/// Parses a printed type.
pub fn ty(s: &str) -> Result<Ty> {
    let s = s.trim();
    if let Some(inner) = inside(s, "vector") {
        let (dims, e) = dims_and_element(inner)?;
        return Ok(Ty::Value(Type::new(element(e)?, dims)));
    }
    if let Some(inner) = inside(s, "tensor") {
        let (dims, e) = dims_and_element(inner)?;
        return Ok(Ty::Tensor(Type::new(element(e)?, dims)));
    }
    if let Some(inner) = inside(s, "memref") {
        let shaped = inner.split(", ").next().unwrap_or_default();
        if inner.contains(", ")
            && !inner
                .rsplit(", ")
                .next()
                .unwrap_or("")
                .trim()
                .chars()
                .all(|c| c.is_ascii_digit())
        {
            return Err(Error::unsupported(format!("memref layout in `{s}`")));
        }
        let (dims, e) = dims_and_element(shaped)?;
        return Ok(Ty::MemRef {
            ty: Type::new(element(e)?, dims),
            space: MemorySpace::of_memref(s),
        });
    }
    Ok(Ty::Value(Type::scalar(element(s)?)))
}

/// The value type of a printed scalar or vector type (not a memref).
pub fn value_ty(s: &str) -> Result<Type> {
    match ty(s)? {
        Ty::Value(t) | Ty::Tensor(t) => Ok(t),
        Ty::MemRef { .. } => Err(Error::new(format!("expected a value type, got `{s}`"))),
    }
}

/// `array<i64: 2, 2, 4>` or `array<i32>` → the integers.
pub fn int_array(s: &str) -> Result<Vec<i64>> {
    let inner = inside(s.trim(), "array").ok_or_else(|| bad("a dense array", s))?;
    let list = inner.split_once(':').map_or("", |(_, l)| l);
    list.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().map_err(|_| bad("an integer", x)))
        .collect()
}

/// `[1, 0]` → the integers (a bracketed list, as in tpu dimension numbers).
pub fn int_list(s: &str) -> Result<Vec<i64>> {
    let inner = s
        .trim()
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .ok_or_else(|| bad("a list", s))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().map_err(|_| bad("an integer", x)))
        .collect()
}

/// `3 : i64` → 3; `true` → 1.
pub fn int(s: &str) -> Result<i64> {
    let v = s.split(':').next().unwrap_or_default().trim();
    match v {
        "true" => Ok(1),
        "false" => Ok(0),
        _ => v.parse().map_err(|_| bad("an integer attribute", s)),
    }
}

/// `#tpu.dimension_semantics<parallel>` → `parallel` (the text inside the last `<…>`).
pub fn enum_case(s: &str) -> Result<&str> {
    let s = s.trim();
    let open = s.rfind('<').ok_or_else(|| bad("an enum attribute", s))?;
    s[open + 1..]
        .strip_suffix('>')
        .map(str::trim)
        .ok_or_else(|| bad("an enum attribute", s))
}

/// The value of a constant attribute: a scalar (`0 : index`, `1.0 : f32`, `true`) or a splat
/// (`dense<0.000000e+00> : vector<8xf32>`, `dense<0xFF800000> : vector<8xf32>`).
pub fn literal(s: &str, dtype: DType) -> Result<Literal> {
    let s = s.trim();
    let value = match s.strip_prefix("dense<") {
        Some(rest) => {
            let end = rest.find('>').ok_or_else(|| bad("a dense attribute", s))?;
            let v = &rest[..end];
            if v.starts_with('[') || v.starts_with('"') {
                return Err(Error::unsupported(format!(
                    "a constant that is not a splat (`{}`)",
                    truncate(s)
                )));
            }
            v
        }
        None => s.rsplit_once(" : ").map_or(s, |(v, _)| v),
    }
    .trim();
    match value {
        "true" => return Ok(Literal::Bool(true)),
        "false" => return Ok(Literal::Bool(false)),
        _ => {}
    }
    if let Some(hex) = value.strip_prefix("0x") {
        let bits = u64::from_str_radix(hex, 16).map_err(|_| bad("a hex float", value))?;
        let x = match dtype {
            DType::F32 => f32::from_bits(bits as u32) as f64,
            DType::BF16 => tpukit_dsl::bf16::from_bits(bits as u16).to_f64(),
            DType::F16 => tpukit_dsl::f16::from_bits(bits as u16).to_f64(),
            _ => bits as i64 as f64,
        };
        return Ok(if dtype.is_float() {
            Literal::Float(x)
        } else {
            Literal::Int(bits as i64)
        });
    }
    if dtype.is_float() {
        value
            .parse::<f64>()
            .map(Literal::Float)
            .map_err(|_| bad("a float", value))
    } else if dtype.is_bool() {
        value
            .parse::<i64>()
            .map(|i| Literal::Bool(i != 0))
            .map_err(|_| bad("a bool", value))
    } else {
        value
            .parse::<i64>()
            .map(Literal::Int)
            .map_err(|_| bad("an integer", value))
    }
}

/// The values of a constant attribute (`dense<…> : type`) of type `ty`: `None` for a splat
/// (which [`literal`] reads), else one literal per element in row-major order, from a
/// bracketed list (`dense<[[1, 2], [3, 4]]>`) or hex data (`dense<"0x0000803F…">`, the
/// elements' little-endian bytes). Integers wrap to the dtype (an unsigned `4294967295` is
/// the i32 bits of -1).
pub fn dense_values(s: &str, ty: &tpukit_dsl::Type) -> Result<Option<Vec<Literal>>> {
    let s = s.trim();
    let Some(rest) = s.strip_prefix("dense<") else {
        return Ok(None);
    };
    let end = rest
        .rfind("> :")
        .or_else(|| rest.rfind('>'))
        .ok_or_else(|| bad("a dense attribute", s))?;
    let v = rest[..end].trim();
    let dtype = ty.dtype;
    let values: Vec<Literal> = if let Some(hex) = v.strip_prefix("\"0x") {
        let hex = hex.trim_end_matches('"');
        let size = dtype.size_bytes();
        if dtype.is_bool() || !hex.len().is_multiple_of(2 * size) {
            return Err(Error::unsupported(format!(
                "a constant of {dtype} as hex data (`{}`)",
                truncate(s)
            )));
        }
        let values: Vec<Literal> = hex
            .as_bytes()
            .chunks(2 * size)
            .map(|chunk| {
                let mut bits = 0u64;
                for (i, byte) in chunk.chunks(2).enumerate() {
                    let byte = std::str::from_utf8(byte)
                        .ok()
                        .and_then(|b| u8::from_str_radix(b, 16).ok())
                        .ok_or_else(|| bad("hex data", s))?;
                    bits |= (byte as u64) << (8 * i);
                }
                let x = tpukit_dsl::from_bits(dtype, bits);
                Ok(if dtype.is_float() {
                    Literal::Float(x)
                } else {
                    Literal::Int(x as i64)
                })
            })
            .collect::<Result<_>>()?;
        match values.as_slice() {
            // A splat's hex data holds one element.
            [one] => vec![*one; ty.num_elements()],
            _ => values,
        }
    } else if v.starts_with('[') {
        v.split(',')
            .map(|e| {
                let lit = literal(
                    e.trim_matches(|c: char| c == '[' || c == ']' || c.is_whitespace()),
                    dtype,
                )?;
                Ok(match lit {
                    Literal::Int(i) if dtype.is_int() => Literal::Int(dtype.wrap_int(i)),
                    other => other,
                })
            })
            .collect::<Result<_>>()?
    } else {
        return Ok(None);
    };
    if values.len() != ty.num_elements() {
        return Err(bad(&format!("{} values", ty.num_elements()), s));
    }
    Ok(Some(values))
}

fn truncate(s: &str) -> String {
    if s.len() > 80 {
        format!("{}…", &s[..80])
    } else {
        s.to_string()
    }
}

fn bad(what: &str, s: &str) -> Error {
    Error::new(format!("expected {what}, got `{}`", truncate(s)))
}

/// `"file":line:col` → a [`tpukit_dsl::Loc`]: the first file position in a printed location.
pub fn loc(s: &str) -> Option<tpukit_dsl::Loc> {
    let mut rest = s;
    while let Some(q) = rest.find('"') {
        let after = &rest[q + 1..];
        let end = after.find('"')?;
        let (file, tail) = (&after[..end], &after[end + 1..]);
        if let Some(pos) = tail.strip_prefix(':') {
            let nums: Vec<u32> = pos
                .split(|c: char| !c.is_ascii_digit())
                .take(2)
                .filter_map(|n| n.parse().ok())
                .collect();
            if nums.len() == 2 {
                return Some(tpukit_dsl::Loc::new(file, nums[0], nums[1]));
            }
        }
        rest = tail;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpukit_dsl::ErrorKind;

    #[test]
    fn types() {
        assert_eq!(
            ty("vector<8x128xf32>").unwrap(),
            Ty::Value(Type::new(DType::F32, [8, 128]))
        );
        assert_eq!(ty("index").unwrap(), Ty::Value(Type::scalar(DType::I32)));
        assert_eq!(
            ty("memref<4xi32, 4>").unwrap(),
            Ty::MemRef {
                ty: Type::new(DType::I32, [4]),
                space: MemorySpace::Smem
            }
        );
        assert_eq!(
            ty("tensor<bf16>").unwrap(),
            Ty::Tensor(Type::scalar(DType::BF16))
        );
        assert_eq!(
            ty("vector<?x128xf32>").unwrap_err().kind,
            ErrorKind::Unsupported
        );
        assert!(ty("f64").unwrap_err().message.contains("`f64`"));
    }

    #[test]
    fn attributes() {
        assert_eq!(int_array("array<i64: 2, 2, 4>").unwrap(), vec![2, 2, 4]);
        assert_eq!(int_array("array<i32>").unwrap(), Vec::<i64>::new());
        assert_eq!(int("11 : i64").unwrap(), 11);
        assert_eq!(
            enum_case("#tpu.dimension_semantics<parallel>").unwrap(),
            "parallel"
        );
        assert_eq!(
            literal("dense<0xFF800000> : vector<8xf32>", DType::F32).unwrap(),
            Literal::Float(f64::NEG_INFINITY)
        );
        assert_eq!(literal("0 : index", DType::I32).unwrap(), Literal::Int(0));
        assert_eq!(
            literal("2.500000e+00 : f32", DType::F32).unwrap(),
            Literal::Float(2.5)
        );
        assert!(literal("dense<[1, 2]> : vector<2xi32>", DType::I32).is_err());
    }

    #[test]
    fn locations() {
        let l = loc(r#"loc(callsite("get:"("k"("/tmp/a.py":27:8 to :18)) at "x"))"#).unwrap();
        assert_eq!((l.file.as_ref(), l.line, l.column), ("/tmp/a.py", 27, 8));
        assert!(loc("loc(unknown)").is_none());
    }
}
