//! PFC watchdog scenarios in virtual time (SONiC pfcwd semantics, `sonic-buffer-model.md` §4;
//! the rule the core implements is in `watchdog.rs` and `docs/pfc-watchdog.md`).
//!
//! One three-port switch at 1 Gb/s: host A on port 0, host B on port 1, and on port 2 a peer C
//! that storms: it keeps pausing priority 3 while A sends it lossless traffic. Every scenario
//! also carries traffic that must not notice the storm (priority 4 to C, priority 3 to B, C's
//! own traffic to A) and checks it frame by frame.
//!
//! Time is driven by [`Bench`]: it jumps from event to event (a scheduled frame, a point of a
//! 1 ms grid, the switch's `poll_timeout`), so watchdog polls happen exactly at their nominal
//! instants (construction time + k × poll interval) and a paused queue resumes exactly when its
//! pause expires.

mod common;

use common::*;
use headroom_core::counters::DropReason;
use headroom_core::events::Event;
use headroom_core::frame::{Frame, HeapFrame};
use headroom_core::params::{
    pause_quanta_nanos, presets, PortWatchdogParams, SwitchParams, WatchdogAction,
};
use headroom_core::shared::WatchdogStats;
use headroom_core::time::Instant;
use headroom_core::types::{PortId, Priority, PrioritySet, QueueIndex};
use headroom_core::watchdog::QueueStatus;
use headroom_wire::ip::Ecn;
use headroom_wire::ipv4::Ipv4Packet;

const GBPS: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
/// SONiC's orchagent default poll (`PFC_WD_POLL_MSECS 100`).
const POLL_NS: u64 = 100 * MS;
/// SONiC `start_default` detection time.
const DETECTION_NS: u64 = 200 * MS;
const RESTORATION_NS: u64 = 400 * MS;
/// The bench visits at least every point of this grid (smaller than the poll interval).
const GRID_NS: u64 = MS;
const FRAME_LEN: usize = 200;

const PORT_A: u16 = 0;
const PORT_B: u16 = 1;
const PORT_C: u16 = 2;
const Q3: usize = 3;
const Q4: usize = 4;

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn ns(n: u64) -> Instant {
    Instant::from_nanos(n)
}

/// The pause one XOFF with 0xFFFF quanta asks for at 1 Gb/s (802.3 Annex 31B: 512 bit times
/// per quantum): 33.553920 ms.
fn full_pause_ns() -> u64 {
    pause_quanta_nanos(0xFFFF, GBPS)
}

fn watched_3_and_4() -> PrioritySet {
    PrioritySet::EMPTY
        .with(Priority::from_low_bits(3))
        .with(Priority::from_low_bits(4))
}

/// `presets::simple` with the watchdog on the given ports.
fn params(action: WatchdogAction, watched_ports: &[u16]) -> SwitchParams {
    let mut p = presets::simple(3, GBPS);
    for &port in watched_ports {
        p.ports[usize::from(port)].watchdog = Some(PortWatchdogParams {
            action,
            detection_time_ns: DETECTION_NS,
            restoration_time_ns: RESTORATION_NS,
            watched: watched_3_and_4(),
        });
    }
    p.watchdog.poll_interval_ns = POLL_NS;
    p
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// PFC frame from `src` with these per-priority quanta; the class-enable vector holds the
    /// priorities with non-zero quanta.
    Pfc { src: [u8; 6], quanta: [u16; 8] },
    /// An IPv4/UDP data frame.
    Data {
        src: [u8; 6],
        dst: [u8; 6],
        dscp: u8,
    },
}

/// Frames received on `port` at `first`, `first + every`, ... up to `last` inclusive.
#[derive(Debug)]
struct Source {
    port: u16,
    kind: Kind,
    next: Instant,
    every_ns: u64,
    last: Instant,
    sent: Vec<Instant>,
    delivered: Vec<Instant>,
    /// Port the data frames must leave by.
    out_port: Option<u16>,
}

impl Source {
    fn key(&self) -> Option<(u16, [u8; 6], [u8; 6], u8)> {
        match self.kind {
            Kind::Data { src, dst, dscp } => Some((self.out_port?, src, dst, dscp)),
            Kind::Pfc { .. } => None,
        }
    }
}

type SourceId = usize;

struct Bench {
    lab: Lab,
    sources: Vec<Source>,
    events: Vec<Event>,
    /// PFC frames the switch sent on each port.
    pfc_sent: [u64; 3],
    /// Data frames that matched no source.
    stray: u64,
}

impl Bench {
    fn new(params: SwitchParams) -> Self {
        let mut lab = Lab::new(params);
        // Lab starts at 1 ms: polls fall at 101 ms, 201 ms, ... Learn where everybody is.
        lab.learn(PORT_A, HOST_A);
        lab.learn(PORT_B, HOST_B);
        lab.learn(PORT_C, HOST_C);
        assert_eq!(lab.now, ms(1));
        Self {
            lab,
            sources: Vec::new(),
            events: Vec::new(),
            pfc_sent: [0; 3],
            stray: 0,
        }
    }

