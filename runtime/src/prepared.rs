//! Kernels checked once, launched many times.
//!
//! Every launch needs its kernel verified and, on the compiled backend, its structural hash
//! (the compilation cache's key): for a large kernel that is printing and hashing its whole IR,
//! a few hundred microseconds. A [`Prepared`] kernel pays that once; libraries that launch the
//! same kernels over and over (tpuBLAS) keep them prepared.

use crate::RuntimeError;
use tpukit_dsl::{Kernel, KernelHash};

/// What [`crate::launch`] runs: a [`Kernel`], verified and hashed at every launch, or a
/// [`Prepared`] one.
pub trait Launchable {
    fn kernel(&self) -> &Kernel;
    /// Checks the kernel (a no-op once prepared).
    fn verify(&self) -> Result<(), RuntimeError>;
    /// The kernel's structural hash (computed once when prepared).
    fn hash(&self) -> KernelHash;
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

/// A verified kernel with its structural hash. Immutable: the hash always describes the
/// kernel.
#[derive(Debug)]
pub struct Prepared {
    kernel: Kernel,
    hash: KernelHash,
}

impl Prepared {
    /// Verifies `kernel` and computes its hash.
    pub fn new(kernel: Kernel) -> Result<Prepared, RuntimeError> {
        tpukit_dsl::verify(&kernel)?;
        let hash = kernel.structural_hash();
        Ok(Prepared { kernel, hash })
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
}
