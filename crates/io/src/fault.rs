//! Fault-injecting ports: wrappers around any [`RxQueue`] / [`TxQueue`] that, from a seed,
//! drop, corrupt, truncate, duplicate, reorder and delay frames, stall a transmit queue (a NIC
//! that stops draining) and flap the link (smoltcp's `FaultInjector` is the model).
//!
//! ```text
//!   wire ──▶ inner RxQueue ──▶ FaultyRx ──▶ switch ──▶ FaultyTx ──▶ inner TxQueue ──▶ wire
//! ```
//!
//! **For tests and fault drills only.** `headroom run` wraps its ports only when the
//! configuration says `[testing.fault_injection]` with `i_understand_this_breaks_traffic = true`.
//!
//! # What happens to a frame
//! Each frame that passes a wrapper draws one fate, with the probabilities of [`FrameFaults`]
//! (their sum is at most 1; whatever is left is "passes untouched"):
//!
//! | fate | what the wrapper does |
//! |---|---|
//! | drop | the frame is freed (a lost frame on the wire) |
//! | corrupt | 1 to [`CORRUPT_BITS_MAX`] bits flipped; each flip lands in the first [`HEADER_BYTES`] bytes (Ethernet, 802.1Q, MAC Control opcode/class-enable/quanta, IP and UDP headers) with probability ½, anywhere in the frame otherwise |
//! | truncate | cut to a length drawn uniformly in `[0, len)` |
//! | duplicate | delivered, and a copy (from the frame's own pool, no allocation) follows it on the next call |
//! | reorder | held back and delivered on the next call, after the frames that followed it |
//! | delay | held back for a time drawn uniformly in `(0, delay_max_ns]` |
//!
//! Held frames (duplicates, reordered and delayed ones) live in a bounded buffer
//! ([`FaultConfig::hold_frames`]); when it is full a frame that would be held passes untouched
//! and is counted in [`FaultStats::hold_full`]. Nothing allocates after construction.
//!
//! In time, not per frame: a transmit queue **stalls** (takes nothing, so frames back up in the
//! switch, as with a NIC that stops draining) [`FaultConfig::tx_stalls_per_second`] times a
//! second on average, for [`FaultConfig::tx_stall_ns`] each; the **link goes down**
//! [`FaultConfig::link_flaps_per_second`] times a second on average, for
//! [`FaultConfig::link_down_ns`] each (a Poisson process, drawn at each call for the time since
//! the previous one, so the rate does not depend on how often the port is polled). While the
//! link is down every frame received or transmitted on the port is lost (counted), and
//! [`FaultLink::is_up`] says so to whoever reads the link state.
//!
//! # Determinism
//! Each wrapper has its own xoshiro generator seeded from [`FaultConfig::seed`] and its
//! direction; given the same seed, the same frames and the same clock readings, it makes the
//! same decisions. The clock ([`FaultClock`]) is passed in: tests use a virtual one.
//!
//! # Accounting
//! Every frame that enters a wrapper is, at any moment, exactly one of: delivered, dropped by a
//! counted fault, or held (a gauge). A duplicate adds one delivered frame.
//! [`FaultStats::conserved`] checks it.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use headroom_core::counters::{Counter, Gauge};
use headroom_core::frame::Frame;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::{RxQueue, TxQueue, BURST_MAX};

/// Most bits one corruption flips.
pub const CORRUPT_BITS_MAX: u32 = 3;

/// Bytes from the start of the frame that a corruption favours (headers up to UDP/BTH).
pub const HEADER_BYTES: usize = 64;

/// Frames a wrapper may hold back by default (duplicates, reordered and delayed frames).
pub const DEFAULT_HOLD_FRAMES: usize = 64;

/// A clock for fault timing, in nanoseconds (any epoch; it must not go back).
pub type FaultClock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// A clock that only moves when a test moves it.
#[derive(Clone, Debug, Default)]
pub struct VirtualClock(Arc<AtomicU64>);

impl VirtualClock {
    /// A clock at `ns`.
    #[must_use]
    pub fn at(ns: u64) -> Self {
        Self(Arc::new(AtomicU64::new(ns)))
    }

    /// Moves the clock on by `ns`.
    pub fn advance(&self, ns: u64) {
        self.0.fetch_add(ns, Ordering::Relaxed);
    }

