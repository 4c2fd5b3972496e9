//! One lcore: a thread pinned to a CPU that polls its ports in bursts (DPDK l2fwd's loop)
//! around the core's [`LcoreStep`], in the step's documented call order.
//!
//! Per iteration, with the clock read once: control commands; receive a burst on each RX port
//! (`handle_rx_burst`); frames the control plane asked to send (`inject`); time-driven work
//! (`handle_timeout`); for each TX port, retry what the device refused last time, then pull a
//! burst (PFC first, `poll_tx_burst`) and transmit it; move punted frames to the control
//! thread's ring (`poll_punt`). Events stay in the core's lock-free logs, which the control
//! thread drains itself ([`crate::Running::drain_events`]). When polling is adaptive and nothing
//! happened for a while, sleep until a port becomes readable or the step's next deadline
//! (`poll_timeout`), whichever comes first.

use crate::clock::MonotonicClock;
use crate::mirror::{CaptureControl, Mirror};
use headroom_core::fdb::FdbEntry;
use headroom_core::frame::Frame;
use headroom_core::punt::Punted;
use headroom_core::step::LcoreStep;
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_io::{RxQueue, TxQueue};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How an lcore waits when it has nothing to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polling {
    /// Never sleep (pure poll mode, for dedicated cores).
    Busy,
    /// After `idle_polls` empty iterations, sleep until a port is readable or the core's next
    /// deadline, for at most `max_sleep`. On a small machine a busy-polling lcore that shares a
    /// core with the kernel's veth/AF_PACKET work starves it; this gives the CPU back.
    Adaptive {
        /// Empty iterations before sleeping.
        idle_polls: u32,
        /// Longest sleep.
        max_sleep: Duration,
    },
}

impl Default for Polling {
    fn default() -> Self {
        Self::Adaptive {
            idle_polls: 64,
            max_sleep: Duration::from_micros(200),
        }
    }
}

/// Counters of an lcore's loop (written by the lcore, read by the control thread).
#[derive(Debug, Default)]
pub struct LcoreStats {
    /// Loop iterations.
    pub iterations: AtomicU64,
    /// Iterations that received or sent nothing.
    pub idle_iterations: AtomicU64,
    /// Times the lcore went to sleep.
    pub sleeps: AtomicU64,
    /// Frames received.
    pub rx_frames: AtomicU64,
    /// Frames handed to devices.
    pub tx_frames: AtomicU64,
    /// Frames the devices refused and that were dropped (after the drain deadline).
    pub tx_dropped: AtomicU64,
    /// Frames the core punted that the ring towards the control thread had no room for
    /// (dropped).
    pub punt_ring_full: AtomicU64,
    /// Frames punted to the control thread.
    pub punted: AtomicU64,
    /// Frames the control plane asked to inject that got no frame buffer (dropped).
    pub inject_no_buffer: AtomicU64,
    /// Frames the control plane asked to inject that were handed to the core (which counts what
    /// it enqueued and what it dropped per port: `inject_frames`, `inject_drops`).
    pub injected: AtomicU64,
    /// Control commands handled (FDB dumps, flushes, the big red switch).
    pub commands: AtomicU64,
    /// Longest time between the starts of two iterations since the last read, ns (read and
    /// clear with `take`; a clear racing a raise may keep the raise). Sleeps of adaptive polling
    /// count: with busy polling it is the loop's worst latency.
    pub longest_iteration_ns: headroom_core::counters::Watermark,
}

fn bump(c: &AtomicU64, n: u64) {
    // One writer (this lcore): load + store, no locked instruction. Relaxed: the control thread
    // reads them as monotonic totals, nothing else (as `headroom_core::counters`).
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// A request from the control plane to an lcore, handled between bursts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LcoreCommand {
    /// List the MAC table of this lcore's ingress side.
    DumpFdb,
    /// Turn the PFC watchdog's big red switch on or off on this lcore's egress side.
    SetBigRedSwitch(bool),
    /// Forget the stations learned on a port (`Some`), or every station (`None`), on this
    /// lcore's ingress side; the learn rings carry the flush to the other ingress sides.
    FlushFdb(Option<PortId>),
}

/// An lcore's answer to a [`LcoreCommand`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LcoreReply {
    /// The MAC table (empty when the lcore has no ingress side).
    Fdb(Vec<FdbEntry>),
    /// Done.
    Done,
}

/// A frame the control plane asks to send out of `port` (see [`crate::Running::inject`]).
#[derive(Debug)]
pub(crate) struct InjectRequest {
    pub(crate) port: PortId,
    /// Into this VLAN, for its VLAN interface (`port` unused), instead of out of `port`.
    pub(crate) vlan: Option<u16>,
    pub(crate) bytes: Vec<u8>,
}

/// The lcore's ends of the inject rings: requests in, their emptied buffers back (so that
/// neither thread allocates per frame once the buffers exist).
#[derive(Debug)]
pub(crate) struct InjectChannel {
    pub(crate) requests: rtrb::Consumer<InjectRequest>,
    pub(crate) buffers: rtrb::Producer<Vec<u8>>,
}

