//! IR → object code → a callable entry point, and the in-process cache of compiled kernels.

use super::abi::Entry;
use super::artifact::Artifact;
use super::cache::{self, CacheKey};
use super::codegen::{self, CodegenOptions, OpSite};
use super::{jit, target::HostTarget};
use crate::RuntimeError;
use inkwell::context::Context;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::FileType;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tpukit_dsl::{ErrorKind, Kernel, KernelHash};

/// A kernel compiled for the host and linked into the process.
pub struct Compiled {
    pub(crate) entry: Entry,
    /// Bytes of per-thread workspace the kernel needs.
    pub workspace_bytes: usize,
    pub(crate) sites: Vec<OpSite>,
    /// What every launch asks of the kernel's IR (of the kernel launched:
    /// [`Compiled::launched`]), found at its first launch (the compiled code is keyed by the
    /// IR's structural hash, so any kernel it runs has the same facts).
    pub(crate) facts: OnceLock<LaunchFacts>,
    /// The CPU form of the kernel the code was compiled from, if it differs (`launched`):
    /// found at the first launch, as `facts`.
    cpu_form: OnceLock<Option<Kernel>>,
}

impl Compiled {
    /// The kernel this code runs for `kernel` (the kernel it was compiled from, in debug mode
    /// or not as `debug` says): its CPU form where it has one outside debug mode
    /// ([`launched`]), whose grid and windows a launch must then use, else `kernel` itself.
    pub(crate) fn launched<'a>(&'a self, kernel: &'a Kernel, debug: bool) -> &'a Kernel {
        self.cpu_form
            .get_or_init(|| launched(kernel, debug))
            .as_ref()
            .unwrap_or(kernel)
    }
}

/// The CPU form of `kernel` compiled and launched outside debug mode (debug mode runs the
/// kernel as written, step by step), if it differs: coalesced narrow blocks
/// (`coalesce`), then every axis `parallel` where the steps are independent
/// (`independent`).
pub(crate) fn launched(kernel: &Kernel, debug: bool) -> Option<Kernel> {
    if debug {
        return None;
    }
    let coalesced = super::coalesce::coalesce(kernel);
    let parallel = super::independent::parallel_steps(coalesced.as_ref().unwrap_or(kernel));
    parallel.or(coalesced)
}

/// Facts of a kernel's IR a launch needs, found once per compiled kernel rather than by a
/// walk of the IR at every launch.
pub(crate) struct LaunchFacts {
    /// The operands each launch gives the kernel copies of: the prefetch operands the body
    /// writes (`tpukit_dsl::smem`) and the semaphore inputs (whose counts its waits take).
    pub written: Vec<tpukit_dsl::OperandId>,
    /// Whether the kernel is passed semaphores (it then runs in order, on one worker).
    pub semaphores: bool,
    /// The leading grid axes a launch may split among workers (`codegen::split_axes`).
    pub lead: usize,
    /// The arithmetic of one run of the body (`worth::step_compute`).
    pub compute: usize,
}

impl LaunchFacts {
    pub(crate) fn of(kernel: &Kernel) -> LaunchFacts {
        let semaphores = kernel.semaphore_operands();
        let mut written = kernel.written_prefetch();
        written.extend(
            semaphores
                .iter()
                .filter(|&&id| kernel.operand(id).role == tpukit_dsl::Role::Input),
        );
        LaunchFacts {
            written,
            semaphores: !semaphores.is_empty(),
            lead: super::codegen::split_axes(kernel),
            compute: super::worth::step_compute(kernel),
        }
    }
}

pub fn options_for(target: &HostTarget, debug: bool) -> CodegenOptions {
    CodegenOptions {
        debug,
        vector_lanes: if target.has_avx512() { 16 } else { 8 },
        bf16_dot: target.has_avx512_bf16(),
        bf16_convert: target.has_avx512_bf16_convert(),
        minmax_range: target.has_avx512_dq_vl(),
        erf_table: target.has_avx512(),
    }
}

