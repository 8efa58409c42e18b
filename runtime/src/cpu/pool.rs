//! The worker threads compiled kernels run on: created at the first launch that splits its
//! grid (never at start-up or import), and again in a forked child.
//!
//! A forked process has only the thread that called `fork`: a thread pool created before the
//! fork still looks alive in the child, and a launch that hands it work would wait forever.
//! So the pool is owned with the id of the process that created it, and a launch in another
//! process (a child of `fork`, `multiprocessing`'s default start method on Linux) creates a
//! new pool first. The parent's pool is leaked in the child (its threads do not exist there,
//! so it cannot be shut down), once per fork that launches.

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// This process's pool, created on first use.
pub(crate) fn pool() -> Arc<ThreadPool> {
    let _gate = crate::fork::section();
    static POOL: Mutex<Option<(u32, Arc<ThreadPool>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = POOL.lock().unwrap_or_else(|e| e.into_inner());
    match &*slot {
        Some((owner, pool)) if *owner == pid => pool.clone(),
        stale => {
            if let Some((_, inherited)) = stale {
                // Created by the parent before the fork: its threads are not in this process.
                std::mem::forget(inherited.clone());
            }
            let pool = Arc::new(
                ThreadPoolBuilder::new()
                    .num_threads(helper_threads().max(1))
                    .thread_name(|i| format!("tpukit-worker-{i}"))
                    .build()
                    .expect("the worker threads could not be started"),
            );
            *slot = Some((pid, pool.clone()));
            pool
        }
    }
}

/// The threads a launch runs on: the calling thread and [`helper_threads`].
pub(crate) fn threads() -> usize {
    helper_threads() + 1
}

/// The pool's threads: one fewer than the CPUs this process may use, the calling thread
/// being the other. (A pool of as many threads as CPUs, as Rayon makes by default, has one
/// more thread than cores while a launch runs: on two cores, 12% of 1000 back-to-back
/// 1024² bf16 `mm` launches woke their helper ~2 ms late on average, `pool::each` timestamps,
/// as the scheduler queued it behind the caller while the other worker, just finished,
/// still held the second core.)
fn helper_threads() -> usize {
    static HELPERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *HELPERS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .saturating_sub(1)
    })
}

