//! The compiled CPU backend: kernel IR → LLVM IR (inkwell) → host object code → linked into
//! the process (ORC LLJIT) → called once per worker thread over its share of the grid.
//!
//! A kernel is compiled once per (IR hash, target, options) and kept for the life of the
//! process; runtime extents make one compiled kernel serve every shape its IR allows. Compiled
//! kernels also come from bundles and an on-disk cache shared across processes (`cache`).
//! Outside debug mode, a kernel is compiled and launched in its CPU form
//! (`Compiled::launched`): an elementwise kernel over blocks narrower than a row runs several
//! grid steps as one (`coalesce`); a kernel whose steps each write their own output blocks
//! and keep nothing for the next runs every axis `parallel` (`independent`).

mod abi;
pub(crate) mod artifact;
pub(crate) mod cache;
mod coalesce;
mod codegen;
mod compile;
mod eviction;
mod independent;
mod jit;
mod pool;
mod reuse;
mod shared;
mod smem;
mod stage;
mod target;
mod worth;

pub use artifact::Artifact;
pub(crate) use cache::warn_once;
pub use cache::{
    CacheKey, CacheStats, DEFAULT_CACHE_MAX_BYTES, LOCK_TIMEOUT, entry_bytes, read_entry, stats,
    store,
};
pub use codegen::CodegenOptions;
pub use compile::{Compiled, compile, compile_artifact, link, options_for};
pub(crate) use compile::{cached, launched};
pub use target::{HostTarget, PORTABLE_CPU};
pub use worth::{BRIEF_WORK, MIN_SPLIT_BYTES, set_min_split_bytes};
pub(crate) use worth::{launch_work, step_compute};

/// The leaf locks the fork handler holds across `fork` besides its gate (see `crate::fork`).
pub(crate) fn fork_leaves() -> Vec<Box<dyn std::any::Any>> {
    vec![Box::new(cache::hold_warnings())]
}

/// Prepares the compiled backend ahead of the first launch: reads the host target, creates
/// the JIT that links kernels into the process, starts the worker threads, brings the
/// allocator to its steady state, and links the loaded bundles' warm-up kernel (see
/// [`crate::bundle::WARM_UP`]). A few milliseconds, otherwise paid by the first calls.
/// Nothing else starts any of this: each is created at its first use (threads in a forked
/// child included, see `pool`), so loading tpukit costs nothing until it runs a kernel.
pub fn warm_up() -> Result<(), RuntimeError> {
    let _gate = crate::fork::section();
    HostTarget::detect();
    warm_allocator();
    jit::warm_up().map_err(|m| RuntimeError {
        kind: ErrorKind::Internal,
        message: format!("tpukit cpu: {m}"),
    })?;
    if let Some((hash, artifact)) = crate::bundle::warm_up_entry() {
        compile::preload(hash, artifact);
    }
    Ok(())
}

/// Brings the allocator to the state the first large arrays would bring it to, so the first
/// launch does not pay for it. glibc's malloc serves blocks up to its mmap threshold from the
/// allocating thread's heap; [`alloc::keep_freed_memory`] fixes that threshold at 32 MiB and
/// keeps freed heap memory (otherwise glibc would serve large blocks from fresh `mmap`s,
/// every page faulted in on first touch, and trim its heap at every large `free`). So: touch
/// and free some heap in this thread (16 MiB: arrays are allocated here) and in each worker
/// (4 MiB: their kernels' workspace and scratch), which later blocks reuse without faults
/// (about 3 ms once, here).
fn warm_allocator() {
    alloc::keep_freed_memory();
    touch_heap(16 << 20);
    pool::pool();
}

/// What each helper thread of the pool runs first: touches 4 MiB of its heap (its kernels'
/// workspace and scratch; see [`warm_allocator`]).
fn warm_helper() {
    touch_heap(4 << 20);
}

/// Touches and frees `bytes` of this thread's heap.
fn touch_heap(bytes: usize) {
    let mut heap = std::hint::black_box(Vec::<u8>::with_capacity(bytes));
    heap.resize(bytes, 1);
    drop(std::hint::black_box(heap));
}

