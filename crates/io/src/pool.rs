//! A preallocated pool of fixed-size frame buffers, with a cache per lcore in front.
//!
//! Every buffer is allocated once, when the pool is built. A [`PoolFrame`] owns one buffer while
//! it lives and gives it back when dropped, from whatever thread drops it: the RX lcore
//! allocates, the TX lcore frees.
//!
//! # Per-lcore caches (magazines)
//!
//! DPDK's mempool cache is the model, in the shape of Bonwick and Adams' magazines ("Magazines
//! and Vmem", USENIX 2001): a thread that [attached a cache](FramePool::attach_thread_cache)
//! (every backend queue does, on the thread of its first burst) keeps up to two *magazines* of
//! [`PoolConfig::magazine_frames`] buffers in a thread-local, allocates from and frees into
//! them, and trades whole magazines with the shared *depot* only when both are empty (alloc) or
//! both full (free). Alloc and free in steady state touch only that thread's memory; a buffer
//! allocated on one lcore and freed on another goes into the freeing lcore's cache and travels
//! back in a full magazine, one queue operation per magazine instead of one per buffer.
//!
//! The depot holds full magazines (exactly `magazine_frames` buffers each), empty magazines
//! (their `Vec`s, preallocated, so that trading one never allocates), and loose buffers: those
//! of threads without a cache, and what a cache gives back when its thread ends
//! ([`flush_thread_caches`], or the thread-local's destructor). Trades are one for one, so the
//! depot always holds its `frame_count / magazine_frames + 1` magazines, full or empty; as at
//! most `frame_count / magazine_frames` can be full, a cache that must hand in a full one always
//! finds an empty one to take. All three are bounded lock-free
//! MPMC queues (`crossbeam_queue::ArrayQueue`); nothing here adds a cross-thread protocol of its
//! own.
//!
//! A thread's cache holds at most two magazines that other threads cannot use (DPDK's caches
//! hold up to 1.5 times their size); [`PoolStats::available`] counts them as free. Pools too
//! small to spare that ([`PoolConfig::with_frame_count`] below 128 frames) have no caches.
//!
//! # No reference count per frame
//!
//! A frame's handle to its pool is a `Weak` created with the buffer when the pool is built and
//! moved with it ever after: allocating and freeing never touch a reference count. A thread's
//! cache holds the pool alive (one strong reference, taken when it attaches) and recognises
//! its frames by address; a thread without a cache upgrades the `Weak` to reach the depot. The
//! depot's buffers hold only weak references, so a pool whose handles and caches are all gone
//! is freed at once, and frames that outlive it free their buffer when dropped.
//!
//! Each buffer has `headroom_bytes` in front of the frame's first byte, so that an 802.1Q tag
//! (4 bytes) can be inserted with [`Frame::push_front`] without moving the frame, and
//! `data_room_bytes` from there on for the frame itself.

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use headroom_core::frame::Frame;

/// Default bytes a frame may hold: a 1518-byte VLAN-tagged Ethernet frame fits with room to spare
/// (the same 2048 B as DPDK's `RTE_MBUF_DEFAULT_DATAROOM`).
pub const DEFAULT_DATA_ROOM_BYTES: usize = 2048;

/// Default bytes reserved in front of a frame (DPDK's `RTE_PKTMBUF_HEADROOM`).
pub const DEFAULT_HEADROOM_BYTES: usize = 128;

/// Largest default magazine: a thread's cache holds at most two, 512 buffers (DPDK's
/// `RTE_MEMPOOL_CACHE_MAX_SIZE` is 512).
pub const MAX_DEFAULT_MAGAZINE_FRAMES: usize = 256;

/// Smallest magazine worth having; smaller pools get no caches.
pub const MIN_MAGAZINE_FRAMES: usize = 8;

/// How a pool is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Number of buffers; the most frames that can be alive at once.
    pub frame_count: usize,
    /// Bytes available to a frame from its first byte on.
    pub data_room_bytes: usize,
    /// Bytes reserved in front of a freshly allocated frame, for [`Frame::push_front`].
    pub headroom_bytes: usize,
    /// Buffers per magazine of the per-thread caches (a cache holds up to two); 0: no caches,
    /// every alloc and free goes to the shared queue. At most a quarter of `frame_count`.
    pub magazine_frames: usize,
}

impl PoolConfig {
    /// `frame_count` buffers with the default data room and headroom, and magazines of a
    /// sixteenth of the pool, at most [`MAX_DEFAULT_MAGAZINE_FRAMES`] (no caches below 128
    /// buffers): a thread's cache keeps at most an eighth of the pool from the others.
    #[must_use]
    pub const fn with_frame_count(frame_count: usize) -> Self {
        Self {
            frame_count,
            data_room_bytes: DEFAULT_DATA_ROOM_BYTES,
            headroom_bytes: DEFAULT_HEADROOM_BYTES,
            magazine_frames: default_magazine_frames(frame_count),
        }
    }
}

/// The magazine size [`PoolConfig::with_frame_count`] picks for `frame_count` buffers.
#[must_use]
pub const fn default_magazine_frames(frame_count: usize) -> usize {
    let sixteenth = frame_count / 16;
    if sixteenth < MIN_MAGAZINE_FRAMES {
        0
    } else if sixteenth > MAX_DEFAULT_MAGAZINE_FRAMES {
        MAX_DEFAULT_MAGAZINE_FRAMES
    } else {
        sixteenth
    }
}

