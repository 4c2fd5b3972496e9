//! In-memory ports, for tests and benchmarks.
//!
//! A [`MemoryPort`] is a port whose wire is two bounded lock-free SPSC rings (`rtrb`):
//!
//! ```text
//!   Injector ──ring──▶ MemoryRx (RxQueue)   ... switch ...   MemoryTx (TxQueue) ──ring──▶ Collector
//! ```
//!
//! A test thread injects frames that the switch receives, and collects the frames the switch
//! transmits. All four halves are `Send`, so each may live on its own thread. Frames come from
//! one [`FramePool`], so a benchmark through memory ports exercises the same allocation path as
//! the AF_PACKET backend. A [`MemoryBackend`] opens such ports by device name, as the runtime
//! opens any backend's, and keeps their test-side ends ([`MemoryTap`]).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::backend::{Backend, BackendError, OpenedPort};
use crate::pool::{FramePool, PoolFrame, PoolStats};
use crate::{BackendStats, PortInfo, RxQueue, TxQueue};

#[derive(Default)]
struct Counters {
    rx_frames: AtomicU64,
    tx_frames: AtomicU64,
    tx_failed: AtomicU64,
    rx_no_buffer: AtomicU64,
    rx_missed: AtomicU64,
}

/// A port backed by memory; split it into its four halves with [`MemoryPort::split`].
pub struct MemoryPort {
    info: PortInfo,
    rx: MemoryRx,
    tx: MemoryTx,
    injector: Injector,
    collector: Collector,
    stats: MemoryStatsHandle,
}

impl fmt::Debug for MemoryPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryPort")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl MemoryPort {
    /// A port whose RX and TX rings each hold up to `ring_capacity` frames, with frames from
    /// `pool`.
    #[must_use]
    pub fn new(info: PortInfo, pool: FramePool, ring_capacity: usize) -> Self {
        let counters = Arc::new(Counters::default());
        let (rx_producer, rx_consumer) = rtrb::RingBuffer::new(ring_capacity);
        let (tx_producer, tx_consumer) = rtrb::RingBuffer::new(ring_capacity);
        Self {
            info,
            rx: MemoryRx {
                ring: rx_consumer,
                pool: pool.clone(),
                cache_attached: false,
                counters: Arc::clone(&counters),
            },
            tx: MemoryTx {
                ring: tx_producer,
                pool: pool.clone(),
                cache_attached: false,
                counters: Arc::clone(&counters),
            },
            injector: Injector {
                ring: rx_producer,
                pool,
                counters: Arc::clone(&counters),
            },
            collector: Collector { ring: tx_consumer },
            stats: MemoryStatsHandle { counters },
        }
    }

    /// What the port says about itself.
    #[must_use]
    pub fn info(&self) -> &PortInfo {
        &self.info
    }

    /// A handle reading the port's counters from any thread.
    #[must_use]
    pub fn stats_handle(&self) -> MemoryStatsHandle {
        self.stats.clone()
    }

    /// The switch-side halves and the test-side handles.
    #[must_use]
    pub fn split(self) -> (MemoryRx, MemoryTx, Injector, Collector) {
        (self.rx, self.tx, self.injector, self.collector)
    }
}

/// Reads a memory port's counters.
#[derive(Clone)]
pub struct MemoryStatsHandle {
    counters: Arc<Counters>,
}

impl fmt::Debug for MemoryStatsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MemoryStatsHandle")
            .field(&self.stats())
            .finish()
    }
}

impl MemoryStatsHandle {
    /// The counters now. `rx_missed` counts frames the injector could not place because the RX
    /// ring was full; `rx_no_buffer` those it could not copy because the pool was empty.
    #[must_use]
    pub fn stats(&self) -> BackendStats {
        BackendStats {
            rx_frames: self.counters.rx_frames.load(Ordering::Relaxed),
            tx_frames: self.counters.tx_frames.load(Ordering::Relaxed),
            rx_missed: self.counters.rx_missed.load(Ordering::Relaxed),
            tx_failed: self.counters.tx_failed.load(Ordering::Relaxed),
            rx_no_buffer: self.counters.rx_no_buffer.load(Ordering::Relaxed),
        }
    }
}

/// The switch's receive half of a memory port.
pub struct MemoryRx {
    ring: rtrb::Consumer<PoolFrame>,
    /// For the frame cache of the thread that polls it (which drops and clones frames).
    pool: FramePool,
    cache_attached: bool,
    counters: Arc<Counters>,
}

