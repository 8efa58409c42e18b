//! Kernels checked once, launched many times.
//!
//! Every launch needs its kernel verified and, on the compiled backend, its structural hash
//! (the compilation cache's key): for a large kernel that is printing and hashing its whole IR,
//! a few hundred microseconds. A [`Prepared`] kernel pays that once; libraries that launch the
//! same kernels over and over (tpuBLAS) keep them prepared.

use crate::RuntimeError;
use std::borrow::Cow;
use tpukit_dsl::{Kernel, KernelHash};

/// What [`crate::launch`] runs: a [`Kernel`], verified and hashed at every launch, or a
/// [`Prepared`] one.
pub trait Launchable {
    fn kernel(&self) -> &Kernel;
    /// Checks the kernel (a no-op once prepared).
    fn verify(&self) -> Result<(), RuntimeError>;
    /// The kernel's structural hash (computed once when prepared).
    fn hash(&self) -> KernelHash;
    /// One flag per output: whether the kernel writes it whole, so a launch on the compiled
    /// CPU backend need not zero it first (see `coverage.rs`; found once when prepared).
    fn whole_outputs(&self) -> Cow<'_, [bool]> {
        Cow::Owned(crate::coverage::whole_outputs(self.kernel()))
    }
}

impl Launchable for Kernel {
    fn kernel(&self) -> &Kernel {
        self
    }

    fn verify(&self) -> Result<(), RuntimeError> {
        Ok(tpukit_dsl::verify(self)?)
    }

    fn hash(&self) -> KernelHash {
        self.structural_hash()
    }
}

/// A verified kernel with its structural hash and which outputs it writes whole.
/// Immutable: both always describe the kernel.
#[derive(Debug)]
pub struct Prepared {
    kernel: Kernel,
    hash: KernelHash,
    whole: Vec<bool>,
}

impl Prepared {
    /// Verifies `kernel` and computes its hash.
    pub fn new(kernel: Kernel) -> Result<Prepared, RuntimeError> {
        tpukit_dsl::verify(&kernel)?;
        let hash = kernel.structural_hash();
        let whole = crate::coverage::whole_outputs(&kernel);
        Ok(Prepared {
            kernel,
            hash,
            whole,
        })
    }
}

impl Launchable for Prepared {
    fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    fn verify(&self) -> Result<(), RuntimeError> {
        Ok(())
    }

    fn hash(&self) -> KernelHash {
        self.hash
    }

    fn whole_outputs(&self) -> Cow<'_, [bool]> {
        Cow::Borrowed(&self.whole)
    }
}
