//! The structural hash that keys every cache: SHA-256 of the printed kernel without source
//! locations.
//!
//! Hashing the printed form (rather than Rust's `Hash`, whose output may change between
//! compiler versions and is seeded per process) makes the key stable across runs, processes,
//! machines and tpukit builds, as long as the printer's format is unchanged; the format is
//! pinned by snapshot tests.

use crate::{Kernel, PrintOptions, print_kernel};
use sha2::{Digest, Sha256};
use std::fmt;

#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
/// A kernel's structural hash: SHA-256 of its printed form without locations (see the
/// module). Equal hashes mean equal kernels, up to source locations; `Display` is lower-case hex.
pub struct KernelHash(pub [u8; 32]);

impl Kernel {
    /// This kernel's [`KernelHash`]: the same for a kernel built anywhere, by any frontend, at
    /// any source location, as long as its IR is the same.
    pub fn structural_hash(&self) -> KernelHash {
        let text = print_kernel(self, PrintOptions { locations: false });
        KernelHash(Sha256::digest(text.as_bytes()).into())
    }
}

impl fmt::Display for KernelHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for KernelHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KernelHash({self})")
    }
}