use crate::backend::Backend;
use crate::{HostArray, LaunchOptions, Launchable, RuntimeError, alloc};
use abi::{STATUS_LEN, code, field};
use compile::LaunchFacts;
use shared::Shared;
use tpukit_dsl::{Bindings, ErrorKind, Kernel, KernelHash, Role, Semantics};

/// The compiled CPU backend: each kernel compiled once per structural hash (see
/// [`compile::cached`]); `debug` compiles bounds checks into every access.
pub(crate) struct CpuBackend;

impl Backend for CpuBackend {
    fn run(
        &self,
        kernel: &dyn Launchable,
        bindings: &Bindings,
        inputs: &[&HostArray],
        outputs: &mut [HostArray],
        options: LaunchOptions,
    ) -> Result<(), RuntimeError> {
        run(
            kernel.kernel(),
            kernel.hash(),
            bindings,
            inputs,
            outputs,
            options.debug,
        )
    }
}

/// Runs `kernel` (whose structural hash is `hash`) compiled for the host, writing `outputs`
/// in place.
fn run(
    kernel: &Kernel,
    hash: KernelHash,
    bindings: &Bindings,
    inputs: &[&HostArray],
    outputs: &mut [HostArray],
    debug: bool,
) -> Result<(), RuntimeError> {
    // Contiguous row-major copies only where the caller's layout is not already that.
    let inputs: Vec<std::borrow::Cow<HostArray>> =
        inputs.iter().map(|a| a.standard_layout()).collect();
    let ins: Vec<*const u8> = inputs.iter().map(|a| a.data_ptr()).collect();
    let outs: Vec<*mut u8> = outputs
        .iter_mut()
        .map(|o| {
            o.make_standard_layout();
            o.data_ptr_mut()
        })
        .collect();
    // SAFETY: the pointers address the arrays' row-major storage, which holds their (bound)
    // shapes and lives, unaliased (outputs made unique by `data_ptr_mut`), for the call.
    unsafe { run_at(kernel, hash, bindings, &ins, &outs, debug) }
}

/// [`run`] on memory given by address: `inputs` and `outputs` in kernel order (prefetch
/// operands and inputs, then outputs).
///
/// # Safety
/// Each pointer addresses row-major contiguous storage of its operand's dtype and shape
/// (bound by `bindings`), valid for the call; outputs are writable and overlap nothing else.
pub(crate) unsafe fn run_at(
    kernel: &Kernel,
    hash: KernelHash,
    bindings: &Bindings,
    inputs: &[*const u8],
    outputs: &[*mut u8],
    debug: bool,
) -> Result<(), RuntimeError> {
    let compiled = compile::cached(kernel, hash, debug)?;
    let kernel = compiled.launched(kernel, debug);
    let (grid, dims) = extents(kernel, bindings);
    // SAFETY: this function's contract; `grid` and `dims` are the bound extents of the kernel
    // the code runs (the same operands and shapes: coalescing changes windows and grid).
    unsafe { run_resolved(kernel, &compiled, (&grid, &dims), inputs, outputs) }
}

/// The grid's extents and every operand dimension (operand after operand), as `bindings`
/// (which bind every symbol: see `launch::bind`) resolve them: what the compiled code reads.
pub(crate) fn extents(kernel: &Kernel, bindings: &Bindings) -> (Vec<i64>, Vec<i64>) {
    let grid = kernel
        .grid
        .iter()
        .map(|a| a.extent.resolve(bindings).expect("bound by launch") as i64)
        .collect();
    let dims = kernel
        .operands
        .iter()
        .flat_map(|o| &o.shape)
        .map(|d| d.resolve(bindings).expect("bound by launch") as i64)
        .collect();
    (grid, dims)
}