    /// The time now.
    #[must_use]
    pub fn now_ns(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// This clock as a [`FaultClock`].
    #[must_use]
    pub fn fault_clock(&self) -> FaultClock {
        let clock = self.clone();
        Arc::new(move || clock.now_ns())
    }
}

/// A [`FaultClock`] reading `CLOCK_MONOTONIC` (nanoseconds since the call).
#[must_use]
pub fn monotonic_clock() -> FaultClock {
    let start = std::time::Instant::now();
    Arc::new(move || u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX))
}

/// Probabilities (0 to 1, summing to at most 1) of each per-frame fate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrameFaults {
    /// The frame is lost.
    pub drop_rate: f64,
    /// Bits of the frame are flipped.
    pub corrupt_rate: f64,
    /// The frame is cut short.
    pub truncate_rate: f64,
    /// The frame arrives twice.
    pub duplicate_rate: f64,
    /// The frame is overtaken by the frames behind it.
    pub reorder_rate: f64,
    /// The frame is held back for up to `delay_max_ns`.
    pub delay_rate: f64,
    /// Longest delay, ns.
    pub delay_max_ns: u64,
}

impl FrameFaults {
    /// No fault at all.
    #[must_use]
    pub const fn none() -> Self {
        Self {
            drop_rate: 0.0,
            corrupt_rate: 0.0,
            truncate_rate: 0.0,
            duplicate_rate: 0.0,
            reorder_rate: 0.0,
            delay_rate: 0.0,
            delay_max_ns: 0,
        }
    }

    fn rates(&self) -> [f64; 6] {
        [
            self.drop_rate,
            self.corrupt_rate,
            self.truncate_rate,
            self.duplicate_rate,
            self.reorder_rate,
            self.delay_rate,
        ]
    }
}

/// What a fault-injecting port does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultConfig {
    /// Seed of the wrappers' generators.
    pub seed: u64,
    /// Faults of the frames the switch receives.
    pub rx: FrameFaults,
    /// Faults of the frames the switch transmits.
    pub tx: FrameFaults,
    /// Transmit stalls per second, on average.
    pub tx_stalls_per_second: f64,
    /// How long a stall lasts, ns.
    pub tx_stall_ns: u64,
    /// Link flaps per second, on average.
    pub link_flaps_per_second: f64,
    /// How long the link stays down, ns.
    pub link_down_ns: u64,
    /// Frames each wrapper may hold back at once.
    pub hold_frames: usize,
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            rx: FrameFaults::none(),
            tx: FrameFaults::none(),
            tx_stalls_per_second: 0.0,
            tx_stall_ns: 0,
            link_flaps_per_second: 0.0,
            link_down_ns: 0,
            hold_frames: DEFAULT_HOLD_FRAMES,
        }
    }
}

/// Why a [`FaultConfig`] is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultConfigError(String);

impl fmt::Display for FaultConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FaultConfigError {}

impl FaultConfig {
    /// Checks that every rate is a probability and that each direction's rates sum to at most 1.
    ///
    /// # Errors
    /// [`FaultConfigError`] saying which value is wrong.
    pub fn validate(&self) -> Result<(), FaultConfigError> {
        let probability = |name: &str, v: f64| {
            if v.is_finite() && (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(FaultConfigError(format!(
                    "{name} = {v} is not a probability between 0 and 1"
                )))
            }
        };
        for (dir, faults) in [("rx", &self.rx), ("tx", &self.tx)] {
            for (name, v) in [
                "drop",
                "corrupt",
                "truncate",
                "duplicate",
                "reorder",
                "delay",
            ]
            .iter()
            .zip(faults.rates())
            {
                probability(&format!("{dir}.{name}_rate"), v)?;
            }
            let sum: f64 = faults.rates().iter().sum();
            if sum > 1.0 + 1e-9 {
                return Err(FaultConfigError(format!(
                    "the {dir} rates sum to {sum}: each frame has one fate, so at most 1"
                )));
            }
        }
        for (name, v) in [
            ("tx_stalls_per_second", self.tx_stalls_per_second),
            ("link_flaps_per_second", self.link_flaps_per_second),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(FaultConfigError(format!(
                    "{name} = {v} is not a rate (a number of events per second, 0 or more)"
                )));
            }
        }
        Ok(())
    }
}