/// Why a pool could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolConfigError {
    /// `frame_count` was 0.
    NoFrames,
    /// `data_room_bytes` was 0.
    NoDataRoom,
    /// `magazine_frames` was above a quarter of `frame_count`: two threads' caches could hold
    /// every buffer.
    MagazineTooLarge,
    /// A buffer's bytes (headroom + data room) do not fit a frame's 32-bit offsets.
    BufferTooLarge,
}

impl fmt::Display for PoolConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoFrames => f.write_str("frame pool needs at least one frame"),
            Self::NoDataRoom => f.write_str("frame pool needs a non-zero data room"),
            Self::MagazineTooLarge => {
                f.write_str("frame pool magazines may hold at most a quarter of the pool")
            }
            Self::BufferTooLarge => f.write_str("frame pool buffers must be below 4 GiB"),
        }
    }
}

impl std::error::Error for PoolConfigError {}

/// A snapshot of a pool's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers the pool owns in total.
    pub capacity: usize,
    /// Buffers free at the moment of the snapshot, those in threads' caches included (racy by
    /// nature while other threads allocate; exact once they are idle).
    pub available: usize,
    /// Allocations that failed because every buffer was in use (or held by other threads'
    /// caches).
    pub alloc_failures: u64,
}

/// A buffer and the pool it belongs to, as they travel together between the depot, the caches
/// and the frames.
struct Slot {
    buf: Box<[u8]>,
    pool: Weak<Shared>,
}

struct Shared {
    /// Buffers one at a time.
    loose: ArrayQueue<Slot>,
    /// Full magazines, exactly `magazine` buffers each.
    full: ArrayQueue<Vec<Slot>>,
    /// Empty magazines (their capacity is `magazine`).
    empty: ArrayQueue<Vec<Slot>>,
    /// Buffers per magazine; 0: no caches.
    magazine: usize,
    capacity: usize,
    data_room_bytes: usize,
    headroom_bytes: usize,
    alloc_failures: AtomicU64,
    /// How many free buffers each attached cache holds (each written by its thread only).
    cached: Mutex<Vec<Weak<CachePadded<AtomicUsize>>>>,
}

impl Shared {
    /// A buffer for a thread without a cache: a loose one, else one out of a full magazine
    /// (the rest of which becomes loose).
    fn take_uncached(&self) -> Option<Slot> {
        if let Some(slot) = self.loose.pop() {
            return Some(slot);
        }
        let mut magazine = self.full.pop()?;
        let slot = magazine.pop();
        for rest in magazine.drain(..) {
            // Cannot fail: `loose` has room for every buffer of the pool.
            let _ = self.loose.push(rest);
        }
        // Cannot fail: the depot's queues hold all its magazines, and this one came out of it.
        let _ = self.empty.push(magazine);
        slot
    }

    /// Frees a buffer from a thread without a cache for this pool.
    fn give_back(&self, slot: Slot) {
        // Cannot fail: `loose` has room for every buffer of the pool. (Were it ever to, the
        // buffer would be freed, and the pool one smaller.)
        let _ = self.loose.push(slot);
    }

    fn failed(&self) {
        self.alloc_failures.fetch_add(1, Ordering::Relaxed);
    }
}

/// One thread's cache for one pool.
struct ThreadCache {
    /// Keeps the pool alive while the cache exists; identifies its frames by address.
    pool: Arc<Shared>,
    /// The magazine allocated from and freed into.
    loaded: Vec<Slot>,
    /// The previous magazine: empty or full, never in between.
    spare: Vec<Slot>,
    /// `loaded.len() + spare.len()`, for [`FramePool::stats`] on other threads.
    count: Arc<CachePadded<AtomicUsize>>,
}

impl ThreadCache {
    fn is_for(&self, pool: *const Shared) -> bool {
        std::ptr::eq(Arc::as_ptr(&self.pool), pool)
    }

    fn publish(&self) {
        // One writer (this thread); readers sum the counts for a snapshot.
        self.count
            .store(self.loaded.len() + self.spare.len(), Ordering::Relaxed);
    }

    #[inline]
    fn take(&mut self) -> Option<Slot> {
        let slot = match self.loaded.pop() {
            Some(slot) => Some(slot),
            None => self.refill(),
        };
        self.publish();
        slot
    }

    #[cold]
    fn refill(&mut self) -> Option<Slot> {
        if !self.spare.is_empty() {
            std::mem::swap(&mut self.loaded, &mut self.spare);
            return self.loaded.pop();
        }
        // Both empty: trade the loaded (empty) magazine for a full one.
        if let Some(full) = self.pool.full.pop() {
            let empty = std::mem::replace(&mut self.loaded, full);
            // Cannot fail: one for one, the depot's queues hold all its magazines.
            let _ = self.pool.empty.push(empty);
            return self.loaded.pop();
        }
        // No full magazine: gather loose buffers (other threads' frees) into this one.
        let magazine = self.pool.magazine;
        while self.loaded.len() < magazine {
            match self.pool.loose.pop() {
                Some(slot) => self.loaded.push(slot),
                None => break,
            }
        }
        let slot = self.loaded.pop();
        if slot.is_none() {
            self.pool.failed();
        }
        slot
    }