/// Most inject requests one iteration takes (bounded work per iteration).
const INJECT_PER_ITERATION: usize = 32;

/// A transmit port of an lcore with the frames the device has not taken yet.
#[derive(Debug)]
pub(crate) struct TxPort<F, T> {
    pub(crate) id: PortId,
    pub(crate) queue: T,
    pub(crate) pending: Vec<F>,
}

/// Everything one lcore thread owns.
#[derive(Debug)]
pub(crate) struct Lcore<F: Frame, R, T> {
    pub(crate) name: String,
    pub(crate) cpu: Option<usize>,
    pub(crate) step: LcoreStep<F>,
    /// Towards the control thread: frames the core punted (`Some` when the step receives).
    pub(crate) punts: Option<rtrb::Producer<Punted<F>>>,
    /// From the control thread: frames to inject (on one lcore only).
    pub(crate) injects: Option<InjectChannel>,
    pub(crate) rx: Vec<(PortId, R)>,
    pub(crate) tx: Vec<TxPort<F, T>>,
    pub(crate) polling: Polling,
    pub(crate) burst: usize,
    pub(crate) drain_timeout: Duration,
    pub(crate) stats: Arc<LcoreStats>,
    pub(crate) control: crate::lcore_channel::LcoreEnd,
    pub(crate) mirror: Mirror,
    pub(crate) capture: Arc<CaptureControl>,
}