impl fmt::Debug for MemoryRx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryRx")
            .field("queued", &self.ring.slots())
            .finish_non_exhaustive()
    }
}

impl RxQueue for MemoryRx {
    type Frame = PoolFrame;

    fn rx_burst(&mut self, out: &mut Vec<PoolFrame>, max: usize) -> usize {
        if !self.cache_attached {
            self.pool.attach_thread_cache();
            self.cache_attached = true;
        }
        let mut received = 0;
        while received < max {
            let Ok(frame) = self.ring.pop() else { break };
            out.push(frame);
            received += 1;
        }
        if received > 0 {
            self.counters
                .rx_frames
                .fetch_add(received as u64, Ordering::Relaxed);
        }
        received
    }
}

/// The switch's transmit half of a memory port.
pub struct MemoryTx {
    ring: rtrb::Producer<PoolFrame>,
    pool: FramePool,
    cache_attached: bool,
    counters: Arc<Counters>,
}

impl fmt::Debug for MemoryTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryTx")
            .field("free_slots", &self.ring.slots())
            .finish_non_exhaustive()
    }
}

impl TxQueue for MemoryTx {
    type Frame = PoolFrame;

    fn tx_burst(&mut self, frames: &mut Vec<PoolFrame>) -> usize {
        if !self.cache_attached {
            self.pool.attach_thread_cache();
            self.cache_attached = true;
        }
        let taken = frames.len().min(self.ring.slots());
        for frame in frames.drain(..taken) {
            // Cannot fail: `slots()` free slots were checked above and only this half pushes.
            if let Err(rtrb::PushError::Full(frame)) = self.ring.push(frame) {
                drop(frame);
                self.counters.tx_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        if taken > 0 {
            self.counters
                .tx_frames
                .fetch_add(taken as u64, Ordering::Relaxed);
        }
        taken
    }

    fn alloc_frame(&mut self, len: usize) -> Option<PoolFrame> {
        self.pool.alloc(len)
    }
}

/// Why [`Injector::inject`] did not place a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectError {
    /// The frame pool had no free buffer (counted in `rx_no_buffer`).
    PoolEmpty,
    /// The frame is longer than the pool's data room.
    TooLong,
    /// The RX ring was full: the switch is not keeping up.
    RingFull,
}

impl fmt::Display for InjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PoolEmpty => f.write_str("frame pool empty"),
            Self::TooLong => f.write_str("frame longer than the pool's data room"),
            Self::RingFull => f.write_str("receive ring full"),
        }
    }
}

impl std::error::Error for InjectError {}

/// Puts frames on a memory port's wire, towards the switch.
pub struct Injector {
    ring: rtrb::Producer<PoolFrame>,
    pool: FramePool,
    counters: Arc<Counters>,
}

impl fmt::Debug for Injector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Injector")
            .field("free_slots", &self.ring.slots())
            .finish_non_exhaustive()
    }
}

impl Injector {
    /// Copies `bytes` into a pool frame and queues it for the switch to receive.
    ///
    /// # Errors
    /// [`InjectError`] says why the frame was not queued.
    pub fn inject(&mut self, bytes: &[u8]) -> Result<(), InjectError> {
        if bytes.len() > self.pool.data_room_bytes() {
            return Err(InjectError::TooLong);
        }
        if self.ring.is_full() {
            self.counters.rx_missed.fetch_add(1, Ordering::Relaxed);
            return Err(InjectError::RingFull);
        }
        let Some(frame) = self.pool.alloc_copy(bytes) else {
            self.counters.rx_no_buffer.fetch_add(1, Ordering::Relaxed);
            return Err(InjectError::PoolEmpty);
        };
        // Cannot fail: fullness was checked above and only this half pushes.
        self.ring.push(frame).map_err(|_| InjectError::RingFull)
    }

    /// Queues a frame the caller built for the switch to receive.
    ///
    /// # Errors
    /// Gives the frame back when the ring is full.
    pub fn inject_frame(&mut self, frame: PoolFrame) -> Result<(), PoolFrame> {
        self.ring
            .push(frame)
            .map_err(|rtrb::PushError::Full(frame)| frame)
    }

    /// Frames that can be injected before the ring is full.
    #[must_use]
    pub fn free_slots(&self) -> usize {
        self.ring.slots()
    }

    /// The pool frames are copied into.
    #[must_use]
    pub fn pool(&self) -> &FramePool {
        &self.pool
    }
}

