//! A global allocator for hosts that launch kernels on large arrays over and over (the Python
//! extension installs it): blocks of [`MIN_BYTES`] or more, which glibc maps fresh at every
//! allocation and unmaps at every free (it serves no larger block from its heap, see
//! `alloc::keep_freed_memory`), are kept when freed, up to [`KEEP_BYTES`] in all, and handed
//! to the next allocation of their size class. A call's output then reuses the memory of the
//! previous call's, freed by then, instead of paying a page fault per 4 KiB page.
//!
//! A kept block belongs to nobody: it is handed out only after it was freed, so no two live
//! allocations share memory. Zeroed allocations of a reused block are zeroed here. Everything
//! else is the system allocator's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;

/// Allocations of at least this many bytes are kept when freed (glibc's largest heap block,
/// `alloc::HEAP_BLOCK_MAX`: smaller ones are reused by glibc itself).
pub const MIN_BYTES: usize = crate::alloc::HEAP_BLOCK_MAX;

/// The most freed memory kept at once.
pub const KEEP_BYTES: usize = 256 << 20;

/// Sizes round up to a multiple of this, so a block serves every size of its class.
const CLASS_BYTES: usize = 2 << 20;

/// How many freed blocks are kept at most.
const SLOTS: usize = 16;

/// The system allocator, keeping freed blocks of 32 MiB or more for reuse (see the
/// module). Install it with `#[global_allocator] static A: LargeBlocks = LargeBlocks;`.
pub struct LargeBlocks;

/// A kept block: its address, and the size and alignment it was allocated with (`0` size:
/// an empty slot).
#[derive(Copy, Clone)]
struct Kept {
    ptr: usize,
    size: usize,
    align: usize,
}

struct Cache {
    slots: [Kept; SLOTS],
    bytes: usize,
}

static KEPT: Mutex<Cache> = Mutex::new(Cache {
    slots: [Kept {
        ptr: 0,
        size: 0,
        align: 0,
    }; SLOTS],
    bytes: 0,
});

/// The layout a large request is allocated with: its size rounded up to the class.
fn class(layout: Layout) -> Option<Layout> {
    if layout.size() < MIN_BYTES {
        return None;
    }
    let size = layout.size().checked_next_multiple_of(CLASS_BYTES)?;
    Layout::from_size_align(size, layout.align()).ok()
}

/// A kept block of exactly `layout` (a class layout), taken out of the cache.
fn take(layout: Layout) -> Option<*mut u8> {
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let slot = kept
        .slots
        .iter_mut()
        .find(|k| k.size == layout.size() && k.align == layout.align())?;
    let ptr = slot.ptr as *mut u8;
    slot.size = 0;
    kept.bytes -= layout.size();
    Some(ptr)
}

/// Keeps a freed block of `layout` (a class layout); false if there is no room.
fn keep(ptr: *mut u8, layout: Layout) -> bool {
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if kept.bytes + layout.size() > KEEP_BYTES {
        return false;
    }
    let Some(slot) = kept.slots.iter_mut().find(|k| k.size == 0) else {
        return false;
    };
    *slot = Kept {
        ptr: ptr as usize,
        size: layout.size(),
        align: layout.align(),
    };
    kept.bytes += layout.size();
    true
}

// SAFETY: every block comes from `System` with the layout it is returned with (a large one's
// class layout, computed alike at allocation and free from the caller's layout), and a kept
// block is handed out again only after it was freed, once (it leaves the cache under the lock).
unsafe impl GlobalAlloc for LargeBlocks {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class(layout) {
            // SAFETY: the caller's layout has a non-zero size (`GlobalAlloc`'s contract).
            None => unsafe { System.alloc(layout) },
            // SAFETY: the class layout is at least as large, with the same alignment.
            Some(c) => take(c).unwrap_or_else(|| unsafe { System.alloc(c) }),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class(layout) {
            // SAFETY: as for `alloc`.
            None => unsafe { System.alloc_zeroed(layout) },
            Some(c) => match take(c) {
                Some(ptr) => {
                    // SAFETY: the block holds `c.size() >= layout.size()` bytes, owned here.
                    unsafe { std::ptr::write_bytes(ptr, 0, layout.size()) };
                    ptr
                }
                // SAFETY: as for `alloc` (fresh pages are zero: no pass over them).
                None => unsafe { System.alloc_zeroed(c) },
            },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class(layout) {
            // SAFETY: `ptr` was allocated by `System` with `layout` (see `alloc`).
            None => unsafe { System.dealloc(ptr, layout) },
            Some(c) => {
                if !keep(ptr, c) {
                    // SAFETY: `ptr` was allocated by `System` with the class layout.
                    unsafe { System.dealloc(ptr, c) }
                }
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.size() < MIN_BYTES && new_size < MIN_BYTES {
            // SAFETY: both sizes are the system's own (the caller's contract otherwise).
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the caller's contract: `new_size` with `layout`'s alignment is a layout.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `new` has a non-zero size (`realloc`'s contract).
        let fresh = unsafe { self.alloc(new) };
        if !fresh.is_null() {
            // SAFETY: both blocks hold at least the bytes copied, and are distinct; `ptr`
            // was allocated here with `layout`.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, fresh, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_large_blocks_serve_the_next_allocation_of_their_class() {
        let a = LargeBlocks;
        let big = Layout::from_size_align(MIN_BYTES + 100, 64).unwrap();
        let same_class = Layout::from_size_align(MIN_BYTES + 200, 64).unwrap();
        // SAFETY: layouts of non-zero size; every block is freed with its layout, once.
        unsafe {
            let p = a.alloc(big);
            assert!(!p.is_null());
            p.write_bytes(7, big.size());
            a.dealloc(p, big);
            let q = a.alloc_zeroed(same_class);
            assert_eq!(q, p, "the freed block is reused");
            let bytes = std::slice::from_raw_parts(q, same_class.size());
            assert!(bytes.iter().all(|&b| b == 0), "and zeroed when asked");
            // Live blocks are never handed out twice.
            let r = a.alloc(big);
            assert_ne!(r, q);
            a.dealloc(r, big);
            a.dealloc(q, same_class);
            // Small blocks are the system's own; reallocation keeps the contents.
            let small = Layout::from_size_align(64, 8).unwrap();
            let s = a.alloc(small);
            s.write_bytes(3, 64);
            let t = a.realloc(s, small, MIN_BYTES + 1);
            assert!(std::slice::from_raw_parts(t, 64).iter().all(|&b| b == 3));
            a.dealloc(t, Layout::from_size_align(MIN_BYTES + 1, 8).unwrap());
        }
        let kept = KEPT.lock().unwrap();
        assert!(kept.bytes <= KEEP_BYTES);
    }
}