    fn add(
        &mut self,
        port: u16,
        kind: Kind,
        first: Instant,
        every_ns: u64,
        last: Instant,
    ) -> SourceId {
        let out_port = match kind {
            Kind::Data { dst, .. } => Some(
                [(HOST_A, PORT_A), (HOST_B, PORT_B), (HOST_C, PORT_C)]
                    .iter()
                    .find(|(mac, _)| *mac == dst)
                    .expect("a known host")
                    .1,
            ),
            Kind::Pfc { .. } => None,
        };
        self.sources.push(Source {
            port,
            kind,
            next: first,
            every_ns: every_ns.max(1),
            last,
            sent: Vec::new(),
            delivered: Vec::new(),
            out_port,
        });
        self.sources.len() - 1
    }

    /// Peer C pauses priority 3 (0xFFFF quanta) every `every_ns` from `first` to `last`.
    fn storm(&mut self, first: Instant, every_ns: u64, last: Instant) -> SourceId {
        let mut quanta = [0; 8];
        quanta[3] = 0xFFFF;
        self.add(
            PORT_C,
            Kind::Pfc {
                src: HOST_C,
                quanta,
            },
            first,
            every_ns,
            last,
        )
    }

    fn data(
        &mut self,
        from: (u16, [u8; 6]),
        to: [u8; 6],
        dscp: u8,
        first: Instant,
        every_ns: u64,
        last: Instant,
    ) -> SourceId {
        self.add(
            from.0,
            Kind::Data {
                src: from.1,
                dst: to,
                dscp,
            },
            first,
            every_ns,
            last,
        )
    }

    fn now(&self) -> Instant {
        self.lab.now
    }

    /// Runs every event up to and including `until`.
    fn run_to(&mut self, until: Instant) {
        loop {
            let now = self.lab.now;
            let grid = ns((now.as_nanos() / GRID_NS + 1) * GRID_NS);
            let mut next = grid;
            for s in &self.sources {
                if s.next <= s.last && s.next > now {
                    next = next.min(s.next);
                }
            }
            if let Some(t) = self.lab.sw.poll_timeout(now) {
                if t > now {
                    next = next.min(t);
                }
            }
            if next > until {
                break;
            }
            self.at(next);
        }
        if self.lab.now < until {
            self.at(until);
        }
    }

    /// Everything that happens at `t`, in the documented call order: receive, timeouts,
    /// transmit, events.
    fn at(&mut self, t: Instant) {
        assert!(t >= self.lab.now, "time goes forward");
        self.lab.now = t;
        // PFC sources first (they were added first in every scenario, but make it explicit).
        let mut bursts: [Vec<HeapFrame>; 3] = Default::default();
        for pfc_first in [true, false] {
            for s in &mut self.sources {
                let is_pfc = matches!(s.kind, Kind::Pfc { .. });
                if is_pfc != pfc_first || s.next != t || s.next > s.last {
                    continue;
                }
                let frame = match s.kind {
                    Kind::Pfc { src, quanta } => {
                        let enable = quanta
                            .iter()
                            .enumerate()
                            .filter(|(_, q)| **q != 0)
                            .fold(0u8, |m, (i, _)| m | 1 << i);
                        pfc_frame(src, enable, quanta)
                    }
                    Kind::Data { src, dst, dscp } => {
                        ipv4_frame(src, dst, dscp, Ecn::NotEct, FRAME_LEN)
                    }
                };
                bursts[usize::from(s.port)].push(frame);
                s.sent.push(t);
                s.next = s.next.saturating_add_nanos(s.every_ns);
            }
        }
        for (port, burst) in bursts.iter_mut().enumerate() {
            if !burst.is_empty() {
                self.lab.sw.handle_rx_burst(t, PortId(port as u16), burst);
            }
        }
        self.lab.sw.handle_timeout(t);
        for port in 0..3u16 {
            for f in self.lab.tx(port, 256) {
                if as_pfc(&f).is_some() {
                    self.pfc_sent[usize::from(port)] += 1;
                    continue;
                }
                let d = f.data();
                let dst: [u8; 6] = d[0..6].try_into().unwrap();
                let src: [u8; 6] = d[6..12].try_into().unwrap();
                let dscp = Ipv4Packet::new_checked(&d[14..]).expect("IPv4").dscp();
                match self
                    .sources
                    .iter_mut()
                    .find(|s| s.key() == Some((port, src, dst, dscp)))
                {
                    Some(s) => s.delivered.push(t),
                    None => self.stray += 1,
                }
            }
        }
        while let Some(e) = self.lab.sw.poll_event() {
            self.events.push(e);
        }
    }

    fn sent(&self, s: SourceId) -> &[Instant] {
        &self.sources[s].sent
    }

    fn delivered(&self, s: SourceId) -> &[Instant] {
        &self.sources[s].delivered
    }

    fn sent_in(&self, s: SourceId, from: Instant, to: Instant) -> u64 {
        self.sent(s)
            .iter()
            .filter(|t| **t >= from && **t <= to)
            .count() as u64
    }

    /// Asserts every frame of `s` left the switch at the instant it arrived.
    fn assert_unaffected(&self, s: SourceId, what: &str) {
        assert!(!self.sent(s).is_empty(), "{what}: nothing sent");
        assert_eq!(
            self.sent(s),
            self.delivered(s),
            "{what}: every frame must leave at the instant it arrives"
        );
    }

