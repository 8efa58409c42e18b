//! `#tpu.memory_space<…>` in memref types, which upstream MLIR cannot parse without the tpu
//! dialect, rewritten to integer memory spaces it can.
//!
//! jaxlib prints a Mosaic body's memrefs as `memref<8x128xf32, #tpu.memory_space<vmem>>`. The
//! rewrite is textual and lossless: each such suffix becomes `, N>` with `N` the
//! [`MemorySpace::code`] below, so `memref<8x128xf32, 1>` still says where the buffer lives and
//! the importer reads it back from the parsed type ([`MemorySpace::of_memref`]).

use tpukit_dsl::{Error, Result};

/// Where a Mosaic buffer lives, as far as the importer cares.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MemorySpace {
    /// Vector memory: windows and scratch buffers.
    Vmem,
    /// Scalar memory: scalar-prefetch operands and `memory_space=SMEM` inputs.
    Smem,
    /// Anything else (`any`/HBM with manual DMA, semaphores): recorded so the importer can
    /// name it in its error.
    Other(&'static str),
}

/// Every memory-space name jaxlib prints, with the integer it is rewritten to.
const CODES: [(&str, u32); 6] = [
    ("vmem", 1),
    ("smem", 4),
    ("any", 100),
    ("hbm", 101),
    ("semaphore_mem", 102),
    ("host", 103),
];

impl MemorySpace {
    fn from_code(code: u32) -> MemorySpace {
        match CODES.iter().find(|(_, c)| *c == code) {
            Some(("vmem", _)) => MemorySpace::Vmem,
            Some(("smem", _)) => MemorySpace::Smem,
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

/// `text` with every `, #tpu.memory_space<name>>` replaced by `, code>`.
///
/// Fails, naming it, on a tpu *type* (`!tpu.dma_semaphore`, …): memrefs of those cannot be
/// parsed upstream either, and tpukit imports no DMA or semaphore kernels.
pub fn rewrite(text: &str) -> Result<String> {
    if let Some(at) = text.find("!tpu.") {
        let name: String = text[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '!' | '.' | '_'))
            .collect();
        return Err(Error::unsupported(format!(
            "the Mosaic body uses the type `{name}` (DMA semaphores: kernels with \
             manual copies, memory_space=ANY, are not imported)"
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
            MemorySpace::Other("any")
        );
    }

    #[test]
    fn semaphores_are_named() {
        let e =
            rewrite("memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>").unwrap_err();
        assert!(e.message.contains("`!tpu.dma_semaphore`"), "{e}");
    }
}
