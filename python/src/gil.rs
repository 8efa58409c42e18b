//! When a launch releases the GIL: always, so other Python threads run while it computes,
//! except a bound launch of a few microseconds ([`BoundLaunch::is_brief`]). Releasing the
//! GIL for so short a time gains other threads nothing, and costs the caller: ~0.07 µs
//! alone, but a waiting thread takes the GIL and keeps it up to a switch interval (5 ms),
//! so a loop of tiny calls beside a busy thread ran at ~3.5 ms a call (BENCHMARKS.md). numpy
//! keeps the GIL for small loops the same way. A brief launch never waits for another
//! thread (it is not split over the pool and its code is compiled), so holding the GIL
//! through it cannot deadlock.

use pyo3::prelude::*;
use tpukit::runtime::BoundLaunch;

/// Runs `launch`, the launches of `bound` (empty: launches on the general path), holding
/// the GIL only if every one is brief.
pub fn launch<T: Send>(
    py: Python<'_>,
    bound: &[BoundLaunch],
    launch: impl FnOnce() -> T + Send,
) -> T {
    if !bound.is_empty() && bound.iter().all(BoundLaunch::is_brief) {
        launch()
    } else {
        py.detach(launch)
    }
}