    fn wd_stats(&self, port: u16, q: usize) -> &WatchdogStats {
        &self.lab.sw.shared().egress_counters[0].watchdog[usize::from(port)][q]
    }

    fn status(&self, port: u16, q: usize) -> Option<QueueStatus> {
        self.lab.egress().watchdog_status(PortId(port), q)
    }

    fn watchdog_events(&self) -> Vec<Event> {
        self.events
            .iter()
            .copied()
            .filter(|e| matches!(e, Event::StormDetected { .. } | Event::StormRestored { .. }))
            .collect()
    }
}

fn detected(port: u16, q: u8, action: WatchdogAction, at: Instant) -> Event {
    Event::StormDetected {
        port: PortId(port),
        queue: QueueIndex::from_low_bits(q),
        action,
        at,
    }
}

fn restored(port: u16, q: u8, at: Instant) -> Event {
    Event::StormRestored {
        port: PortId(port),
        queue: QueueIndex::from_low_bits(q),
        at,
    }
}

/// Stats as SONiC's `show pfcwd stats` row: detected/restored, tx ok/drop, rx ok/drop, and the
/// same four for the last storm.
fn row(s: &WatchdogStats) -> [u64; 11] {
    [
        s.stormed.get(),
        s.detected.get(),
        s.restored.get(),
        s.tx_ok.get(),
        s.tx_drop.get(),
        s.rx_ok.get(),
        s.rx_drop.get(),
        s.last_tx_ok.get(),
        s.last_tx_drop.get(),
        s.last_rx_ok.get(),
        s.last_rx_drop.get(),
    ]
}

// ------------------------------------------------------------------------------------------
// Detection edges
// ------------------------------------------------------------------------------------------

/// Storm start set by the head of the queue: paused since 10 ms, one frame enqueued at `head`.
/// Returns the instant the storm was detected.
fn detection_time_with_head_at(head: Instant) -> Instant {
    let mut b = Bench::new(params(WatchdogAction::Drop, &[PORT_C]));
    b.storm(ms(10), 10 * MS, ms(2000));
    let s = b.data((PORT_A, HOST_A), HOST_C, 3, head, 1, head);
    b.run_to(ms(1000));
    assert_eq!(b.sent(s), &[head]);
    let events = b.watchdog_events();
    let Some(Event::StormDetected {
        at, port, queue, ..
    }) = events.first().copied()
    else {
        panic!("no storm detected: {events:?}")
    };
    assert_eq!((port, queue.index()), (PortId(PORT_C), Q3));
    at
}

#[test]
fn detection_at_the_first_poll_where_the_storm_has_lasted_the_detection_time() {
    // Polls at 101, 201, 301, 401 ms. A storm starting exactly at the 101 ms poll has lasted
    // exactly the detection time (200 ms) at the 301 ms poll: detected there (">=").
    assert_eq!(detection_time_with_head_at(ms(101)), ms(301));
    // One nanosecond later, it has lasted 1 ns less than the detection time at 301 ms: not a
    // storm yet; declared at the next poll.
    assert_eq!(
        detection_time_with_head_at(ms(101).saturating_add_nanos(1)),
        ms(401)
    );
    // Any start in (101 ms, 201 ms] is declared at 401 ms: detection ∈ [start + detection,
    // start + detection + poll).
    assert_eq!(detection_time_with_head_at(ms(150)), ms(401));
    assert_eq!(detection_time_with_head_at(ms(201)), ms(401));
}

/// Storm start set by the start of the pause episode: a frame waits (port C's TX disabled) since
/// 20 ms; C's TX comes back and the pause starts at `episode`.
fn detection_time_with_episode_at(episode: Instant) -> (Instant, u64) {
    let mut b = Bench::new(params(WatchdogAction::Alert, &[PORT_C]));
    b.lab.sw.shared().set_tx_enable(PortId(PORT_C), false);
    let s = b.data((PORT_A, HOST_A), HOST_C, 3, ms(20), 1, ms(20));
    b.storm(episode, 10 * MS, ms(2000));
    // Transmission disabled alone is not a storm (no pause in force before `episode`).
    b.run_to(episode);
    assert!(b.delivered(s).is_empty());
    assert!(b.watchdog_events().is_empty());
    b.lab.sw.shared().set_tx_enable(PortId(PORT_C), true);
    b.run_to(ms(1000));
    let events = b.watchdog_events();
    let Some(Event::StormDetected { at, .. }) = events.first().copied() else {
        panic!("no storm detected: {events:?}")
    };
    (at, b.sent(s).len() as u64)
}

#[test]
fn a_pause_episode_starting_after_the_head_frame_sets_the_storm_start() {
    // The PFC frame at `episode` is received before port C transmits at that instant, so the
    // waiting frame never leaves.
    assert_eq!(detection_time_with_episode_at(ms(101)), (ms(301), 1));
    assert_eq!(
        detection_time_with_episode_at(ms(101).saturating_add_nanos(1)),
        (ms(401), 1)
    );
}

