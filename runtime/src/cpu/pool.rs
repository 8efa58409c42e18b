//! The helper threads compiled kernels run on beside the calling thread: started at the
//! first launch that splits its grid or at [`super::warm_up`] (never at import), and again
//! in a forked child.
//!
//! A helper that finishes a batch *lingers* for [`LINGER`], watching for the next batch, before
//! it sleeps: a launch that follows within that time (back-to-back calls from Python, a few
//! microseconds apart) finds its helper running instead of paying a wake-up, which costs
//! ~5–15 µs on a quiet machine (and more under load), about the whole gain of splitting a
//! ~0.1 ms launch. OpenMP runtimes (torch's CPU kernels) spin the same way between parallel
//! regions. A lingering helper only reads one atomic (with `pause`), so a core it holds is
//! given up to any other runnable thread at the scheduler's next tick.
//!
//! A forked process has only the thread that called `fork`: helpers created before the fork
//! still look alive in the child, and a launch that hands them work would wait forever. So
//! the pool is owned with the id of the process that created it, and a launch in another
//! process (a child of `fork`, `multiprocessing`'s default start method on Linux) creates a
//! new pool first. The parent's pool is leaked in the child (its threads do not exist there),
//! once per fork that launches.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a helper keeps watching for work after a batch before it sleeps.
const LINGER: Duration = Duration::from_micros(300);