/// Takes the frames the switch transmitted on a memory port.
pub struct Collector {
    ring: rtrb::Consumer<PoolFrame>,
}

impl fmt::Debug for Collector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collector")
            .field("queued", &self.ring.slots())
            .finish()
    }
}

impl Collector {
    /// The oldest transmitted frame not yet collected.
    pub fn pop(&mut self) -> Option<PoolFrame> {
        self.ring.pop().ok()
    }

    /// Moves up to `max` transmitted frames to `out`; returns how many.
    pub fn collect(&mut self, out: &mut Vec<PoolFrame>, max: usize) -> usize {
        let mut collected = 0;
        while collected < max {
            let Some(frame) = self.pop() else { break };
            out.push(frame);
            collected += 1;
        }
        collected
    }

    /// Frames transmitted and not yet collected.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.ring.slots()
    }
}

/// The test-side ends of an in-memory port opened by a [`MemoryBackend`].
#[derive(Debug)]
pub struct MemoryTap {
    /// Puts frames into the port's receive side.
    pub injector: Injector,
    /// Takes what the port transmits.
    pub collector: Collector,
    /// The port's link state as the switch reads it (up when opened): a test pulls the cable
    /// by storing `false`.
    pub link_up: Arc<AtomicBool>,
}

/// In-memory ports, for tests and benchmarks: every `open` creates a port whose other ends
/// ([`MemoryTap`]) are kept for the caller to take.
#[derive(Debug)]
pub struct MemoryBackend {
    pool: FramePool,
    ring_frames: usize,
    taps: HashMap<String, MemoryTap>,
    next_mac: u8,
}

impl MemoryBackend {
    /// A backend whose ports share `pool`; each port's rings hold `ring_frames`.
    #[must_use]
    pub fn new(pool: FramePool, ring_frames: usize) -> Self {
        Self {
            pool,
            ring_frames,
            taps: HashMap::new(),
            next_mac: 1,
        }
    }

    /// The test-side ends of the port opened on `device`.
    pub fn take_tap(&mut self, device: &str) -> Option<MemoryTap> {
        self.taps.remove(device)
    }

    /// Frees what the ports whose taps nobody took transmitted (a switch run on memory ports
    /// without a test at their other ends: its LLDPDUs); returns how many frames. Their buffers
    /// go back to the pool, so that a check of the pool after a stop sees every one.
    pub fn discard_untaken_transmits(&mut self) -> usize {
        let mut n = 0;
        for tap in self.taps.values_mut() {
            while tap.collector.pop().is_some() {
                n += 1;
            }
        }
        n
    }
}

impl Backend for MemoryBackend {
    type Frame = PoolFrame;
    type Rx = MemoryRx;
    type Tx = MemoryTx;