#[test]
fn paused_but_empty_queue_is_never_a_storm() {
    let mut b = Bench::new(params(WatchdogAction::Drop, &[PORT_A, PORT_B, PORT_C]));
    // C pauses priority 3 for 3 s without a gap; nothing is ever queued for C's queue 3.
    b.storm(ms(10), 10 * MS, ms(3000));
    let q4 = b.data((PORT_A, HOST_A), HOST_C, 4, ms(20), 10 * MS, ms(3000));
    let to_b = b.data((PORT_A, HOST_A), HOST_B, 3, ms(20), 10 * MS, ms(3000));
    b.run_to(ms(3100));
    assert!(b.watchdog_events().is_empty(), "{:?}", b.events);
    assert_eq!(b.status(PORT_C, Q3), Some(QueueStatus::Operational));
    assert_eq!(row(b.wd_stats(PORT_C, Q3)), [0; 11]);
    b.assert_unaffected(q4, "priority 4 to C");
    b.assert_unaffected(to_b, "priority 3 to B");
    assert!(b
        .lab
        .sw
        .shared()
        .pfc
        .view(usize::from(PORT_C), Priority::from_low_bits(3))
        .is_paused(ms(3000)));
}

#[test]
fn intermittent_pauses_that_let_the_queue_drain_are_not_a_storm() {
    let mut b = Bench::new(params(WatchdogAction::Drop, &[PORT_C]));
    // C pauses priority 3 for 33.55 ms every 50 ms: paused two thirds of the time, but the queue
    // transmits in every gap, so the condition never lasts 200 ms.
    b.storm(ms(10), 50 * MS, ms(3000));
    let q3 = b.data((PORT_A, HOST_A), HOST_C, 3, ms(12), 7 * MS, ms(3000));
    b.run_to(ms(3100));
    assert!(b.watchdog_events().is_empty(), "{:?}", b.events);
    assert_eq!(b.delivered(q3).len(), b.sent(q3).len());
    // And some frames were really held by the pauses.
    assert!(b.delivered(q3) != b.sent(q3));
}

// ------------------------------------------------------------------------------------------
// Lifecycle per action
// ------------------------------------------------------------------------------------------

/// The scenario of the issue, for one action:
///
/// * C pauses priority 3 every 10 ms from 10 ms to 700 ms (0xFFFF quanta: 33.55 ms each, so
///   the pause is continuous until 733.55 ms), then once more at 1200 ms;
/// * A sends C priority 3 and priority 4 every 10 ms from 20 ms; A sends B priority 3;
///   C sends A priority 3 and 4 every 10 ms from 25 ms (priority 3 from C enters the stormed
///   port: the drop action drops it, like SONiC's ingress ACL).
///
/// Storm start = 20 ms (the first frame; paused since 10 ms) → detection at the first poll at
/// or after 220 ms: 301 ms. Last PFC frame of the storm at 700 ms → drop and forward restore
/// at the first poll at or after 1100 ms: 1101 ms; alert restores at the first poll after the
/// pause ends and the queue drains (733.55 ms): 801 ms.
struct Lifecycle {
    b: Bench,
    a_to_c_3: SourceId,
    a_to_c_4: SourceId,
    a_to_b_3: SourceId,
    c_to_a_3: SourceId,
    c_to_a_4: SourceId,
}

const STORM_LAST_PFC_MS: u64 = 700;
const SECOND_PAUSE_MS: u64 = 1200;
const END_MS: u64 = 1500;

fn lifecycle(action: WatchdogAction) -> Lifecycle {
    let mut b = Bench::new(params(action, &[PORT_A, PORT_B, PORT_C]));
    b.storm(ms(10), 10 * MS, ms(STORM_LAST_PFC_MS));
    b.storm(ms(SECOND_PAUSE_MS), 1, ms(SECOND_PAUSE_MS));
    let a_to_c_3 = b.data((PORT_A, HOST_A), HOST_C, 3, ms(20), 10 * MS, ms(END_MS));
    let a_to_c_4 = b.data((PORT_A, HOST_A), HOST_C, 4, ms(20), 10 * MS, ms(END_MS));
    let a_to_b_3 = b.data((PORT_A, HOST_A), HOST_B, 3, ms(20), 10 * MS, ms(END_MS));
    let c_to_a_3 = b.data((PORT_C, HOST_C), HOST_A, 3, ms(25), 10 * MS, ms(END_MS));
    let c_to_a_4 = b.data((PORT_C, HOST_C), HOST_A, 4, ms(25), 10 * MS, ms(END_MS));
    Lifecycle {
        b,
        a_to_c_3,
        a_to_c_4,
        a_to_b_3,
        c_to_a_3,
        c_to_a_4,
    }
}