impl<F, R, T> Lcore<F, R, T>
where
    F: Frame,
    R: RxQueue<Frame = F>,
    T: TxQueue<Frame = F>,
{
    /// Runs until `stop`, then drains (see [`Lcore::drain`]).
    pub(crate) fn run(mut self, stop: &AtomicBool, clock: MonotonicClock) {
        if let Some(cpu) = self.cpu {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
                tracing::warn!(lcore = %self.name, cpu, "could not pin the lcore to its CPU");
            }
        }
        tracing::debug!(lcore = %self.name, cpu = ?self.cpu, rx = self.rx.len(), tx = self.tx.len(), "lcore started");
        let mut burst: Vec<F> = Vec::with_capacity(self.burst);
        let mut idle: u32 = 0;
        // Relaxed: the flag is all that is passed; what the lcore hands back when it stops is
        // ordered by the control thread's `join`.
        let mut previous = clock.now();
        while !stop.load(Ordering::Relaxed) {
            let now = clock.now();
            let iteration_ns = now.saturating_nanos_since(previous);
            previous = now;
            self.stats.longest_iteration_ns.observe(iteration_ns);
            self.handle_commands(now);
            let work = self.iterate(now, &mut burst, true);
            bump(&self.stats.iterations, 1);
            if work > 0 {
                idle = 0;
                continue;
            }
            bump(&self.stats.idle_iterations, 1);
            idle = idle.saturating_add(1);
            if let Polling::Adaptive {
                idle_polls,
                max_sleep,
            } = self.polling
            {
                if idle >= idle_polls {
                    self.sleep(now, max_sleep, &clock);
                }
            }
        }
        self.drain(&mut burst, &clock);
        tracing::debug!(lcore = %self.name, "lcore stopped");
    }

    fn handle_commands(&mut self, now: Instant) {
        let (step, stats) = (&mut self.step, &self.stats);
        self.control.serve(|command| {
            bump(&stats.commands, 1);
            match command {
                LcoreCommand::DumpFdb => LcoreReply::Fdb(step.fdb_entries(now).collect()),
                LcoreCommand::SetBigRedSwitch(on) => {
                    step.set_big_red_switch(on, now);
                    LcoreReply::Done
                }
                LcoreCommand::FlushFdb(port) => {
                    step.flush_fdb(port, now);
                    LcoreReply::Done
                }
            }
        });
    }

    /// One loop iteration in the step's call order; returns how many frames moved.
    fn iterate(&mut self, now: Instant, burst: &mut Vec<F>, receive: bool) -> usize {
        let mut work = 0;
        if receive {
            // 1. Receive.
            for (port, rx) in &mut self.rx {
                let n = rx.rx_burst(burst, self.burst);
                if n > 0 {
                    work += n;
                    self.mirror
                        .record(&self.capture, port.0, false, burst.iter().map(Frame::data));
                    bump(&self.stats.rx_frames, n as u64);
                    self.step.handle_rx_burst(now, *port, burst);
                }
                // Whatever the step left (nothing, by contract) is dropped here.
                burst.clear();
            }
            // 2. Inject.
            work += self.inject(now);
        }
        // 3. Time-driven work.
        self.step.handle_timeout(now);
        // 4. Transmit.
        for port in &mut self.tx {
            if !port.pending.is_empty() {
                let sent = port.queue.tx_burst(&mut port.pending);
                port.queue.flush();
                work += sent;
                bump(&self.stats.tx_frames, sent as u64);
                if !port.pending.is_empty() {
                    // The device is full: leave the frames in the core's queues for now.
                    continue;
                }
            }
            let queue = &mut port.queue;
            let n =
                self.step
                    .poll_tx_burst(now, port.id, &mut port.pending, self.burst, &mut |len| {
                        queue.alloc_frame(len)
                    });
            if n > 0 {
                self.mirror.record(
                    &self.capture,
                    port.id.0,
                    true,
                    port.pending.iter().map(Frame::data),
                );
                let sent = port.queue.tx_burst(&mut port.pending);
                port.queue.flush();
                work += n;
                bump(&self.stats.tx_frames, sent as u64);
            }
        }
        // 5. Punted frames, towards the control thread. (6. Events: the control thread drains
        // the core's event logs itself.)
        if let Some(ring) = self.punts.as_mut() {
            let mut punted = 0u64;
            let mut full = 0u64;
            while let Some(p) = self.step.poll_punt() {
                match ring.push(p) {
                    Ok(()) => punted += 1,
                    Err(rtrb::PushError::Full(dropped)) => {
                        full += 1;
                        drop(dropped);
                    }
                }
            }
            if punted + full > 0 {
                work += 1;
                bump(&self.stats.punted, punted);
                bump(&self.stats.punt_ring_full, full);
            }
        }
        work
    }

    /// Hands the control plane's frames to the step (bounded per iteration), each copied into
    /// a frame buffer of this lcore's backend; the emptied byte buffers go back. Returns how
    /// many requests were taken.
    fn inject(&mut self, now: Instant) -> usize {
        let Some(channel) = self.injects.as_mut() else {
            return 0;
        };
        let mut taken = 0;
        while taken < INJECT_PER_ITERATION {
            let Ok(InjectRequest {
                port,
                vlan,
                mut bytes,
            }) = channel.requests.pop()
            else {
                break;
            };
            taken += 1;
            // A buffer from the port's own queue when this lcore transmits on it, else from
            // any of its queues (all of a backend's ports draw from pools any port can send).
            let queue = match self.tx.iter().position(|t| t.id == port) {
                Some(i) => Some(&mut self.tx[i].queue),
                None => self.tx.first_mut().map(|t| &mut t.queue),
            };
            let frame = queue
                .and_then(|q| q.alloc_frame(bytes.len()))
                .filter(|f| f.len() == bytes.len())
                .map(|mut f| {
                    f.data_mut().copy_from_slice(&bytes);
                    f
                });
            match frame {
                Some(frame) => {
                    bump(&self.stats.injected, 1);
                    // Refusals are counted by the core, per port and reason.
                    let _ = match vlan {
                        Some(vid) => self.step.inject_vlan(now, vid, frame).map(|_| ()),
                        None => self.step.inject(now, port, frame),
                    };
                }
                None => bump(&self.stats.inject_no_buffer, 1),
            }
            bytes.clear();
            // The control thread never has more buffers out than this ring holds.
            let _ = channel.buffers.push(bytes);
        }
        taken
    }

    /// Sleeps until a port is readable, the step's next deadline, or `max_sleep`.
    fn sleep(&self, now: Instant, max_sleep: Duration, clock: &MonotonicClock) {
        let mut timeout = max_sleep;
        if let Some(deadline) = self.step.poll_timeout(now) {
            timeout = timeout.min(deadline - now);
        }
        if self.tx.iter().any(|p| !p.pending.is_empty()) {
            timeout = timeout.min(Duration::from_micros(20));
        }
        if timeout.is_zero() {
            return;
        }
        bump(&self.stats.sleeps, 1);
        let fds: Vec<_> = self.rx.iter().filter_map(|(_, rx)| rx.wait_fd()).collect();
        let receive_only = self.step.egress().is_none() && self.injects.is_none();
        if fds.len() == self.rx.len() && !fds.is_empty() && receive_only {
            // Only receive work: sleep on the sockets.
            wait_readable(&fds, timeout);
        } else if !fds.is_empty() && fds.len() == self.rx.len() {
            // Frames from other lcores (and the control plane) arrive without a wakeup; cap the
            // sleep.
            wait_readable(&fds, timeout.min(Duration::from_micros(200)));
        } else {
            std::thread::sleep(timeout.min(Duration::from_micros(50)));
        }
        let _ = clock;
    }

    /// Stops receiving and sends what is queued until every queue is empty or
    /// `drain_timeout` passes (a queue paused by PFC may never drain); what is left is dropped
    /// with the core's buffers when the lcore ends.
    fn drain(&mut self, burst: &mut Vec<F>, clock: &MonotonicClock) {
        let deadline = clock.now() + self.drain_timeout;
        loop {
            let now = clock.now();
            self.iterate(now, burst, false);
            let queued = self.step.queued_frames();
            let pending: usize = self.tx.iter().map(|p| p.pending.len()).sum();
            if queued + pending == 0 || now >= deadline {
                if pending > 0 {
                    bump(&self.stats.tx_dropped, pending as u64);
                }
                if queued > 0 {
                    tracing::warn!(lcore = %self.name, queued, "frames still queued at the drain deadline are dropped");
                }
                break;
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

fn wait_readable(fds: &[std::os::fd::BorrowedFd<'_>], timeout: Duration) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut pollfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .collect();
    let ts = Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    // An interrupted or failed poll only shortens the sleep.
    let _ = poll(&mut pollfds, Some(&ts));
}
