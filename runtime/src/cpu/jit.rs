//! Loading object code into the process: one ORC LLJIT for the whole process.
//!
//! The CPU backend compiles every kernel to a relocatable object (the same bytes a bundle
//! stores) and links it here. Objects are never unloaded: a compiled kernel lives as long as
//! the process, like a loaded shared library. LLJIT is thread-safe; the mutex only keeps the
//! add-then-look-up sequence of one object together.
//!
//! The objects are linked by RuntimeDyld rather than LLJIT's default JITLink: a kernel's
//! object is one function calling a few libm symbols, and RuntimeDyld links such an object
//! 15–40% faster (about 0.1 ms here), which is most of a bundled kernel's first call.

use inkwell::llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy;
use inkwell::llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use inkwell::llvm_sys::orc2::lljit::{
    LLVMOrcCreateLLJIT, LLVMOrcCreateLLJITBuilder, LLVMOrcLLJITAddObjectFile,
    LLVMOrcLLJITBuilderSetObjectLinkingLayerCreator, LLVMOrcLLJITGetGlobalPrefix,
    LLVMOrcLLJITGetMainJITDylib, LLVMOrcLLJITLookup, LLVMOrcLLJITRef,
};
use inkwell::llvm_sys::orc2::{
    LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess, LLVMOrcExecutorAddress,
    LLVMOrcJITDylibAddGenerator,
};
use std::ffi::{CStr, CString};
use std::sync::{Mutex, OnceLock};

struct Jit(LLVMOrcLLJITRef);

// SAFETY: LLJIT is internally synchronised; we additionally serialise every call through the
// mutex in `jit()`.
unsafe impl Send for Jit {}

extern "C" fn rtdyld_layer(
    _ctx: *mut std::ffi::c_void,
    es: inkwell::llvm_sys::orc2::LLVMOrcExecutionSessionRef,
    _triple: *const std::ffi::c_char,
) -> inkwell::llvm_sys::orc2::LLVMOrcObjectLayerRef {
    // SAFETY: a plain LLVM C API call on the session LLJIT passes in.
    unsafe {
        inkwell::llvm_sys::orc2::ee::LLVMOrcCreateRTDyldObjectLinkingLayerWithSectionMemoryManager(
            es,
        )
    }
}

fn jit() -> Result<&'static Mutex<Jit>, String> {
    static JIT: OnceLock<Result<Mutex<Jit>, String>> = OnceLock::new();
    JIT.get_or_init(|| {
        super::target::initialize();
        // SAFETY: plain LLVM C API calls; every error is consumed.
        unsafe {
            let mut j: LLVMOrcLLJITRef = std::ptr::null_mut();
            let builder = LLVMOrcCreateLLJITBuilder();
            LLVMOrcLLJITBuilderSetObjectLinkingLayerCreator(
                builder,
                rtdyld_layer,
                std::ptr::null_mut(),
            );
            check(LLVMOrcCreateLLJIT(&mut j, builder))?;
            // Kernels call libm (`logf`, `erff`, …) and `memcpy`: resolve them in the process.
            let mut generator = std::ptr::null_mut();
            check(LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                &mut generator,
                LLVMOrcLLJITGetGlobalPrefix(j),
                None,
                std::ptr::null_mut(),
            ))?;
            LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(j), generator);
            Ok(Mutex::new(Jit(j)))
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Creates the process's JIT now rather than at the first kernel's first call (the Python
/// package does this at import, so a first call served from a bundle only links), and
/// resolves the process symbols kernels call through it once, which sets up the lookup
/// machinery every later link uses.
pub(crate) fn warm_up() -> Result<(), String> {
    let _gate = crate::fork::section();
    let jit = jit()?.lock().unwrap_or_else(|e| e.into_inner());
    let mut address: LLVMOrcExecutorAddress = 0;
    let name = CString::new("memcpy").expect("no NUL");
    // SAFETY: a plain lookup; its error is consumed.
    unsafe { check(LLVMOrcLLJITLookup(jit.0, &mut address, name.as_ptr())) }
}

/// Links `object` into the process and returns the address of its symbol `entry`.
/// `entry` must be unique in the process (kernels are named by their hash and a counter).
pub(crate) fn load(object: &[u8], entry: &str) -> Result<usize, String> {
    let _gate = crate::fork::section();
    let jit = jit()?.lock().unwrap_or_else(|e| e.into_inner());
    let name = CString::new(entry).map_err(|e| e.to_string())?;
    let buffer_name = CString::new(format!("{entry}.o")).map_err(|e| e.to_string())?;
    // SAFETY: the buffer is copied by LLVM and owned by LLJIT after `AddObjectFile`.
    unsafe {
        let buffer = LLVMCreateMemoryBufferWithMemoryRangeCopy(
            object.as_ptr().cast(),
            object.len(),
            buffer_name.as_ptr(),
        );
        check(LLVMOrcLLJITAddObjectFile(
            jit.0,
            LLVMOrcLLJITGetMainJITDylib(jit.0),
            buffer,
        ))?;
        let mut address: LLVMOrcExecutorAddress = 0;
        check(LLVMOrcLLJITLookup(jit.0, &mut address, name.as_ptr()))?;
        if address == 0 {
            return Err(format!("symbol `{entry}` resolved to null"));
        }
        Ok(address as usize)
    }
}

/// Turns an `LLVMErrorRef` into a message.
unsafe fn check(e: LLVMErrorRef) -> Result<(), String> {
    if e.is_null() {
        return Ok(());
    }
    // SAFETY: `e` is a live error; its message is disposed after copying.
    unsafe {
        let m = LLVMGetErrorMessage(e);
        let s = CStr::from_ptr(m).to_string_lossy().into_owned();
        LLVMDisposeErrorMessage(m);
        Err(format!("LLVM JIT: {s}"))
    }
}
