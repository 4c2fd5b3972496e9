//! A preallocated pool of fixed-size frame buffers.
//!
//! Every buffer is allocated once, when the pool is built. A [`PoolFrame`] owns one buffer while
//! it lives and gives it back to the pool when dropped, from whatever thread drops it: the RX
//! lcore allocates, the TX lcore frees. The free list is a bounded lock-free MPMC queue
//! (`crossbeam_queue::ArrayQueue`) of boxed buffers, so taking and returning a buffer moves one
//! pointer and never touches the allocator.
//!
//! Each buffer has `headroom_bytes` in front of the frame's first byte, so that an 802.1Q tag
//! (4 bytes) can be inserted with [`Frame::push_front`] without moving the frame, and
//! `data_room_bytes` from there on for the frame itself.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use headroom_core::frame::Frame;

/// Default bytes a frame may hold: a 1518-byte VLAN-tagged Ethernet frame fits with room to spare
/// (the same 2048 B as DPDK's `RTE_MBUF_DEFAULT_DATAROOM`).
pub const DEFAULT_DATA_ROOM_BYTES: usize = 2048;

/// Default bytes reserved in front of a frame (DPDK's `RTE_PKTMBUF_HEADROOM`).
pub const DEFAULT_HEADROOM_BYTES: usize = 128;

/// How a pool is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Number of buffers; the most frames that can be alive at once.
    pub frame_count: usize,
    /// Bytes available to a frame from its first byte on.
    pub data_room_bytes: usize,
    /// Bytes reserved in front of a freshly allocated frame, for [`Frame::push_front`].
    pub headroom_bytes: usize,
}

impl PoolConfig {
    /// `frame_count` buffers with the default data room and headroom.
    #[must_use]
    pub const fn with_frame_count(frame_count: usize) -> Self {
        Self {
            frame_count,
            data_room_bytes: DEFAULT_DATA_ROOM_BYTES,
            headroom_bytes: DEFAULT_HEADROOM_BYTES,
        }
    }
}

/// Why a pool could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolConfigError {
    /// `frame_count` was 0.
    NoFrames,
    /// `data_room_bytes` was 0.
    NoDataRoom,
}

impl fmt::Display for PoolConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoFrames => f.write_str("frame pool needs at least one frame"),
            Self::NoDataRoom => f.write_str("frame pool needs a non-zero data room"),
        }
    }
}

impl std::error::Error for PoolConfigError {}

/// A snapshot of a pool's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers the pool owns in total.
    pub capacity: usize,
    /// Buffers free at the moment of the snapshot (racy by nature when other threads allocate).
    pub available: usize,
    /// Allocations that failed because every buffer was in use.
    pub alloc_failures: u64,
}

struct Shared {
    free: ArrayQueue<Box<[u8]>>,
    capacity: usize,
    data_room_bytes: usize,
    headroom_bytes: usize,
    alloc_failures: AtomicU64,
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
            .field("stats", &self.stats())
            .finish()
    }
}