    #[inline]
    fn put(&mut self, slot: Slot) {
        if self.loaded.len() < self.pool.magazine {
            self.loaded.push(slot);
        } else {
            self.spill(slot);
        }
        self.publish();
    }

    #[cold]
    fn spill(&mut self, slot: Slot) {
        if !self.spare.is_empty() {
            // Both full: the spare goes to the depot, an empty magazine takes its place.
            let Some(empty) = self.pool.empty.pop() else {
                // Cannot happen: the depot has one more magazine than can be full at once (see
                // the module docs). Were it to, the buffer goes loose.
                self.pool.give_back(slot);
                return;
            };
            let full = std::mem::replace(&mut self.spare, empty);
            // Cannot fail: one for one, the depot's queues hold all its magazines.
            let _ = self.pool.full.push(full);
        }
        // The spare is empty: it becomes the loaded magazine, the full one the spare.
        std::mem::swap(&mut self.loaded, &mut self.spare);
        self.loaded.push(slot);
    }
}

impl Drop for ThreadCache {
    fn drop(&mut self) {
        for slot in self.loaded.drain(..).chain(self.spare.drain(..)) {
            self.pool.give_back(slot);
        }
        // The cache's two magazine Vecs were its own (see `attach_thread_cache`): they are freed
        // with it, which happens when a thread ends, not per packet.
        self.count.store(0, Ordering::Relaxed);
    }
}

/// One thread's caches: the pool it uses (nearly always the only one) and any others.
struct Caches {
    first: Option<ThreadCache>,
    more: Vec<ThreadCache>,
}

impl Caches {
    #[inline(always)]
    fn get(&mut self, pool: *const Shared) -> Option<&mut ThreadCache> {
        if self.first.as_ref().is_some_and(|c| c.is_for(pool)) {
            return self.first.as_mut();
        }
        self.get_more(pool)
    }

    /// A cache for a pool other than the one in front: out of line, to keep the path of the
    /// front one (nearly every alloc and free) short. The cache found moves to the front, so a
    /// thread that switches between pools pays this once per switch, not once per frame.
    #[cold]
    #[inline(never)]
    fn get_more(&mut self, pool: *const Shared) -> Option<&mut ThreadCache> {
        let i = self.more.iter().position(|c| c.is_for(pool))?;
        match self.first.as_mut() {
            Some(first) => std::mem::swap(first, &mut self.more[i]),
            None => self.first = Some(self.more.swap_remove(i)),
        }
        self.first.as_mut()
    }

    fn has(&self, pool: *const Shared) -> bool {
        self.first.iter().chain(&self.more).any(|c| c.is_for(pool))
    }
}

thread_local! {
    /// This thread's caches, one per pool it attached to.
    static CACHES: RefCell<Caches> = const {
        RefCell::new(Caches {
            first: None,
            more: Vec::new(),
        })
    };
}

/// Runs `f` on this thread's cache for `pool`, if it has one; `None` otherwise (no cache, or
/// the thread-local is being destroyed, or it is borrowed already).
#[inline(always)]
fn with_cache<R>(pool: *const Shared, f: impl FnOnce(&mut ThreadCache) -> R) -> Option<R> {
    CACHES
        .try_with(|caches| {
            let mut caches = caches.try_borrow_mut().ok()?;
            caches.get(pool).map(f)
        })
        .ok()
        .flatten()
}

/// Gives every buffer in this thread's caches back to its pool and forgets the caches. The
/// runtime calls it when an lcore ends (the thread-local's destructor would too, when the
/// thread exits), so that [`FramePool::stats`] finds every buffer in the depot.
pub fn flush_thread_caches() {
    let caches = CACHES
        .try_with(|caches| {
            caches
                .try_borrow_mut()
                .map(|mut c| (c.first.take(), std::mem::take(&mut c.more)))
        })
        .ok()
        .and_then(Result::ok);
    drop(caches);
}

/// Returns `frame`'s buffer: into this thread's cache for its pool, else to the pool's depot,
/// else (the pool is gone) frees it.
///
/// The buffer and its `Weak` move straight from the frame into the cache's magazine: building
/// the slot elsewhere first made the compiler copy it through the stack in pieces of different
/// widths, and the loads that followed waited on store forwarding (measured: the cached path
/// was slower than the shared queue's four atomic operations).
#[inline]
fn release(frame: &mut PoolFrame) {
    let pool = frame.pool.as_ptr();
    let cached = CACHES
        .try_with(|caches| {
            let Ok(mut caches) = caches.try_borrow_mut() else {
                return false;
            };
            let Some(cache) = caches.get(pool) else {
                return false;
            };
            cache.put(frame.take_slot());
            true
        })
        .unwrap_or(false);
    if !cached {
        release_uncached(frame.take_slot());
    }
}

#[cold]
fn release_uncached(slot: Slot) {
    if let Some(shared) = slot.pool.upgrade() {
        shared.give_back(slot);
    }
}

/// A buffer of `pool` for the calling thread: from its cache when it has one.
#[inline(always)]
fn acquire(pool: &Shared) -> Option<Slot> {
    match with_cache(pool, ThreadCache::take) {
        Some(slot) => slot,
        None => {
            let slot = pool.take_uncached();
            if slot.is_none() {
                pool.failed();
            }
            slot
        }
    }
}