/// This process's pool, started on first use: [`helper_threads`] threads, each warming its
/// heap first (`super::warm_helper`), then serving batches.
pub(crate) fn pool() -> Arc<Pool> {
    let _gate = crate::fork::section();
    static POOL: Mutex<Option<(u32, Arc<Pool>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = lock(&POOL);
    match &*slot {
        Some((owner, pool)) if *owner == pid => pool.clone(),
        stale => {
            if let Some((_, inherited)) = stale {
                // Created by the parent before the fork: its threads are not in this process.
                std::mem::forget(inherited.clone());
            }
            let pool = Arc::new(Pool {
                posted: AtomicU64::new(0),
                job: Mutex::new(None),
                sleepers: AtomicUsize::new(0),
                gate: Mutex::new(()),
                wake: Condvar::new(),
            });
            for i in 0..helper_threads() {
                let pool = pool.clone();
                std::thread::Builder::new()
                    .name(format!("tpukit-worker-{i}"))
                    .spawn(move || {
                        super::warm_helper();
                        pool.serve(i + 1);
                    })
                    .expect("the worker threads could not be started");
            }
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
/// being the other. (A pool of as many threads as CPUs has one more thread than cores while
/// a launch runs: on two cores, 12% of 1000 back-to-back 1024² bf16 `mm` launches woke their
/// helper ~2 ms late on average, `pool::each` timestamps, as the scheduler queued it behind
/// the caller while the other worker, just finished, still held the second core.)
fn helper_threads() -> usize {
    static HELPERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *HELPERS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .saturating_sub(1)
    })
}

/// The helpers' shared state: the latest batch, and how to wake them for the next.
pub(crate) struct Pool {
    /// Bumped at every post: a helper runs the job in `job` whenever this differs from the
    /// value it last saw. A helper that sees two posts late runs only the newer: the older
    /// batch is over, or (launches from several threads at once) its caller is still running
    /// it, which it can alone: a caller runs every index no helper took.
    posted: AtomicU64,
    job: Mutex<Option<Arc<dyn Job>>>,
    /// Helpers asleep on `wake`, or about to be: a post wakes them only if this is not zero.
    sleepers: AtomicUsize,
    gate: Mutex<()>,
    wake: Condvar,
}

/// A posted batch, its index type erased.
trait Job: Send + Sync {
    /// Runs indices of the batch as thread `slot` (0 the caller, helper `h` is `h + 1`).
    fn run(&self, slot: usize);
}

impl Pool {
    /// Makes `job` the current batch and wakes the helpers asleep.
    fn post(&self, job: Arc<dyn Job>) {
        *lock(&self.job) = Some(job);
        // SeqCst here and in `next_post`: either the helper's check of `posted` sees this
        // post, or this load sees it among the sleepers (and it waits under `gate` already,
        // so the notification cannot come before its wait).
        self.posted.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _gate = lock(&self.gate);
            self.wake.notify_all();
        }
    }

    /// The life of helper `slot` (from 1): run each posted batch, from the pool's first (a
    /// batch posted before this thread got here included).
    fn serve(&self, slot: usize) {
        let mut seen = 0;
        loop {
            seen = self.next_post(seen);
            let job = lock(&self.job).clone();
            if let Some(job) = job {
                job.run(slot);
            }
        }
    }

    /// Waits until a post after `seen` and returns its number: for [`LINGER`] by watching
    /// `posted`, then asleep on `wake`.
    fn next_post(&self, seen: u64) -> u64 {
        let start = Instant::now();
        let mut checks = 0u32;
        loop {
            let posted = self.posted.load(Ordering::Acquire);
            if posted != seen {
                return posted;
            }
            checks = checks.wrapping_add(1);
            if checks.is_multiple_of(64) && start.elapsed() >= LINGER {
                break;
            }
            std::hint::spin_loop();
        }
        let mut gate = lock(&self.gate);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        loop {
            let posted = self.posted.load(Ordering::SeqCst);
            if posted != seen {
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return posted;
            }
            gate = self.wake.wait(gate).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Runs `work(i)` for every `i` in `0..n`, on the calling thread and this process's helpers:
/// each runs its [`Share`] of the indices, then takes what the others have not yet taken,
/// so a busy core runs fewer. The calling thread, already running, starts at once (a
/// pool-only run would leave it waiting for as many wake-ups as there are threads, a delay
/// that grows with the host's load), and a helper still lingering from the last batch starts
/// without a wake-up. The caller returns once
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
        shares: shares(n, threads()),
        done: AtomicUsize::new(0),
        gate: Mutex::new(()),
        all_done: Condvar::new(),
        failed: Mutex::new(Vec::new()),
        panic: Mutex::new(None),
        work,
    });
    if n > 1 {
        pool().post(batch.clone());
    }
    batch.run(0);
    batch.wait();
    if let Some(payload) = lock(&batch.panic).take() {
        std::panic::resume_unwind(payload);
    }
    let mut failed = std::mem::take(&mut *lock(&batch.failed));
    failed.sort_by_key(|&(i, _)| i);
    failed.into_iter().map(|(_, e)| e).collect()
}

/// One call of [`each`], shared by the calling thread and its helpers (which may outlive
/// the call: a helper that starts after the last index was taken only reads the shares'
/// counters).
struct Batch<E> {
    n: usize,
    /// Each thread's share of the indices (see [`Share`]), by slot.
    shares: Vec<Share>,
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

impl<E: Send> Job for Batch<E> {
    /// Runs the indices of `slot`'s share, then takes what is left of the others' until
    /// none is left.
    fn run(&self, slot: usize) {
        let k = self.shares.len();
        for s in (0..k).map(|d| (slot + d) % k) {
            let share = &self.shares[s];
            loop {
                let i = share.next.fetch_add(1, Ordering::Relaxed);
                if i >= share.end {
                    break;
                }
                self.run_index(i);
            }
        }
    }
}

impl<E> Batch<E> {
    /// Runs index `i`, taken by this thread (so not yet done).
    fn run_index(&self, i: usize) {
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

/// One thread's contiguous range of a batch's indices, `next..end` still to take. A thread
/// runs its own share first and then helps with the others': in the usual case (every thread
/// running) thread `t` runs the same indices at every launch of a kernel, so each core finds
/// its part of the arrays in its own cache from the last call (back-to-back calls on a few
/// MiB, as OpenMP's static schedule does for torch), while a late or busy thread's share is
/// still taken by the others.
struct Share {
    next: AtomicUsize,
    end: usize,
}

/// `0..n` cut into `threads` contiguous shares (the first ones one longer).
fn shares(n: usize, threads: usize) -> Vec<Share> {
    let k = threads.clamp(1, n.max(1));
    (0..k)
        .map(|t| Share {
            next: AtomicUsize::new(t * n / k),
            end: (t + 1) * n / k,
        })
        .collect()
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
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    #[test]
    fn each_index_runs_once_and_failures_come_in_order() {
        let _serial = serial();
        let runs: Vec<AtomicUsize> = (0..50).map(|_| AtomicUsize::new(0)).collect();
        let failed = each(50, &|i| {
            runs[i].fetch_add(1, Ordering::Relaxed);
            if i % 7 == 3 { Err(i) } else { Ok(()) }
        });
        assert!(runs.iter().all(|r| r.load(Ordering::Relaxed) == 1));
        assert_eq!(failed, [3, 10, 17, 24, 31, 38, 45]);
        assert!(each::<()>(0, &|_| Ok(())).is_empty());
    }

    /// Taken by every test here: they post to the one pool, and a test that needs a helper
    /// must not have its batch replaced by another test's.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn shares_cut_the_indices_into_contiguous_ranges() {
        let ranges = |n, t| {
            super::shares(n, t)
                .iter()
                .map(|s| (s.next.load(Ordering::Relaxed), s.end))
                .collect::<Vec<_>>()
        };
        assert_eq!(ranges(16, 2), [(0, 8), (8, 16)]);
        assert_eq!(ranges(7, 3), [(0, 2), (2, 4), (4, 7)]);
        assert_eq!(ranges(2, 4), [(0, 1), (1, 2)]);
        assert_eq!(ranges(0, 2), [(0, 0)]);
    }

    /// A job that holds every helper that runs it for a second.
    struct Sleeper;

    impl super::Job for Sleeper {
        fn run(&self, _slot: usize) {
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    #[test]
    fn the_caller_does_not_wait_for_a_helper_that_starts_after_the_work() {
        let _serial = serial();
        // Every helper busy for a second: a helper starts the batch after the caller has run
        // all the indices itself, and the caller does not wait for it.
        super::pool().post(Arc::new(Sleeper));
        let start = Instant::now();
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
    fn helpers_take_batches_lingering_and_after_sleeping() {
        let _serial = serial();
        if super::helper_threads() == 0 {
            return;
        }
        // Right after a batch (a lingering helper) and long after one (a sleeping helper):
        // both indices must run at the same time, each waiting for the other to start, so
        // the batch finishes only if a helper takes one.
        for pause in [Duration::ZERO, super::LINGER * 20, Duration::ZERO] {
            std::thread::sleep(pause);
            let started = AtomicUsize::new(0);
            let failed = each::<()>(2, &|_| {
                started.fetch_add(1, Ordering::SeqCst);
                let start = Instant::now();
                while started.load(Ordering::SeqCst) < 2 {
                    assert!(start.elapsed() < Duration::from_secs(20), "no helper came");
                    std::hint::spin_loop();
                }
                Ok(())
            });
            assert!(failed.is_empty());
        }
    }

    #[test]
    fn a_panic_is_raised_in_the_caller_after_every_index_ran() {
        let _serial = serial();
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
