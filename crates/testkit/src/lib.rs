//! Test support shared by headroom's crates (dev-dependency only).
//!
//! [`CountingAllocator`] forwards to the system allocator and counts the allocations made by
//! the calling thread, so that a test can prove a code path allocates nothing in steady state
//! while the test harness's other threads allocate as they please. Install it in a test binary:
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: headroom_testkit::CountingAllocator = headroom_testkit::CountingAllocator;
//!
//! let before = headroom_testkit::allocations();
//! hot_path();
//! assert_eq!(headroom_testkit::allocations() - before, 0);
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // `const`: initialising them must not allocate (they are used inside the allocator).
    static ALLOCATIONS_ON_THIS_THREAD: Cell<u64> = const { Cell::new(0) };
    static DEALLOCATIONS_ON_THIS_THREAD: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with`: the allocator may run while this thread's locals are being torn down.
    let _ = ALLOCATIONS_ON_THIS_THREAD.try_with(|count| count.set(count.get() + 1));
}

fn count_free() {
    let _ = DEALLOCATIONS_ON_THIS_THREAD.try_with(|count| count.set(count.get() + 1));
}

/// Allocations (alloc, alloc_zeroed, realloc) the calling thread has made since it started.
#[must_use]
pub fn allocations() -> u64 {
    ALLOCATIONS_ON_THIS_THREAD.with(Cell::get)
}

/// Every call the calling thread has made into the allocator, frees included.
#[must_use]
pub fn allocator_calls() -> u64 {
    allocations() + DEALLOCATIONS_ON_THIS_THREAD.with(Cell::get)
}

/// Runs `f` and returns its result with the number of allocations it made on this thread.
pub fn count_allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = allocations();
    let result = f();
    (result, allocations() - before)
}

/// The system allocator, counting the calling thread's allocations (see the crate docs).
#[derive(Debug)]
pub struct CountingAllocator;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds exactly as it does for `System`; counting touches only a
// thread-local counter, never memory the allocator hands out.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller upholds `alloc`'s contract, which is `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count_free();
        // SAFETY: `ptr` came from `System` (through this allocator) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds the rest.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