/// A probability as a threshold on a uniform `u32` (exact for 0 and 1 in effect: 1 maps to
/// `u32::MAX + 1`, represented in a `u64`).
fn threshold(p: f64) -> u64 {
    // Truncation is intended: the rate's resolution is 2^-32.
    (p.clamp(0.0, 1.0) * 4_294_967_296.0) as u64
}

/// The cumulative fate thresholds of one direction.
#[derive(Clone, Copy, Debug)]
struct Fates {
    cumulative: [u64; 6],
    delay_max_ns: u64,
    any: bool,
}

impl Fates {
    fn new(f: &FrameFaults) -> Self {
        let mut cumulative = [0u64; 6];
        let mut sum = 0u64;
        for (c, r) in cumulative.iter_mut().zip(f.rates()) {
            sum += threshold(r);
            *c = sum;
        }
        Self {
            cumulative,
            delay_max_ns: f.delay_max_ns,
            any: sum > 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Pass,
    Drop,
    Corrupt,
    Truncate,
    Duplicate,
    Reorder,
    Delay,
}

const FATES: [Fate; 6] = [
    Fate::Drop,
    Fate::Corrupt,
    Fate::Truncate,
    Fate::Duplicate,
    Fate::Reorder,
    Fate::Delay,
];

/// What one wrapper did (one writer: the thread that polls the wrapper; any thread reads).
#[derive(Debug, Default)]
pub struct FaultStats {
    /// Frames that entered the wrapper.
    pub frames_in: Counter,
    /// Frames that left it (duplicates included).
    pub frames_out: Counter,
    /// Frames lost to the drop fate.
    pub dropped: Counter,
    /// Frames lost because the link was down.
    pub link_down_dropped: Counter,
    /// Frames with bits flipped.
    pub corrupted: Counter,
    /// Frames cut short.
    pub truncated: Counter,
    /// Frames the backend could not cut short (`Frame::truncate` unsupported): passed untouched.
    pub truncate_unsupported: Counter,
    /// Copies made.
    pub duplicated: Counter,
    /// Copies that could not be made (the frame's pool was empty).
    pub duplicate_failed: Counter,
    /// Frames held back to be overtaken.
    pub reordered: Counter,
    /// Frames delayed.
    pub delayed: Counter,
    /// Frames that would have been held but the hold buffer was full: passed untouched.
    pub hold_full: Counter,
    /// Frames held now (a level).
    pub held: Gauge,
    /// Transmit stalls started.
    pub tx_stalls: Counter,
    /// Transmit calls refused because the queue was stalled.
    pub tx_stalled_calls: Counter,
    /// Link flaps (the link went down).
    pub link_flaps: Counter,
}

impl FaultStats {
    /// Every frame that entered is delivered, dropped by a counted fault, or held:
    /// `in + duplicated = out + dropped + link_down_dropped + held`. Exact when read by the
    /// writer or after it stopped.
    #[must_use]
    pub fn conserved(&self) -> bool {
        self.frames_in.get() + self.duplicated.get()
            == self.frames_out.get()
                + self.dropped.get()
                + self.link_down_dropped.get()
                + self.held.get()
    }

    /// Frames lost by faults (dropped or lost to a down link).
    #[must_use]
    pub fn lost(&self) -> u64 {
        self.dropped.get() + self.link_down_dropped.get()
    }
}

/// A port's link as fault injection sees it: down until a time, written by the port's
/// [`FaultyRx`] only, read by its [`FaultyTx`] and by whoever reports link state.
#[derive(Debug, Default)]
pub struct FaultLink {
    /// The link is down while the clock is below this, ns (0: never went down).
    down_until_ns: AtomicU64,
}

impl FaultLink {
    /// Whether the link is up at `now_ns`.
    #[must_use]
    pub fn is_up(&self, now_ns: u64) -> bool {
        // Relaxed: a reader that sees the change one call late loses or keeps one more burst,
        // which is what a real link going down mid-burst does too.
        now_ns >= self.down_until_ns.load(Ordering::Relaxed)
    }

    fn set_down_until(&self, ns: u64) {
        self.down_until_ns.store(ns, Ordering::Relaxed);
    }
}

/// A frame held back, and when it may leave.
#[derive(Debug)]
struct Held<F> {
    frame: F,
    due_ns: u64,
}

/// The per-frame machinery both directions share.
struct Injector<F> {
    rng: Xoshiro256PlusPlus,
    fates: Fates,
    held: VecDeque<Held<F>>,
    hold_capacity: usize,
    stats: Arc<FaultStats>,
}

impl<F: Frame> Injector<F> {
    fn new(seed: u64, faults: &FrameFaults, hold_capacity: usize) -> Self {
        Self {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            fates: Fates::new(faults),
            held: VecDeque::with_capacity(hold_capacity),
            hold_capacity,
            stats: Arc::new(FaultStats::default()),
        }
    }

    /// Whether an event of a Poisson process of `per_second` happened in the `elapsed_ns`
    /// since the last draw (probability 1 - e^(-rate × time)).
    fn happened(&mut self, per_second: f64, elapsed_ns: u64) -> bool {
        if per_second <= 0.0 || elapsed_ns == 0 {
            return false;
        }
        let p = 1.0 - (-per_second * elapsed_ns as f64 / 1e9).exp();
        u64::from(self.rng.next_u32()) < threshold(p)
    }

    /// A number in `[0, n)` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        // Multiply-shift: uniform enough for fault placement, no division.
        ((u128::from(self.rng.next_u64()) * u128::from(n)) >> 64) as u64
    }

    fn fate(&mut self) -> Fate {
        if !self.fates.any {
            return Fate::Pass;
        }
        let draw = u64::from(self.rng.next_u32());
        for (fate, &limit) in FATES.iter().zip(&self.fates.cumulative) {
            if draw < limit {
                return *fate;
            }
        }
        Fate::Pass
    }

    fn hold(&mut self, frame: F, due_ns: u64) -> Result<(), F> {
        if self.held.len() >= self.hold_capacity {
            self.stats.hold_full.inc();
            return Err(frame);
        }
        self.held.push_back(Held { frame, due_ns });
        self.stats.held.set(self.held.len() as u64);
        Ok(())
    }

    /// Moves held frames due at `now_ns` to `out`, oldest first, while `out` has fewer than
    /// `max` frames; returns how many.
    fn release_due(&mut self, now_ns: u64, out: &mut Vec<F>, max: usize) -> usize {
        let mut released = 0;
        let mut i = 0;
        while i < self.held.len() && out.len() < max {
            if self.held[i].due_ns <= now_ns {
                if let Some(h) = self.held.remove(i) {
                    out.push(h.frame);
                    released += 1;
                }
            } else {
                i += 1;
            }
        }
        if released > 0 {
            self.stats.held.set(self.held.len() as u64);
        }
        released
    }

    /// Flips 1 to [`CORRUPT_BITS_MAX`] bits of a non-empty frame.
    fn corrupt(&mut self, frame: &mut F) {
        let len = frame.len();
        let flips = 1 + self.below(u64::from(CORRUPT_BITS_MAX));
        for _ in 0..flips {
            let span = if self.rng.next_u32() & 1 == 0 {
                len.min(HEADER_BYTES)
            } else {
                len
            };
            let bit = self.below(span as u64 * 8);
            let (byte, bit) = ((bit / 8) as usize, bit % 8);
            frame.data_mut()[byte] ^= 1 << bit;
        }
    }

    /// Decides what happens to `frame`: `Some` when it leaves now (possibly changed), `None`
    /// when it was dropped or held. A duplicate is held to follow on the next call.
    fn apply(&mut self, mut frame: F, now_ns: u64) -> Option<F> {
        self.stats.frames_in.inc();
        match self.fate() {
            Fate::Pass => {}
            Fate::Drop => {
                self.stats.dropped.inc();
                return None;
            }
            Fate::Corrupt => {
                if !frame.is_empty() {
                    self.corrupt(&mut frame);
                    self.stats.corrupted.inc();
                }
            }
            Fate::Truncate => {
                let len = frame.len() as u64;
                if len > 0 {
                    let cut = self.below(len) as usize;
                    if frame.truncate(cut) {
                        self.stats.truncated.inc();
                    } else {
                        self.stats.truncate_unsupported.inc();
                    }
                }
            }
            Fate::Duplicate => match frame.try_clone() {
                Some(copy) => {
                    if self.hold(copy, now_ns).is_ok() {
                        self.stats.duplicated.inc();
                    }
                    // A copy the full hold buffer refused is freed: the original still goes.
                }
                None => self.stats.duplicate_failed.inc(),
            },
            Fate::Reorder => match self.hold(frame, now_ns) {
                Ok(()) => {
                    self.stats.reordered.inc();
                    return None;
                }
                Err(f) => frame = f,
            },
            Fate::Delay => {
                let delay = 1 + self.below(self.fates.delay_max_ns.max(1));
                match self.hold(frame, now_ns.saturating_add(delay)) {
                    Ok(()) => {
                        self.stats.delayed.inc();
                        return None;
                    }
                    Err(f) => frame = f,
                }
            }
        }
        Some(frame)
    }
}

/// Derives a wrapper's seed from the configured one (splitmix64 of seed and stream).
fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Both halves of a port with faults, and the port's link as the faults make it.
#[derive(Debug)]
pub struct FaultyPort<R: RxQueue, T: TxQueue> {
    /// Receive half.
    pub rx: FaultyRx<R>,
    /// Transmit half.
    pub tx: FaultyTx<T>,
    /// Down while a flap lasts.
    pub link: Arc<FaultLink>,
}

/// Wraps both halves of a port. `stream` tells ports apart (the port index): each wrapper's generator is seeded from
/// `config.seed` and `stream`.
///
/// # Errors
/// When `config` does not validate.
pub fn wrap_port<R, T>(
    rx: R,
    tx: T,
    config: &FaultConfig,
    stream: u64,
    clock: FaultClock,
) -> Result<FaultyPort<R, T>, FaultConfigError>
where
    R: RxQueue,
    T: TxQueue<Frame = R::Frame>,
{
    config.validate()?;
    let link = Arc::new(FaultLink::default());
    let rx = FaultyRx {
        inner: rx,
        injector: Injector::new(
            stream_seed(config.seed, 2 * stream),
            &config.rx,
            config.hold_frames,
        ),
        flaps_per_second: config.link_flaps_per_second,
        last_call_ns: None,
        link_down_ns: config.link_down_ns,
        link: Arc::clone(&link),
        clock: Arc::clone(&clock),
        scratch: Vec::with_capacity(BURST_MAX),
    };
    let tx = FaultyTx {
        inner: tx,
        injector: Injector::new(
            stream_seed(config.seed, 2 * stream + 1),
            &config.tx,
            config.hold_frames,
        ),
        stalls_per_second: config.tx_stalls_per_second,
        last_call_ns: None,
        stall_ns: config.tx_stall_ns,
        stalled_until_ns: 0,
        link: Arc::clone(&link),
        clock,
        backlog: Vec::with_capacity(TX_BACKLOG_FRAMES),
    };
    Ok(FaultyPort { rx, tx, link })
}

/// The receive half of a port, with faults.
pub struct FaultyRx<R: RxQueue> {
    inner: R,
    injector: Injector<R::Frame>,
    flaps_per_second: f64,
    /// When `rx_burst` was last called (`None`: never).
    last_call_ns: Option<u64>,
    link_down_ns: u64,
    link: Arc<FaultLink>,
    clock: FaultClock,
    scratch: Vec<R::Frame>,
}

impl<R: RxQueue> fmt::Debug for FaultyRx<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultyRx")
            .field("stats", &self.injector.stats)
            .finish_non_exhaustive()
    }
}