impl Lifecycle {
    /// Checks what must hold whatever the action, once the scenario ran to the end.
    fn check_common(&self, action: WatchdogAction, restored_at: Instant) {
        let b = &self.b;
        assert_eq!(
            b.watchdog_events(),
            vec![
                detected(PORT_C, 3, action, ms(301)),
                restored(PORT_C, 3, restored_at),
            ],
            "exactly one detection and one restoration, on port 2 queue 3"
        );
        // Priority 4 of the same port and every other port: untouched, frame by frame.
        b.assert_unaffected(self.a_to_c_4, "priority 4 to the stormed port");
        b.assert_unaffected(self.a_to_b_3, "priority 3 to another port");
        b.assert_unaffected(self.c_to_a_4, "priority 4 from the stormed port");
        for (port, q) in [
            (PORT_C, Q4),
            (PORT_A, Q3),
            (PORT_A, Q4),
            (PORT_B, Q3),
            (PORT_B, Q4),
        ] {
            assert_eq!(row(b.wd_stats(port, q)), [0; 11], "port {port} queue {q}");
            assert_eq!(b.status(port, q), Some(QueueStatus::Operational));
        }
        assert_eq!(b.status(PORT_C, Q3), Some(QueueStatus::Operational));
        assert_eq!(b.stray, 0);
        // 100 PFC frames per second is far below the storm-rate alarm (2000/s).
        assert!(!b
            .events
            .iter()
            .any(|e| matches!(e, Event::PfcRateHigh { .. } | Event::PfcRateNormal { .. })));
        // Nothing the switch did made it send PFC (buffers never filled).
        assert_eq!(b.pfc_sent, [0; 3]);
        // After restoration: normal PFC again. The pause at 1200 ms holds the frames of 1210,
        // 1220 and 1230 ms until it expires at 1233.55 ms, and they leave at that instant.
        let expiry = ms(SECOND_PAUSE_MS).saturating_add_nanos(full_pause_ns());
        let sent = b.sent(self.a_to_c_3);
        let delivered = b.delivered(self.a_to_c_3);
        let late: Vec<Instant> = sent.iter().copied().filter(|t| *t > ms(1110)).collect();
        assert!(delivered.len() >= late.len());
        // FIFO: the last frames delivered are the last frames sent.
        let tail = &delivered[delivered.len() - late.len()..];
        for (sent, delivered) in late.iter().zip(tail) {
            if *sent >= ms(SECOND_PAUSE_MS) && *sent < expiry {
                assert_eq!(
                    *delivered, expiry,
                    "frame of {sent:?} held by the new pause"
                );
            } else {
                assert_eq!(delivered, sent, "frame of {sent:?} not held");
            }
        }
        assert_eq!(
            late.iter()
                .filter(|t| **t >= ms(SECOND_PAUSE_MS) && **t < expiry)
                .count(),
            4,
            "1200 (after the PFC frame of the same instant), 1210, 1220, 1230 ms"
        );
        b.lab.sw.check_invariants();
    }
}

#[test]
fn drop_action_drops_exactly_the_stormed_queue_then_restores() {
    let mut l = lifecycle(WatchdogAction::Drop);
    // Before detection, the storm holds every frame for C's queue 3.
    l.b.run_to(ms(300));
    assert!(l.b.delivered(l.a_to_c_3).is_empty());
    assert_eq!(l.b.status(PORT_C, Q3), Some(QueueStatus::Operational));
    let held = l.b.sent(l.a_to_c_3).len() as u64;
    assert_eq!(held, 29); // 20, 30, ..., 300 ms
    assert_eq!(l.b.lab.egress().queue_len(PortId(PORT_C), Q3) as u64, held);
    l.b.run_to(ms(301));
    assert_eq!(l.b.status(PORT_C, Q3), Some(QueueStatus::Stormed));
    assert_eq!(l.b.wd_stats(PORT_C, Q3).stormed.get(), 1);
    // Held frames are dropped at once, not sent.
    assert_eq!(l.b.lab.egress().queue_len(PortId(PORT_C), Q3), 0);
    assert_eq!(l.b.lab.tx_counters(PORT_C).pfcwd_drops[Q3].get(), held);
    l.b.run_to(ms(1100));
    assert_eq!(l.b.status(PORT_C, Q3), Some(QueueStatus::Stormed));
    l.b.run_to(ms(1101));
    assert_eq!(l.b.status(PORT_C, Q3), Some(QueueStatus::Operational));
    l.b.run_to(ms(END_MS));
    l.check_common(WatchdogAction::Drop, ms(1101));

    // No frame for C's queue 3 left between 20 ms and the restoration; after it, all did.
    let b = &l.b;
    let dropped = b.sent_in(l.a_to_c_3, ms(20), ms(1101));
    assert_eq!(dropped, 109); // 20, 30, ..., 1100 ms
    assert_eq!(
        b.delivered(l.a_to_c_3).len() as u64,
        b.sent(l.a_to_c_3).len() as u64 - dropped
    );
    assert!(b.delivered(l.a_to_c_3).iter().all(|t| *t > ms(1101)));
    let tx = b.lab.tx_counters(PORT_C);
    assert_eq!(tx.pfcwd_drops[Q3].get(), dropped);
    assert_eq!(tx.drops[DropReason::PfcwdQueue.index()].get(), dropped);
    assert_eq!(tx.tx_frames[Q3].get(), b.delivered(l.a_to_c_3).len() as u64);
    // Priority 3 arriving on the stormed port is dropped at ingress while stormed (305..1095 ms).
    let ingress_dropped = b.sent_in(l.c_to_a_3, ms(301), ms(1101));
    assert_eq!(ingress_dropped, 80);
    let rx = b.lab.rx_counters(PORT_C);
    assert_eq!(
        rx.drops[DropReason::PfcwdIngress.index()].get(),
        ingress_dropped
    );
    assert_eq!(rx.pg_drops[3].get(), ingress_dropped);
    // SAI semantics: the PG's packet count includes its drops.
    assert_eq!(rx.pg_frames[3].get(), b.sent(l.c_to_a_3).len() as u64);
    assert_eq!(
        b.delivered(l.c_to_a_3).len() as u64,
        b.sent(l.c_to_a_3).len() as u64 - ingress_dropped
    );
    assert!(b
        .delivered(l.c_to_a_3)
        .iter()
        .all(|t| *t < ms(301) || *t > ms(1101)));
    // show pfcwd stats: 1/1, TX 0/109, RX 0/80, last storm the same.
    assert_eq!(
        row(b.wd_stats(PORT_C, Q3)),
        [
            0,
            1,
            1,
            0,
            dropped,
            0,
            ingress_dropped,
            0,
            dropped,
            0,
            ingress_dropped
        ]
    );
}