impl FramePool {
    /// Allocates every buffer of the pool now.
    ///
    /// # Errors
    /// [`PoolConfigError`] when the configuration asks for no frame or no data room.
    pub fn new(config: PoolConfig) -> Result<Self, PoolConfigError> {
        if config.frame_count == 0 {
            return Err(PoolConfigError::NoFrames);
        }
        if config.data_room_bytes == 0 {
            return Err(PoolConfigError::NoDataRoom);
        }
        let buffer_bytes = config.headroom_bytes + config.data_room_bytes;
        let free = ArrayQueue::new(config.frame_count);
        for _ in 0..config.frame_count {
            // Cannot fail: the queue was sized to hold every buffer.
            let _ = free.push(vec![0u8; buffer_bytes].into_boxed_slice());
        }
        Ok(Self {
            shared: Arc::new(Shared {
                free,
                capacity: config.frame_count,
                data_room_bytes: config.data_room_bytes,
                headroom_bytes: config.headroom_bytes,
                alloc_failures: AtomicU64::new(0),
            }),
        })
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

    /// A frame of `len` zero bytes. `None` (and an allocation failure counted) when the pool is
    /// empty or `len` exceeds the data room.
    #[must_use]
    pub fn alloc(&self, len: usize) -> Option<PoolFrame> {
        let mut frame = self.alloc_unzeroed(len)?;
        frame.data_mut().fill(0);
        Some(frame)
    }

    /// A frame holding a copy of `bytes`. `None` when the pool is empty (counted as an allocation
    /// failure) or `bytes` is longer than the data room (not counted: the caller classifies it).
    #[must_use]
    pub fn alloc_copy(&self, bytes: &[u8]) -> Option<PoolFrame> {
        let mut frame = self.alloc_unzeroed(bytes.len())?;
        frame.data_mut().copy_from_slice(bytes);
        Some(frame)
    }

    /// A frame of `len` bytes whose contents are unspecified: they are whatever an earlier frame
    /// left in the buffer, and the caller must overwrite all of them. Saves zeroing when the
    /// caller fills the frame anyway (a receive path copying from a ring).
    ///
    /// `None` when the pool is empty (counted as an allocation failure) or `len` exceeds the data
    /// room (not counted).
    #[must_use]
    pub fn alloc_unzeroed(&self, len: usize) -> Option<PoolFrame> {
        if len > self.shared.data_room_bytes {
            return None;
        }
        let Some(buf) = self.shared.free.pop() else {
            self.shared.alloc_failures.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let start = self.shared.headroom_bytes;
        Some(PoolFrame {
            buf,
            start,
            end: start + len,
            pool: Arc::clone(&self.shared),
        })
    }

    /// The pool's counters now.
    #[must_use]
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            capacity: self.shared.capacity,
            available: self.shared.free.len(),
            alloc_failures: self.shared.alloc_failures.load(Ordering::Relaxed),
        }
    }
}

/// A frame in a buffer borrowed from a [`FramePool`]; dropping it returns the buffer.
///
/// The frame's bytes are `buf[start..end]`: `start` bytes of headroom in front, and tailroom up to
/// the end of the buffer behind.
pub struct PoolFrame {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    pool: Arc<Shared>,
}

impl fmt::Debug for PoolFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolFrame")
            .field("len", &(self.end - self.start))
            .field("headroom", &self.start)
            .field("tailroom", &(self.buf.len() - self.end))
            .finish_non_exhaustive()
    }
}

impl PoolFrame {
    /// Bytes free in front of the frame, available to [`Frame::push_front`].
    #[must_use]
    pub fn headroom(&self) -> usize {
        self.start
    }

    /// Bytes free behind the frame, available to [`PoolFrame::push_back`].
    #[must_use]
    pub fn tailroom(&self) -> usize {
        self.buf.len() - self.end
    }

    /// Grows the frame by `n` bytes at the end (to pad a short frame). The new bytes are
    /// unspecified. Returns `false`, leaving the frame unchanged, when the buffer has no room.
    pub fn push_back(&mut self, n: usize) -> bool {
        if n > self.tailroom() {
            return false;
        }
        self.end += n;
        true
    }
}

impl Frame for PoolFrame {
    fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.end]
    }

    fn push_front(&mut self, n: usize) -> bool {
        if n > self.start {
            return false;
        }
        self.start -= n;
        true
    }

    fn pull_front(&mut self, n: usize) -> bool {
        if n > self.end - self.start {
            return false;
        }
        self.start += n;
        true
    }

    fn try_clone(&self) -> Option<Self> {
        let Some(mut buf) = self.pool.free.pop() else {
            self.pool.alloc_failures.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        // Same layout as the original, so the clone keeps its headroom for tag insertion.
        buf[self.start..self.end].copy_from_slice(&self.buf[self.start..self.end]);
        Some(Self {
            buf,
            start: self.start,
            end: self.end,
            pool: Arc::clone(&self.pool),
        })
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    /// Shortens the frame to `len` bytes; does nothing when it is not longer than that.
    fn truncate(&mut self, len: usize) -> bool {
        if len < self.end - self.start {
            self.end = self.start + len;
        }
        true
    }
}

impl Drop for PoolFrame {
    fn drop(&mut self) {
        // An empty boxed slice does not allocate, so taking the buffer out is free.
        let buf = std::mem::take(&mut self.buf);
        // Cannot fail: the queue holds as many slots as the pool has buffers, and this buffer
        // came out of it. Were it ever to fail, the buffer would simply be freed.
        let _ = self.pool.free.push(buf);
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

    #[test]
    fn pool_frame_is_send() {
        fn assert_send<T: Send + 'static>() {}
        assert_send::<PoolFrame>();
        assert_send::<FramePool>();
    }
}