/// A handle to a pool of preallocated frame buffers. Cloning the handle shares the pool.
#[derive(Clone)]
pub struct FramePool {
    shared: Arc<Shared>,
}

impl fmt::Debug for FramePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FramePool")
            .field("data_room_bytes", &self.shared.data_room_bytes)
            .field("headroom_bytes", &self.shared.headroom_bytes)
            .field("magazine_frames", &self.shared.magazine)
            .field("stats", &self.stats())
            .finish()
    }
}

impl FramePool {
    /// Allocates every buffer of the pool now (and the depot's empty magazines).
    ///
    /// # Errors
    /// [`PoolConfigError`] when the configuration asks for no frame or no data room, for
    /// magazines above a quarter of the pool, or for buffers of 4 GiB or more.
    pub fn new(config: PoolConfig) -> Result<Self, PoolConfigError> {
        if config.frame_count == 0 {
            return Err(PoolConfigError::NoFrames);
        }
        if config.data_room_bytes == 0 {
            return Err(PoolConfigError::NoDataRoom);
        }
        if config.magazine_frames > config.frame_count / 4 {
            return Err(PoolConfigError::MagazineTooLarge);
        }
        let buffer_bytes = config
            .headroom_bytes
            .checked_add(config.data_room_bytes)
            .filter(|&b| u32::try_from(b).is_ok())
            .ok_or(PoolConfigError::BufferTooLarge)?;
        let magazine = config.magazine_frames;
        // At most frame_count / magazine magazines can be full at once; the depot has one more,
        // so a cache handing in a full one always finds an empty one (see `spill`). Every trade
        // is one for one, so both queues are big enough for all of them.
        let magazines = config
            .frame_count
            .checked_div(magazine)
            .map_or(0, |full| full + 1);
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| {
            let loose = ArrayQueue::new(config.frame_count);
            for _ in 0..config.frame_count {
                // Cannot fail: the queue was sized to hold every buffer.
                let _ = loose.push(Slot {
                    buf: vec![0u8; buffer_bytes].into_boxed_slice(),
                    pool: weak.clone(),
                });
            }
            let full = ArrayQueue::new(magazines.max(1));
            let empty = ArrayQueue::new(magazines.max(1));
            for _ in 0..magazines {
                let _ = empty.push(Vec::with_capacity(magazine));
            }
            Shared {
                loose,
                full,
                empty,
                magazine,
                capacity: config.frame_count,
                data_room_bytes: config.data_room_bytes,
                headroom_bytes: config.headroom_bytes,
                alloc_failures: AtomicU64::new(0),
                cached: Mutex::new(Vec::new()),
            }
        });
        Ok(Self { shared })
    }

    /// Bytes a frame may hold from its first byte on (without using the headroom).
    #[must_use]
    pub fn data_room_bytes(&self) -> usize {
        self.shared.data_room_bytes
    }

    /// Bytes reserved in front of a freshly allocated frame.
    #[must_use]
    pub fn headroom_bytes(&self) -> usize {
        self.shared.headroom_bytes
    }

    /// Gives the calling thread a cache for this pool (see the [module docs](self)), unless it
    /// has one or the pool has no magazines. Backends call it for the thread of a queue's first
    /// burst; it allocates (the cache's own two magazine `Vec`s and a counter) and takes a lock,
    /// once per thread and pool.
    pub fn attach_thread_cache(&self) {
        let magazine = self.shared.magazine;
        if magazine == 0 {
            return;
        }
        let pool = Arc::as_ptr(&self.shared);
        let _ = CACHES.try_with(|caches| {
            let Ok(mut caches) = caches.try_borrow_mut() else {
                return;
            };
            // Caches of pools nobody else holds any more give their buffers back and go.
            if caches
                .first
                .as_ref()
                .is_some_and(|c| Arc::strong_count(&c.pool) == 1)
            {
                caches.first = None;
            }
            caches.more.retain(|c| Arc::strong_count(&c.pool) > 1);
            if caches.has(pool) {
                return;
            }
            let count = Arc::new(CachePadded::new(AtomicUsize::new(0)));
            {
                let mut cached = self
                    .shared
                    .cached
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                cached.retain(|c| c.strong_count() > 0);
                cached.push(Arc::downgrade(&count));
            }
            let cache = ThreadCache {
                pool: Arc::clone(&self.shared),
                loaded: Vec::with_capacity(magazine),
                spare: Vec::with_capacity(magazine),
                count,
            };
            if caches.first.is_none() {
                caches.first = Some(cache);
            } else {
                caches.more.push(cache);
            }
        });
    }

    /// Whether the calling thread has a cache for this pool.
    #[must_use]
    pub fn has_thread_cache(&self) -> bool {
        with_cache(Arc::as_ptr(&self.shared), |_| ()).is_some()
    }

    /// A frame of `len` zero bytes. `None` (and an allocation failure counted) when the pool is
    /// empty or `len` exceeds the data room.
    #[must_use]
    #[inline]
    pub fn alloc(&self, len: usize) -> Option<PoolFrame> {
        self.alloc_filled(len, |bytes| bytes.fill(0))
    }

    /// A frame holding a copy of `bytes`. `None` when the pool is empty (counted as an allocation
    /// failure) or `bytes` is longer than the data room (not counted: the caller classifies it).
    #[must_use]
    #[inline]
    pub fn alloc_copy(&self, bytes: &[u8]) -> Option<PoolFrame> {
        self.alloc_filled(bytes.len(), |frame| frame.copy_from_slice(bytes))
    }

    /// A frame of `len` bytes written by `fill` before the frame is built: the frame's fields
    /// then go from registers straight to where the caller wants them, rather than through the
    /// stack around the call to `fill` (whose reloads stalled on store forwarding).
    #[inline(always)]
    fn alloc_filled(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> Option<PoolFrame> {
        if len > self.shared.data_room_bytes {
            return None;
        }
        let mut slot = acquire(&self.shared)?;
        let start = self.shared.headroom_bytes;
        fill(&mut slot.buf[start..start + len]);
        Some(PoolFrame::in_slot(slot, start, len))
    }

    /// A frame of `len` bytes whose contents are unspecified: they are whatever an earlier frame
    /// left in the buffer, and the caller must overwrite all of them. Saves zeroing when the
    /// caller fills the frame anyway (a receive path copying from a ring).
    ///
    /// `None` when the pool is empty (counted as an allocation failure) or `len` exceeds the data
    /// room (not counted).
    #[must_use]
    #[inline]
    pub fn alloc_unzeroed(&self, len: usize) -> Option<PoolFrame> {
        if len > self.shared.data_room_bytes {
            return None;
        }
        let slot = acquire(&self.shared)?;
        Some(PoolFrame::in_slot(slot, self.shared.headroom_bytes, len))
    }

    /// The pool's counters now: free buffers in the depot and in every thread's cache.
    #[must_use]
    pub fn stats(&self) -> PoolStats {
        let shared = &self.shared;
        let cached: usize = shared
            .cached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .map(|c| c.load(Ordering::Relaxed))
            .sum();
        PoolStats {
            capacity: shared.capacity,
            available: shared.loose.len() + shared.full.len() * shared.magazine + cached,
            alloc_failures: shared.alloc_failures.load(Ordering::Relaxed),
        }
    }
}