#[test]
fn forward_action_delivers_everything_despite_the_pauses() {
    let mut l = lifecycle(WatchdogAction::Forward);
    l.b.run_to(ms(300));
    assert!(l.b.delivered(l.a_to_c_3).is_empty());
    l.b.run_to(ms(END_MS));
    l.check_common(WatchdogAction::Forward, ms(1101));
    let b = &l.b;
    // Every frame delivered: the 29 held ones at the detection poll, the others at once.
    assert_eq!(b.delivered(l.a_to_c_3).len(), b.sent(l.a_to_c_3).len());
    for (sent, delivered) in b.sent(l.a_to_c_3).iter().zip(b.delivered(l.a_to_c_3)) {
        if *sent < ms(301) {
            assert_eq!(*delivered, ms(301), "held frame of {sent:?}");
        } else if *sent < ms(SECOND_PAUSE_MS) {
            assert_eq!(
                delivered, sent,
                "frame of {sent:?} while pauses are ignored"
            );
        }
    }
    b.assert_unaffected(l.c_to_a_3, "priority 3 from the stormed port (forward)");
    let tx = b.lab.tx_counters(PORT_C);
    assert_eq!(tx.pfcwd_drops[Q3].get(), 0);
    let sent_while_stormed = b.sent_in(l.a_to_c_3, ms(20), ms(1101));
    let rx_while_stormed = b.sent_in(l.c_to_a_3, ms(301), ms(1101));
    assert_eq!((sent_while_stormed, rx_while_stormed), (109, 80));
    assert_eq!(
        row(b.wd_stats(PORT_C, Q3)),
        [
            0,
            1,
            1,
            sent_while_stormed,
            0,
            rx_while_stormed,
            0,
            sent_while_stormed,
            0,
            rx_while_stormed,
            0
        ]
    );
}

#[test]
fn alert_action_changes_nothing_and_restores_when_the_condition_stops() {
    let mut l = lifecycle(WatchdogAction::Alert);
    l.b.run_to(ms(301));
    assert_eq!(l.b.status(PORT_C, Q3), Some(QueueStatus::Stormed));
    // Alert: still held, nothing dropped.
    l.b.run_to(ms(733));
    assert!(l.b.delivered(l.a_to_c_3).is_empty());
    l.b.run_to(ms(END_MS));
    // The pause ends at 700 ms + 33.55 ms; the queue drains at that instant; the next poll
    // (801 ms) restores, long before the restoration time would (1101 ms).
    l.check_common(WatchdogAction::Alert, ms(801));
    let b = &l.b;
    let expiry = ms(STORM_LAST_PFC_MS).saturating_add_nanos(full_pause_ns());
    assert_eq!(b.delivered(l.a_to_c_3).len(), b.sent(l.a_to_c_3).len());
    for (sent, delivered) in b.sent(l.a_to_c_3).iter().zip(b.delivered(l.a_to_c_3)) {
        if *sent < expiry {
            assert_eq!(*delivered, expiry, "frame of {sent:?} held by the storm");
        } else if *sent < ms(SECOND_PAUSE_MS) {
            assert_eq!(delivered, sent);
        }
    }
    b.assert_unaffected(l.c_to_a_3, "priority 3 from the stormed port (alert)");
    assert_eq!(b.lab.tx_counters(PORT_C).pfcwd_drops[Q3].get(), 0);
    // While stormed (301..801 ms) the queue sent the 72 held frames and 7 more (740..800 ms);
    // port C's PG 3 admitted C's frames of 305..795 ms.
    let tx_ok = b
        .delivered(l.a_to_c_3)
        .iter()
        .filter(|t| **t >= ms(301) && **t < ms(801))
        .count() as u64;
    assert_eq!(tx_ok, 72 + 7);
    let rx_ok = b.sent_in(l.c_to_a_3, ms(301), ms(801));
    assert_eq!(rx_ok, 50);
    assert_eq!(
        row(b.wd_stats(PORT_C, Q3)),
        [0, 1, 1, tx_ok, 0, rx_ok, 0, tx_ok, 0, rx_ok, 0]
    );
}