/// A symbol name no other compilation uses: the key names the kernel and options, the
/// process id and a counter the compilation.
fn entry_name(key: &CacheKey) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    format!(
        "tpukit_{}_{}_{}",
        &key.0[..24],
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Generates, optimises (LLVM's `default<O3>`) and assembles `kernel` for `target`: its
/// CPU form outside debug mode, where it has one (see `Compiled::launched`).
///
/// Diagnostics: `TPUKIT_DUMP_LLVM=1` prints the optimised module, `TPUKIT_TIMINGS=1` the time
/// spent emitting, optimising and assembling it.
pub fn compile_artifact(
    kernel: &Kernel,
    target: &HostTarget,
    options: CodegenOptions,
) -> Result<Artifact, RuntimeError> {
    let _gate = crate::fork::section();
    tpukit_dsl::verify(kernel)?;
    let entry = entry_name(&CacheKey::new(kernel, target, options));
    let cpu_form = launched(kernel, options.debug);
    let kernel = cpu_form.as_ref().unwrap_or(kernel);
    let clock = std::time::Instant::now();
    let ctx = Context::create();
    let emitted = codegen::emit(&ctx, kernel, &entry, options)
        .map_err(|e| RuntimeError::new(&kernel.name, e.message).with_kind(e.kind))?;
    let emitted_at = clock.elapsed();
    let machine = target.machine().map_err(|m| internal(&kernel.name, m))?;
    let module = emitted.module;
    module.set_triple(&machine.get_triple());
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    // Unrolling the (static, often 1024-long) block loops, fully or by interleaving vectorised
    // iterations, multiplies code size and compile time (10x for full unrolling) for no
    // measured gain in these memory-bound loops; the `dot` micro-kernel is unrolled by
    // construction.
    let passes = PassBuilderOptions::create();
    passes.set_loop_unrolling(false);
    passes.set_loop_interleaving(false);
    module
        .run_passes("default<O3>", &machine, passes)
        .map_err(|e| internal(&kernel.name, format!("LLVM passes: {e}")))?;
    codegen::finish(&module, &machine, options).map_err(|e| internal(&kernel.name, e.message))?;
    let optimised_at = clock.elapsed();
    if std::env::var_os("TPUKIT_DUMP_LLVM").is_some() {
        eprintln!("{}", module.print_to_string().to_string());
    }
    let object = machine
        .write_to_memory_buffer(&module, FileType::Object)
        .map_err(|e| internal(&kernel.name, format!("LLVM codegen: {e}")))?
        .as_slice()
        .to_vec();
    if std::env::var_os("TPUKIT_TIMINGS").is_some() {
        eprintln!(
            "tpukit cpu: `{}`: emit {:?}, optimise {:?}, assemble {:?}",
            kernel.name,
            emitted_at,
            optimised_at - emitted_at,
            clock.elapsed() - optimised_at
        );
    }
    Ok(Artifact {
        entry,
        object,
        workspace_bytes: emitted.workspace_bytes as u64,
        sites: emitted.sites,
    })
}

/// Links an artifact into the process.
pub fn link(artifact: Artifact) -> Result<Compiled, String> {
    let _gate = crate::fork::section();
    let address = jit::load(&artifact.object, &artifact.entry)?;
    // SAFETY: the entry was emitted with exactly the `Entry` signature (see `abi`).
    let entry: Entry = unsafe { std::mem::transmute::<usize, Entry>(address) };
    Ok(Compiled {
        entry,
        workspace_bytes: artifact.workspace_bytes as usize,
        sites: artifact.sites,
        facts: OnceLock::new(),
        cpu_form: OnceLock::new(),
    })
}

/// A failure of the compiler or the linker on a verified kernel: a bug in tpukit, or an
/// unusable LLVM, never the kernel's fault.
fn internal(kernel: &str, message: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::new(kernel, message).with_kind(ErrorKind::Internal)
}

/// Compiles `kernel` for the host and links it, bypassing every cache (what the compile-
/// latency benchmark measures).
pub fn compile(kernel: &Kernel, debug: bool) -> Result<Compiled, RuntimeError> {
    let _gate = crate::fork::section();
    let target = HostTarget::detect();
    let artifact = compile_artifact(kernel, &target, options_for(&target, debug))?;
    link(artifact).map_err(|m| internal(&kernel.name, m))
}

type Slot = Arc<OnceLock<Result<Arc<Compiled>, RuntimeError>>>;

/// The in-process cache of compiled kernels, by structural hash and debug mode.
fn memory() -> std::sync::MutexGuard<'static, HashMap<(KernelHash, bool), Slot>> {
    static MEMORY: OnceLock<Mutex<HashMap<(KernelHash, bool), Slot>>> = OnceLock::new();
    MEMORY
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Links `artifact`, the (non-debug) compiled form of the kernel whose structural hash is
/// `hash`, and keeps it in the in-process cache, as its first launch would.
pub(crate) fn preload(hash: KernelHash, artifact: Artifact) {
    let _gate = crate::fork::section();
    let slot = memory().entry((hash, false)).or_default().clone();
    slot.get_or_init(|| {
        link(artifact)
            .map(Arc::new)
            .map_err(|m| internal("warm-up", m))
    });
}

/// The compiled kernel for `(kernel, debug)`, `hash` being the kernel's structural hash: from
/// memory, a bundle, the disk cache or the compiler (see [`cache`]). Concurrent callers
/// asking for the same kernel wait for one compilation.
pub(crate) fn cached(
    kernel: &Kernel,
    hash: KernelHash,
    debug: bool,
) -> Result<Arc<Compiled>, RuntimeError> {
    // Held while waiting for another thread's compilation too: a fork never sees one half
    // done (see `crate::fork`).
    let _gate = crate::fork::section();
    let slot = memory().entry((hash, debug)).or_default().clone();
    slot.get_or_init(|| {
        let clock = std::time::Instant::now();
        let target = HostTarget::detect();
        let options = options_for(&target, debug);
        let key = CacheKey::from_hash(hash, &target, options);
        let keyed_at = clock.elapsed();
        let artifact = cache::artifact(&key, (hash, debug), || {
            compile_artifact(kernel, &target, options)
        })?;
        let found_at = clock.elapsed();
        let compiled = link(artifact)
            .map(Arc::new)
            .map_err(|m| internal(&kernel.name, m));
        if std::env::var_os("TPUKIT_TIMINGS").is_some() {
            eprintln!(
                "tpukit cpu: `{}`: key {keyed_at:?}, artifact {:?}, link {:?}",
                kernel.name,
                found_at - keyed_at,
                clock.elapsed() - found_at
            );
        }
        compiled
    })
    .clone()
}