/// Runs `work(i)` for every `i` in `0..n`, on the calling thread and up to [`helper_threads`]
/// of this process's pool: each takes the next index until none is left, so a busy core takes
/// fewer. The calling thread, already running, starts at once and a launch wakes one thread
/// fewer than it uses (a pool-only `install` leaves the caller waiting for as many wake-ups
/// as there are threads, a delay that grows with the host's load). The caller returns once
/// every index has run, without waiting for helpers that found none left: a helper woken
/// after the caller took the last index (on a loaded host, often) only finds the batch over.
/// The `Err`s, in index order; a panic in `work` is re-raised here once every index is done.
pub(crate) fn each<E: Send + 'static>(
    n: usize,
    work: &(dyn Fn(usize) -> Result<(), E> + Sync),
) -> Vec<E> {
    let work: *const (dyn Fn(usize) -> Result<(), E> + Sync + '_) = work;
    // SAFETY: only the lifetime changes; `Batch::work` says when the pointer is followed.
    let work = unsafe {
        std::mem::transmute::<
            *const (dyn Fn(usize) -> Result<(), E> + Sync + '_),
            *const (dyn Fn(usize) -> Result<(), E> + Sync + 'static),
        >(work)
    };
    let batch = Arc::new(Batch {
        n,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        gate: Mutex::new(()),
        all_done: Condvar::new(),
        failed: Mutex::new(Vec::new()),
        panic: Mutex::new(None),
        work,
    });
    let pool = pool();
    let helpers = helper_threads().min(n.saturating_sub(1));
    for _ in 0..helpers {
        let batch = batch.clone();
        pool.spawn(move || batch.run());
    }
    batch.run();
    batch.wait();
    if let Some(payload) = lock(&batch.panic).take() {
        std::panic::resume_unwind(payload);
    }
    let mut failed = std::mem::take(&mut *lock(&batch.failed));
    failed.sort_by_key(|&(i, _)| i);
    failed.into_iter().map(|(_, e)| e).collect()
}

/// One call of [`each`], shared by the calling thread and its helpers (which may outlive
/// the call: a helper that starts after the last index was taken only reads `next`).
struct Batch<E> {
    n: usize,
    /// The next index to take (past `n` once all are taken).
    next: AtomicUsize,
    /// Indices finished (run, failed or panicked); the caller returns when it reaches `n`.
    done: AtomicUsize,
    gate: Mutex<()>,
    all_done: Condvar,
    failed: Mutex<Vec<(usize, E)>>,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// The caller's `work`, its lifetime erased: followed only by a thread that took an index
    /// below `n`, before it counts that index `done`, and the caller does not return (so
    /// `work` lives) until all `n` are.
    work: *const (dyn Fn(usize) -> Result<(), E> + Sync),
}

// SAFETY: `work` is `Sync` and followed only while the caller keeps it alive (see `work`);
// the rest is atomics and locks over `Send` values.
unsafe impl<E: Send> Send for Batch<E> {}
unsafe impl<E: Send> Sync for Batch<E> {}

impl<E> Batch<E> {
    /// Takes and runs indices until none is left.
    fn run(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n {
                return;
            }
            // SAFETY: `i < n` is taken and not yet done, so the caller is still in `each`.
            let work = unsafe { &*self.work };
            match std::panic::catch_unwind(AssertUnwindSafe(|| work(i))) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => lock(&self.failed).push((i, e)),
                Err(payload) => {
                    lock(&self.panic).get_or_insert(payload);
                }
            }
            // Release: what `work(i)` wrote is visible to the caller that sees the count.
            if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
                let _gate = lock(&self.gate);
                self.all_done.notify_all();
            }
        }
    }

    /// Waits until every index is done: a short spin (a helper finishing its last index
    /// is usually microseconds away), then sleeps.
    fn wait(&self) {
        for _ in 0..SPINS {
            if self.done.load(Ordering::Acquire) == self.n {
                return;
            }
            std::hint::spin_loop();
        }
        let mut gate = lock(&self.gate);
        while self.done.load(Ordering::Acquire) < self.n {
            gate = self.all_done.wait(gate).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// How many times [`Batch::wait`] checks before it sleeps (a few microseconds).
const SPINS: usize = 2000;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::each;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn each_index_runs_once_and_failures_come_in_order() {
        let runs: Vec<AtomicUsize> = (0..50).map(|_| AtomicUsize::new(0)).collect();
        let failed = each(50, &|i| {
            runs[i].fetch_add(1, Ordering::Relaxed);
            if i % 7 == 3 { Err(i) } else { Ok(()) }
        });
        assert!(runs.iter().all(|r| r.load(Ordering::Relaxed) == 1));
        assert_eq!(failed, [3, 10, 17, 24, 31, 38, 45]);
        assert!(each::<()>(0, &|_| Ok(())).is_empty());
    }

    #[test]
    fn the_caller_does_not_wait_for_a_helper_that_starts_after_the_work() {
        // Every worker busy for a second: the helper `each` spawns starts after the caller
        // has run all the indices itself, and the caller does not wait for it.
        let pool = super::pool();
        for _ in 0..pool.current_num_threads() {
            pool.spawn(|| std::thread::sleep(std::time::Duration::from_secs(1)));
        }
        let start = std::time::Instant::now();
        let runs = AtomicUsize::new(0);
        assert!(
            each::<()>(8, &|_| {
                runs.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
            .is_empty()
        );
        assert_eq!(runs.load(Ordering::Relaxed), 8);
        let waited = start.elapsed();
        assert!(waited.as_millis() < 500, "waited {waited:?}");
    }

    #[test]
    fn a_panic_is_raised_in_the_caller_after_every_index_ran() {
        let runs = AtomicUsize::new(0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            each::<()>(40, &|i| {
                std::thread::sleep(std::time::Duration::from_micros(200));
                runs.fetch_add(1, Ordering::Relaxed);
                assert_ne!(i, 5, "index 5 panics");
                Ok(())
            })
        }));
        assert!(caught.is_err());
        assert_eq!(runs.load(Ordering::Relaxed), 40);
        // The pool still works.
        assert!(each::<()>(4, &|_| Ok(())).is_empty());
    }
}
