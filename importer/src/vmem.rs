//! The VMEM a Mosaic kernel's windows and VMEM scratch take on a TPU, checked against the
//! scoped VMEM a TPU's compiler gives a kernel: a kernel whose buffers cannot all be in it at
//! once fails to compile there (XLA's allocation of its windows runs out of memory), so it is
//! refused here too rather than run on the CPU devices, which have no such limit. The error
//! (an [`ErrorKind::Memory`]) lists every allocation as a TPU's compiler reports it: the
//! window's shape beside the array's, and its buffering.
//!
//! The limit is the call's `vmem_limit_bytes` (at most a TensorCore's whole VMEM) or, without
//! one, the v5e's default scoped limit: on a CPU device `pltpu.get_tpu_info()` describes a
//! v5e, and libtpu refuses a v5e kernel above 16 MiB (a v6e's default is 32 MiB).
//!
//! The count is a lower bound of what a TPU allocates (no tile padding, no internal scratch,
//! one buffer for a window the pipeline fetches once), so a kernel is never refused that a
//! TPU could fit.

use tpukit_dsl::{DType, Error, ErrorKind, Result};

/// The VMEM of a v5e or v6e TensorCore, in bytes: the most `vmem_limit_bytes` can give.
pub const VMEM_BYTES: usize = 128 << 20;

/// The VMEM a v5e's compiler gives a kernel that sets no `vmem_limit_bytes`, in bytes
/// (libtpu's default scoped VMEM: a v5e kernel of 16 MiB of windows compiles, of 16 MiB and
/// 1 KiB does not).
pub const SCOPED_VMEM_BYTES: usize = 16 << 20;

/// One VMEM allocation of a kernel: a window of an input or output, or a scratch buffer.
pub struct Allocation {
    /// What it is, as a TPU's compiler names it (`input window allocation for operator
    /// input 1`: the call's operands counted from the first scalar-prefetch one).
    pub what: String,
    pub dtype: DType,
    /// The shape of one buffer.
    pub shape: Vec<usize>,
    /// The whole array's shape, for a window.
    pub full: Option<Vec<usize>>,
    /// How many buffers of `shape` the pipeline keeps (1 or 2).
    pub buffers: usize,
}

impl Allocation {
    fn bytes(&self) -> usize {
        self.shape
            .iter()
            .fold(self.dtype.size_bytes(), |n, &d| n.saturating_mul(d))
            .saturating_mul(self.buffers)
    }

    fn describe(&self) -> String {
        let typed = |shape: &[usize]| {
            let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
            format!("{}[{}]", self.dtype, dims.join(","))
        };
        let mut text = format!("{} of {}", self.what, mib(self.bytes()));
        if let Some(full) = &self.full {
            text += &format!(
                ". The window shape is {}, while the full shape is {}.",
                typed(&self.shape),
                typed(full)
            );
        } else {
            text += &format!(": {}.", typed(&self.shape));
        }
        text += if self.buffers == 1 {
            " This allocation is single buffered."
        } else {
            " This allocation has 2 buffering levels."
        };
        text
    }
}

fn mib(bytes: usize) -> String {
    format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64)
}

/// Refuses `allocations` that together exceed `limit` (a call's `vmem_limit_bytes`) or,
/// without one, [`SCOPED_VMEM_BYTES`], naming each.
pub fn check(allocations: &[Allocation], limit: Option<usize>) -> Result<()> {
    let total = allocations
        .iter()
        .fold(0usize, |n, a| n.saturating_add(a.bytes()));
    let capacity = limit.unwrap_or(SCOPED_VMEM_BYTES).min(VMEM_BYTES);
    if total <= capacity {
        return Ok(());
    }
    let bound = match limit {
        Some(n) if n < VMEM_BYTES => format!("the call's vmem_limit_bytes ({n} bytes)"),
        Some(_) => format!(
            "the {} of VMEM of a TPU v5e or v6e TensorCore",
            mib(VMEM_BYTES)
        ),
        None => format!(
            "the {} of scoped VMEM a TPU v5e gives a kernel by default (a call's \
             `vmem_limit_bytes` raises it, up to {})",
            mib(SCOPED_VMEM_BYTES),
            mib(VMEM_BYTES)
        ),
    };
    let listed: Vec<String> = allocations
        .iter()
        .filter(|a| a.bytes() > 0)
        .map(Allocation::describe)
        .collect();
    Err(Error::new(format!(
        "Ran out of memory in memory space vmem: the kernel's windows and scratch need {}, \
         more than {bound}, so it does not compile for a TPU (smaller blocks, or \
         `pl.Buffered(1)` for a window fetched once, fit): {}",
        mib(total),
        listed.join("; ")
    ))
    .with_kind(ErrorKind::Memory))
}
