//! When a launch releases the GIL: always, so other Python threads run while it computes,
//! except a bound launch of a few microseconds ([`BoundLaunch::is_brief`]), for which
//! releasing and retaking the GIL (a few hundred nanoseconds, more when another thread
//! wants it) is a tenth of the whole call. numpy keeps the GIL for small loops the same way.
//! A brief launch never waits for another thread (it is not split over the pool and its
//! code is compiled), so holding the GIL through it cannot deadlock.

use pyo3::prelude::*;
use tpukit::runtime::BoundLaunch;

/// Runs `launch`, the launch of `bound` (None: a launch on the general path), holding the
/// GIL only if `bound` is brief.
pub fn launch<T: Send>(
    py: Python<'_>,
    bound: Option<&BoundLaunch>,
    launch: impl FnOnce() -> T + Send,
) -> T {
    if bound.is_some_and(BoundLaunch::is_brief) {
        launch()
    } else {
        py.detach(launch)
    }
}