    fn open(&mut self, device: &str) -> Result<OpenedPort<MemoryRx, MemoryTx>, BackendError> {
        let info = PortInfo {
            name: device.to_owned(),
            mac: [0x02, 0x4d, 0x45, 0x4d, 0, self.next_mac],
            max_frame_len: self.pool.data_room_bytes(),
        };
        self.next_mac = self.next_mac.wrapping_add(1);
        let port = MemoryPort::new(info.clone(), self.pool.clone(), self.ring_frames);
        let handle = port.stats_handle();
        let (rx, tx, injector, collector) = port.split();
        let link_up = Arc::new(AtomicBool::new(true));
        self.taps.insert(
            device.to_owned(),
            MemoryTap {
                injector,
                collector,
                link_up: Arc::clone(&link_up),
            },
        );
        Ok(OpenedPort {
            rx,
            tx,
            info,
            stats: Arc::new(move || handle.stats()),
            link: Arc::new(move || Some(link_up.load(Ordering::Relaxed))),
        })
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        Some(self.pool.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::PoolConfig;
    use crate::BURST_MAX;
    use headroom_core::frame::Frame;

    fn port(frame_count: usize, ring_capacity: usize) -> (FramePool, MemoryPort) {
        let pool = FramePool::new(PoolConfig::with_frame_count(frame_count)).expect("pool");
        let info = PortInfo {
            name: "mem0".into(),
            mac: [2, 0, 0, 0, 0, 1],
            max_frame_len: 2048,
        };
        let port = MemoryPort::new(info, pool.clone(), ring_capacity);
        (pool, port)
    }

    #[test]
    fn injected_frames_are_received_in_order_and_in_bursts() {
        let (_pool, port) = port(64, 8);
        let stats = port.stats_handle();
        let (mut rx, _tx, mut injector, _collector) = port.split();
        let mut out = Vec::new();
        assert_eq!(rx.rx_burst(&mut out, BURST_MAX), 0, "nothing injected yet");
        for i in 0..5u8 {
            injector.inject(&[i; 60]).expect("room");
        }
        assert_eq!(rx.rx_burst(&mut out, 3), 3);
        assert_eq!(rx.rx_burst(&mut out, BURST_MAX), 2);
        let firsts: Vec<u8> = out.iter().map(|f| f.data()[0]).collect();
        assert_eq!(firsts, [0, 1, 2, 3, 4]);
        assert!(out.iter().all(|f| f.len() == 60));
        assert_eq!(stats.stats().rx_frames, 5);
    }

    #[test]
    fn injector_reports_full_ring_empty_pool_and_oversize() {
        let (pool, port) = port(3, 2);
        let stats = port.stats_handle();
        let (mut rx, _tx, mut injector, _collector) = port.split();
        injector.inject(&[1]).expect("room");
        injector.inject(&[2]).expect("room");
        assert_eq!(injector.inject(&[3]), Err(InjectError::RingFull));
        assert_eq!(stats.stats().rx_missed, 1);
        assert_eq!(injector.inject(&[0; 2049]), Err(InjectError::TooLong));
        let mut out = Vec::new();
        assert_eq!(rx.rx_burst(&mut out, 1), 1);
        let hold = pool.alloc(1).expect("last buffer");
        assert_eq!(injector.inject(&[3]), Err(InjectError::PoolEmpty));
        assert_eq!(stats.stats().rx_no_buffer, 1);
        drop(hold);
    }

    #[test]
    fn tx_burst_takes_what_fits_and_leaves_the_rest_in_order() {
        let (pool, port) = port(16, 4);
        let stats = port.stats_handle();
        let (_rx, mut tx, _injector, mut collector) = port.split();
        let mut frames: Vec<_> = (0..6u8)
            .map(|i| pool.alloc_copy(&[i]).expect("buf"))
            .collect();
        assert_eq!(tx.tx_burst(&mut frames), 4);
        let left: Vec<u8> = frames.iter().map(|f| f.data()[0]).collect();
        assert_eq!(left, [4, 5]);
        assert_eq!(tx.tx_burst(&mut frames), 0, "ring full");
        let mut out = Vec::new();
        assert_eq!(collector.collect(&mut out, 2), 2);
        assert_eq!(tx.tx_burst(&mut frames), 2);
        assert!(frames.is_empty());
        assert_eq!(collector.collect(&mut out, BURST_MAX), 4);
        let sent: Vec<u8> = out.iter().map(|f| f.data()[0]).collect();
        assert_eq!(sent, [0, 1, 2, 3, 4, 5]);
        assert_eq!(stats.stats().tx_frames, 6);
        drop(out);
        assert_eq!(pool.stats().available, 16);
    }

    #[test]
    fn alloc_frame_is_zeroed_and_from_the_pool() {
        let (pool, port) = port(2, 2);
        let (_rx, mut tx, _injector, _collector) = port.split();
        let frame = tx.alloc_frame(64).expect("buffer");
        assert_eq!(frame.data(), &[0; 64]);
        assert_eq!(pool.stats().available, 1);
    }

    #[test]
    fn a_forwarding_thread_between_injector_and_collector() {
        const FRAMES: u32 = 10_000;
        let (pool, port) = port(256, 64);
        let (mut rx, mut tx, mut injector, mut collector) = port.split();
        let forwarder = std::thread::spawn(move || {
            let mut burst = Vec::with_capacity(BURST_MAX);
            let mut forwarded = 0u32;
            while forwarded < FRAMES {
                rx.rx_burst(&mut burst, BURST_MAX);
                while !burst.is_empty() {
                    forwarded += tx.tx_burst(&mut burst) as u32;
                    std::thread::yield_now();
                }
            }
        });
        let mut next_to_inject = 0u32;
        let mut next_expected = 0u32;
        while next_expected < FRAMES {
            if next_to_inject < FRAMES && injector.inject(&next_to_inject.to_be_bytes()).is_ok() {
                next_to_inject += 1;
            }
            if let Some(frame) = collector.pop() {
                assert_eq!(frame.data(), &next_expected.to_be_bytes());
                next_expected += 1;
            }
        }
        forwarder.join().expect("forwarder");
        assert_eq!(pool.stats().available, 256);
    }
}