/// A frame in a buffer borrowed from a [`FramePool`]; dropping it returns the buffer.
///
/// The frame's bytes are `buf[start..end]`: `start` bytes of headroom in front, and tailroom up to
/// the end of the buffer behind. 32 bytes: the buffer, the pool, two 32-bit offsets.
pub struct PoolFrame {
    buf: Box<[u8]>,
    pool: Weak<Shared>,
    start: u32,
    end: u32,
}

impl fmt::Debug for PoolFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolFrame")
            .field("len", &self.len())
            .field("headroom", &self.start)
            .field("tailroom", &self.tailroom())
            .finish_non_exhaustive()
    }
}

impl PoolFrame {
    /// Bytes free in front of the frame, available to [`Frame::push_front`].
    #[must_use]
    pub fn headroom(&self) -> usize {
        self.start as usize
    }

    /// Bytes free behind the frame, available to [`PoolFrame::push_back`].
    #[must_use]
    pub fn tailroom(&self) -> usize {
        self.buf.len() - self.end as usize
    }

    /// Grows the frame by `n` bytes at the end (to pad a short frame). The new bytes are
    /// unspecified. Returns `false`, leaving the frame unchanged, when the buffer has no room.
    pub fn push_back(&mut self, n: usize) -> bool {
        if n > self.tailroom() {
            return false;
        }
        // `n` ≤ tailroom, and the buffer is below 4 GiB.
        self.end += n as u32;
        true
    }
}

impl PoolFrame {
    /// The frame `slot.buf[start..start + len]`; `start + len` is within the data room.
    #[inline]
    fn in_slot(slot: Slot, start: usize, len: usize) -> Self {
        // The buffer is at most u32::MAX bytes (checked in `FramePool::new`), so both offsets
        // fit.
        Self {
            buf: slot.buf,
            pool: slot.pool,
            start: start as u32,
            end: (start + len) as u32,
        }
    }

    /// Takes the buffer and the pool's handle out, leaving an empty frame behind (for `Drop`).
    #[inline]
    fn take_slot(&mut self) -> Slot {
        // An empty boxed slice and an empty `Weak` do not allocate, so taking both out is free.
        Slot {
            buf: std::mem::take(&mut self.buf),
            pool: std::mem::replace(&mut self.pool, Weak::new()),
        }
    }
}

impl Frame for PoolFrame {
    #[inline]
    fn data(&self) -> &[u8] {
        &self.buf[self.start as usize..self.end as usize]
    }

    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start as usize..self.end as usize]
    }

    fn push_front(&mut self, n: usize) -> bool {
        if n > self.headroom() {
            return false;
        }
        // `n` ≤ start.
        self.start -= n as u32;
        true
    }

    fn pull_front(&mut self, n: usize) -> bool {
        if n > self.len() {
            return false;
        }
        // `n` ≤ end - start.
        self.start += n as u32;
        true
    }

    fn try_clone(&self) -> Option<Self> {
        let pool = self.pool.as_ptr();
        let slot = match with_cache(pool, ThreadCache::take) {
            Some(slot) => slot?,
            None => {
                // No cache here: reach the depot (a pool that is gone has no buffer to give).
                let shared = self.pool.upgrade()?;
                let slot = shared.take_uncached();
                if slot.is_none() {
                    shared.failed();
                }
                slot?
            }
        };
        let mut copy = Self {
            buf: slot.buf,
            pool: slot.pool,
            start: self.start,
            end: self.end,
        };
        // Same layout as the original, so the clone keeps its headroom for tag insertion.
        copy.data_mut().copy_from_slice(self.data());
        Some(copy)
    }

    #[inline]
    fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Shortens the frame to `len` bytes; does nothing when it is not longer than that.
    fn truncate(&mut self, len: usize) -> bool {
        if len < self.len() {
            // `len` < the frame's length, itself below 4 GiB.
            self.end = self.start + len as u32;
        }
        true
    }
}

