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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
                    .thread_name(|i| format!("tpukit-worker-{i}"))
                    .build()
                    .expect("the worker threads could not be started"),
            );
            *slot = Some((pid, pool.clone()));
            pool
        }
    }
}

/// Runs `work(i)` for every `i` in `0..n`, on the calling thread and up to `threads - 1` of
/// this process's pool: each takes the next index until none is left, so a busy core takes
/// fewer. The calling thread, already running, starts at once and a launch wakes one thread
/// fewer than it uses (a pool-only `install` leaves the caller waiting for as many wake-ups
/// as there are threads, a delay that grows with the host's load). The `Err`s, in index order.
pub(crate) fn each<E: Send>(n: usize, work: &(dyn Fn(usize) -> Result<(), E> + Sync)) -> Vec<E> {
    let next = AtomicUsize::new(0);
    let failed = Mutex::new(Vec::new());
    let run = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            if let Err(e) = work(i) {
                failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, e));
            }
        }
    };
    let run = &run;
    let pool = pool();
    let helpers = pool
        .current_num_threads()
        .saturating_sub(1)
        .min(n.saturating_sub(1));
    pool.in_place_scope(|s| {
        for _ in 0..helpers {
            s.spawn(move |_| run());
        }
        run();
    });
    let mut failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    failed.sort_by_key(|&(i, _)| i);
    failed.into_iter().map(|(_, e)| e).collect()
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
}
