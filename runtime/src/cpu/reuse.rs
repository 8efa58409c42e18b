//! The memory a worker call hands its kernel (scratch operands, the workspace), kept by the
//! thread between calls instead of allocated and freed for each chunk of a grid: a launch runs
//! a few chunks per thread, and a 256 KiB scratch freed back to glibc is coalesced and split
//! again at every chunk (the allocator's share of a blocked 1024³ matmul's time was as large
//! as the scratch's NaN fill). Reused memory is also still in the thread's caches.
//!
//! What a buffer holds when it is handed out is the caller's to set (scratch is filled, the
//! workspace written by the kernel before it is read): reuse changes no result. A thread
//! keeps at most [`KEEP_BYTES`]; larger or further buffers are freed as before.

use crate::{RuntimeError, alloc};
use std::cell::RefCell;
use std::mem::MaybeUninit;

/// The most memory one thread keeps for its next calls.
pub(super) const KEEP_BYTES: usize = 4 << 20;

type Words = Vec<MaybeUninit<u64>>;

thread_local! {
    /// Buffers this thread's calls released, for its next calls.
    static KEPT: RefCell<Vec<Words>> = const { RefCell::new(Vec::new()) };
}

/// `n` words of memory (contents unspecified), reused from this thread's kept buffers when
/// one is large enough, else newly allocated (an [`ErrorKind::Memory`] error naming `what`
/// if that fails). Give it back with [`release`].
///
/// [`ErrorKind::Memory`]: tpukit_dsl::ErrorKind::Memory
pub(super) fn take(n: usize, what: &str) -> Result<Words, RuntimeError> {
    let kept = KEPT.with_borrow_mut(|kept| {
        // The smallest buffer that holds `n` words, so large ones stay for large requests.
        let best = (0..kept.len())
            .filter(|&i| kept[i].capacity() >= n)
            .min_by_key(|&i| kept[i].capacity())?;
        Some(kept.swap_remove(best))
    });
    match kept {
        Some(mut v) => {
            // SAFETY: `MaybeUninit` needs no initialisation; the capacity holds `n`.
            unsafe { v.set_len(n) };
            Ok(v)
        }
        None => alloc::uninit(n, what),
    }
}

/// Keeps `v` for this thread's next [`take`], unless that would keep more than
/// [`KEEP_BYTES`] (then it is freed).
pub(super) fn release(v: Words) {
    let bytes = |w: &Words| w.capacity() * size_of::<u64>();
    KEPT.with_borrow_mut(|kept| {
        let total: usize = kept.iter().map(bytes).sum();
        if total + bytes(&v) <= KEEP_BYTES {
            kept.push(v);
        }
    });
}

/// `n` copies of `word`, in memory from [`take`] (one pass over it).
pub(super) fn filled(n: usize, word: u64, what: &str) -> Result<Words, RuntimeError> {
    let mut v = take(n, what)?;
    v.fill(MaybeUninit::new(word));
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_buffers_serve_later_requests_filled_as_asked() {
        let a = filled(1000, 7, "a").unwrap();
        let at = a.as_ptr();
        release(a);
        // A smaller request reuses the buffer, with every word it asks for set anew.
        let b = filled(500, 9, "b").unwrap();
        assert_eq!(b.as_ptr(), at);
        assert_eq!(b.len(), 500);
        // SAFETY: every word was just written by `filled`.
        assert!(b.iter().all(|w| unsafe { w.assume_init() } == 9));
        // A larger one gets new memory; the kept total stays bounded.
        let c = take(2000, "c").unwrap();
        assert_ne!(c.as_ptr(), at);
        release(b);
        release(c);
        release(take(KEEP_BYTES / 8, "d").unwrap());
        let kept: usize = KEPT.with_borrow(|k| k.iter().map(|w| w.capacity() * 8).sum());
        assert!(kept <= KEEP_BYTES);
        // What cannot be had is an error, as for any allocation.
        assert!(filled(usize::MAX / 4, 0, "a test buffer").is_err());
    }
}