#[test]
fn drop_action_never_transmits_a_held_frame_beyond_the_per_poll_drop_budget() {
    let mut b = Bench::new(params(WatchdogAction::Drop, &[PORT_C]));
    b.storm(ms(10), 10 * MS, ms(2000));
    // 300 frames of one cell each from 20 ms: more than the drop action discards per poll
    // (256), fewer than PG 3 of port A admits (264 cells to XOFF + 128 of headroom).
    let burst = b.data(
        (PORT_A, HOST_A),
        HOST_C,
        3,
        ms(20),
        1_000,
        ms(20).saturating_add_nanos(299_000),
    );
    b.run_to(ms(300));
    assert_eq!(b.sent(burst).len(), 300);
    assert_eq!(b.lab.egress().queue_len(PortId(PORT_C), Q3), 300);
    assert_eq!(b.lab.rx_counters(PORT_A).pg_drops[3].get(), 0);
    b.run_to(ms(1000));
    assert_eq!(
        b.watchdog_events(),
        vec![detected(PORT_C, 3, WatchdogAction::Drop, ms(301))]
    );
    assert!(
        b.delivered(burst).is_empty(),
        "{} held frames left a queue under the drop action",
        b.delivered(burst).len()
    );
    assert_eq!(b.lab.tx_counters(PORT_C).pfcwd_drops[Q3].get(), 300);
    assert_eq!(b.lab.egress().queue_len(PortId(PORT_C), Q3), 0);
}

#[test]
fn last_counters_cover_the_last_storm_only() {
    let mut b = Bench::new(params(WatchdogAction::Drop, &[PORT_C]));
    // Storm 1: PFC 10..300 ms, traffic 20..400 ms. Detected at 301 (start 20 + 200 → 301),
    // restored at 701 (last PFC 300 + 400).
    b.storm(ms(10), 10 * MS, ms(300));
    let first = b.data((PORT_A, HOST_A), HOST_C, 3, ms(20), 10 * MS, ms(400));
    // Storm 2: PFC 1000..1500 ms, traffic 1005..1295 ms. Start 1005 → detected at 1301;
    // restored at 1901 (last PFC 1500 + 400).
    b.storm(ms(1000), 10 * MS, ms(1500));
    let second = b.data((PORT_A, HOST_A), HOST_C, 3, ms(1005), 10 * MS, ms(1295));
    b.run_to(ms(2000));
    assert_eq!(
        b.watchdog_events(),
        vec![
            detected(PORT_C, 3, WatchdogAction::Drop, ms(301)),
            restored(PORT_C, 3, ms(701)),
            detected(PORT_C, 3, WatchdogAction::Drop, ms(1301)),
            restored(PORT_C, 3, ms(1901)),
        ]
    );
    let n1 = b.sent(first).len() as u64; // 20..400 ms, all dropped (restoration at 701 ms)
    let n2 = b.sent(second).len() as u64; // 1005..1295 ms, all dropped
    assert_eq!((n1, n2), (39, 30));
    assert!(b.delivered(first).is_empty() && b.delivered(second).is_empty());
    assert_eq!(
        row(b.wd_stats(PORT_C, Q3)),
        [0, 2, 2, 0, n1 + n2, 0, 0, 0, n2, 0, 0]
    );
}

// ------------------------------------------------------------------------------------------
// Big red switch
// ------------------------------------------------------------------------------------------

#[test]
fn big_red_switch_drops_every_watched_queue_and_undoing_it_restores_normal_behaviour() {
    // Watchdog on ports B and C only; A is not watched.
    let mut b = Bench::new(params(WatchdogAction::Forward, &[PORT_B, PORT_C]));
    let a_c3 = b.data((PORT_A, HOST_A), HOST_C, 3, ms(10), 10 * MS, ms(900));
    let a_c4 = b.data((PORT_A, HOST_A), HOST_C, 4, ms(10), 10 * MS, ms(900));
    let a_b3 = b.data((PORT_A, HOST_A), HOST_B, 3, ms(10), 10 * MS, ms(900));
    let a_c0 = b.data((PORT_A, HOST_A), HOST_C, 0, ms(10), 10 * MS, ms(900));
    let b_a3 = b.data((PORT_B, HOST_B), HOST_A, 3, ms(15), 10 * MS, ms(900));
    let b_a0 = b.data((PORT_B, HOST_B), HOST_A, 0, ms(15), 10 * MS, ms(900));
    b.run_to(ms(300));
    let now = b.now();
    b.lab.sw.set_big_red_switch(true, now);
    b.run_to(ms(600));
    let now = b.now();
    b.lab.sw.set_big_red_switch(false, now);
    b.run_to(ms(1000));
    let on = |t: &Instant| *t > ms(300) && *t <= ms(600);
    // Lossless traffic towards watched ports is dropped from their queues while it is on.
    for (s, what) in [
        (a_c3, "A→C prio 3"),
        (a_c4, "A→C prio 4"),
        (a_b3, "A→B prio 3"),
    ] {
        let expect: Vec<Instant> = b.sent(s).iter().copied().filter(|t| !on(t)).collect();
        assert_eq!(b.delivered(s), expect.as_slice(), "{what}");
    }
    // Lossless traffic received on a watched port is dropped at ingress (towards A, unwatched).
    let expect: Vec<Instant> = b.sent(b_a3).iter().copied().filter(|t| !on(t)).collect();
    assert_eq!(b.delivered(b_a3), expect.as_slice(), "B→A prio 3");
    // Lossy traffic never notices.
    b.assert_unaffected(a_c0, "A→C prio 0");
    b.assert_unaffected(b_a0, "B→A prio 0");
    let dropped_per_source = b.sent_in(a_c3, ms(301), ms(600));
    assert_eq!(dropped_per_source, 30);
    let tx_c = b.lab.tx_counters(PORT_C);
    assert_eq!(tx_c.pfcwd_drops[Q3].get(), dropped_per_source);
    assert_eq!(tx_c.pfcwd_drops[Q4].get(), dropped_per_source);
    assert_eq!(
        b.lab.tx_counters(PORT_B).pfcwd_drops[Q3].get(),
        dropped_per_source
    );
    assert_eq!(
        b.lab.rx_counters(PORT_B).drops[DropReason::PfcwdIngress.index()].get(),
        dropped_per_source
    );
    // The big red switch is not a storm: no event, no storm counted.
    assert!(b.watchdog_events().is_empty());
    for port in [PORT_B, PORT_C] {
        for q in [Q3, Q4] {
            assert_eq!(row(b.wd_stats(port, q)), [0; 11]);
        }
    }
}

