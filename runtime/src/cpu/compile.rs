//! IR → object code → a callable entry point, and the in-process cache of compiled kernels.

use super::abi::Entry;
use super::codegen::{self, CodegenOptions, OpSite};
use super::{jit, target::HostTarget};
use crate::RuntimeError;
use inkwell::context::Context;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::FileType;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tpukit_dsl::{Kernel, KernelHash};

/// A kernel compiled for the host and linked into the process.
pub struct Compiled {
    pub(crate) entry: Entry,
    /// Bytes of per-thread workspace the kernel needs.
    pub workspace_bytes: usize,
    pub(crate) sites: Vec<OpSite>,
    /// The relocatable object it was linked from.
    pub object: Vec<u8>,
}

/// Object code for `kernel` (exporting `entry`), and what the runtime needs to call it.
pub struct Object {
    pub bytes: Vec<u8>,
    pub workspace_bytes: usize,
    pub(crate) sites: Vec<OpSite>,
}

pub fn options_for(target: &HostTarget, debug: bool) -> CodegenOptions {
    CodegenOptions {
        debug,
        vector_lanes: if target.has_avx512() { 16 } else { 8 },
    }
}

/// Generates, optimises (LLVM's `default<O3>`) and assembles `kernel` for `target`.
///
/// Diagnostics: `TPUKIT_DUMP_LLVM=1` prints the optimised module, `TPUKIT_TIMINGS=1` the time
/// spent emitting, optimising and assembling it.
pub fn compile_object(
    kernel: &Kernel,
    entry: &str,
    target: &HostTarget,
    options: CodegenOptions,
) -> Result<Object, RuntimeError> {
    tpukit_dsl::verify(kernel)?;
    let clock = std::time::Instant::now();
    let ctx = Context::create();
    let emitted = codegen::emit(&ctx, kernel, entry, options)
        .map_err(|e| RuntimeError::new(&kernel.name, e.message))?;
    let emitted_at = clock.elapsed();
    let machine = target
        .machine()
        .map_err(|m| RuntimeError::new(&kernel.name, m))?;
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
        .map_err(|e| RuntimeError::new(&kernel.name, format!("LLVM passes: {e}")))?;
    let optimised_at = clock.elapsed();
    if std::env::var_os("TPUKIT_DUMP_LLVM").is_some() {
        eprintln!("{}", module.print_to_string().to_string());
    }
    let bytes = machine
        .write_to_memory_buffer(&module, FileType::Object)
        .map_err(|e| RuntimeError::new(&kernel.name, format!("LLVM codegen: {e}")))?
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
    Ok(Object {
        bytes,
        workspace_bytes: emitted.workspace_bytes,
        sites: emitted.sites,
    })
}

/// Compiles `kernel` for the host and links it into the process.
pub fn compile(kernel: &Kernel, debug: bool) -> Result<Compiled, RuntimeError> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let target = HostTarget::detect();
    let entry = format!(
        "tpukit_{}_{}_{}",
        sanitize(&kernel.name),
        &kernel.structural_hash().to_string()[..16],
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let obj = compile_object(kernel, &entry, &target, options_for(&target, debug))?;
    let address = jit::load(&obj.bytes, &entry).map_err(|m| RuntimeError::new(&kernel.name, m))?;
    // SAFETY: `entry` was emitted with exactly the `Entry` signature (see `abi`).
    let entry: Entry = unsafe { std::mem::transmute::<usize, Entry>(address) };
    Ok(Compiled {
        entry,
        workspace_bytes: obj.workspace_bytes,
        sites: obj.sites,
        object: obj.bytes,
    })
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

type Slot = Arc<OnceLock<Result<Arc<Compiled>, RuntimeError>>>;

/// The compiled kernel for `(kernel, debug)`, compiling it on first use. Concurrent callers
/// asking for the same kernel wait for one compilation.
pub(crate) fn cached(kernel: &Kernel, debug: bool) -> Result<Arc<Compiled>, RuntimeError> {
    static CACHE: OnceLock<Mutex<HashMap<(KernelHash, bool), Slot>>> = OnceLock::new();
    let key = (kernel.structural_hash(), debug);
    let slot = {
        let mut map = CACHE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        map.entry(key).or_default().clone()
    };
    slot.get_or_init(|| compile(kernel, debug).map(Arc::new))
        .clone()
}
