//! Fork safety of the runtime's process-wide state: a child of `fork` (`os.fork`,
//! `multiprocessing`'s default start method on Linux) never inherits a lock, or a one-time
//! initialisation, that a thread of its parent was in the middle of.
//!
//! A forked child has only the thread that called `fork`. A mutex another thread held at
//! that moment stays locked in the child forever, and a `OnceLock` another thread was
//! initialising stays "running" forever: the child's next compile, link, bundle lookup or
//! warning would wait for ever. LLVM's own global state is just as exposed while a thread
//! compiles.
//!
//! So every section of the runtime that takes those locks, initialises that state or runs
//! LLVM passes through a *gate* (a shared read lock, re-entrant per thread via a depth
//! count so sections nest freely), and a `pthread_atfork` handler takes the gate
//! exclusively before `fork` (waiting for sections in flight to finish, a compile at most)
//! and releases it after, in parent and child. The few leaf locks taken outside gated
//! sections (the warn-once set) are taken by the handler too, after the gate; no code holds
//! one of them while entering the gate, so the order cannot deadlock. The worker threads
//! need no gate: the pool is owned with its process id (see `cpu::pool`).

use std::cell::{Cell, RefCell};
use std::sync::{Once, RwLock, RwLockReadGuard, RwLockWriteGuard};

static GATE: RwLock<()> = RwLock::new(());

thread_local! {
    /// How many gated sections this thread is in.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// What the fork handler holds between `prepare` and `release` (the forking thread).
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

struct Held {
    _gate: RwLockWriteGuard<'static, ()>,
    _leaves: Vec<Box<dyn std::any::Any>>,
}

/// Being inside a gated section; leaving drops it.
pub(crate) struct Section {
    _read: Option<RwLockReadGuard<'static, ()>>,
}

impl Drop for Section {
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get() - 1);
    }
}

/// Enters a gated section: until the returned value drops, no `fork` happens in this
/// process (a `fork` from another thread waits).
pub(crate) fn section() -> Section {
    install();
    let depth = DEPTH.get();
    DEPTH.set(depth + 1);
    Section {
        _read: (depth == 0).then(|| GATE.read().unwrap_or_else(|e| e.into_inner())),
    }
}

fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        // SAFETY: registers plain `extern "C"` functions that only lock and unlock.
        let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(release), Some(release)) };
        if rc != 0 {
            crate::cpu::warn_once("tpukit: pthread_atfork failed; fork while compiling is unsafe");
        }
    });
}

extern "C" fn prepare() {
    // A fork from inside a gated section (a kernel calling `fork`, say) must not wait for
    // itself: then it proceeds ungated, as before this module existed.
    if DEPTH.get() > 0 {
        return;
    }
    let gate = GATE.write().unwrap_or_else(|e| e.into_inner());
    let leaves = crate::cpu::fork_leaves();
    HELD.set(Some(Held {
        _gate: gate,
        _leaves: leaves,
    }));
}

extern "C" fn release() {
    HELD.take();
}