impl<R: RxQueue> FaultyRx<R> {
    /// What this wrapper did.
    #[must_use]
    pub fn stats(&self) -> &Arc<FaultStats> {
        &self.injector.stats
    }

    /// The port's link as the faults make it.
    #[must_use]
    pub fn link(&self) -> &Arc<FaultLink> {
        &self.link
    }
}

impl<R: RxQueue> RxQueue for FaultyRx<R> {
    type Frame = R::Frame;

    fn rx_burst(&mut self, out: &mut Vec<R::Frame>, max: usize) -> usize {
        let now = (self.clock)();
        let before = out.len();
        let limit = before + max;
        let elapsed = now.saturating_sub(self.last_call_ns.unwrap_or(now));
        self.last_call_ns = Some(now);
        if self.link.is_up(now) && self.injector.happened(self.flaps_per_second, elapsed) {
            self.link
                .set_down_until(now.saturating_add(self.link_down_ns));
            self.injector.stats.link_flaps.inc();
        }
        // Held frames that are due go first: they arrived earlier.
        self.injector.release_due(now, out, limit);
        let room = limit - out.len();
        if room > 0 {
            self.scratch.clear();
            self.inner.rx_burst(&mut self.scratch, room.min(BURST_MAX));
            let up = self.link.is_up(now);
            for frame in self.scratch.drain(..) {
                if !up {
                    self.injector.stats.frames_in.inc();
                    self.injector.stats.link_down_dropped.inc();
                    continue;
                }
                if let Some(frame) = self.injector.apply(frame, now) {
                    out.push(frame);
                }
            }
        }
        let n = out.len() - before;
        self.injector.stats.frames_out.add(n as u64);
        n
    }

    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        // With frames held, the caller must not sleep on the device alone; it would wake only
        // when new frames arrive. Returning no descriptor makes an adaptive lcore nap briefly.
        if self.injector.held.is_empty() {
            self.inner.wait_fd()
        } else {
            None
        }
    }
}