/// [`run_at`] with `kernel`'s compiled code and its extents (see [`extents`]) given.
///
/// # Safety
/// As for [`run_at`], the pointers addressing arrays of the extents `dims`.
pub(crate) unsafe fn run_resolved(
    kernel: &Kernel,
    compiled: &Compiled,
    (grid, dims): (&[i64], &[i64]),
    inputs: &[*const u8],
    outputs: &[*mut u8],
) -> Result<(), RuntimeError> {
    if grid.contains(&0) {
        return Ok(());
    }
    let mut base: Vec<usize> = Vec::with_capacity(kernel.operands.len());
    let (mut ins, mut outs) = (inputs.iter(), outputs.iter());
    for o in &kernel.operands {
        base.push(match o.role {
            Role::Prefetch | Role::Input => *ins.next().expect("checked") as usize,
            Role::Output => *outs.next().expect("checked") as usize,
            Role::Scratch => 0,
        });
    }
    // A kernel that writes prefetch operands gets its own copies, and runs in order on one
    // worker (see `tpukit_dsl::smem`); so does one passed semaphores (`tpukit_dsl::dma`),
    // with its own copies of the semaphore inputs, whose counts its waits take from.
    let facts = compiled.facts.get_or_init(|| LaunchFacts::of(kernel));
    let _copies = if facts.written.is_empty() {
        Vec::new()
    } else {
        // SAFETY: `base` holds the caller's input pointers (this function's contract).
        unsafe { smem::private_copies(kernel, &facts.written, dims, &mut base) }
            .map_err(|e| RuntimeError::new(&kernel.name, e.message).with_kind(e.kind))?
    };
    let may_split = facts.written.is_empty() && !facts.semaphores;
    // SAFETY: `base` holds the caller's arrays (this function's contract); no worker runs.
    let (chunks, shared) = unsafe { split(kernel, grid, facts, may_split, (&base, dims)) }?;
    let call = Call {
        kernel,
        compiled,
        base: &base,
        dims,
        grid,
        shared: shared.as_ref(),
        last: chunks.last().map_or(0, |c| c.1),
    };
    let failures: Vec<Failed> = if chunks.len() == 1 {
        call.worker(chunks[0]).err().into_iter().collect()
    } else {
        // The calling thread and the pool's helpers: no thread start-up per launch; each
        // runs its own share of the chunks, then helps with the rest (a busy core runs fewer).
        pool::each(chunks.len(), &|i| call.worker(chunks[i]))
    };
    match failures.into_iter().next() {
        Some(Failed::Kernel(status)) => Err(describe(kernel, compiled, dims, &status)),
        Some(Failed::Memory(e)) => {
            Err(RuntimeError::new(&kernel.name, e.message).with_kind(e.kind))
        }
        None => Ok(()),
    }
}

type Status = Box<[i64; STATUS_LEN]>;

/// A range `lo..hi` of the linearised leading grid axes that one worker call runs.
type Chunk = (i64, i64);

/// Why a worker stopped: the kernel failed (its status record), or its buffers could not be
/// allocated.
enum Failed {
    Kernel(Status),
    Memory(RuntimeError),
}

/// The ranges of the leading grid axes (taken together, see `codegen::split_axes`) each
/// chunk of work runs: everything in one chunk unless they are `parallel`, else a few chunks
/// per thread (so the pool can balance them); and the outputs those chunks share (see
/// `shared`), whose contents before the launch are kept for the chunks' private copies.
///
/// Workers write outputs in place, so chunks must write disjoint output blocks: all but the
/// last chunk get private copies of shared outputs. A kernel whose shared outputs exceed
/// [`shared::MAX_SHARED_BYTES`] runs in one chunk, as does one that writes a prefetch operand
/// (`tpukit_dsl::smem`), for which the caller passes `may_split` false, and one with less
/// work than a split costs ([`worth::MIN_SPLIT_BYTES`]).
///
/// # Safety
/// `base` holds the operands' pointers, each addressing its array (of `dims`), and no worker
/// runs yet.
unsafe fn split(
    kernel: &Kernel,
    grid: &[i64],
    facts: &LaunchFacts,
    may_split: bool,
    (base, dims): (&[usize], &[i64]),
) -> Result<(Vec<Chunk>, Option<Shared>), RuntimeError> {
    let lead = facts.lead;
    // The compiled code linearises the leading axes into an i64.
    let steps = grid[..lead]
        .iter()
        .try_fold(1i64, |n, &g| n.checked_mul(g))
        .ok_or_else(|| {
            RuntimeError::new(
                &kernel.name,
                format!("the grid {grid:?} has more steps than an i64 counts"),
            )
            .with_kind(ErrorKind::Shape)
        })?;
    let parallel = kernel
        .grid
        .first()
        .is_some_and(|a| a.semantics == Semantics::Parallel);
    if !(parallel
        && may_split
        && steps > 1
        && worth::worth_splitting(kernel, grid, dims, facts.compute))
    {
        return Ok((vec![(0, steps)], None));
    }
    let found = Shared::find(kernel, lead, dims);
    let shared_bytes = found
        .iter()
        .try_fold(0usize, |n, &(_, b)| b.and_then(|b| n.checked_add(b)));
    let fits = shared_bytes.is_some_and(|b| b <= shared::MAX_SHARED_BYTES);
    let threads = pool::threads();
    // One CPU: no helper would take a chunk.
    let chunks = if fits && threads > 1 {
        (4 * threads as i64).min(steps).max(1)
    } else {
        1
    };
    let shared = if chunks > 1 && !found.is_empty() {
        // SAFETY: the caller's contract; the sizes were checked above.
        Some(
            unsafe { Shared::snapshot(&found, base) }
                .map_err(|e| RuntimeError::new(&kernel.name, e.message).with_kind(e.kind))?,
        )
    } else {
        None
    };
    let at = |t: i64| (steps as i128 * t as i128 / chunks as i128) as i64;
    Ok(((0..chunks).map(|t| (at(t), at(t + 1))).collect(), shared))
}

