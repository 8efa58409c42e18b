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