/// Frames a [`FaultyTx`] keeps that its device has not taken yet (the device's ring, as it
/// were): one burst plus its duplicates and due held frames.
const TX_BACKLOG_FRAMES: usize = 2 * BURST_MAX + DEFAULT_HOLD_FRAMES;

/// The transmit half of a port, with faults.
pub struct FaultyTx<T: TxQueue> {
    inner: T,
    injector: Injector<T::Frame>,
    stalls_per_second: f64,
    /// When `tx_burst` was last called (`None`: never).
    last_call_ns: Option<u64>,
    stall_ns: u64,
    stalled_until_ns: u64,
    link: Arc<FaultLink>,
    clock: FaultClock,
    /// Frames accepted from the caller (and due held frames) that the device has not taken.
    backlog: Vec<T::Frame>,
}

impl<T: TxQueue> fmt::Debug for FaultyTx<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultyTx")
            .field("stats", &self.injector.stats)
            .field("backlog", &self.backlog.len())
            .finish_non_exhaustive()
    }
}

impl<T: TxQueue> FaultyTx<T> {
    /// What this wrapper did. Frames accepted but not yet taken by the device are counted in
    /// `held` too.
    #[must_use]
    pub fn stats(&self) -> &Arc<FaultStats> {
        &self.injector.stats
    }