impl Drop for PoolFrame {
    #[inline]
    fn drop(&mut self) {
        release(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_pool(frame_count: usize) -> FramePool {
        FramePool::new(PoolConfig {
            frame_count,
            data_room_bytes: 64,
            headroom_bytes: 8,
            magazine_frames: 0,
        })
        .expect("valid config")
    }

    #[test]
    fn rejects_empty_configurations() {
        assert_eq!(
            FramePool::new(PoolConfig {
                frame_count: 0,
                ..PoolConfig::with_frame_count(1)
            })
            .unwrap_err(),
            PoolConfigError::NoFrames
        );
        assert_eq!(
            FramePool::new(PoolConfig {
                data_room_bytes: 0,
                ..PoolConfig::with_frame_count(1)
            })
            .unwrap_err(),
            PoolConfigError::NoDataRoom
        );
    }

    #[test]
    fn alloc_until_empty_then_none_and_drop_returns() {
        let pool = small_pool(3);
        let frames: Vec<_> = (0..3)
            .map(|_| pool.alloc(10).expect("free buffer"))
            .collect();
        assert_eq!(
            pool.stats(),
            PoolStats {
                capacity: 3,
                available: 0,
                alloc_failures: 0
            }
        );
        assert!(pool.alloc(10).is_none());
        assert!(frames[0].try_clone().is_none());
        assert_eq!(pool.stats().alloc_failures, 2);
        drop(frames);
        assert_eq!(pool.stats().available, 3);
        assert!(pool.alloc(10).is_some());
    }

    #[test]
    fn too_long_is_refused_without_counting_a_failure() {
        let pool = small_pool(1);
        assert!(pool.alloc(65).is_none());
        assert!(pool.alloc_copy(&[0; 65]).is_none());
        assert_eq!(
            pool.stats(),
            PoolStats {
                capacity: 1,
                available: 1,
                alloc_failures: 0
            }
        );
        assert_eq!(pool.alloc(64).map(|f| f.len()), Some(64));
    }

    #[test]
    fn alloc_zeroes_reused_buffers() {
        let pool = small_pool(1);
        drop(pool.alloc_copy(&[0xAB; 64]));
        let frame = pool.alloc(64).expect("free buffer");
        assert!(frame.data().iter().all(|&b| b == 0));
    }

    #[test]
    fn push_and_pull_respect_headroom_and_length() {
        let pool = small_pool(1);
        let mut frame = pool.alloc_copy(&[1, 2, 3, 4]).expect("free buffer");
        assert_eq!(frame.headroom(), 8);
        assert!(frame.push_front(4));
        frame.data_mut()[..4].copy_from_slice(&[9, 9, 9, 9]);
        assert_eq!(frame.data(), &[9, 9, 9, 9, 1, 2, 3, 4]);
        assert!(frame.push_front(4));
        assert!(!frame.push_front(1), "headroom exhausted");
        assert_eq!(frame.len(), 12);
        assert!(frame.pull_front(8));
        assert_eq!(frame.data(), &[1, 2, 3, 4]);
        assert!(!frame.pull_front(5));
        assert_eq!(frame.data(), &[1, 2, 3, 4]);
        assert!(frame.pull_front(4));
        assert!(frame.is_empty());
    }

    #[test]
    fn push_back_and_truncate() {
        let pool = small_pool(1);
        let mut frame = pool.alloc_copy(&[1, 2, 3]).expect("free buffer");
        assert_eq!(frame.tailroom(), 61);
        assert!(!frame.push_back(62));
        assert!(frame.push_back(61));
        assert_eq!(frame.len(), 64);
        frame.truncate(2);
        assert_eq!(frame.data(), &[1, 2]);
        frame.truncate(10);
        assert_eq!(frame.data(), &[1, 2]);
    }

    #[test]
    fn clone_copies_bytes_and_keeps_headroom() {
        let pool = small_pool(2);
        let mut frame = pool.alloc_copy(&[5, 6, 7]).expect("free buffer");
        assert!(frame.pull_front(1));
        let mut copy = frame.try_clone().expect("second buffer");
        assert_eq!(copy.data(), &[6, 7]);
        assert_eq!(copy.headroom(), frame.headroom());
        copy.data_mut()[0] = 0;
        assert_eq!(frame.data(), &[6, 7], "the clone has its own buffer");
        assert_eq!(pool.stats().available, 0);
    }

    #[test]
    fn frames_outlive_the_pool_handle() {
        let pool = small_pool(1);
        let frame = pool.alloc(1).expect("free buffer");
        let stats_handle = pool.clone();
        drop(pool);
        drop(frame);
        assert_eq!(stats_handle.stats().available, 1);
    }

    #[test]
    fn frames_cross_threads_and_all_come_back() {
        const FRAME_COUNT: usize = 64;
        const ROUNDS: usize = 20_000;
        let pool = small_pool(FRAME_COUNT);
        let (sender, receiver) = std::sync::mpsc::sync_channel::<PoolFrame>(16);
        let producer_pool = pool.clone();
        let producer = std::thread::spawn(move || {
            let mut sent = 0usize;
            let mut seq = 0u32;
            while sent < ROUNDS {
                // Retry on an empty pool: the consumer frees frames concurrently.
                if let Some(frame) = producer_pool.alloc_copy(&seq.to_be_bytes()) {
                    sender.send(frame).expect("consumer alive");
                    sent += 1;
                    seq += 1;
                } else {
                    std::thread::yield_now();
                }
            }
        });
        let consumer = std::thread::spawn(move || {
            let mut expected = 0u32;
            for frame in receiver {
                assert_eq!(frame.data(), &expected.to_be_bytes());
                expected += 1;
                // This thread allocates too (clones, as flooding does), competing with the
                // producer for the same free list.
                if expected.is_multiple_of(3) {
                    if let Some(copy) = frame.try_clone() {
                        assert_eq!(copy.data(), frame.data());
                    }
                }
                // Frames are dropped here, on another thread than the one that allocated them.
            }
            expected
        });
        producer.join().expect("producer");
        assert_eq!(consumer.join().expect("consumer") as usize, ROUNDS);
        assert_eq!(pool.stats().available, FRAME_COUNT);
        assert_eq!(pool.stats().capacity, FRAME_COUNT);
    }

    /// A pool of `frame_count` with the default magazines (caches from 128 frames on).
    fn cached_pool(frame_count: usize) -> FramePool {
        FramePool::new(PoolConfig::with_frame_count(frame_count)).expect("valid config")
    }

    #[test]
    fn magazines_are_sized_to_the_pool_and_bounded() {
        assert_eq!(default_magazine_frames(127), 0, "too small for caches");
        assert_eq!(default_magazine_frames(128), 8);
        assert_eq!(default_magazine_frames(8192), 256);
        assert_eq!(
            default_magazine_frames(262_144),
            MAX_DEFAULT_MAGAZINE_FRAMES
        );
        assert_eq!(
            FramePool::new(PoolConfig {
                magazine_frames: 26,
                ..PoolConfig::with_frame_count(100)
            })
            .unwrap_err(),
            PoolConfigError::MagazineTooLarge
        );
        // No magazines: attaching is a no-op and everything goes through the shared queue.
        let pool = small_pool(64);
        pool.attach_thread_cache();
        assert!(!pool.has_thread_cache());
    }

    #[test]
    fn a_frame_handle_is_32_bytes() {
        assert_eq!(size_of::<PoolFrame>(), 32);
    }

    /// Buffers a thread's cache holds are free for the stats, but only that thread can use
    /// them: another thread gets the rest of the pool, then nothing.
    #[test]
    fn cached_buffers_count_as_free_and_stay_with_their_thread() {
        let pool = cached_pool(128);
        pool.attach_thread_cache();
        let frames: Vec<_> = (0..16).map(|_| pool.alloc(60).expect("buffer")).collect();
        assert_eq!(pool.stats().available, 112);
        drop(frames);
        assert_eq!(pool.stats().available, 128, "cached buffers are free");
        let other = pool.clone();
        let got = std::thread::spawn(move || {
            let all: Vec<_> = std::iter::from_fn(|| other.alloc(60)).collect();
            all.len()
        })
        .join()
        .expect("other thread");
        assert_eq!(
            got,
            128 - 16,
            "two full magazines stay in this thread's cache"
        );
        // This thread still allocates from its cache.
        assert!(pool.alloc(60).is_some());
        flush_thread_caches();
        assert!(!pool.has_thread_cache());
        assert_eq!(pool.stats().available, 128);
    }

    /// A thread with caches of two pools, switching between them: each frame goes back to its
    /// own pool (the cache in front changes at each switch), and each pool has all its buffers
    /// back, no more, at the end.
    #[test]
    fn a_thread_switching_pools_keeps_their_buffers_apart() {
        let a = cached_pool(128);
        let b = cached_pool(256);
        a.attach_thread_cache();
        b.attach_thread_cache();
        assert!(a.has_thread_cache() && b.has_thread_cache());
        for round in 0..5 {
            let from_a: Vec<_> = (0..20 + round).map(|_| a.alloc(60).expect("a")).collect();
            let from_b: Vec<_> = (0..30 + round).map(|_| b.alloc(60).expect("b")).collect();
            assert_eq!(a.stats().available, 128 - from_a.len());
            assert_eq!(b.stats().available, 256 - from_b.len());
            // Dropped interleaved: the cache in front switches at every frame.
            for (fa, fb) in from_a.into_iter().zip(from_b) {
                drop(fb);
                drop(fa);
            }
        }
        assert_eq!(a.stats().available, 128);
        assert_eq!(b.stats().available, 256);
        flush_thread_caches();
        let all_a: Vec<_> = std::iter::from_fn(|| a.alloc(60)).collect();
        assert_eq!(all_a.len(), 128);
        let all_b: Vec<_> = std::iter::from_fn(|| b.alloc(60)).collect();
        assert_eq!(all_b.len(), 256);
    }

    /// Frames allocated on a cached thread and dropped on others: into the dropping thread's
    /// cache when it has one, into the depot when it has none; every buffer comes back, and
    /// a full cache trades whole magazines that the first thread takes again.
    #[test]
    fn frames_freed_on_other_threads_go_back_where_they_should() {
        let pool = cached_pool(256);
        let magazine = default_magazine_frames(256);
        assert_eq!(magazine, 16);
        pool.attach_thread_cache();
        let frames: Vec<PoolFrame> = (0..6 * magazine)
            .map(|i| pool.alloc_copy(&[i as u8; 60]).expect("buffer"))
            .collect();
        assert_eq!(pool.stats().available, 256 - 6 * magazine);
        let (uncached, cached): (Vec<_>, Vec<_>) = frames
            .into_iter()
            .enumerate()
            .partition(|(i, _)| i % 3 == 0);
        let uncached_pool = pool.clone();
        std::thread::spawn(move || {
            drop(uncached);
            // A thread without a cache frees into the depot, one buffer at a time.
            assert!(!uncached_pool.has_thread_cache());
        })
        .join()
        .expect("uncached thread");
        assert_eq!(pool.stats().available, 256 - 4 * magazine);
        let cached_pool = pool.clone();
        std::thread::spawn(move || {
            cached_pool.attach_thread_cache();
            drop(cached);
            // Four magazines' worth into a cache of two: two full magazines went to the depot.
            assert_eq!(cached_pool.shared.full.len(), 2);
            assert_eq!(cached_pool.stats().available, 256);
            // The thread ends without flushing: the thread-local's destructor gives the rest
            // back.
        })
        .join()
        .expect("cached thread");
        assert_eq!(pool.stats().available, 256);
        assert_eq!(pool.shared.loose.len() + 2 * magazine, 256);
        // This thread's cache is empty and refills with a full magazine from the depot.
        let again: Vec<_> = (0..magazine)
            .map(|_| pool.alloc(60).expect("buffer"))
            .collect();
        assert_eq!(
            pool.shared.full.len(),
            1,
            "one whole magazine came back in one trade"
        );
        drop(again);
        flush_thread_caches();
        assert_eq!(pool.stats().available, 256);
        let all: Vec<_> = std::iter::from_fn(|| pool.alloc(60)).collect();
        assert_eq!(all.len(), 256, "every buffer can be allocated again");
    }

    /// An RX thread allocating and a TX thread freeing, both cached, with a pool small enough
    /// that magazines go round many times: every frame arrives intact, and every buffer is back
    /// when both threads have ended.
    #[test]
    fn cached_threads_pass_frames_and_all_come_back() {
        const FRAME_COUNT: usize = 1024;
        const ROUNDS: usize = 50_000;
        let pool = cached_pool(FRAME_COUNT);
        let (sender, receiver) = std::sync::mpsc::sync_channel::<PoolFrame>(64);
        let producer_pool = pool.clone();
        let producer = std::thread::spawn(move || {
            producer_pool.attach_thread_cache();
            let mut sent = 0u32;
            while (sent as usize) < ROUNDS {
                if let Some(frame) = producer_pool.alloc_copy(&sent.to_be_bytes()) {
                    sender.send(frame).expect("consumer alive");
                    sent += 1;
                } else {
                    std::thread::yield_now();
                }
            }
        });
        let consumer_pool = pool.clone();
        let consumer = std::thread::spawn(move || {
            consumer_pool.attach_thread_cache();
            let mut expected = 0u32;
            for frame in receiver {
                assert_eq!(frame.data(), &expected.to_be_bytes());
                if expected.is_multiple_of(5) {
                    let copy = frame.try_clone().expect("a buffer for the copy");
                    assert_eq!(copy.data(), frame.data());
                }
                expected += 1;
            }
            expected
        });
        producer.join().expect("producer");
        assert_eq!(consumer.join().expect("consumer") as usize, ROUNDS);
        assert_eq!(pool.stats().available, FRAME_COUNT);
    }

    /// Frames outliving every handle and cache of their pool free their buffers when dropped,
    /// on any thread (the pool's memory is gone already).
    #[test]
    fn frames_outlive_their_pool_and_its_caches() {
        let pool = cached_pool(128);
        let weak = Arc::downgrade(&pool.shared);
        let frames = std::thread::spawn(move || {
            pool.attach_thread_cache();
            let frames: Vec<_> = (0..10).map(|_| pool.alloc(60).expect("buffer")).collect();
            let clone = frames[0].try_clone().expect("buffer");
            drop(clone);
            frames
        })
        .join()
        .expect("thread");
        assert_eq!(weak.strong_count(), 0, "the thread's cache ended with it");
        let copy = frames[0].try_clone();
        assert!(copy.is_none(), "no pool, no buffer");
        drop(frames);
    }

    #[test]
    fn pool_frame_is_send() {
        fn assert_send<T: Send + 'static>() {}
        assert_send::<PoolFrame>();
        assert_send::<FramePool>();
    }
}