#[test]
fn big_red_switch_from_the_parameters_is_on_from_the_start() {
    let mut p = params(WatchdogAction::Drop, &[PORT_C]);
    p.watchdog.big_red_switch = true;
    let mut b = Bench::new(p);
    let a_c3 = b.data((PORT_A, HOST_A), HOST_C, 3, ms(10), 10 * MS, ms(300));
    let a_c1 = b.data((PORT_A, HOST_A), HOST_C, 1, ms(10), 10 * MS, ms(300));
    b.run_to(ms(200));
    assert!(b.delivered(a_c3).is_empty());
    assert_eq!(b.lab.tx_counters(PORT_C).pfcwd_drops[Q3].get(), 20);
    let now = b.now();
    b.lab.sw.set_big_red_switch(false, now);
    b.run_to(ms(400));
    let after: Vec<Instant> = b
        .sent(a_c3)
        .iter()
        .copied()
        .filter(|t| *t > ms(200))
        .collect();
    assert_eq!(after.len(), 10);
    assert_eq!(
        b.delivered(a_c3),
        after.as_slice(),
        "after the big red switch is off"
    );
    b.assert_unaffected(a_c1, "lossy");
    assert!(b.watchdog_events().is_empty());
}

// ------------------------------------------------------------------------------------------
// Storm-rate alarm
// ------------------------------------------------------------------------------------------

#[test]
fn storm_rate_alarm_fires_once_per_episode() {
    let mut b = Bench::new(params(WatchdogAction::Drop, &[PORT_C]));
    let threshold = u64::from(b.lab.sw.shared().params.storm_alarm_frames_per_second);
    assert_eq!(threshold, 2000);
    // Episode 1: 4000 PFC frames/s for 3 s (100 ms .. 3100 ms). Episode 2 from 6 s, 3 s long.
    // In between and after, 1000 frames/s for 2 s: below the threshold, no alarm.
    let every = 250_000; // ns → 4000 frames/s
    let e1 = b.storm(ms(100), every, ms(3100));
    b.storm(ms(3600), MS, ms(5600));
    let e2 = b.storm(ms(6000), every, ms(9000));
    b.run_to(ms(12_000));
    let rate: Vec<Event> = b
        .events
        .iter()
        .copied()
        .filter(|e| matches!(e, Event::PfcRateHigh { .. } | Event::PfcRateNormal { .. }))
        .collect();
    assert_eq!(rate.len(), 4, "{rate:?}");
    let prio3 = Priority::from_low_bits(3);
    // Episode 1: the alarm is raised by the first frame above the threshold within a one-second
    // window (the 2001st of the window starting at 0, i.e. at 100 ms + 2000 × 250 µs)...
    let crossing = b.sent(e1)[2000];
    assert_eq!(crossing, ms(600));
    assert_eq!(
        rate[0],
        Event::PfcRateHigh {
            port: PortId(PORT_C),
            priority: prio3,
            frames_per_second: threshold + 1,
            at: crossing
        }
    );
    // ...and cleared once, within two windows of the end of the episode, before the slow phase
    // could matter (1000/s is below the threshold anyway).
    let Event::PfcRateNormal { port, priority, at } = rate[1] else {
        panic!("{rate:?}")
    };
    assert_eq!((port, priority), (PortId(PORT_C), prio3));
    assert!(at > ms(3100) && at <= ms(5100), "normal at {at:?}");
    // Episode 2: again exactly one alarm and one clear.
    let Event::PfcRateHigh {
        at: high2,
        frames_per_second,
        ..
    } = rate[2]
    else {
        panic!("{rate:?}")
    };
    assert!(high2 > ms(6000) && high2 < ms(7000), "{high2:?}");
    assert_eq!(frames_per_second, threshold + 1);
    assert!(b.sent(e2).contains(&high2));
    let Event::PfcRateNormal { at: normal2, .. } = rate[3] else {
        panic!("{rate:?}")
    };
    assert!(normal2 > ms(9000) && normal2 <= ms(11_000), "{normal2:?}");
    // No traffic was queued: no watchdog storm either.
    assert!(b.watchdog_events().is_empty());
}