/// One launch's arguments, shared by its workers.
struct Call<'a> {
    kernel: &'a Kernel,
    compiled: &'a Compiled,
    /// Data pointers in operand order (0 for scratch, which each worker allocates).
    base: &'a [usize],
    dims: &'a [i64],
    grid: &'a [i64],
    /// The outputs the chunks share, when the grid is split (see `shared`).
    shared: Option<&'a Shared>,
    /// The end of the last chunk: the chunk that ends there writes the shared outputs.
    last: i64,
}

impl Call<'_> {
    /// Runs the grid points whose first coordinate is in `lo..hi` on this thread.
    fn worker(&self, (lo, hi): (i64, i64)) -> Result<(), Failed> {
        let mut ptrs = self.base.to_vec();
        let _private = match self.shared {
            Some(shared) if hi != self.last => {
                shared.privatise(&mut ptrs).map_err(Failed::Memory)?
            }
            _ => Vec::new(),
        };
        // Scratch and workspace memory is this thread's, kept between calls (see `reuse`).
        let mut scratch = Vec::new();
        let kept = |scratch: Vec<_>| scratch.into_iter().for_each(reuse::release);
        for (i, o) in self.kernel.operands.iter().enumerate() {
            if o.role == Role::Scratch {
                // Static and at most `MAX_BUFFER_BYTES` (verified).
                let shape = o.shape.iter().map(|d| d.as_static().unwrap_or(0));
                let words = tpukit_dsl::buffer_bytes(o.dtype, shape)
                    .map_or(usize::MAX, |b| b.div_ceil(8).max(1));
                let what = format!("scratch operand `{}`", o.name);
                // Filled at every call: what an earlier chunk left is not this chunk's.
                let mem = reuse::filled(words, poison(o.dtype).unwrap_or(0), &what);
                let mut mem = match mem {
                    Ok(mem) => mem,
                    Err(e) => {
                        kept(scratch);
                        return Err(Failed::Memory(e));
                    }
                };
                ptrs[i] = mem.as_mut_ptr() as usize;
                scratch.push(mem);
            }
        }
        // Not filled: the kernel writes each workspace word before reading it (it zeroes its
        // own records, see `codegen::window`).
        let words = self.compiled.workspace_bytes.div_ceil(8).saturating_add(8);
        let mut workspace = match reuse::take(words, "the kernel's workspace") {
            Ok(w) => w,
            Err(e) => {
                kept(scratch);
                return Err(Failed::Memory(e));
            }
        };
        let ws = (workspace.as_mut_ptr() as usize).next_multiple_of(64) as *mut u8;
        let mut status: Status = Box::new([0; STATUS_LEN]);
        // SAFETY: the pointers are live for the call and sized as the ABI says; the kernel
        // checks every index map and dynamic access, so it touches no memory outside the
        // arrays; workers write disjoint output blocks (the `parallel` axis contract).
        let rc = unsafe {
            (self.compiled.entry)(
                ptrs.as_ptr() as *const *mut u8,
                self.dims.as_ptr(),
                self.grid.as_ptr(),
                ws,
                lo,
                hi,
                status.as_mut_ptr(),
                abi::helpers().as_ptr(),
            )
        };
        kept(scratch);
        reuse::release(workspace);
        if rc == 0 {
            Ok(())
        } else {
            Err(Failed::Kernel(status))
        }
    }
}