    fn update_held(&self) {
        self.injector
            .stats
            .held
            .set((self.injector.held.len() + self.backlog.len()) as u64);
    }

    /// Moves due held frames to the backlog and offers the backlog to the device.
    fn push_backlog(&mut self, now: u64) {
        let room = self.backlog.capacity();
        self.injector.release_due(now, &mut self.backlog, room);
        if !self.backlog.is_empty() {
            let sent = self.inner.tx_burst(&mut self.backlog);
            self.injector.stats.frames_out.add(sent as u64);
        }
        self.update_held();
    }
}

impl<T: TxQueue> TxQueue for FaultyTx<T> {
    type Frame = T::Frame;

    fn tx_burst(&mut self, frames: &mut Vec<T::Frame>) -> usize {
        let now = (self.clock)();
        let elapsed = now.saturating_sub(self.last_call_ns.unwrap_or(now));
        self.last_call_ns = Some(now);
        if now < self.stalled_until_ns {
            self.injector.stats.tx_stalled_calls.inc();
            return 0;
        }
        if self.injector.happened(self.stalls_per_second, elapsed) {
            self.stalled_until_ns = now.saturating_add(self.stall_ns);
            self.injector.stats.tx_stalls.inc();
            self.injector.stats.tx_stalled_calls.inc();
            return 0;
        }
        self.push_backlog(now);
        if !self.link.is_up(now) {
            // A NIC with its link down drops what it is given.
            let n = frames.len();
            self.injector.stats.frames_in.add(n as u64);
            self.injector.stats.link_down_dropped.add(n as u64);
            frames.clear();
            return n;
        }
        if !self.backlog.is_empty() {
            // The device is still busy with earlier frames: refuse, the caller keeps its own.
            return 0;
        }
        // Room for this burst and one duplicate of each frame (checked by `hold`/capacity).
        let take = frames.len().min(BURST_MAX);
        for frame in frames.drain(..take) {
            if let Some(frame) = self.injector.apply(frame, now) {
                self.backlog.push(frame);
            }
        }
        self.push_backlog(now);
        take
    }

    fn alloc_frame(&mut self, len: usize) -> Option<T::Frame> {
        self.inner.alloc_frame(len)
    }

    fn flush(&mut self) {
        let now = (self.clock)();
        if now >= self.stalled_until_ns {
            self.push_backlog(now);
        }
        self.inner.flush();
    }
}

#[cfg(test)]
mod tests;
