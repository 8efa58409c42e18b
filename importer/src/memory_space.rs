//! `#tpu.memory_space<…>` in memref types, which upstream MLIR cannot parse without the tpu
//! dialect, rewritten to integer memory spaces it can.
//!
//! jaxlib prints a Mosaic body's memrefs as `memref<8x128xf32, #tpu.memory_space<vmem>>`. The
//! rewrite is textual and lossless: each such suffix becomes `, N>` with `N` the
//! [`MemorySpace::code`] below, so `memref<8x128xf32, 1>` still says where the buffer lives and
//! the importer reads it back from the parsed type ([`MemorySpace::of_memref`]).

use tpukit_dsl::{Error, Result, SemaphoreKind};

/// Where a Mosaic buffer lives, as far as the importer cares.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MemorySpace {
    /// Vector memory: windows and scratch buffers.
    Vmem,
    /// Scalar memory: scalar-prefetch operands and `memory_space=SMEM` inputs.
    Smem,
    /// HBM (`any`, `hbm`): reached by DMA.
    Any,
    /// Semaphores (`!tpu.semaphore` or `!tpu.dma_semaphore` in `semaphore_mem`).
    Semaphore(SemaphoreKind),
    /// Anything else (host memory): recorded so the importer can name it in its error.
    Other(&'static str),
}

/// Every memory-space name jaxlib prints, with the integer it is rewritten to.
/// `dma_semaphore_mem` is tpukit's: `semaphore_mem` holding `!tpu.dma_semaphore`s.
const CODES: [(&str, u32); 7] = [
    ("vmem", 1),
    ("smem", 4),
    ("any", 100),
    ("hbm", 101),
    ("semaphore_mem", 102),
    ("host", 103),
    ("dma_semaphore_mem", 104),
];

/// Semaphore memrefs, whose element types upstream MLIR cannot parse, as i32 memrefs in a
/// memory space that keeps the semaphore's kind.
const SEMAPHORES: [(&str, &str); 2] = [
    (
        "!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>",
        "i32, #tpu.memory_space<dma_semaphore_mem>>",
    ),
    (
        "!tpu.semaphore, #tpu.memory_space<semaphore_mem>>",
        "i32, #tpu.memory_space<semaphore_mem>>",
    ),
];

impl MemorySpace {
    fn from_code(code: u32) -> MemorySpace {
        match CODES.iter().find(|(_, c)| *c == code) {
            Some(("vmem", _)) => MemorySpace::Vmem,
            Some(("smem", _)) => MemorySpace::Smem,
            Some(("any" | "hbm", _)) => MemorySpace::Any,
            Some(("semaphore_mem", _)) => MemorySpace::Semaphore(SemaphoreKind::Regular),
            Some(("dma_semaphore_mem", _)) => MemorySpace::Semaphore(SemaphoreKind::Dma),
            Some((name, _)) => MemorySpace::Other(name),
            None => MemorySpace::Other("unknown"),
        }
    }

    /// The memory space of a printed memref type (`memref<8x128xf32, 1>`); none is VMEM.
    pub fn of_memref(ty: &str) -> MemorySpace {
        let inner = ty.trim_end_matches('>');
        match inner.rsplit_once(", ") {
            Some((_, code)) => code
                .trim()
                .parse()
                .map_or(MemorySpace::Vmem, MemorySpace::from_code),
            None => MemorySpace::Vmem,
        }
    }
}

/// `text` with every `, #tpu.memory_space<name>>` replaced by `, code>`, and memrefs of
/// semaphores by i32 memrefs in a semaphore memory space.
///
/// Fails, naming it, on any other tpu *type*: upstream MLIR cannot parse it.
pub fn rewrite(text: &str) -> Result<String> {
    let mut text = text.to_string();
    for (from, to) in SEMAPHORES {
        text = text.replace(from, to);
    }
    let text = text.as_str();
    if let Some(at) = text.find("!tpu.") {
        let name: String = text[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '!' | '.' | '_'))
            .collect();
        return Err(Error::unsupported(format!(
            "the Mosaic body uses the type `{name}`"
        )));
    }
    const PREFIX: &str = ", #tpu.memory_space<";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        out.push_str(&rest[..at]);
        let after = &rest[at + PREFIX.len()..];
        let end = after
            .find('>')
            .ok_or_else(|| Error::new("unterminated #tpu.memory_space attribute"))?;
        let name = &after[..end];
        let code = CODES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| *c)
            .ok_or_else(|| Error::unsupported(format!("memory space `{name}`")))?;
        out.push_str(&format!(", {code}"));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_and_reads_back() {
        let t = rewrite(
            "memref<4xi32, #tpu.memory_space<smem>>, memref<8x128xf32, #tpu.memory_space<vmem>>",
        )
        .unwrap();
        assert_eq!(t, "memref<4xi32, 4>, memref<8x128xf32, 1>");
        assert_eq!(
            MemorySpace::of_memref("memref<4xi32, 4>"),
            MemorySpace::Smem
        );
        assert_eq!(
            MemorySpace::of_memref("memref<8x128xf32, 1>"),
            MemorySpace::Vmem
        );
        assert_eq!(
            MemorySpace::of_memref("memref<8x128xf32>"),
            MemorySpace::Vmem
        );
        assert_eq!(
            MemorySpace::of_memref("memref<8x128xf32, 100>"),
            MemorySpace::Any
        );
    }

    #[test]
    fn semaphores_keep_their_kind() {
        let t = rewrite(
            "memref<2x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>, \
             memref<!tpu.semaphore, #tpu.memory_space<semaphore_mem>>",
        )
        .unwrap();
        assert_eq!(t, "memref<2xi32, 104>, memref<i32, 102>");
        assert_eq!(
            MemorySpace::of_memref("memref<2xi32, 104>"),
            MemorySpace::Semaphore(SemaphoreKind::Dma)
        );
        assert_eq!(
            MemorySpace::of_memref("memref<i32, 102>"),
            MemorySpace::Semaphore(SemaphoreKind::Regular)
        );
    }

    #[test]
    fn other_tpu_types_are_named() {
        let e = rewrite("memref<!tpu.float8, #tpu.memory_space<vmem>>").unwrap_err();
        assert!(e.message.contains("`!tpu.float8`"), "{e}");
    }
}