/// The word float scratch of `dtype` is filled with: NaN (as the interpreter fills it), so
/// a kernel that reads its scratch before writing it fails loudly instead of looking right by
/// luck. `None` for other dtypes, whose scratch is zeroed (semaphores start at zero).
fn poison(dtype: tpukit_dsl::DType) -> Option<u64> {
    use tpukit_dsl::DType;
    match dtype {
        DType::F32 => Some(0x7fc0_0000_7fc0_0000),
        DType::BF16 => Some(0x7fc0_7fc0_7fc0_7fc0),
        DType::F16 => Some(0x7e00_7e00_7e00_7e00),
        _ => None,
    }
}

/// Turns a failed kernel's status record into an error naming the kernel, the operand or op
/// with its source line, the grid point and the index (worded as the interpreter words it).
fn describe(
    kernel: &Kernel,
    compiled: &Compiled,
    dims: &[i64],
    s: &[i64; STATUS_LEN],
) -> RuntimeError {
    let rank = kernel.grid.len().min(field::MAX_POINT);
    let point: Vec<i64> = s[field::POINT..field::POINT + rank].to_vec();
    let (dim, value, extent) = (s[field::DIM], s[field::VALUE], s[field::EXTENT]);
    let site = compiled.sites.get(s[field::SUBJECT] as usize);
    let op = site.map_or_else(String::new, |site| {
        let at = site
            .loc
            .as_ref()
            .map(|l| format!(" at {l}"))
            .unwrap_or_default();
        format!("op `{}`{at}", site.name)
    });
    let (kind, message) = match s[field::CODE] {
        code::WINDOW => {
            let id = s[field::SUBJECT] as usize;
            let o = &kernel.operands[id];
            let first: usize = kernel.operands[..id].iter().map(|o| o.shape.len()).sum();
            let shape = &dims[first..first + o.shape.len()];
            let n = o.shape.len().min(field::MAX_BLOCKS);
            let blocks = &s[field::BLOCKS..field::BLOCKS + n];
            let message = format!(
                "the index map of {} `{}` at grid point {point:?} gives block index {blocks:?}: its window starts at element {value} of dim {dim}, outside the array of shape {shape:?}",
                o.role.name(),
                o.name,
            );
            (ErrorKind::Bounds, message)
        }
        code::ACCESS => {
            let size = s[field::SIZE];
            let range = if size < 0 {
                format!("index {value}")
            } else {
                format!("slice {value}..{}", value + size)
            };
            let (what, name) = match site.and_then(|s| s.operand) {
                Some(id) => {
                    let o = kernel.operand(id);
                    let what = match o.window {
                        tpukit_dsl::Window::Blocked(_) => "block",
                        tpukit_dsl::Window::Whole => "array",
                    };
                    (what, o.name.as_str())
                }
                None => ("ref", "?"),
            };
            let message = format!(
                "{op} in grid step {point:?}: {range} of dim {dim} is outside the {what} of `{name}` (extent {extent})"
            );
            (ErrorKind::Bounds, message)
        }
        code::ELEMENT => (
            ErrorKind::Bounds,
            format!(
                "{op} in grid step {point:?}: element offset {value} is outside the array ({extent} elements)"
            ),
        ),
        code::STEP => (
            ErrorKind::Invalid,
            format!("{op} in grid step {point:?}: loop step {value} is not positive"),
        ),
        code::SEMAPHORE => (
            ErrorKind::Invalid,
            format!(
                "{op} in grid step {point:?}: waits for {extent} on a semaphore that holds \
                 {value}: nothing signalled it enough (on a TPU this wait never returns)"
            ),
        ),
        other => (
            ErrorKind::Internal,
            format!("failed with unknown status {other}"),
        ),
    };
    RuntimeError::new(&kernel.name, message).with_kind(kind)
}
